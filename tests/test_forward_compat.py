"""A CUDA above the driver's own branch is the cuda-compat package's (CMP011): judged by the GPUs NVIDIA supports it
on. The case that made it: faster-whisper#653, a GeForce RTX 2080 Ti on driver 470.57.02 whose nvidia-smi said CUDA
12.1, and error 804; before, gpudoctor took 12.1 for the driver's own and passed a CUDA 12.1 build on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import pipeline
from gpudoctor.compat.data import BUNDLED
from gpudoctor.compat.forward import forward_cuda, supported_where

TICKETS = Path(__file__).parent / "fixtures" / "tickets"


def _facts(driver: str, cuda: int, gpu: str, os_name: str = "Linux", torch: str = "") -> dict[str, Any]:
    facts: dict[str, Any] = {
        "host": {"os": os_name, "wsl": False},
        "nvml": {"init": {"ok": True}, "device_count": 1, "driver_version": driver, "cuda_driver_version": cuda},
        "gpus": [{"index": 0, "name": gpu, "compute_capability": "7.5" if "2080" in gpu else "8.0"}],
    }
    if torch:
        facts["frameworks"] = {"torch": {"status": "metadata", "installed": True,
                                         "info": {"version": torch, "built_cuda": "12.1", "cuda_build": True}}}
    return facts


def _found(facts: dict[str, Any]) -> dict[str, str]:
    return {f["code"]: f["severity"] for f in pipeline.judge(facts)["findings"] if f["code"] in ("CMP011", "CMP001")}


@pytest.mark.parametrize("driver, cuda, expected", [
    ("470.57.02", "12.1", ("12.1", "11.4", "530.30.02")),  # R470 runs CUDA 11.4; 12.1 needs R530
    ("470.57.02", "11.5", ("11.5", "11.4", "495.29.05")),
    ("580.159.04", "13.0", None),  # the lab machines: the driver's own CUDA
    ("535.54.03", "12.2", None),
    ("535.104.05", "12.2", None),  # an update within the branch says nothing
    ("470.182.03", "11.4", None),
])
def test_a_cuda_above_the_drivers_branch_is_forward_compatibility(driver, cuda, expected):
    found = forward_cuda(BUNDLED, driver, cuda, "linux")
    assert (tuple(found) if found else None) == expected


def test_only_linux_has_it_and_a_paste_without_the_os_is_told_by_the_drivers_numbering():
    assert forward_cuda(BUNDLED, "471.41", "12.1", None) is None  # Windows numbers its drivers in two parts
    assert forward_cuda(BUNDLED, "471.41", "12.1", "windows") is None
    assert forward_cuda(BUNDLED, "470.57.02", "12.1", None) is not None
    assert forward_cuda(BUNDLED, "470.57.02", "12.1", "wsl") is None


def test_where_nvidia_supports_it_decides_the_verdict():
    assert supported_where(BUNDLED, ["NVIDIA GeForce RTX 2080 Ti"]) == "no"
    assert supported_where(BUNDLED, ["NVIDIA A100-SXM4-80GB"]) == "yes"
    assert supported_where(BUNDLED, ["NVIDIA RTX A6000"]) is None  # a workstation card may be an NGC-Ready SKU
    assert supported_where(BUNDLED, []) is None
    assert _found(_facts("470.57.02", 12010, "NVIDIA GeForce RTX 2080 Ti", torch="2.1.0+cu121")) == {
        "CMP011": "error", "CMP001": "error"}  # on a GeForce the build gets the driver's own CUDA, 11.4
    assert _found(_facts("470.57.02", 12010, "NVIDIA A100-SXM4-80GB", torch="2.1.0+cu121")) == {"CMP011": "info"}
    assert _found(_facts("470.57.02", 12010, "NVIDIA RTX A6000")) == {"CMP011": "warning"}
    assert _found(_facts("580.159.04", 13000, "NVIDIA GeForce RTX 2080 Ti")) == {}


def test_the_ticket_that_showed_it():
    """faster-whisper#653: nvidia-smi's header alone names no GPU, so a warning beside CUDA's own error 804."""
    from click.testing import CliRunner

    from gpudoctor.cli import cli

    result = CliRunner().invoke(cli, ["analyze", "--format", "json", str(TICKETS / "faster-whisper-653.md")])
    codes = {f["code"]: f["severity"] for f in json.loads(result.stdout)["findings"]}
    assert codes == {"DRV023": "error", "CMP011": "warning"}
