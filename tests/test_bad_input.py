"""Bad input is exit 2 with one line naming what is wrong, and output is always valid.

The reports are real recordings (tests/fixtures/real/README.md) with one field changed as a fuzzer
changes them: `tool: "x"`, `facts.host: 7`, `gpus[0].index: "x"`, a 500-deep array, NaN.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor import report as rep
from gpudoctor.cli import cli

REAL = Path(__file__).parent / "fixtures" / "real"
SOURCE = REAL / "h200x2-20261121" / "report.json"
ROOT = Path(__file__).resolve().parent.parent


def saved(tmp_path: Path, change, name: str = "report.json", raw: bool = False) -> Path:
    doc = json.loads(SOURCE.read_text(encoding="utf-8"))
    change(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc, allow_nan=True), encoding="utf-8")
    return path


def one_line(result) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _set(path: str, value: Any):
    def change(doc: dict[str, Any]) -> None:
        node: Any = doc
        parts = path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(parts[-1]) if isinstance(node, list) else parts[-1]] = value
    return change


def _deep(n: int) -> Any:
    node: Any = []
    for _ in range(n):
        node = [node]
    return node


CASES = [
    ("tool", "x", "tool must be an object"),
    ("facts.host", 7, "facts.host must be an object or null"),
    ("facts.gpus.0.index", "x", "facts.gpus[0].index must be an integer"),
    ("facts.gpus.1.index", True, "facts.gpus[1].index must be an integer"),
    ("facts.gpus", {"0": {}}, "facts.gpus must be an array or null"),
    ("facts.topology.pairs.0.gpus", [0, "1"], "facts.topology.pairs[0].gpus[1] must be an integer"),
    ("facts.nvml.driver_version", 580, "facts.nvml.driver_version must be a string"),
    ("facts.libraries.copies.3", [], "facts.libraries.copies[3] must be an object"),
    ("facts.libraries.copies.3.family", 1e308, "facts.libraries.copies[3].family must be a string"),
    ("facts.frameworks", 10 ** 30, "facts.frameworks must be an object or null"),
    ("findings", "none", "findings must be an array"),
    ("facts.gpus.0.name", _deep(500), "is nested more than 64 levels deep"),
]


@pytest.mark.parametrize("command", [("analyze",), ("analyze", "--format", "json"), ("merge",),
                                     ("devices", "--report")])
@pytest.mark.parametrize("path,value,message", CASES, ids=[c[0] + "=" + type(c[1]).__name__ for c in CASES])
def test_malformed_field_is_exit_2_naming_it(tmp_path, command, path, value, message):
    report = saved(tmp_path, _set(path, value))
    result = CliRunner().invoke(cli, [*command, str(report)])
    assert result.exit_code == 2, result.stderr
    if command[0] == "merge":  # merge shows the file as a refused row, with the same one-line reason
        assert "refused" in result.stdout and f"INT007 [file] {report}: " in result.stdout
        assert (message if "nested" not in message else message) in result.stdout
        return
    line = one_line(result)
    assert line.startswith(f"Error: {report}: ")
    assert line.endswith(message) if "nested" not in message else message in line
    assert result.stdout == ""


def test_absent_fact_is_accepted_where_a_value_is_expected(tmp_path):
    """Any fact may be {"unavailable": REASON} (docs/report-format.md): that is not a wrong type."""
    report = saved(tmp_path, _set("facts.gpus.0.index", {"unavailable": "unknown"}))
    result = CliRunner().invoke(cli, ["analyze", str(report)])
    assert result.exit_code in (0, 1), result.stderr


def test_unknown_keys_are_ignored(tmp_path):
    report = saved(tmp_path, _set("facts.gpus.0.a_future_fact", {"nested": [1, "x"]}))
    assert CliRunner().invoke(cli, ["analyze", str(report)]).exit_code == 0


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_are_refused_at_load(tmp_path, token):
    text = SOURCE.read_text(encoding="utf-8").replace('"gpu_percent": 0', f'"gpu_percent": {token}', 1)
    assert token in text
    path = tmp_path / "nan.json"
    path.write_text(text, encoding="utf-8")
    for command in (("analyze", "--format", "json"), ("merge",), ("devices", "--json", "--report")):
        result = CliRunner().invoke(cli, [*command, str(path)])
        assert result.exit_code == 2, result.stderr
        if command[0] == "merge":  # a refused row of its own, with the same reason
            assert f"INT007 [file] {path} is not valid JSON (" in result.stdout
            continue
        assert one_line(result).startswith(f"Error: {path} is not valid JSON (")


def test_json_output_never_holds_nan():
    """A figure computed from extreme values is written as null, so JSON.parse accepts the report."""
    text = rep.to_json({"a": float("nan"), "b": [float("inf"), {"c": float("-inf")}], "d": 1.5})
    assert json.loads(text, parse_constant=lambda name: pytest.fail(name)) == {"a": None, "b": [None, {"c": None}],
                                                                               "d": 1.5}
    clean = {"x": [1.0, 2]}
    assert rep.finite(clean) is clean  # nothing copied when there is nothing to fix


def test_a_check_or_renderer_that_still_raises_is_exit_2(tmp_path, monkeypatch):
    """Defence in depth: what validation does not catch is still the report's fault, not an internal error."""
    from gpudoctor.render import text as text_renderer

    def broken(*args, **kwargs):
        raise TypeError("'<' not supported between instances of 'int' and 'str'")

    monkeypatch.setattr(text_renderer, "render_text", broken)
    result = CliRunner().invoke(cli, ["analyze", str(SOURCE)])
    assert result.exit_code == 2
    assert one_line(result) == (f"gpudoctor: {SOURCE} could not be judged (TypeError: '<' not supported between "
                                "instances of 'int' and 'str'): a value in it does not have the type this gpudoctor "
                                "expects")


def test_a_crash_outside_input_commands_is_still_exit_3(monkeypatch):
    from gpudoctor import codes

    monkeypatch.setattr(codes, "CATALOGUE", None)
    result = CliRunner().invoke(cli, ["explain", "DRV001"])
    assert result.exit_code == 3
    assert one_line(result).startswith("gpudoctor: internal error: AttributeError")


@pytest.mark.parametrize("value,message", [
    ("nan", "'nan' is not a finite number of seconds."),
    ("inf", "'inf' is not a finite number of seconds."),
    ("-inf", "-inf is not in the range x>=0.1."),
    ("-5", "-5.0 is not in the range x>=0.1."),
    ("0", "0.0 is not in the range x>=0.1."),
])
def test_timeout_must_be_a_finite_positive_number(value, message):
    result = CliRunner().invoke(cli, ["check", "--quick", "--timeout", value])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == f"Error: Invalid value for '--timeout': {message}"


@pytest.mark.parametrize("args", [("analyze",), ("analyze", "--format", "json"), ("analyze", "--format", "markdown"),
                                  ("analyze", "--format", "junit"), ("analyze", "-v"), ("merge",),
                                  ("merge", "--format", "markdown"), ("devices", "--report")])
def test_latin1_output_never_fails(tmp_path, args):
    """PYTHONIOENCODING=latin-1 and a "–" or "✅" in the report: escaped, never a UnicodeEncodeError (exit 3)."""
    report = saved(tmp_path, _set("facts.gpus.0.name", "NVIDIA H200 – ✅ 😀"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "latin-1", "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-m", "gpudoctor", *args, str(report)], capture_output=True, env=env,
                            timeout=120)
    assert result.returncode in (0, 1), result.stderr.decode("latin-1")
    out = result.stdout.decode("latin-1")
    assert "Traceback" not in result.stderr.decode("latin-1")
    if "json" in args:
        assert json.loads(out)["facts"]["gpus"][0]["name"] == "NVIDIA H200 – ✅ 😀"  # escapes JSON reads back
    elif args[0] != "merge":
        assert "\\u2013" in out
