"""The compatibility checks: this machine's stack, read from the snapshot, before the one judge in
gpudoctor/compat/stack.py (the same judge `gpudoctor matrix check` runs on a hypothetical stack).
Only the GPUs a CUDA program sees here (views/visibility.py) are judged."""

from __future__ import annotations

from typing import Iterator

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, nvml_ready
from gpudoctor.compat.from_facts import stack_from_facts
from gpudoctor.compat.known_bad import judge_known_bad, settled_by_known_bad
from gpudoctor.compat.data import Matrix, MatrixError
from gpudoctor.compat import stack as judge  # judge.judge_versions, as `matrix check` calls it (one judge, spied on in tests)
from gpudoctor.findings import Finding


def check_compat(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    stated = any(isinstance(g, dict) and g.get("stated") for g in facts.get("gpus") or [])
    if not nvml_ready(facts) and not stated:  # a GPU a ticket names is judged against its builds without NVML
        raise NotApplicable("NVML is not available")
    try:
        stack = stack_from_facts(matrix, facts)
        yield from judge.judge_versions(matrix, stack, settled_by_known_bad(matrix, stack))
    except MatrixError as exc:
        yield finding("CMP008", f"the compatibility matrix could not be read: {exc}")


def check_known_bad(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    """The known-bad combinations of compat_matrix/known_bad.json on this machine's stack (TensorFlow
    after 2.10 on native Windows, TensorFlow up to 2.20 on compute capability 12.x, ...): the same
    judge_known_bad that `matrix check` runs. Needs no NVML: TensorFlow on Windows is known bad even
    where the driver cannot be read."""
    try:
        stack = stack_from_facts(matrix, facts)
    except MatrixError:
        return  # compat.stack reports the unreadable matrix (CMP008)
    if not stack.builds:
        raise NotApplicable("no framework build to judge")
    yield from judge_known_bad(matrix, stack)


CHECKS = (
    Check("compat.known_bad", "compat", "no known-bad combination", ("CMP009",), check_known_bad,
          ("frameworks", "host", "nvml"), reads_matrix=True),
    Check("compat.stack", "compat", "the driver, GPUs, toolkit and framework builds are compatible",
          ("CMP001", "CMP002", "CMP003", "CMP004", "CMP005", "CMP006", "CMP007", "CMP008", "CMP010"), check_compat, ("nvml", "frameworks", "cuda_stack", "python"),
          reads_matrix=True),
)
