"""Healthy machines and healthy tickets that read like faults: each must pass without a false alarm.

A false alarm on a healthy machine is the worst defect gpudoctor can have. These cases come from a review of
the kernel-log Xid reader, the NVML error counters and fabric state, and the ticket readers: a mention of a
ROCm package beside a CUDA PyTorch, benign NVRM lines, an API mismatch the driver has since got over, a
fabric registration still under way at boot.
"""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.pastes.forms import rocm


def analyze_text(tmp_path: Any, text: str) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "ticket.md"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", str(path)])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


# --- a ROCm package named beside an NVIDIA stack ---------------------------------------------------------

PIP_LIST_CU = """pip list
Package              Version
-------------------- ----------
{extra}torch                2.5.1+cu124
numpy                1.26.4
Everything works, torch.cuda.is_available() is True.
"""


def test_a_rocm_package_asked_about_in_prose_is_no_sign() -> None:
    assert rocm.read(["Do I need pytorch-triton-rocm? Someone told me to install it but I have an NVIDIA card."]) is None
    assert rocm.read(["tensorflow-rocm is for AMD, right?"]) is None


def test_a_rocm_package_in_a_list_or_an_install_command_is_a_sign() -> None:
    for line in ("pytorch-triton-rocm  3.1.0", "[pip3] pytorch-triton-rocm==3.1.0", "tensorflow-rocm==2.14.0.600",
                 "$ pip install tensorflow-rocm"):
        assert rocm.read([line])["signs"][0]["what"].endswith("-rocm package"), line


def test_a_cuda_pytorch_with_a_rocm_package_mentioned_is_judged_as_nvidias(tmp_path: Any) -> None:
    code, report = analyze_text(tmp_path, PIP_LIST_CU.format(extra="") + "Do I need pytorch-triton-rocm too?\n")
    assert code == 0 and "rocm" not in report["facts"]
    assert "FWK210" not in {f["code"] for f in report["findings"]}


def test_a_cuda_pytorch_with_a_rocm_package_installed_is_judged_as_nvidias(tmp_path: Any) -> None:
    """The package sits in the list, but torch is a +cu124 wheel: torch.cuda is CUDA's."""
    code, report = analyze_text(tmp_path, PIP_LIST_CU.format(extra="pytorch-triton-rocm  3.1.0\n"))
    assert code == 0 and "rocm" not in report["facts"]
    assert report["facts"]["frameworks"]["torch"]["info"]["backend"] == "cuda"
