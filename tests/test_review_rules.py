"""Verdicts a review found wrong on healthy machines (2026-11-23), each a rule fixed at its mechanism:

- TensorFlow's own list (``get_build_info``) counts ``compute_XY`` as built for X.Y; judged from the installed
  build it must agree with the matrix (tensorflow.json TF-NOTATION), not warn "PTX only" on an A100 or H100.
- The known-bad OS entries (no CUDA on macOS, no GPU TensorFlow/JAX on native Windows) speak of GPU use: a CPU
  build, or a machine with no NVIDIA GPU in view, is not an error.
- Jetson (Tegra) has no binary compatibility between compute capabilities ("Binary compatibility is supported
  only for the desktop. It is not supported for Tegra.", CUDA C++ Programming Guide), and PyPI's aarch64
  wheels are SBSA builds: the matrix's wheel lists cannot judge a Jetson (unknown, never ok or error).
- An Arm host's wheels carry other lists than the x86_64 ones the matrix holds (PyTorch's aarch64 CUDA 13
  build: TORCH_CUDA_ARCH_LIST "8.0;9.0;10.0;11.0;12.0+PTX", .ci/manywheel): not judged from the x86 list.
- A MIG slice has a fraction of its GPU's engines: no expected figures for it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor.cli import cli
from gpudoctor.compat import known_bad, model as st, rules, stack
from gpudoctor.compat.data import BUNDLED

REAL = Path(__file__).parent / "fixtures/real/h100x1-20261123"
H100 = ("GPU 0 (NVIDIA H100 80GB HBM3)", "9.0")


def _codes(findings):
    return [f.code for f in findings]


def test_an_installed_tensorflow_built_for_compute_90_is_not_ptx_only_on_an_h100():
    tf = st.Build("TensorFlow 2.17.0", "tensorflow", "12.3", arch_list=["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"],
                  version="2.17.0", installed=True, arch_measured=True)
    found = stack.judge_versions(BUNDLED, st.Stack(driver="580.159.04", driver_cuda="13.0", gpus=[H100], builds=[tf], os="linux"))
    assert "CMP004" not in _codes(found) and "CMP003" not in _codes(found)
    # the same build on a cc 12.0 GPU still has only PTX for it
    assert rules.build_runs_on("12.0", tf.sass, tf.ptx).status == rules.LIMITED


def test_known_bad_os_entries_need_a_gpu_use():
    cpu_torch = st.Build("PyTorch 2.5.1", "torch", None, version="2.5.1", cpu_only=True, installed=True)
    assert known_bad.judge_known_bad(BUNDLED, st.Stack(os="macos", builds=[cpu_torch])) == []
    jax = st.Build("JAX 0.4.30", "jax", None, version="0.4.30", installed=True)
    assert known_bad.judge_known_bad(BUNDLED, st.Stack(os="windows", builds=[jax])) == []  # no NVIDIA GPU in view
    # with the GPU there, the framework silently leaves it unused: that stays an error
    assert _codes(known_bad.judge_known_bad(BUNDLED, st.Stack(os="windows", builds=[jax], gpus=[("GPU 0 (NVIDIA GeForce RTX 4090)", "8.9")]))) \
        == ["CMP009"]


def _matrix_verdict(*args: str) -> str:
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", *args])
    return json.loads(result.stdout)["verdict"]


def test_a_jetson_is_not_judged_by_pypi_wheel_lists():
    assert _matrix_verdict("--gpu", "Orin", "--jax", "0.4.30") == "unknown"
    assert _matrix_verdict("--gpu", "Orin", "--torch", "2.4.0+cu124") == "unknown"
    assert _matrix_verdict("--gpu", "NVIDIA Jetson AGX Thor", "--torch", "2.9.0+cu130") == "unknown"
    # a desktop GPU of the same architecture family is still judged from the list
    assert _matrix_verdict("--gpu", "NVIDIA A10", "--torch", "2.4.0+cu124") == "ok"


def test_an_arm_host_quick_check_does_not_take_the_x86_list():
    report = json.loads((REAL / "quick.json").read_text())
    facts = copy.deepcopy(report["facts"])
    facts["host"]["machine"] = "aarch64"
    facts["gpus"][0]["compute_capability"] = "11.0"  # a GPU the x86_64 cu130 list lacks (sm_110)
    judged = pipeline.judge(facts)
    assert [f for f in judged["findings"] if f["code"] == "CMP003"] == []


def test_a_mig_slice_has_no_expected_figures():
    assert rules.performance_entry(BUNDLED, "NVIDIA H100 80GB HBM3") is not None
    assert rules.performance_entry(BUNDLED, "NVIDIA H100 80GB HBM3 MIG 1g.10gb") is None
    assert rules.performance_entry(BUNDLED, "NVIDIA A100-SXM4-40GB MIG 1g.5gb") is None
