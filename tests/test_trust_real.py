"""Verdicts that can be trusted, shown on reports recorded on real GPUs with tools/device/record_trust.sh:
1 x H100 (2026-11-23 15:19 UTC) and 1 x H200 (15:21 UTC), driver 580.159.04, the image's stock
PyTorch 2.11.0 from the package index, JAX 0.11.2, CuPy 14.2 (no TensorFlow there).

Healthy: `check`, `--quick`, `--deep`, and gpudoctor run from a tool venv without frameworks
(as pipx installs it) with the image's venv active: all clear. Faults, one variable each in the
environment of the gpudoctor process, or a second process running bf16 matmuls on the GPU for
the whole check: each gives exactly the findings that name its cause.
"""

from __future__ import annotations

import json

import pytest

from gpudoctor import pipeline

from conftest import REAL

MACHINES = ("h100x1-20261123", "h200x1-20261123")
HEALTHY = ("full", "quick", "deep", "tool_venv", "tool_venv_quick")
FAULTS = {
    "bogus_alloc": {"FWK002", "FWK103"},  # PYTORCH_CUDA_ALLOC_CONF=bogus_option:1
    "jax_cpu": {"FWK002", "FWK101"},  # JAX_PLATFORMS=cpu
    "launch_blocking": {"FWK106"},  # CUDA_LAUNCH_BLOCKING=1: a note, the check passes
    "shared_gpu": {"RUN019"},  # another process's matmuls: not judged, not called slow
}


def _report(machine: str, name: str) -> dict:
    return json.loads((REAL / machine / f"{name}.json").read_text())


def _codes(machine: str, name: str) -> set[str]:
    return {f["code"] for f in pipeline.judge(_report(machine, name)["facts"])["findings"]}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("name", HEALTHY)
def test_the_stock_stack_is_all_clear_in_every_mode(machine, name):
    assert _codes(machine, name) == set()
    assert _report(machine, name)["summary"]["verdict"] == "ok"  # as recorded there, not only re-judged here


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_gives_the_finding_that_names_its_cause(machine, name):
    assert _codes(machine, name) == FAULTS[name]


@pytest.mark.parametrize("machine", MACHINES)
def test_quick_and_full_agree_on_every_framework(machine):
    quick, full = (_report(machine, n)["facts"]["frameworks"] for n in ("quick", "full"))
    for name, fw in full.items():
        assert quick[name]["installed"] == fw["installed"]
        if not fw["installed"]:
            continue
        q, f = quick[name]["info"], fw["info"]
        assert q["version"] == f["version"], name
        assert q["cpu_only_build"] in (None, f["cpu_only_build"]), name  # unknown, or the same answer
        if q.get("built_cuda") and f.get("built_cuda"):
            assert q["built_cuda"] == f["built_cuda"], name


@pytest.mark.parametrize("machine", MACHINES)
def test_the_fault_findings_say_what_to_type(machine):
    found = {f["code"]: f for f in pipeline.judge(_report(machine, "jax_cpu")["facts"])["findings"]}
    assert "unset JAX_PLATFORMS" in found["FWK101"]["remediation"]["commands"]
    found = {f["code"]: f for f in pipeline.judge(_report(machine, "bogus_alloc")["facts"])["findings"]}
    assert "Unrecognized key 'bogus_option'" in found["FWK002"]["detail"]
    assert any("PYTORCH_CUDA_ALLOC_CONF" in c for c in found["FWK103"]["remediation"]["commands"])
    assert not any("reinstall" in c for f in found.values() for c in f["remediation"]["commands"])


@pytest.mark.parametrize("machine", MACHINES)
def test_the_shared_gpu_names_the_other_process_and_its_own_gpu_idle_figures_are_judged(machine):
    shared = _report(machine, "shared_gpu")["facts"]
    torch = next(r for r in shared["workload"]["runs"] if r["framework"] == "torch")
    assert torch["throughput"]["sharing"]["shared"] is True
    assert [o["name"] for o in torch["throughput"]["sharing"]["others"]] == ["python3"]
    idle = next(r for r in _report(machine, "full")["facts"]["workload"]["runs"] if r["framework"] == "torch")
    assert idle["throughput"]["sharing"] == {"shared": False}
    assert idle["throughput"]["matmul_bf16_tflops"] > 2 * torch["throughput"]["matmul_bf16_tflops"]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_tool_venv_diagnosed_the_active_venv_and_ran_its_frameworks(machine):
    facts = _report(machine, "tool_venv")["facts"]
    assert facts["python"]["diagnosed"]["own"] is False
    assert facts["python"]["diagnosed"]["reason"].startswith("$VIRTUAL_ENV")
    for name in ("torch", "jax", "cupy"):
        assert facts["frameworks"][name]["status"] == "ok"
        assert len(facts["frameworks"][name]["info"]["devices"]) == 1
