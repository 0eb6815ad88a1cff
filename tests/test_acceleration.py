"""Judging the proof of acceleration on real recordings (workload-report.json: a full `check` with
framework workloads on 1 x H100 and 4 x H200, 2026-11-21) and on degraded variants derived from
them one fact at a time: a slow GPU, a narrow PCIe link, a failing kernel, a training step that
does not learn, a busy GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor import pipeline
from gpudoctor.snapshot import with_fact

REAL = Path(__file__).parent / "fixtures" / "real"


def facts(name: str) -> dict:
    return json.loads((REAL / name / "workload-report.json").read_text())["facts"]


@pytest.fixture(params=["h100x1-20261121", "h200x2-20261121", "h200x4-20261121"])
def healthy(request):
    return facts(request.param)


def codes(f: dict) -> list[str]:
    return sorted(x["code"] for x in pipeline.judge(f)["findings"])


def _torch_run(f: dict, device: str) -> int:
    return next(i for i, r in enumerate(f["workload"]["runs"]) if r["framework"] == "torch" and r["device"] == device)


def test_recorded_workloads_pass_and_are_quiet(healthy):
    report = pipeline.judge(healthy)
    assert report["findings"] == []
    runs = healthy["workload"]["runs"]
    assert all(r.get(step, {"ok": True})["ok"] for r in runs for step in ("elementwise", "matmul", "conv", "training"))
    assert {c["id"]: c["status"] for c in report["checks"] if c["area"] == "acceleration"} == {
        "acceleration.smoke": "pass", "acceleration.workload": "pass", "acceleration.throughput": "pass",
        "acceleration.p2p": "skip", "acceleration.allreduce": "skip"}  # recorded without --deep


def test_recorded_training_learned_in_bf16(healthy):
    t = healthy["workload"]["runs"][_torch_run(healthy, "0")]["training"]
    assert t["mixed_precision"] == "bf16" and t["loss_last"] < 0.7 * t["loss_first"] and t["params_updated"]


def test_a_slow_gpu_is_named_with_likely_causes():
    f = facts("h200x4-20261121")
    i = _torch_run(f, "2")
    f = with_fact(f, f"workload.runs.{i}.throughput.matmul_bf16_tflops", 300.0)
    f = with_fact(f, "gpus.2.clock_event_reasons", {"mask": 0x8, "active": ["hw_slowdown"]})
    report = pipeline.judge(f)
    run014 = [x for x in report["findings"] if x["code"] == "RUN014"]
    assert len(run014) == 1 and "cuda:2" in run014[0]["title"] and "bf16 matmul 300" in run014[0]["title"]
    assert "hw_slowdown" in run014[0]["detail"]
    assert run014[0]["subject"]["gpu_index"] == 2


def test_a_narrow_pcie_link_shows_in_host_copies():
    f = facts("h200x4-20261121")
    i = _torch_run(f, "1")
    f = with_fact(f, f"workload.runs.{i}.throughput.h2d_gbs", 13.1)
    f = with_fact(f, "gpus.1.pcie.width_current", 4)
    assert codes(f) == ["GPU131", "RUN014"]
    run014 = next(x for x in pipeline.judge(f)["findings"] if x["code"] == "RUN014")
    assert "host-to-device 13.1 GB/s" in run014["title"] and "PCIe link at x4 of x16" in run014["detail"]


def test_a_failing_kernel_and_a_wrong_result():
    f = facts("h100x1-20261121")
    i = _torch_run(f, "0")
    f1 = with_fact(f, f"workload.runs.{i}.conv", {"ok": False, "error": "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"})
    assert codes(f1) == ["RUN012"]
    f2 = with_fact(f, f"workload.runs.{i}.matmul.ok", False)
    f2 = with_fact(f2, f"workload.runs.{i}.matmul.checks.1", {"ok": False, "rel_error": 0.5, "tolerance": 0.01, "what": "matmul bfloat16"})
    assert codes(f2) == ["RUN011"]


def test_training_that_does_not_learn():
    f = facts("h100x1-20261121")
    i = _torch_run(f, "0")
    f = with_fact(f, f"workload.runs.{i}.training.ok", False)
    f = with_fact(f, f"workload.runs.{i}.training.finite", False)
    assert codes(f) == ["RUN013"]


def test_a_busy_gpu_is_skipped_not_failed():
    f = facts("h100x1-20261121")
    i = _torch_run(f, "0")
    run = {k: v for k, v in f["workload"]["runs"][i].items() if k not in ("elementwise", "matmul", "conv", "training", "throughput")}
    f = with_fact(f, f"workload.runs.{i}", {**run, "skipped": "the GPU is busy: 70.0 of 79.2 GiB in use"})
    report = pipeline.judge(f)
    assert codes(f) == ["RUN015"] and report["summary"]["verdict"] == "ok"


def test_an_unknown_gpu_model_is_shown_not_judged():
    f = facts("h100x1-20261121")
    i = _torch_run(f, "0")
    f = with_fact(f, f"workload.runs.{i}.name", "NVIDIA Fictional X9000")
    f = with_fact(f, f"workload.runs.{i}.throughput.matmul_bf16_tflops", 1.0)
    assert codes(f) == ["RUN018"]


def test_quick_runs_no_gpu_work():
    from gpudoctor.runner import GPU_WORK

    assert set(GPU_WORK) == {"smoke", "workload", "multigpu"}
    report = pipeline.check(quick=True, only=("acceleration",))
    assert "smoke" not in report["facts"] and "workload" not in report["facts"]
    assert {c["status"] for c in report["checks"] if c["area"] == "acceleration"} == {"skip"}
