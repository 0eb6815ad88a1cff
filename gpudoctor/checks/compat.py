"""The compatibility checks: this machine's stack, read from the snapshot, before the one judge in
gpudoctor/compat/stack.py (the same judge `gpudoctor matrix check` runs on a hypothetical stack).
Only the GPUs a CUDA program sees here (views/visibility.py) are judged."""

from __future__ import annotations

from typing import Iterator

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, nvml_ready
from gpudoctor.compat.from_facts import os_of, stack_from_facts
from gpudoctor.compat.known_bad import judge_known_bad, settled_by_known_bad
from gpudoctor.compat.data import Matrix, MatrixError
from gpudoctor.compat import stack as judge  # judge.judge_versions, as `matrix check` calls it (one judge, spied on in tests)
from gpudoctor.findings import ERROR, INFO, Finding
from gpudoctor.snapshot import get


def check_compat(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    stated = any(isinstance(g, dict) and g.get("stated") for g in facts.get("gpus") or [])
    if not nvml_ready(facts) and not stated:  # a GPU a ticket names is judged against its builds without NVML
        raise NotApplicable("NVML is not available")
    try:
        stack = stack_from_facts(matrix, facts)
        yield from judge.judge_versions(matrix, stack, settled_by_known_bad(matrix, stack))
    except MatrixError as exc:
        yield finding("CMP008", f"the compatibility matrix could not be read: {exc}")


def check_forward_compat(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    """A CUDA above the driver's own branch: the cuda-compat package's (compat/forward.py), judged by whether NVIDIA
    supports it on these GPUs."""
    from gpudoctor.compat.forward import forward_cuda, supported_where
    from gpudoctor.compat.rules import parse_driver_cuda
    from gpudoctor.views.visibility import resolve

    if not nvml_ready(facts):
        raise NotApplicable("NVML is not available")
    driver, raw = get(facts, "nvml.driver_version"), get(facts, "nvml.cuda_driver_version")
    try:
        found = forward_cuda(matrix, driver, parse_driver_cuda(raw), os_of(facts)) if isinstance(raw, int) else None
        names = [str(d.name) for d in resolve(facts).devices]
        supported = supported_where(matrix, names) if found else None
    except MatrixError as exc:
        raise NotApplicable(f"the compatibility matrix could not be read: {exc}") from None
    if found is None:
        if facts.get("pastes") is not None:  # a ticket's Compatibility area is its builds' verdict, not this one's
            raise NotApplicable("the driver reports the CUDA of its own branch")
        return
    cause = (f"driver {driver} reports CUDA {found.reported}, but its branch runs CUDA {found.native} by itself "
             f"(CUDA {found.reported} needs driver {found.needs}): the CUDA here is the cuda-compat package's")
    if supported == "yes":
        yield finding("CMP011", f"{cause}, which NVIDIA supports on these data-center GPUs", severity=INFO,
                      text="Nothing to fix: forward compatibility is meant for this.", links=[FORWARD_DOCS])
        return
    off = ("Take the cuda-compat libraries off the loader path (a container image's /usr/local/cuda/compat on "
           f"LD_LIBRARY_PATH), and install driver {found.needs} or newer if the programs need CUDA {found.reported}.")
    if supported == "no":
        yield finding("CMP011", f"{cause}, which NVIDIA does not support on a GeForce: CUDA stops with error 804",
                      severity=ERROR, text=off, commands=["echo $LD_LIBRARY_PATH", "ldconfig -p | grep libcuda.so"],
                      links=[FORWARD_DOCS])
        return
    yield finding("CMP011", f"{cause}; NVIDIA supports it only on data-center GPUs, some NGC-Ready RTX cards and Jetson",
                  text="If CUDA fails here with error 804, this is why: " + off[0].lower() + off[1:],
                  commands=["echo $LD_LIBRARY_PATH", "ldconfig -p | grep libcuda.so"], links=[FORWARD_DOCS])


#: NVIDIA's page on forward compatibility and where it is supported (compat_matrix/cuda_toolkits.json, FWD).
FORWARD_DOCS = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"


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
    Check("compat.forward", "compat", "the driver's CUDA is its own, or forward compatibility where it is supported",
          ("CMP011",), check_forward_compat, ("nvml", "host"), reads_matrix=True),
    Check("compat.known_bad", "compat", "no known-bad combination", ("CMP009",), check_known_bad,
          ("frameworks", "host", "nvml"), reads_matrix=True),
    Check("compat.stack", "compat", "the driver, GPUs, toolkit and framework builds are compatible",
          ("CMP001", "CMP002", "CMP003", "CMP004", "CMP005", "CMP006", "CMP007", "CMP008", "CMP010"), check_compat, ("nvml", "frameworks", "cuda_stack", "python"),
          reads_matrix=True),
)
