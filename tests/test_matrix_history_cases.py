"""`gpudoctor matrix check` judged against real cases from older public threads.

fixtures/matrix_cases/history_cases.json holds mostly older stacks (PyTorch 0.3-1.x, TensorFlow 0.12-2.9,
JAX 0.1-0.4, CuPy 8), GPUs from Fermi to Volta, driver branches that no longer drive a GPU, and cuDNN
older than a build needs, in the format and with the verdict semantics of cases.json (see
test_matrix_cases.py): each stack exactly as its thread gives it, the thread's URL, what establishes
the outcome, and the verdict that outcome supports ("error", "ok" or "not_error").

A case the matrix cannot judge yet carries "open": the rule or data it lacks. Its verdict may still
be short of the expected one (unknown, or a missed error), but an "ok" or "not_error" case must never
be judged "error", open or not: a false alarm on a healthy machine is the worst defect. Why a separate
corpus: cases.json holds mostly recent tickets, while old GPUs and old releases are judged from data
(driver branches, per-release architecture lists) that those tickets never reach.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_matrix_cases import assert_corpus_shape, verdict_of  # one way to turn a stack into a verdict

CASES = json.loads(
    (Path(__file__).parent / "fixtures" / "matrix_cases" / "history_cases.json").read_text()
)


def _settled(case: dict, verdict: str) -> bool:
    """Whether the verdict is the one the thread's outcome supports."""
    if case["expected"] == "error":
        return verdict == "error"
    if case["expected"] == "ok":
        return verdict not in ("error", "unknown")
    return verdict != "error"


def test_corpus_shape() -> None:
    assert_corpus_shape(CASES)
    assert not {c["id"] for c in CASES} & {c["id"] for c in json.loads(
        (Path(__file__).parent / "fixtures" / "matrix_cases" / "cases.json").read_text())}
    for case in CASES:
        assert case.get("open", "x").strip(), case["id"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_never_a_false_error(case: dict) -> None:
    verdict, output = verdict_of(case["stack"])
    assert verdict != "usage", f"{case['source']}: matrix check refused the stack: {output.strip()}"
    if case["expected"] != "error":
        assert verdict != "error", f"false error ({case['source']}): {output}"


def _marked(case: dict) -> object:
    """An open case is expected to miss its verdict until its rule lands; XPASS in the summary then says
    its "open" mark is stale."""
    if "open" in case:
        return pytest.param(case, marks=pytest.mark.xfail(reason=case["open"], strict=False))
    return case


@pytest.mark.parametrize("case", [_marked(c) for c in CASES], ids=[c["id"] for c in CASES])
def test_case(case: dict) -> None:
    verdict, output = verdict_of(case["stack"])
    assert _settled(case, verdict), f"{verdict} for a case expected {case['expected']} ({case['source']}): {output}"
