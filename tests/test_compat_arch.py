"""GPU compute capability against compiled architectures, and version handling: the rules that
need no matrix data. Source: CUDA C++ Programming Guide, "Binary Compatibility" (SASS for X.y runs
on X.z, z >= y, same major only) and "PTX Compatibility" (PTX for compute_XY is JIT-compiled on any
compute capability >= X.Y); "Feature availability" for arch-specific sm_XYa (exactly X.Y)."""

from __future__ import annotations

import pytest

from gpudoctor.compat import rules as compat

TORCH_211_CU130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # torch.cuda.get_arch_list(), recorded on H100


@pytest.mark.parametrize("cc,arch,expected", [
    ("9.0", TORCH_211_CU130, compat.OK),  # H100 with the recorded PyTorch 2.11+cu130
    ("8.9", ["sm_80", "sm_86"], compat.OK),  # L4 (Ada 8.9) runs sm_86 machine code: same major, higher minor
    ("8.6", ["sm_80"], compat.OK),
    ("9.0", ["sm_80", "sm_86"], compat.FAIL),  # sm_80 code does not run on 9.0: another major
    ("9.0", ["sm_80", "sm_86", "compute_86"], compat.LIMITED),  # ...but PTX for 8.6 JIT-compiles on 9.0
    ("12.0", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], compat.FAIL),  # RTX 5090 before sm_120 builds
    ("6.1", TORCH_211_CU130, compat.FAIL),  # Pascal on a build that starts at sm_75
    ("7.0", TORCH_211_CU130, compat.FAIL),  # Volta likewise
    ("8.0", ["sm_86"], compat.FAIL),  # SASS never runs on a lower minor
    ("9.0", ["sm_90a"], compat.OK),  # arch-specific code runs on exactly 9.0
    ("10.0", ["sm_90a"], compat.FAIL),  # ...and nowhere else
    ("12.1", ["sm_120"], compat.OK),  # DGX Spark GB10 runs sm_120 code
    ("10.3", ["sm_100f"], compat.OK),  # family-specific code runs on later minors of the family
    ("10.0", ["compute_120"], compat.FAIL),  # PTX never runs on an older GPU
])
def test_arch_runs(cc, arch, expected):
    assert compat.arch_runs(cc, arch).status == expected


def test_no_kernel_image_is_spelled_out():
    verdict = compat.arch_runs("12.0", ["sm_80", "sm_90"])
    assert "no kernel image is available for execution on the device" in verdict.reason


def test_unreadable_inputs_are_unknown_not_errors():
    assert compat.arch_runs("garbage", ["sm_80"]).status == compat.UNKNOWN
    assert compat.arch_runs("9.0", []).status == compat.UNKNOWN


def test_versions_are_never_floats():
    """12.10 is newer than 12.9; as floats it would be older."""
    assert compat.major_minor("12.10") > compat.major_minor("12.9")
    assert compat.version("580.95.05") > compat.version("580.9.5")
    assert compat.parse_arch("sm_120") == ("sass", compat.version("12.0"), "")
    assert compat.parse_arch("compute_90") == ("ptx", compat.version("9.0"), "")
    assert compat.parse_arch("sm_100f") == ("sass", compat.version("10.0"), "f")


def test_python_range():
    assert compat.python_in(">=3.9,<3.14", "3.12.3") is True
    assert compat.python_in(">=3.9,<3.14", "3.14.0") is False
    assert compat.python_in(None, "3.12") is None
