"""What a build's CUDA version proves without an entry for the build, and every variant judged by every
rule.

Sources of the expectations:
  TARGETS  compat_matrix/cuda_targets.json: the first and last toolkit that compiles for each compute
           capability (CUDA 11.0 dropped sm_30, 12.0 sm_35/sm_37, 13.0 everything below sm_75; 11.0 first
           compiles sm_80, 11.8 sm_89/sm_90, 12.8 sm_100/sm_120), each row citing the release notes or CMake
  GUIDE    CUDA C++ Programming Guide, "PTX Compatibility": PTX for compute_XY runs on X.Y or newer only
  PT-PTX   pytorch.json PR-145792 and PT-BUILD-CUDA-2.8: the wheel scripts put +PTX on the newest
           architecture only ("...;10.0;12.0+PTX")
  TABLE3   cuda_toolkits.json: the Windows and Linux minimum drivers (551.61 for 12.4, 555.85 for 12.5 on Windows)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.compat import rules
from gpudoctor.compat.from_facts import stack_from_facts
from gpudoctor.compat.model import Stack
from gpudoctor.compat.stack import build_from_matrix, judge_stack
from gpudoctor.compat.data import BUNDLED

PASTES = Path(__file__).parent / "fixtures" / "pastes"




def judge(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", *args])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def codes(data: dict, severity: str = "") -> set[str]:
    return {f["code"] for f in data["findings"] if not severity or f["severity"] == severity}


# --- the deductions, one by one --------------------------------------------------------------------

@pytest.mark.parametrize("cuda,cc,dropped", [
    ("13.0", "6.1", True),  # Pascal: CUDA 13.0 removed offline compilation and library support below 7.5
    ("13", "7.0", True),  # a major alone (a cupy-cuda13x, jax-cuda13 wheel) is judged as its .0
    ("13.2", "5.2", True),
    ("13.0", "7.5", False),  # Turing is still targeted
    ("12.9", "6.1", False),  # the last 12.x still builds for Pascal
    ("12.0", "3.7", True),  # CUDA 12.0 removed Kepler sm_35/sm_37
    ("11.8", "3.7", False),
    ("11.0", "3.0", True),  # CUDA 11.0 removed sm_30
    ("10.2", "3.0", False),
    ("13.0", "10.1", False),  # Thor is sm_110 from CUDA 13.0: renamed, not dropped
    ("13.0", "9.9", False),  # a compute capability the matrix does not know: no verdict
])
def test_toolkit_that_dropped_an_architecture_builds_nothing_for_it(cuda, cc, dropped):
    verdict = rules.cuda_dropped(BUNDLED, cuda, cc)
    assert (verdict is not None and verdict.status == rules.FAIL) is dropped
    if dropped:
        assert "was the last toolkit" in verdict.reason and "no PTX that runs there" in verdict.reason


@pytest.mark.parametrize("cuda,cc,first", [
    ("10.2", "8.0", "11.0"),  # no CUDA 10.x build has machine code for an A100
    ("10.2", "9.0", "11.8"),
    ("11.3", "9.0", "11.8"),  # nor a CUDA 11.3 one for an H100
    ("12.6", "12.0", "12.8"),  # nor a 12.6 one for Blackwell
    ("11.0", "8.0", None),
    ("11.8", "9.0", None),
    ("12.8", "12.0", None),
])
def test_cuda_older_than_the_gpu_has_no_machine_code_for_it(cuda, cc, first):
    why = rules.cuda_too_old(BUNDLED, cuda, cc)
    assert (why is None) == (first is None)
    if first:
        assert f"first supported by CUDA {first}" in why


@pytest.mark.parametrize("cc,fails", [("6.1", True), ("9.0", True), ("11.0", True), ("12.0", False), ("12.1", False)])
def test_ptx_runs_only_on_its_own_architecture_or_newer(cc, fails):
    verdict = rules.ptx_floor_verdict(cc, "compute_120", "its only PTX")
    assert (verdict is not None and verdict.status == rules.FAIL) is fails


# --- the measured misses, through `matrix check` ---------------------------------------------------

@pytest.mark.parametrize("torch", ["2.7.0+cu128", "2.7.1+cu128", "2.8.0+cu129"])
def test_cu128_and_cu129_builds_whose_ptx_is_not_listed_fail_on_pascal(torch):
    """Their PTX, if any, is compute_120 (PT-PTX): it cannot JIT for sm_61, so the verdict is an error."""
    code, data = judge("--torch", torch, "--cc", "6.1")
    assert code == 1 and data["verdict"] == "error" and codes(data) == {"CMP003"}
    assert "compute_120" in data["findings"][0]["detail"]


@pytest.mark.parametrize("torch,cc", [("2.7.0+cu128", "7.5"), ("2.7.0+cu128", "8.0"), ("2.7.0+cu128", "9.0"),
                                      ("2.7.0+cu128", "12.0"), ("2.8.0+cu129", "8.9"), ("2.8.0+cu129", "12.1")])
def test_the_same_builds_are_ok_on_the_gpus_they_carry_code_for(torch, cc):
    code, data = judge("--torch", torch, "--cc", cc, "--driver", "580.65.06")
    assert (code, data["verdict"], codes(data)) == (0, "ok", set())


def test_cuda_13_toolkit_on_pascal_is_an_error_not_an_extension_warning():
    code, data = judge("--cuda", "13.0", "--cc", "6.1")
    assert code == 1 and data["verdict"] == "error"
    [f] = data["findings"]
    assert (f["code"], f["severity"]) == ("CMP005", "error") and "builds nothing that runs" in f["title"]


@pytest.mark.parametrize("cuda,cc", [("12.0", "3.7"), ("11.0", "3.0")])
def test_older_toolkit_drops_are_errors_too(cuda, cc):
    assert codes(judge("--cuda", cuda, "--cc", cc)[1], "error") == {"CMP005"}


def test_a_toolkit_older_than_the_gpu_stays_a_warning():
    """nvcc 10.2 has no sm_80 target, but PTX it emits for compute_75 JIT-compiles on 8.0 (GUIDE)."""
    _, data = judge("--cuda", "10.2", "--cc", "8.0")
    assert [(f["code"], f["severity"]) for f in data["findings"]] == [("CMP005", "warning")]


@pytest.mark.parametrize("cuda,cc", [("13.0", "7.5"), ("13.0", "9.0"), ("12.9", "6.1"), ("12.8", "12.0"), ("11.8", "3.5")])
def test_no_toolkit_finding_where_it_still_targets_the_gpu(cuda, cc):
    assert judge("--cuda", cuda, "--cc", cc)[1]["findings"] == []


def test_a_cuda_13_build_whose_architectures_are_unknown_still_fails_on_pascal():
    """Nothing built with CUDA 13 runs below 7.5 (TARGETS), whatever else the build carries."""
    stack = Stack(gpus=[("GPU 0 (NVIDIA GeForce GTX 1080)", "6.1")])
    build = build_from_matrix(BUNDLED, "torch", "2.9.0+cu130", stack, installed=True)
    build.sass = build.ptx = None  # as a build read from package metadata alone
    stack.builds.append(build)
    assert [f.code for f in judge_stack(BUNDLED, stack)] == ["CMP003"]


def test_a_cuda_10_build_of_unknown_architectures_on_an_a100_says_why_it_is_unknown():
    """No machine code can exist (TARGETS), but PTX of an older architecture would JIT (GUIDE): unknown, with the reason."""
    stack = Stack(gpus=[("GPU 0 (NVIDIA A100-SXM4-80GB)", "8.0")])
    build = build_from_matrix(BUNDLED, "torch", "1.12.1=py3.9_cuda10.2_cudnn7.6.5_0", stack)
    stack.builds.append(build)
    [f] = judge_stack(BUNDLED, stack)
    assert f.code == "CMP008" and "first supported by CUDA 11.0" in f.detail and "PTX" in f.detail
    build.ptx = []  # known to carry none: then nothing runs there
    assert [f.code for f in judge_stack(BUNDLED, stack)] == ["CMP003"]


# --- every variant, every rule ---------------------------------------------------------------------

@pytest.mark.parametrize("torch", ["2.5.0+cpu", "2.6.0.dev20241112+cpu", "1.12.1=py3.9_cpu_0"])
def test_python_wheel_availability_is_judged_for_cpu_builds(torch):
    _, data = judge("--torch", torch, "--python", "3.14")
    f = next(f for f in data["findings"] if f["code"] == "CMP007")
    assert f["severity"] == "error" and "Python 3.14" in f["title"]


def test_cpu_build_inside_its_python_range_has_no_python_finding():
    _, data = judge("--torch", "2.5.0+cpu", "--python", "3.12")
    assert data["verdict"] == "ok" and data["findings"] == []


def test_plain_pypi_wheel_on_windows_is_cpu_only_and_judged_for_python():
    _, data = judge("--torch", "2.9.0", "--os", "windows", "--python", "3.9", "--cc", "8.9")
    assert codes(data) == {"FWK001", "CMP007"}


def test_conda_build_string_gives_the_cuda_and_the_python():
    _, data = judge("--torch", "1.12.1=py3.9_cuda11.3_cudnn8.3.2_0", "--python", "3.10", "--driver", "450.51.06")
    [build] = data["stack"]["builds"]
    assert build["cuda"] == "11.3" and build["sass"] is None  # a conda package's list is not the pip wheel's
    assert codes(data) == {"CMP001", "CMP007"}
    python = next(f for f in data["findings"] if f["code"] == "CMP007")
    assert "conda package" in python["title"] and "3.9" in python["title"]


def test_conda_build_on_a_gpu_its_cuda_dropped_is_an_error():
    _, data = judge("--torch", "1.12.1=py3.9_cuda11.3_cudnn8.3.2_0", "--cc", "3.0")
    assert codes(data, "error") == {"CMP003"}


def test_conda_cpu_build_is_cpu_only():
    _, data = judge("--torch", "1.12.1=py3.10_cpu_0", "--cc", "8.0")
    assert codes(data) == {"FWK001"}


def test_a_conda_string_that_is_not_a_build_string_is_unknown_not_a_crash():
    _, data = judge("--torch", "1.12.1=whatever", "--cc", "8.0")
    assert data["verdict"] == "unknown" and "conda build string" in data["stack"]["unknown"][0]


@pytest.mark.parametrize("torch,cc,verdict", [
    ("2.6.0.dev20241112+cu124", "8.0", "ok"),  # the 2.6 line's cu124 variant
    ("2.6.0.dev20241112+cu124", "12.0", "error"),  # ...which has no Blackwell code and no PTX
    ("1.11.0.dev20211204+cu102", "8.6", "error"),  # 'sm_86 is not compatible' (open-mmlab/mmcv#1558)
    ("2.8.0.dev20250601+cu128", "6.1", "error"),  # no Pascal code; PTX, if any, compute_120 (PT-PTX)
    ("2.8.0.dev20250601+cu128", "12.0", "ok"),
    ("2.6.0.dev20241112", "9.0", "ok"),  # the plain wheel of the 2.6 line
    ("2.15.0.dev20260101+cu130", "9.0", "unknown"),  # a line the matrix does not have yet
    ("2.6.0a0+git1234abc", "9.0", "unknown"),  # a source build
    ("2.6.0rc1+cu124", "9.0", "ok"),
])
def test_nightlies_are_judged_by_the_release_line_they_precede(torch, cc, verdict):
    assert judge("--torch", torch, "--cc", cc, "--driver", "580.65.06")[1]["verdict"] == verdict


@pytest.mark.parametrize("jax", ["0.4.20+cuda12_pip", "0.4.30+cuda12-local", "0.4.30+cuda12"])
def test_jax_extras_old_and_local_are_read(jax):
    _, data = judge("--jax", jax, "--cc", "8.0")
    assert data["stack"]["unknown"] == [] and data["stack"]["builds"][0]["cuda"] == "12"


@pytest.mark.parametrize("driver,os_name,cuda", [
    ("551.86", "windows", "12.4"), ("566.36", "windows", "12.6"), ("452.39", "windows", "11.0"),
    ("551.86", "wsl", "12.4"),  # WSL runs the Windows driver
    ("550.54.14", "linux", "12.4"),
])
def test_windows_driver_maps_to_its_cuda_as_a_linux_one_does(driver, os_name, cuda):
    assert judge("--driver", driver, "--os", os_name)[1]["stack"]["driver_cuda"] == cuda


def test_windows_r550_driver_cannot_run_a_cuda_13_build():
    _, data = judge("--driver", "551.86", "--os", "windows", "--torch", "2.9.0+cu130", "--cc", "8.9")
    assert codes(data, "error") == {"CMP001"}


@pytest.mark.parametrize("driver,os_name,verdict", [
    ("581.57", "windows", "unknown"),  # R580 runs CUDA 13.0, but Table 3's Windows column for 13.x is N/A
    ("620.10", "linux", "ok"),  # past the newest Linux row (13.3): at least CUDA 13.3, so a 13.0 build runs
])
def test_a_driver_past_its_newest_table_3_row_is_never_capped_at_that_row(driver, os_name, verdict):
    """Capping it (581.57 -> 12.9) made a CUDA 13 build a false CMP001 error."""
    _, data = judge("--driver", driver, "--os", os_name, "--torch", "2.9.0+cu130", "--cc", "8.9")
    assert data["verdict"] == verdict and data["stack"]["driver_cuda"] is None and data["stack"]["unknown"] == []


@pytest.mark.parametrize("torch", ["2.5.0+cu124", "2.9.0+cu130"])
def test_macos_has_no_cuda_builds(torch):
    assert "CMP009" in codes(judge("--torch", torch, "--os", "macos", "--cc", "8.0")[1], "error")


# --- snapshots and pastes --------------------------------------------------------------------------

def _facts(driver: str, os_name: str) -> dict:
    return {"nvml": {"driver_version": driver, "cuda_driver_version": {"unavailable": "not_found"}}, "host": {"os": os_name}}


@pytest.mark.parametrize("driver,os_name,cuda", [
    ("551.86", "Windows", "12.4"),
    ("442.92", "Windows", "10.2"),
    ("550.54.14", "Linux", "12.4"),
    ("999.99", "Linux", None),  # past the newest Table 3 row: which CUDA it runs is not known
    ("581.57", "Windows", None),  # CUDA 13's Windows column is N/A: no row bounds it
    ("551.86", "", None),  # no OS: the Linux and Windows columns differ
])
def test_snapshot_driver_without_its_cuda_gets_it_from_table_3(driver, os_name, cuda):
    assert stack_from_facts(BUNDLED, _facts(driver, os_name)).driver_cuda == cuda


def test_windows_collect_env_paste_states_the_drivers_cuda():
    result = CliRunner().invoke(cli, ["analyze", str(PASTES / "pytorch-40682.md")])
    line = next(x for x in result.stdout.splitlines() if "Compatibility" in x)
    assert "driver 442.92 runs CUDA up to 10.2" in line and "CUDA version unknown" not in line


def test_matrix_check_stays_fast():
    judge("--torch", "2.7.0+cu128", "--cc", "6.1")  # the matrix loaded once, as a process would
    started = time.perf_counter()
    judge("--torch", "2.7.0+cu128", "--cc", "6.1", "--cuda", "13.0", "--driver", "551.86", "--os", "windows")
    assert time.perf_counter() - started < 0.3
