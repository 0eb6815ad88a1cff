"""Bad input is exit 2, every time: real recorded reports, mutated one field at a time.

A malformed report must never make `analyze`, `merge` or `devices --report` exit 3 ("internal error:
TypeError/AttributeError/RecursionError"), as one does where a field's type goes unchecked. Here a fixed
seed mutates the reports recorded on real GPU machines (tests/fixtures/real/README.md) field by field (a
wrong type, the field deleted, a huge or deeply nested value, NaN and Infinity, strings with control
characters) and runs each through the real command line in-process. Every run must end 0, 1 or 2, never
3 and never with a traceback; a refused report says why in one line naming the file; JSON output must
parse strictly (no NaN, no Infinity).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli

REAL = Path(__file__).parent / "fixtures" / "real"
#: A spread of real recordings: one GPU and four, quick and full, deep (P2P, all-reduce), a torchrun
#: job holding another node's report, and faults.
SOURCES = (
    "h100x1-20261121/report.json",
    "h100x1-20261123/quick.json",
    "h200x1-20261123/full.json",
    "h200x4-20261121/deep-report.json",
    "h200x2-20261121/cluster/job-2x1.json",
    "h200x2-20261121/faults/cuda-visible-devices-1.json",
    "h100x1-20261123/env-faults/torch-alloc-malformed.json",
)
SEED = 20261123
CASES = 256
#: Top-level sections the mutations are spread over (a uniform pick over all fields would be mostly
#: the hundreds of library copies).
AREAS = ("tool", "created", "findings", "checks", "summary", "redacted", "facts.host", "facts.driver", "facts.nvml",
         "facts.gpus", "facts.topology", "facts.libraries", "facts.toolkit", "facts.python", "facts.frameworks",
         "facts.smoke", "facts.workload", "facts.multigpu", "facts.cluster", "facts.probes", "facts.options")
COMMANDS = (("analyze",), ("analyze", "--format", "json"), ("merge",), ("merge", "--format", "json"),
            ("devices", "--report"), ("devices", "--json", "--report"), ("analyze", "--format", "markdown"),
            ("analyze", "--format", "junit"))


def _deep(n: int) -> Any:
    node: Any = []
    for _ in range(n):
        node = [node]
    return node


def _bad_values(rng: random.Random) -> list[Any]:
    return ["x", "", 7, -1, 0, 3.5, None, True, False, [], {}, [1, "a", None], {"a": {"b": []}},
            float("nan"), float("inf"), float("-inf"), 10 ** 30, -(10 ** 30), 1e308, 5e-324,
            "9" * 400, "x" * 20000, list(range(2000)), _deep(500), _deep(70),
            "\x00\x1b[31mred\x1b]8;;http://x\x07\r\n\u2028\u202e\ud800", "– ✅ ❌ ⏱", {"unavailable": 7},
            {"unavailable": "no_permission"}, rng.choice(["GPU-", "MIG-", "0,0", "-1"])]


def _nodes(node: Any, where: tuple) -> Iterator[tuple[tuple, Any]]:
    stack = [(where, node)]
    while stack:
        path, item = stack.pop()
        yield path, item
        if isinstance(item, dict):
            stack += [(path + (k,), v) for k, v in reversed(list(item.items()))]
        elif isinstance(item, list):
            stack += [(path + (i,), v) for i, v in reversed(list(enumerate(item)))]


def _mutate(doc: dict[str, Any], rng: random.Random) -> str:
    """Change one field of ``doc`` in place; returns what was done, for the failure message."""
    area = rng.choice([a for a in AREAS if _get(doc, a.split(".")) is not None] or ["facts"])
    root = tuple(area.split("."))
    paths = [p for p, _ in _nodes(_get(doc, list(root)), root)]
    path = rng.choice(paths)
    parent = _get(doc, list(path[:-1]))
    kind = rng.random()
    if kind < 0.12 and isinstance(parent, dict):
        del parent[path[-1]]
        return f"deleted {path}"
    if kind < 0.18 and isinstance(parent, dict):
        parent[f"unknown_{rng.randint(0, 99)}"] = rng.choice(_bad_values(rng))  # unknown keys are ignored
        return f"added a key beside {path}"
    value = rng.choice(_bad_values(rng))
    parent[path[-1]] = value
    return f"{path} = {repr(value)[:60]}"


def _get(node: Any, path: list) -> Any:
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return None
    return node


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in the output")

    return json.loads(text, parse_constant=refuse)


def _no_nan(node: Any) -> bool:
    return all(not (isinstance(v, float) and not math.isfinite(v)) for _, v in _nodes(node, ()))


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Path, tuple[str, ...]]]:
    rng = random.Random(SEED)
    texts = {name: (REAL / name).read_text(encoding="utf-8") for name in SOURCES}
    folder = tmp_path_factory.mktemp("fuzz")
    out = []
    for i in range(CASES):
        source = SOURCES[i % len(SOURCES)]
        doc = json.loads(texts[source])
        what = _mutate(doc, rng)
        path = folder / f"case-{i:03d}.json"
        path.write_text(json.dumps(doc, allow_nan=True), encoding="utf-8")
        out.append((f"{source}: {what}", path, COMMANDS[i % len(COMMANDS)]))
    return out


def test_fuzzed_reports_never_exit_3(cases):
    runner = CliRunner()
    codes: dict[int, int] = {}
    failures = []
    for what, path, command in cases:
        args = [*command, str(path)]
        result = runner.invoke(cli, args)
        codes[result.exit_code] = codes.get(result.exit_code, 0) + 1
        problem = None
        if result.exit_code not in (0, 1, 2):
            problem = f"exit {result.exit_code}: {result.stderr.strip()[-300:]}"
        elif result.exception is not None and not isinstance(result.exception, SystemExit):
            problem = f"uncaught {type(result.exception).__name__}: {result.exception}"
        elif "Traceback" in result.stderr:
            problem = "a traceback on stderr"
        elif result.exit_code == 2:
            lines = result.stderr.strip().splitlines()
            if len(lines) != 1 or str(path) not in lines[0]:
                problem = f"exit 2 without one line naming the file: {result.stderr[-300:]!r}"
        elif "json" in command or "--json" in command:
            try:
                parsed = _strict_json(result.stdout)
                if not _no_nan(parsed):
                    problem = "NaN in the JSON output"
            except ValueError as exc:
                problem = f"JSON output does not parse strictly: {exc}"
        if problem:
            failures.append(f"{' '.join(command)} [{what}]: {problem}")
    assert not failures, f"{len(failures)} of {len(cases)} failed:\n" + "\n".join(failures[:20])
    # the fuzzing means something: most mutations are refused at load, some are judged as before
    assert codes.get(2, 0) >= len(cases) // 4, codes
    assert codes.get(0, 0) + codes.get(1, 0) >= len(cases) // 10, codes


def test_every_recorded_report_still_loads():
    """The validation refuses no report gpudoctor itself wrote on a real machine."""
    from gpudoctor import report as rep

    names = sorted(p for p in REAL.rglob("*.json") if p.name != "torch-truth.json")
    assert len(names) >= 60
    for path in names:
        data = rep.load(path.read_text(encoding="utf-8"), source=str(path))
        assert isinstance(data["facts"], dict)
