"""The compat area (checks/compat.py): compat.known_bad (CMP009, known-bad combinations of OS, driver and
framework) and compat.stack (CMP001-CMP008, the installed stack against the bundled matrix, through the same
function as `gpudoctor matrix check`).

Judged on the real 2 x H200 recording (driver 580.159.04 with CUDA 13.0, PyTorch 2.11.0+cu130, JAX 0.11.2,
CuPy 14.2.0, nvcc 13.0; tests/fixtures/real/README.md) with the driver changed one fact at a time. The rules
themselves, case by case with their sources, are tested in test_compat_rules.py, test_compat_arch.py,
test_matrix_cli.py (the one-judge property) and test_review_rules.py.
"""

from __future__ import annotations

from gpudoctor.checks import registry
from helpers_facts import with_fact

from helpers_judge import codes, findings, statuses


def _compat(facts: dict) -> list[tuple[str, str, str]]:
    return [(f["code"], f["severity"], f["title"]) for f in findings(facts) if f["check"].startswith("compat.")]


def test_the_healthy_recording_passes_every_compat_check(h200x2):
    assert statuses(h200x2, "compat") == {c.id: "pass" for c in registry.CHECKS if c.area == "compat"}
    assert codes(h200x2) == set()


def test_a_driver_whose_cuda_is_older_than_the_builds(h200x2):
    """The same driver reporting CUDA 12.8: every CUDA 13 build and the 13.0 toolkit need a newer one (CUDA
    minor version compatibility holds within a major only: docs.nvidia.com/deploy/cuda-compatibility/)."""
    facts = with_fact(h200x2, "nvml.cuda_driver_version", 12080)
    assert _compat(facts) == [
        ("CMP001", "error", "PyTorch 2.11.0+cu130 needs a newer driver than driver 580.159.04"),
        ("CMP001", "error", "JAX 0.11.2 needs a newer driver than driver 580.159.04"),
        ("CMP001", "error", "CuPy 14.2.0 needs a newer driver than driver 580.159.04"),
        ("CMP006", "error", "the CUDA toolkit (13.0) needs a newer driver than this one"),
    ]
    assert codes(facts) == {"CMP001", "CMP006", "CTR003"}  # and the image's NVIDIA_REQUIRE_CUDA is unmet


def test_without_a_driver_version_the_stack_is_not_judged(h200x2):
    """Unknown beats a guess: no driver CUDA version, no verdict on what it runs."""
    facts = with_fact(h200x2, "nvml.cuda_driver_version", {"unavailable": "not_supported"})
    assert [c for c, _, _ in _compat(facts)] == []
