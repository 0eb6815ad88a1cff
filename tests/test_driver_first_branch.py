"""A driver older than the GPU (compat_matrix/driver_branches.json first_branch): matrix check, matrix
suggest and the judgement of a report's stack.

Source of the expectation: NVIDIA's own driver source (github.com/NVIDIA/open-gpu-kernel-modules, quoted
as OGKM-TREE in the matrix file): the last R515 release holds no Hopper or Ada code, the first R520
release (520.56.06) names the H100 PCIe and the GeForce RTX 4090. 520.56.06 is below CUDA 11.8's Table 3
driver (520.61.05), so the bound is the branch, never Table 3's exact version.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.compat import branches, rules
from gpudoctor.compat.data import BUNDLED
from gpudoctor.compat.model import Stack
from gpudoctor.compat.queries import stack_from_args, suggest
from gpudoctor.compat.stack import judge_stack



def test_every_first_branch_is_sourced():
    data = BUNDLED.topic("driver_branches")
    firsts = [e for e in data["entries"] if e.get("first_branch")]
    assert {e["architecture"] for e in firsts} == {"hopper", "ada"}
    for entry in firsts:
        assert entry["first_branch_source"] in data["sources"], entry


@pytest.mark.parametrize("driver, cc, status", [
    ("470.82.01", "9.0", rules.FAIL), ("515.105.01", "9.0", rules.FAIL), ("510.47.03", "8.9", rules.FAIL),
    ("520.56.06", "8.9", rules.OK),  # the RTX 4090's launch driver, below CUDA 11.8's Table 3 minimum
    ("520.61.05", "9.0", rules.OK), ("535.104.05", "9.0", rules.OK),
    ("517.48", "8.9", rules.FAIL),  # Windows R515 numbering: still older than R520
    ("521.90", "8.9", rules.OK),  # Windows R520 numbering
    ("418.87.01", "8.0", rules.OK),  # Ampere has no sourced first branch: never judged by a guess
    ("390.157", "7.5", rules.OK), ("not-a-version", "9.0", rules.UNKNOWN),
])
def test_too_old(driver, cc, status):
    verdict = branches.too_old(BUNDLED, driver, cc)
    assert verdict.status == status
    assert verdict.needs == ("520" if status == rules.FAIL else None)


def test_first_driver_is_the_first_toolkits_table3_driver():
    assert branches.first_driver(BUNDLED, "9.0") == "520.61.05"
    assert branches.first_driver(BUNDLED, "8.9", "windows") == "520.06"
    assert branches.first_driver(BUNDLED, "8.0") is None


@pytest.mark.parametrize("gpu, driver, os_name", [
    ("NVIDIA H100 80GB HBM3", "470.82.01", None), ("NVIDIA GeForce RTX 4090", "510.47.03", None),
    ("NVIDIA H100 PCIe", "515.65.01", None), ("NVIDIA GeForce RTX 4090", "517.48", "windows"),
])
def test_matrix_check_names_the_first_branch(gpu, driver, os_name):
    args = ["matrix", "check", "--gpu", gpu, "--driver", driver] + (["--os", os_name] if os_name else [])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert "CMP010" in result.output and "R520 is the first branch that does" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("gpu, driver", [
    ("NVIDIA GeForce RTX 4090", "520.56.06"), ("NVIDIA H100 80GB HBM3", "525.85.12"),
    ("NVIDIA H100 80GB HBM3", "580.159.04"), ("NVIDIA A100-SXM4-40GB", "450.51.05"),
])
def test_a_driver_that_drives_the_gpu_is_no_error(gpu, driver):
    stack = stack_from_args(BUNDLED, driver=driver, gpu=gpu)
    assert not [f for f in judge_stack(BUNDLED, stack) if f.code == "CMP010"]


def test_a_pasted_reports_stack_is_judged_the_same():
    stack = Stack(driver="470.129.06", gpus=[("GPU 0 (NVIDIA H100 PCIe)", "9.0")])
    found = [f for f in judge_stack(BUNDLED, stack) if f.code == "CMP010"]
    assert len(found) == 1 and "first branch" in found[0].title
    assert list(found[0].remediation.commands) == ["gpudoctor matrix suggest --cc 9.0 --driver 520.61.05"]


@pytest.mark.parametrize("cc, driver, os_name, first", [
    ("9.0", "470.82.01", None, "520.61.05"), ("8.9", "512.15", "windows", "520.06"),
])
def test_suggest_never_offers_builds_for_a_driver_older_than_the_gpu(cc, driver, os_name, first):
    lines = suggest(BUNDLED, driver, cc, None, os_name)
    assert lines[0].startswith(f"Driver {driver} does not drive compute capability {cc} GPUs: R520 is the first branch")
    assert f"for driver {first}" in lines[0]
    stack = Stack(driver=first, os=os_name, gpus=[("gpu", cc)])
    stack.driver_cuda = rules.driver_cuda_of(BUNDLED, first, stack.driver_os)
    # every build offered runs on the first driver that drives the GPU
    for line in lines[1:]:
        if line.startswith("PyTorch "):
            cuda = line.split("(cu")[1][:3]
            assert rules.driver_runs_cuda(BUNDLED, f"{cuda[:-1]}.{cuda[-1]}", first, stack.driver_cuda, stack.driver_os).status == rules.OK
