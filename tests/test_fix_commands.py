"""Every command a fix prints runs as written on the machine the report is from: a ``PYTHON -m MODULE``
names a module that interpreter has. The diagnosed Python is often not gpudoctor's own (pipx, a tools
venv, --python): ``<venv>/bin/python -m gpudoctor`` then fails with "No module named gpudoctor".

Checked on every recorded real report (tests/fixtures/real, judged again by this version) and on every
documented example (tests/docexamples.py), with the recorded interpreters and distributions."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from gpudoctor import pipeline
from gpudoctor.snapshot import get
from helpers_facts import with_fact

from docexamples import EXAMPLES
from helpers_stdlib import stdlib_module_names

REAL = Path(__file__).parent / "fixtures" / "real"
#: Modules every CPython has (what a fix may run with any interpreter).
STANDARD = set(stdlib_module_names()) | {"pip", "venv", "ensurepip"}


def _reports() -> list[Path]:
    out = []
    for path in sorted(REAL.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("facts"), dict):
            out.append(path)
    return out


def _module_runs(command: str) -> Iterator[tuple[str, str]]:
    """(interpreter, top-level module) of each ``X -m MODULE`` in a command line (also after ``&&``)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return
    for pos, word in enumerate(words[:-1]):
        if word == "-m" and pos > 0:
            yield words[pos - 1], words[pos + 1].split(".")[0]


def _has(facts: dict[str, Any], interpreter: str, module: str) -> Optional[bool]:
    """Whether ``interpreter`` has ``module``, by the report's own facts; None when the report cannot tell."""
    if module in STANDARD:
        return True
    own = get(facts, "host.python.executable")
    diagnosed = get(facts, "python.executable")
    if module == "gpudoctor" and interpreter == own:
        return True
    if interpreter in (diagnosed, "python3", "python", "py") or interpreter.endswith("/python"):
        names = {str(d.get("name", "")).lower().replace("-", "_") for d in get(facts, "python.distributions") or []
                 if isinstance(d, dict)}
        if not names:
            return None
        return module.lower() in names or module in ("torch", "tensorflow", "jax", "cupy") and module in names
    return None


def _judged_commands(facts: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for found in pipeline.judge(facts)["findings"]:
        for command in (found.get("remediation") or {}).get("commands") or []:
            yield found["code"], command


@pytest.mark.parametrize("path", _reports(), ids=lambda p: str(p.relative_to(REAL)))
def test_recorded_reports_fix_commands_run_there(path):
    facts = json.loads(path.read_text())["facts"]
    for code, command in _judged_commands(facts):
        for interpreter, module in _module_runs(command):
            assert _has(facts, interpreter, module) is not False, (code, command)


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_documented_fix_commands_run_there(code):
    facts = EXAMPLES[code]
    for found_code, command in _judged_commands(facts):
        for interpreter, module in _module_runs(command):
            assert _has(facts, interpreter, module) is not False, (found_code, command)


def test_a_framework_seeing_no_gpu_in_another_venv_gets_a_command_that_runs_there():
    """The 1 x H100 recording of gpudoctor in a tools venv diagnosing the image's venv (2026-11-23), with
    PyTorch made to see no GPU: the fix runs PyTorch's own check with that venv's Python, not gpudoctor."""
    facts = json.loads((REAL / "h100x1-20261123" / "tool_venv.json").read_text())["facts"]
    facts = with_fact(facts, "frameworks.torch.info.devices", [])
    [fwk002] = [f for f in pipeline.judge(facts)["findings"] if f["code"] == "FWK002" and "PyTorch" in f["title"]]
    [command] = fwk002["remediation"]["commands"]
    assert command.startswith("/opt/torch/.venv/bin/python -c ") and "gpudoctor" not in command
    assert get(facts, "host.python.executable") != get(facts, "python.executable")
