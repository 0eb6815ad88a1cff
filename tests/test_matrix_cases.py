"""`gpudoctor matrix check` judged against real cases from public GitHub issue threads.

Each case in fixtures/matrix_cases/cases.json is a version stack exactly as its thread gives it
(nothing filled in), the thread's URL, a one-line summary of what establishes the outcome, and the
verdict that outcome supports:

- "error": a real incompatibility (the thread shows the stack failing for a version reason, and a
  version change fixing it or a maintainer saying why) -> the verdict must be "error";
- "ok": the stack worked -> the verdict must be neither "error" nor "unknown";
- "not_error": the failure was not a version problem (memory, configuration, a bug) -> the verdict
  must not be "error" ("ok", "warning" or "unknown" are all fine).

Why: a matrix that says "ok" for the most-reported failure (an RTX 5090 with a wheel that has no
sm_120 code) or "error" for a healthy stack is worse than none.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli

CASES = json.loads((Path(__file__).parent / "fixtures" / "matrix_cases" / "cases.json").read_text())
FIELDS = ("gpu", "cc", "driver", "driver_cuda", "torch", "tensorflow", "jax", "cupy", "cuda", "cudnn", "python", "os")


def _args(stack: dict[str, str]) -> list[str]:
    args = ["matrix", "check", "--json"]
    for field in FIELDS:
        if field in stack:
            args += [f"--{field.replace('_', '-')}", stack[field]]
    return args


def verdict_of(stack: dict[str, str]) -> tuple[str, str]:
    """(verdict, output) of `gpudoctor matrix check --json` for a stack; "usage" when the CLI refused
    the arguments (exit 2, e.g. an option that does not exist yet)."""
    result = CliRunner().invoke(cli, _args(stack))
    if result.exit_code == 2:
        return "usage", result.output
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)["verdict"], result.output


def assert_corpus_shape(cases: list[dict]) -> None:
    """A corpus of real cases: at least 40, unique ids, errors at least 40 % and 8 of each other kind, each
    with its thread's URL, a summary, and a stack of matrix check's options."""
    assert len(cases) >= 40
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    counts = {kind: sum(c["expected"] == kind for c in cases) for kind in ("error", "ok", "not_error")}
    assert sum(counts.values()) == len(cases)
    assert counts["error"] >= len(cases) * 0.4 and counts["ok"] >= 8 and counts["not_error"] >= 8, counts
    for case in cases:
        assert case["source"].startswith("https://github.com/"), case["id"]
        assert case["summary"].strip(), case["id"]
        assert case["stack"] and set(case["stack"]) <= set(FIELDS), case["id"]


def test_corpus_shape() -> None:
    assert_corpus_shape(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict) -> None:
    verdict, output = verdict_of(case["stack"])
    assert verdict != "usage", f"{case['source']}: matrix check refused the stack: {output.strip()}"
    if case["expected"] == "error":
        assert verdict == "error", f"missed error ({case['source']}): {output}"
    elif case["expected"] == "ok":
        assert verdict not in ("error", "unknown"), f"{verdict} for a stack that worked ({case['source']}): {output}"
    else:
        assert verdict != "error", f"false error ({case['source']}): {output}"
