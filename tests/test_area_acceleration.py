"""The acceleration area: acceleration.smoke (checks/smoke.py), acceleration.workload and
acceleration.throughput (checks/workload.py), acceleration.p2p and acceleration.allreduce
(checks/multigpu.py), and the torchrun job's acceleration.cluster, cluster_nodes, cluster_drift and
cluster_network (checks/cluster.py).

Judged on real recordings (workload-report.json: a full `check` with framework workloads on 1 x H100 and
4 x H200, 2026-11-21; `check --deep` on 2 x H200 and 4 x H200; torchrun jobs on H200s; a GPU shared with
another process on 1 x H100) and on degraded variants derived from them one fact at a time: a slow GPU,
a narrow PCIe link, a failing kernel, a training step that does not learn, a busy GPU, slow or refused
P2P links, a wrong or slow all-reduce, nodes whose versions or reports differ. Also here: how the
workload children are pinned to their GPU, whose results these checks judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.procs.scope import RunScope
from gpudoctor import pipeline
from gpudoctor.probes.interpreter import own
from gpudoctor.probes.workload import sharing
from gpudoctor.compat.data import BUNDLED
from helpers_facts import with_fact

from helpers_deep import CLUSTER, CLUSTER4, REAL, deep, h200x4, recorded


def facts(name: str) -> dict:
    return json.loads((REAL / name / "workload-report.json").read_text())["facts"]


@pytest.fixture(params=["h100x1-20261121", "h200x2-20261121", "h200x4-20261121"])
def healthy(request):
    return facts(request.param)


def codes(f: dict) -> list[str]:
    return sorted(x["code"] for x in pipeline.judge(f)["findings"])


def findings(f: dict) -> list[dict]:
    return pipeline.judge(f)["findings"]


def statuses(f: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in pipeline.judge(f)["checks"] if c["id"] in ("acceleration.p2p", "acceleration.allreduce")}


def _torch_run(f: dict, device: str) -> int:
    return next(i for i, r in enumerate(f["workload"]["runs"]) if r["framework"] == "torch" and r["device"] == device)


def test_recorded_workloads_pass_and_are_quiet(healthy):
    report = pipeline.judge(healthy)
    assert report["findings"] == []
    runs = healthy["workload"]["runs"]
    assert all(r.get(step, {"ok": True})["ok"] for r in runs for step in ("elementwise", "matmul", "conv", "training"))
    assert {c["id"]: c["status"] for c in report["checks"] if c["area"] == "acceleration"} == {
        "acceleration.smoke": "pass", "acceleration.workload": "pass", "acceleration.throughput": "pass",
        "acceleration.p2p": "skip", "acceleration.allreduce": "skip",  # recorded without --deep
        **{f"acceleration.{c}": "skip" for c in ("cluster", "cluster_nodes", "cluster_drift", "cluster_network")}}


def test_recorded_training_learned_in_bf16(healthy):
    t = healthy["workload"]["runs"][_torch_run(healthy, "0")]["training"]
    assert t["mixed_precision"] == "bf16" and t["loss_last"] < 0.7 * t["loss_first"] and t["params_updated"]


def test_jax_training_learned_in_bf16_on_a_real_h100():
    """Recorded on 1 x H100 (device kind nvidia-h100-x1), 2026-11-21 13:25 UTC, JAX 0.11.2: the MLP's matmuls
    in bf16, its weights in float32 (loss 0.736 -> 0.087); judged all clear like the other recordings."""
    recorded = json.loads((REAL / "h100x1-20261121" / "workload-report-2.json").read_text())["facts"]
    jax = next(r for r in recorded["workload"]["runs"] if r["framework"] == "jax")
    t = jax["training"]
    assert (t["ok"], t["mixed_precision"], round(t["loss_first"], 3), round(t["loss_last"], 3)) == (True, "bf16", 0.736, 0.087)
    assert pipeline.judge(recorded)["findings"] == []


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


def test_a_throughput_measurement_that_failed_on_a_real_gpu_is_an_error():
    """Recorded on 4 x H200 with an experimental build that destroyed each GPU's CUDA context once its run
    was printed: two GPUs' throughput timings then met "context is destroyed". The proof table said
    "failed" and the verdict said nothing; a node gate must not pass that."""
    report = json.loads((REAL / "h200x4-20261127" / "contexts-1302" / "throughput-failed.json").read_text())
    judged = pipeline.judge(report["facts"])
    failed = [x for x in judged["findings"] if x["code"] == "RUN012"]
    assert sorted(x["subject"]["gpu_index"] for x in failed) == [0, 1]
    assert all("the throughput step failed" in x["title"] and "context is destroyed" in x["title"] for x in failed)
    assert judged["summary"]["verdict"] != "ok"


def test_a_throughput_step_that_raised_is_reported_one_fact_from_a_healthy_run(healthy):
    i = _torch_run(healthy, "0")
    f = with_fact(healthy, f"workload.runs.{i}.throughput", {"ok": False, "error": "OutOfMemoryError: CUDA out of memory."})
    assert codes(f) == ["RUN012"]
    assert "throughput" in findings(f)[0]["title"]


def test_a_throughput_that_failed_beside_another_process_is_not_judged(healthy):
    """Out of memory because another process took it after the run began: the GPU was not the run's own, so
    the failure says nothing about this GPU (RUN019, as for a slow figure on a shared GPU), not RUN012."""
    i = _torch_run(healthy, "0")
    others = {"shared": True, "others": [{"pid": 4242, "name": "python3", "used_memory": 60 * 2**30}]}
    f = with_fact(healthy, f"workload.runs.{i}.throughput",
                  {"ok": False, "error": "OutOfMemoryError: CUDA out of memory.", "sharing": others})
    assert codes(f) == ["RUN019"]
    assert "out of memory" in findings(f)[0]["detail"]


def test_a_gpu_without_bf16_is_measured_in_float32_and_shown_so():
    """An older GPU's run as the PyTorch child records it: no bf16 matmul check or figure (the GPU has no
    bf16 units), its tf32 timing float32's; not in the throughput table, so shown, not judged."""
    from gpudoctor.render import proof

    f = facts("h100x1-20261121")
    i = _torch_run(f, "0")
    f = with_fact(f, f"workload.runs.{i}.name", "Tesla P100-PCIE-16GB")
    throughput = {k: v for k, v in f["workload"]["runs"][i]["throughput"].items() if k != "matmul_bf16_tflops"}
    f = with_fact(f, f"workload.runs.{i}.throughput", {**throughput, "matmul_tf32_tflops": 9.3})
    assert codes(f) == ["RUN018"]
    assert "9 TFLOP/s float32" in findings(f)[0]["title"]
    row = next(r for r in proof.rows(f, BUNDLED) if r["framework"] == "torch")
    assert row["matmul"] == "float32 9 TFLOP/s"


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
    report = pipeline.check(pipeline.RunOptions(quick=True, only=("acceleration",)))
    assert "smoke" not in report["facts"] and "workload" not in report["facts"]
    assert {c["status"] for c in report["checks"] if c["area"] == "acceleration"} == {"skip"}


def test_each_one_gpu_workload_child_sees_only_its_gpu():
    """A one-GPU child (TensorFlow's, one per GPU) for cuda:N is started with CUDA_VISIBLE_DEVICES set to that
    GPU's UUID (the smoke probe's count), so the framework initialises one GPU, not all; the report still
    says cuda:N."""
    from gpudoctor.probes.workload import pinned

    env = {"CUDA_VISIBLE_DEVICES": "2,3", "PATH": "/usr/bin"}
    assert pinned(env, "GPU-88fefc12-ff71-7147-d332-b3a1deaa0344") == {
        "CUDA_VISIBLE_DEVICES": "GPU-88fefc12-ff71-7147-d332-b3a1deaa0344", "PATH": "/usr/bin", "GPUDOCTOR_PINNED_GPU": "1"}
    assert pinned(env, None) is env and pinned(env, "not-a-uuid") is env  # nothing to pin by: as the user set it


def test_pinned_children_index_their_one_gpu_as_0(monkeypatch):
    from gpudoctor.probes.workload.common import cuda_index

    monkeypatch.delenv("GPUDOCTOR_PINNED_GPU", raising=False)
    assert cuda_index("3") == 3
    monkeypatch.setenv("GPUDOCTOR_PINNED_GPU", "1")
    assert cuda_index("3") == 0


def test_real_4_gpu_check_with_pinned_children_is_all_clear():
    """4 x H200, 2026-11-21 13:34 UTC, each workload child pinned to its GPU: every GPU measured under its own
    ordinal, bf16 matmul 754 to 808 TFLOP/s, JAX and PyTorch training in bf16, nothing found."""
    recorded = json.loads((REAL / "h200x4-20261121" / "workload-report-pinned.json").read_text())["facts"]
    runs = recorded["workload"]["runs"]
    assert sorted((r["framework"], r["device"]) for r in runs) == sorted(
        (f, d) for f in ("torch", "jax", "cupy") for d in "0123")
    bf16 = [r["throughput"]["matmul_bf16_tflops"] for r in runs if r["framework"] == "torch"]
    assert 750 < min(bf16) and max(bf16) < 810
    assert {r["training"]["mixed_precision"] for r in runs if r["framework"] in ("torch", "jax")} == {"bf16"}
    assert pipeline.judge(recorded)["findings"] == []


def test_mig_instances_are_not_pinned(monkeypatch):
    """A MIG instance needs CUDA's MIG- UUID form to be named in CUDA_VISIBLE_DEVICES: its children run as CUDA
    numbers them."""
    from gpudoctor.probes import smoke, workload
    from gpudoctor.procs.child import ChildResult

    seen = []
    count = {"devices": [{"ordinal": 0, "name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
                          "uuid": "GPU-5c0bd4a8-1111-2222-3333-444455556666"}]}

    def fake_run_module(module, args=(), timeout_s=0, env=None, feed=None, **kwargs):
        seen.append((tuple(args), feed() if feed else None, (env or {}).get("GPUDOCTOR_PINNED_GPU")))
        return ChildResult(lines=[{"section": "count", "data": count}], returncode=0)

    monkeypatch.setattr(workload, "run_module", fake_run_module)
    monkeypatch.setattr(smoke, "run_module", fake_run_module)  # the count, shared with the smoke probe
    monkeypatch.setattr(workload, "installed", lambda name, target: name in ("torch", "tensorflow"))
    scope = RunScope()
    workload.probe_workload(scope, own(), 5.0)
    assert sorted(seen, key=str) == sorted([(("count",), None, None), (("torch", "-", "--facts"), "0\n", None),
                                            (("tensorflow", "0"), None, None)], key=str)  # TensorFlow's one-GPU child too
    seen.clear()
    smoke.probe_smoke(scope, 5.0)
    assert seen == [(("run", "0"), None, None)]  # the run's count is shared; the smoke child is not pinned either


def test_smoke_children_start_cuda_on_their_gpu_alone_and_share_the_count(monkeypatch):
    """Each smoke child is pinned to its GPU by UUID (on 4 x H200 the driver starts CUDA in one process at a
    time, and a child that sees all four starts it on all four); the count is one child for the smoke probe
    and the workloads."""
    from gpudoctor.probes import smoke
    from gpudoctor.procs.child import ChildResult

    uuids = [f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(2)]
    count = {"devices": [{"ordinal": i, "name": "NVIDIA H200", "uuid": u} for i, u in enumerate(uuids)]}
    seen = []

    def fake_run_module(module, args=(), timeout_s=0, env=None, feed=None):
        env = env or {}
        seen.append((tuple(args), env.get("CUDA_VISIBLE_DEVICES"), env.get("GPUDOCTOR_PINNED_GPU")))
        if args[0] == "count":
            return ChildResult(lines=[{"section": "count", "data": count}], returncode=0)
        return ChildResult(lines=[{"section": "run", "data": {"ordinal": int(args[1]), "ok": True}}], returncode=0)

    monkeypatch.setattr(smoke, "run_module", fake_run_module)
    scope = RunScope()
    assert smoke.count_gpus(scope) is smoke.count_gpus(scope)  # one count per run
    result = smoke.probe_smoke(scope, 5.0)["smoke"]
    assert sorted(seen) == [(("count",), None, None), (("run", "0"), uuids[0], "1"), (("run", "1"), uuids[1], "1")]
    assert [(r["ordinal"], r["uuid"], r["ok"]) for r in result["runs"]] == [(0, uuids[0], True), (1, uuids[1], True)]
    assert smoke.count_gpus(RunScope()) is not smoke.count_gpus(scope)  # another run counts again


def test_real_4_gpu_check_with_one_child_per_framework_is_all_clear():
    """4 x H200, 2026-11-21 15:58 UTC (tools/device/bound.sh, bound.txt beside it): one child per framework
    drove all four GPUs, a thread each, and was also the framework probe's child. Each framework was
    imported once (one import time for its four GPUs), every GPU reports under its own ordinal, trained
    in bf16 with the loss falling, and nothing was found. bf16 matmul 775 to 804 TFLOP/s with the four
    GPUs measured at once (744 on GPU 0 alone, seconds earlier): untimed work of other frameworks
    shares a GPU but never overlaps a measurement."""
    recorded = json.loads((REAL / "h200x4-20261121" / "workload-report-threaded.json").read_text())["facts"]
    runs = recorded["workload"]["runs"]
    assert [(r["framework"], r["device"]) for r in runs] == [(f, d) for f in ("torch", "jax", "cupy") for d in "0123"]
    for framework in ("torch", "jax", "cupy"):
        assert len({r["import_s"] for r in runs if r["framework"] == framework}) == 1  # one process, one import
        assert recorded["frameworks"][framework]["status"] == "ok"  # its facts, from the same child
    torch_runs = [r for r in runs if r["framework"] == "torch"]
    assert all(r["training"]["loss_last"] < 0.3 * r["training"]["loss_first"] for r in torch_runs)
    assert all(750 < r["throughput"]["matmul_bf16_tflops"] < 820 for r in torch_runs)
    assert {r["training"]["mixed_precision"] for r in runs if r["framework"] in ("torch", "jax")} == {"bf16"}
    assert pipeline.judge(recorded)["findings"] == []


@pytest.mark.parametrize("machine,devices,when", [("h100x1-20261121", "0", "15:46"), ("h200x2-20261121", "01", "15:44")])
def test_real_checks_with_one_child_per_framework_are_all_clear(machine, devices, when):
    """1 x H100 and 2 x H200, 2026-11-21 (UTC times in the parameters): the same children on one and two
    GPUs, nothing found (recorded before untimed work took the GPU's lock shared; bound.txt beside each)."""
    recorded = json.loads((REAL / machine / "workload-report-threaded.json").read_text())
    assert recorded["created"][11:16] == when
    runs = recorded["facts"]["workload"]["runs"]
    assert [(r["framework"], r["device"]) for r in runs] == [(f, d) for f in ("torch", "jax", "cupy") for d in devices]
    assert pipeline.judge(recorded["facts"])["findings"] == []


def test_real_4_gpu_check_with_contexts_made_early_and_no_autotuning():
    """4 x H200, 2026-11-21 17:08 UTC (bound-1708.txt beside it: every GPU 6.50 - 7.01 s, GPU 0 alone
    4.68 - 5.80 s). PyTorch's four contexts were made while it reported its facts, so no GPU's thread
    waited to start CUDA; JAX compiled without autotuning, outside the GPU lock, and still trained in
    bf16; the pinned copies were 64 MiB after the link was warmed, and read what the link gives."""
    recorded = json.loads((REAL / "h200x4-20261121" / "workload-report-1708.json").read_text())
    assert recorded["created"].startswith("2026-11-21T17:08")
    runs = recorded["facts"]["workload"]["runs"]
    assert [(r["framework"], r["device"]) for r in runs] == [(f, d) for f in ("torch", "jax", "cupy") for d in "0123"]
    torch_runs = [r for r in runs if r["framework"] == "torch"]
    assert all(r["cuda_start_s"] < 0.05 for r in torch_runs)
    assert all(r["throughput"]["pinned_bytes"] == 64 << 20 and 50 < r["throughput"]["h2d_gbs"] < 57 for r in torch_runs)
    jax_runs = [r for r in runs if r["framework"] == "jax"]
    assert all(r["xla_autotuning"] is False and r["training"]["ok"] and r["training"]["compile_s"] > 0 for r in jax_runs)
    assert {r["training"]["mixed_precision"] for r in jax_runs} == {"bf16"}
    assert pipeline.judge(recorded["facts"])["findings"] == []


@pytest.mark.parametrize("path,devices,codes", [
    # CUDA_VISIBLE_DEVICES=0, 17:08 UTC: only the note of which GPU CUDA programs see
    ("h200x4-20261121/workload-report-1708-gpu0.json", "0", ["VIS004"]),
    ("h200x4-20261121/deep-report-1709.json", "0123", []),  # check --deep, 17:09 UTC, 15.6 s
    # the code as it is now, 17:17 UTC (bound-1717.txt: every GPU 5.62 - 6.36 s, GPU 0 alone 4.74 - 6.25 s)
    ("h200x4-20261121/workload-report-1717.json", "0123", []),
    ("h200x4-20261121/workload-report-1717-gpu0.json", "0", ["VIS004"]),
    ("h100x1-20261121/workload-report-1721.json", "0", []),  # the same code, 17:20 UTC (bound-1721.txt: 5.96 - 7.29 s)
    ("h100x1-20261121/workload-report-1711.json", "0", []),
    ("h200x2-20261121/workload-report-1712.json", "01", []),
])
def test_real_checks_of_the_same_code_on_each_machine_are_all_clear(path, devices, codes):
    """The code of the 4-GPU recording above, on GPU 0 alone, with --deep, on 1 x H100 and on 2 x H200, and
    after the end of a run stopped waiting for exits under way (2026-11-21; bound-*.txt beside each):
    every framework on every GPU, nothing wrong found."""
    recorded = json.loads((REAL / path).read_text())["facts"]
    runs = recorded["workload"]["runs"]
    assert [(r["framework"], r["device"]) for r in runs] == [(f, d) for f in ("torch", "jax", "cupy") for d in devices]
    assert all(r.get("training", {"ok": True})["ok"] for r in runs)
    assert [f["code"] for f in pipeline.judge(recorded)["findings"]] == codes


@pytest.mark.parametrize("name, model", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H200", "H200"), ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("NVIDIA H100 NVL", "H100 NVL"),
    # a neighbour of a row's product is not judged by that row's figures (no false "slower than it should be")
    ("NVIDIA GeForce RTX 4090 Laptop GPU", None), ("NVIDIA GeForce RTX 4090 D", None), ("NVIDIA H200 NVL", None),
    ("NVIDIA GeForce RTX 3090 Ti", None), ("NVIDIA GeForce RTX 5090 D", None),
])
def test_expected_figures_belong_to_that_very_product(name, model):
    from gpudoctor.compat import rules as compat

    entry = compat.performance_entry(BUNDLED, name)
    assert (entry and entry["model"]) == model


# --- multi-GPU (check --deep): acceleration.p2p and acceleration.allreduce on the 4 x H200 recording -----


def test_healthy_four_h200s_give_no_findings():
    facts = deep()
    assert len(facts["multigpu"]["p2p"]["pairs"]) == 12
    assert findings(facts) == []
    assert statuses(facts) == {"acceleration.p2p": "pass", "acceleration.allreduce": "pass"}


def test_one_slow_link_is_named():
    report = pipeline.judge(deep(gbs={(1, 3): 95.0}))
    [slow] = report["findings"]
    assert slow["code"] == "RUN022" and slow["severity"] == "warning"
    assert slow["title"].startswith("copies between GPU 1 and GPU 3 (NV18) run at 95 GB/s (cuda:1 -> cuda:3), 0.26 x the median")
    assert slow["subject"] == {"kind": "pair", "gpu_index": 1, "gpu_uuid": h200x4()["gpus"][1]["uuid"],
                               "peer_index": 3, "peer_uuid": h200x4()["gpus"][3]["uuid"]}


def test_a_link_slow_both_ways_is_one_finding():
    found = findings(deep(gbs={(0, 2): 120.0, (2, 0): 110.0}))
    assert [f["code"] for f in found] == ["RUN022"]
    assert "110 GB/s (cuda:2 -> cuda:0) and 120 GB/s (cuda:0 -> cuda:2)" in found[0]["title"]


def test_a_pair_at_three_quarters_of_the_median_is_not_called_slow():
    assert findings(deep(gbs={(1, 3): 0.75 * 370})) == []


def test_pairs_are_named_by_nvml_index_when_cuda_numbers_them_differently():
    """CUDA ordinal 0 is NVML GPU 3 here (say CUDA_DEVICE_ORDER or CUDA_VISIBLE_DEVICES): the finding names the
    link NVML knows, found through the UUIDs."""
    found = findings(deep(gbs={(0, 1): 90.0}, order=[3, 2, 1, 0]))
    assert [(f["code"], f["subject"]["gpu_index"], f["subject"]["peer_index"]) for f in found] == [("RUN022", 2, 3)]
    assert "(cuda:0 -> cuda:1)" in found[0]["title"]


def test_a_slow_all_reduce_names_the_slowest_link():
    facts = deep(gbs={(1, 3): 95.0}, busbw=180.0)
    found = {f["code"]: f for f in findings(facts)}
    assert sorted(found) == ["RUN022", "RUN025"]
    assert "bus bandwidth 180 GB/s" in found["RUN025"]["title"] and "0.53 x the 337 GB/s measured on 4 x NVIDIA H200 (NV18)" \
        in found["RUN025"]["title"]
    assert "Slowest P2P pair: cuda:1 -> cuda:3 at 95 GB/s, 0.26 x the median of all 12 ordered pairs" in found["RUN025"]["detail"]


def test_all_reduce_bandwidth_at_the_threshold():
    assert codes(deep(busbw=0.71 * 337)) == []
    assert codes(deep(busbw=0.69 * 337)) == ["RUN025"]


def test_wrong_all_reduce_values_are_an_error():
    facts = deep()
    facts = with_fact(facts, "multigpu.allreduce.correct", False)
    facts = with_fact(facts, "multigpu.allreduce.ok", False)
    facts = with_fact(facts, "multigpu.allreduce.wrong_elements", 3)
    facts = with_fact(facts, "multigpu.allreduce.ranks.2.correct", False)
    facts = with_fact(facts, "multigpu.allreduce.ranks.2.checks.1",
                      {"wrong_elements": 3, "expected": 10.0, "first_wrong_index": 4097, "first_wrong_value": 7.0})
    [wrong] = findings(facts)
    assert wrong["code"] == "RUN024" and wrong["severity"] == "error"
    assert wrong["title"] == ("the NCCL all-reduce across 4 GPUs gave wrong sums: 3 wrong element(s) on rank(s) 2 "
                              "(expected 10.0 everywhere)")
    assert wrong["detail"] == "First wrong value: 7.0 at element 4097."


def test_a_failed_all_reduce_is_an_error_with_its_text():
    facts = deep()
    facts["multigpu"]["allreduce"] = {
        "world_size": 4, "backend": "nccl", "ok": False,
        "error": "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, unhandled cuda error, NCCL version 2.28.9",
        "stderr_tail": "NCCL WARN Cuda failure 'peer access is not supported between these two devices'"}
    [failed] = findings(facts)
    assert failed["code"] == "RUN024"
    assert failed["title"].startswith("the NCCL all-reduce across 4 GPUs failed: DistBackendError: NCCL error in")
    assert "peer access is not supported" in failed["detail"]


def test_refused_peer_access_where_nvml_says_ok():
    facts = deep()
    for i, pair in enumerate(facts["multigpu"]["p2p"]["pairs"]):
        if {pair["src"], pair["dst"]} == {0, 2}:
            facts = with_fact(facts, f"multigpu.p2p.pairs.{i}.access", False)
    [refused] = findings(facts)
    assert refused["code"] == "RUN021" and refused["severity"] == "warning"
    assert refused["title"].endswith("P2P-capable: cuda:0 -> cuda:2, cuda:2 -> cuda:0")
    assert (refused["subject"]["gpu_index"], refused["subject"]["peer_index"]) == (0, 2)
    # where NVML itself reports no P2P, CUDA refusing it is expected (TOPO201/202 speak for NVML)
    facts = with_fact(facts, "topology.pairs.1.p2p.read", "not_supported")
    assert "RUN021" not in codes(facts)


def test_a_copy_that_fails_or_corrupts_data_is_an_error():
    facts = with_fact(deep(), "multigpu.p2p.pairs.5.wrong_elements", 4096)
    [bad] = findings(facts)
    assert bad["code"] == "RUN023" and "cuda:1 -> cuda:3: 4096 wrong elements" in bad["title"]
    facts = with_fact(deep(), "multigpu.p2p.pairs.0", {"src": 0, "dst": 1, "access": True,
                                                       "error": "RuntimeError: CUDA error: an illegal memory access was encountered"})
    assert codes(facts) == ["RUN023"]
    facts = deep()
    facts["multigpu"]["p2p"] = {"ok": False, "error": "the P2P test gave no answer within 120 s", "stderr_tail": ""}
    assert [f["title"] for f in findings(facts)] == ["the P2P test between the GPUs did not complete: the P2P test gave "
                                                    "no answer within 120 s"]


def test_an_unknown_model_or_count_is_shown_not_judged():
    facts = deep(busbw=20.0)
    for device in facts["multigpu"]["devices"]:
        device["name"] = "NVIDIA Fictional X9000"
    [info] = findings(facts)
    assert info["code"] == "RUN026" and info["severity"] == "info"
    assert info["title"].startswith("no reference all-reduce bandwidth for 4 x NVIDIA Fictional X9000 (NV18); measured bus "
                                    "bandwidth 20 GB/s")
    facts = with_fact(deep(busbw=20.0), "multigpu.allreduce.world_size", 3)  # no reference for 3 x H200
    assert codes(facts) == ["RUN026"]


def test_skipped_and_not_run_are_skips_with_the_reason():
    facts = h200x4()
    report = pipeline.judge(facts)
    reasons = {c["id"]: c["reason"] for c in report["checks"] if c["id"] in ("acceleration.p2p", "acceleration.allreduce")}
    assert all("check --deep" in r for r in reasons.values())
    facts["multigpu"] = {"devices": [], "skipped": "PyTorch is not installed; the multi-GPU tests run through it"}
    report = pipeline.judge(facts)
    assert {c["status"] for c in report["checks"] if c["id"].startswith("acceleration.") and c["id"] != "acceleration.smoke"} \
        == {"skip"}
    assert report["findings"] == []


def test_judgement_survives_redaction():
    from gpudoctor.redact import redact_report

    facts = deep(gbs={(1, 3): 95.0}, busbw=180.0)
    redacted = redact_report(pipeline.judge(facts))
    assert "GPU-redacted-0" in json.dumps(redacted["facts"]["multigpu"])
    again = pipeline.judge(redacted["facts"])
    assert [(f["code"], f["title"]) for f in again["findings"]] == [(f["code"], f["title"]) for f in findings(facts)]


def test_real_deep_run_on_4xh200_is_all_clear():
    """`check --deep` recorded on the real 4 x H200 (device kind nvidia-h200-x4, 2026-11-21): 12 ordered P2P
    pairs at 387-388 GB/s with correct copies, an NCCL 2.28.9 all-reduce with correct sums at 340.8 GB/s busbw."""
    import json
    from pathlib import Path

    from gpudoctor import pipeline

    path = Path(__file__).parent / "fixtures/real/h200x4-20261121/deep-report.json"
    facts = json.loads(path.read_text())["facts"]
    pairs = facts["multigpu"]["p2p"]["pairs"]
    assert len(pairs) == 12 and all(p["access"] and p["wrong_elements"] == 0 and p["gbs"] > 350 for p in pairs)
    assert facts["multigpu"]["allreduce"]["correct"] is True and facts["multigpu"]["allreduce"]["busbw_gbs"] > 330
    report = pipeline.judge(facts)
    assert report["findings"] == []
    assert {c["id"]: c["status"] for c in report["checks"] if c["id"] in ("acceleration.p2p", "acceleration.allreduce")} == {
        "acceleration.p2p": "pass", "acceleration.allreduce": "pass"}


def test_real_deep_run_on_2xh200_is_all_clear():
    """`check --deep` recorded on the real 2 x H200 (nvidia-h200-x2, 2026-11-21): P2P 387 GB/s both ways, NCCL
    all-reduce correct at 299.4 GB/s busbw (reference 298), JAX's training step learning on both GPUs."""
    import json
    from pathlib import Path

    from gpudoctor import pipeline

    facts = json.loads((Path(__file__).parent / "fixtures/real/h200x2-20261121/deep-report.json").read_text())["facts"]
    assert facts["multigpu"]["allreduce"]["correct"] is True and 290 < facts["multigpu"]["allreduce"]["busbw_gbs"] < 310
    jax_training = [r["training"] for r in facts["workload"]["runs"] if r["framework"] == "jax"]
    assert len(jax_training) == 2 and all(t["ok"] and t["loss_last"] < 0.2 for t in jax_training)
    assert pipeline.judge(facts)["findings"] == []


# --- torchrun jobs (check --deep under torchrun): acceleration.cluster, cluster_nodes, cluster_drift, ---------
# cluster_network, on the jobs recorded on real 2 x H200 and 4 x H200 (tools/device/record_cluster.sh): 1 node
# x 2 GPUs and 2 "nodes" x 1 GPU all clear, NCCL pointed at a missing interface (RUN031), more ranks than GPUs
# (RUN035); and on faults derived from the 2-node job one fact at a time.

def cluster_codes(facts: dict[str, Any]) -> list[str]:
    return [f["code"] for f in pipeline.judge(facts)["findings"] if f["code"].startswith("RUN03")]


def warnings_and_errors(report: dict[str, Any]) -> list[str]:
    return [f["code"] for f in report["findings"] if f["severity"] in ("error", "warning")]


@pytest.mark.parametrize("name, folder, busbw, ranks", [
    ("job-1x2", CLUSTER, 298.7, 2), ("job-2x1", CLUSTER, 299.0, 2),  # 2 x H200, 13:59 UTC
    ("job-1x4", CLUSTER4, 340.4, 4), ("job-2x2", CLUSTER4, 340.9, 4),  # 4 x H200, 2026-11-21 13:28 and 13:30 UTC
])
def test_real_jobs_are_all_clear(name, folder, busbw, ranks):
    report = recorded(name, folder)
    cluster = report["facts"]["cluster"]
    assert cluster["allreduce"]["ok"] is True and cluster["allreduce"]["busbw_gbs"] == pytest.approx(busbw, abs=0.1)
    assert cluster["allreduce"]["transports"] == ["P2P/CUMEM"]  # one host: NCCL never needed the network
    assert [r["rank"] for r in cluster["ranks"]] == list(range(ranks))
    rejudged = pipeline.judge(report["facts"])
    assert warnings_and_errors(rejudged) == []
    assert [(c["id"], c["status"]) for c in rejudged["checks"] if c["id"].startswith("acceleration.cluster")] == [
        ("acceleration.cluster", "pass"), ("acceleration.cluster_nodes", "pass"),
        ("acceleration.cluster_drift", "pass" if name.startswith("job-2x") else "skip"),
        ("acceleration.cluster_network", "skip")]  # every rank on one host: no traffic between nodes


def test_real_fault_nccl_on_a_missing_interface():
    report = recorded("fault-no-such-interface")
    assert cluster_codes(report["facts"]) == ["RUN031"]
    finding = next(f for f in pipeline.judge(report["facts"])["findings"] if f["code"] == "RUN031")
    assert "invalid usage" in finding["title"] and "NCCL version 2.28.9" in finding["title"]
    assert finding["remediation"]["commands"][0].startswith("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun")


def test_real_fault_two_ranks_on_one_gpu_quotes_nccl():
    """Recorded 14:03 UTC, before shared_gpu existed: node 1 started 2 ranks with 1 GPU visible, both took it,
    and NCCL refused. The finding carries NCCL's own words from its log."""
    report = recorded("fault-two-ranks-one-gpu-before-fix")
    finding = next(f for f in pipeline.judge(report["facts"])["findings"] if f["code"] == "RUN031")
    assert "NCCL WARN Duplicate GPU detected : rank 1 and rank 2 both on CUDA device" in finding["detail"]


def test_real_fault_nccl_warning_is_quoted():
    finding = next(f for f in pipeline.judge(recorded("fault-no-such-interface")["facts"])["findings"]
                   if f["code"] == "RUN031")
    assert finding["detail"].startswith("NCCL WARN Bootstrap : no socket interface found")


def test_real_fault_more_ranks_than_gpus():
    report = recorded("fault-more-ranks-than-gpus")
    assert cluster_codes(report["facts"]) == ["RUN035"]
    assert "local rank 1 has no GPU of its own: CUDA shows 1 GPU(s)" in report["facts"]["cluster"]["allreduce"]["skipped"]
    assert warnings_and_errors(pipeline.judge(report["facts"])) == []  # an info: the nodes' own findings stand


def derived(*changes: tuple[str, Any]) -> dict[str, Any]:
    facts = recorded("job-2x1")["facts"]
    for path, value in changes:
        facts = with_fact(facts, path, value)
    return facts


def test_wrong_sums_are_an_error():
    facts = derived(("cluster.allreduce.correct", False), ("cluster.allreduce.wrong_elements", 4096))
    assert cluster_codes(facts) == ["RUN031"]


def test_another_nodes_error_is_rank_0s_error():
    node = recorded("job-2x1")["facts"]["cluster"]["nodes"][1]["report"]
    ecc = {"code": "GPU101", "severity": "error", "title": "GPU 1 has 2 uncorrectable ECC errors"}
    facts = derived(("cluster.nodes.1.report.findings", [*node["findings"], ecc]))
    report = pipeline.judge(facts)
    finding = next(f for f in report["findings"] if f["code"] == "RUN032")
    assert finding["severity"] == "error" and finding["title"].endswith("reports 1 problem(s) of its own: GPU101")
    assert report["summary"]["verdict"] == "error"


def test_another_nodes_warning_is_a_warning_and_its_infos_stay_there():
    facts = derived(("cluster.nodes.1.report.findings", [
        {"code": "VIS004", "severity": "info", "title": "CUDA programs will see 1 GPU(s)"},
        {"code": "GPU104", "severity": "warning", "title": "GPU 0 is throttled"}]))
    found = [f for f in pipeline.judge(facts)["findings"] if f["code"] == "RUN032"]
    assert [(f["severity"], f["title"].rsplit(": ", 1)[1]) for f in found] == [("warning", "GPU104")]


def test_a_node_without_its_report_is_a_warning():
    facts = derived(("cluster.nodes.1.report", None))
    found = [f for f in pipeline.judge(facts)["findings"] if f["code"] == "RUN032"]
    assert [(f["severity"], f["title"].endswith("sent no report of its own check")) for f in found] == [("warning", True)]


@pytest.mark.parametrize("path, value, what", [
    ("cluster.nodes.1.report.facts.nvml.driver_version", "570.172.08", "driver branch"),
    ("cluster.ranks.1.nccl_version", "2.27.3", "NCCL"),
    ("cluster.ranks.1.torch", "2.10.0+cu128", "PyTorch"),
])
def test_versions_that_differ_between_nodes(path, value, what):
    facts = derived((path, value))
    found = [f for f in pipeline.judge(facts)["findings"] if f["code"] == "RUN033"]
    assert [f["title"] for f in found] == [f"the nodes of this job run different versions: {what}"]
    assert value.split(".")[0] in found[0]["detail"]


def test_patch_releases_of_one_driver_branch_are_no_drift():
    assert cluster_codes(derived(("cluster.nodes.1.report.facts.nvml.driver_version", "580.95.05"))) == []


def _two_hosts(networks: list[str], infiniband: list[str]) -> dict[str, Any]:
    return derived(("cluster.ranks.1.hostname", "node-b"), ("cluster.nodes.1.hostname", "node-b"),
                   ("cluster.nodes.1.infiniband", infiniband), ("cluster.allreduce.networks", networks))


def test_sockets_between_nodes_with_infiniband_are_a_warning():
    assert cluster_codes(_two_hosts(["Socket"], ["mlx5_0", "mlx5_1"])) == ["RUN034"]


@pytest.mark.parametrize("networks, infiniband", [(["IB"], ["mlx5_0"]), (["Socket"], []),
                                                  (["AWS Libfabric"], ["efa_0"]), (["Socket"], ["efa_0", "rdmap16s27"])])
def test_rdma_used_or_absent_is_quiet(networks, infiniband):
    assert cluster_codes(_two_hosts(networks, infiniband)) == []


@pytest.mark.parametrize("setting", [{"NCCL_IB_DISABLE": "1"}, {"NCCL_NET": "Socket"}])
def test_sockets_asked_for_are_quiet(setting):
    facts = with_fact(_two_hosts(["Socket"], ["mlx5_0"]), "cluster.ranks.1.nccl_settings", setting)
    assert cluster_codes(facts) == []


def test_no_cluster_facts_no_cluster_checks():
    report = pipeline.judge(recorded("job-1x2")["facts"] | {"cluster": None})
    statuses = {c["id"]: c["status"] for c in report["checks"] if c["id"].startswith("acceleration.cluster")}
    assert set(statuses.values()) == {"skip"}


# --- a shared GPU is not a slow GPU (acceleration.throughput: RUN019 instead of RUN014) -----------------------
# The real case: on 1 x H100 (2026-11-23, tests/fixtures/real/h100x1-20261123/before/shared_gpu.json) another
# process ran bf16 matmuls during a check and PyTorch measured 306 of 786 TFLOP/s; the code of then called the
# GPU slow (RUN014). That recording predates the sampling (probes/workload/sharing.py, tested in
# test_sharing.py), so the sampling's verdict is added to it here the way the worker now records it; the
# re-recording with the sampling is in tests/fixtures/real/h100x1-20261123/ (see its README row).

def _before(name: str) -> dict:
    return json.loads((REAL / "h100x1-20261123" / "before" / f"{name}.json").read_text())["facts"]


def _shared_torch_run(f: dict) -> dict:
    return next(r for r in f["workload"]["runs"] if r["framework"] == "torch")


def test_the_recorded_shared_gpu_was_called_slow_without_the_sampling():
    assert "RUN014" in codes(_before("shared_gpu"))


def test_a_figure_taken_beside_another_process_is_not_judged():
    facts = _before("shared_gpu")
    other = {"pid": 4218, "name": "python3", "used_memory_bytes": 1050673152}
    _shared_torch_run(facts)["throughput"]["sharing"] = sharing.judged(
        {"known": True, "processes": 2, "others": [other]}, {"known": True, "processes": 2, "others": [other]})
    found = pipeline.judge(facts)["findings"]
    assert "RUN014" not in [f["code"] for f in found]
    (note,) = [f for f in found if f["code"] == "RUN019"]
    assert note["severity"] == "info"
    assert "pid 4218 (python3, 1002 MiB)" in note["title"]
    assert "bf16 matmul 306 TFLOP/s" in note["detail"]


def test_an_idle_gpu_that_is_slow_is_still_called_slow():
    facts = _before("shared_gpu")
    _shared_torch_run(facts)["throughput"]["sharing"] = sharing.judged({"known": True, "others": []},
                                                                {"known": True, "others": []})
    assert "RUN014" in codes(facts) and "RUN019" not in codes(facts)


def test_unknown_sharing_keeps_the_judgement_and_says_why():
    facts = _before("shared_gpu")
    _shared_torch_run(facts)["throughput"]["sharing"] = sharing.judged(
        {"known": False, "why": "NVML's process ids are not this PID namespace's"}, {})
    (slow,) = [f for f in pipeline.judge(facts)["findings"] if f["code"] == "RUN014"]
    assert "not this PID namespace's" in slow["detail"]


def test_a_healthy_recording_stays_quiet():
    facts = _before("full")
    assert [c for c in codes(facts) if c.startswith("RUN")] == []


# --- the smoke kernel (acceleration.smoke), on the 2 x H200 recording with one fact changed at a time -------
# The CUDA errors are the driver API's own (CUDA driver API reference, "Error Handling":
# https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html), in the shape the smoke worker
# (probes/smoke/worker.py) records a failed call: the step, the CUresult and its name.

def _smoke_findings(f: dict) -> list[dict]:
    return [x for x in pipeline.judge(f)["findings"] if x["check"] == "acceleration.smoke"]


def test_fabric_manager_not_running_fails_before_any_gpu_is_tested():
    f = with_fact(facts("h200x2-20261121"), "smoke.count",
                  {"step": "cuInit", "code": 802, "name": "CUDA_ERROR_SYSTEM_NOT_READY"})
    (found,) = _smoke_findings(f)
    assert (found["code"], found["severity"], found["subject"]) == ("RUN001", "error", {"kind": "host"})
    assert found["title"] == "the smoke kernel failed before any GPU could be tested: cuInit returned CUDA_ERROR_SYSTEM_NOT_READY (802)"
    assert found["detail"].startswith("the system is not ready: on NVSwitch systems the Fabric Manager is not running")
    assert "sudo systemctl enable --now nvidia-fabricmanager" in found["remediation"]["commands"]


def test_a_kernel_that_fails_on_one_gpu_names_that_gpu_by_its_nvml_index():
    f = facts("h200x2-20261121")
    run = {**f["smoke"]["runs"][1], "ok": False, "error": {"step": "cuCtxSynchronize", "code": 700,
                                                           "name": "CUDA_ERROR_ILLEGAL_ADDRESS"}}
    (found,) = _smoke_findings(with_fact(f, "smoke.runs.1", run))
    assert (found["code"], found["subject"]["gpu_index"], found["subject"]["gpu_uuid"]) == ("RUN001", 1, "GPU-redacted-1")
    assert found["title"] == ("the smoke kernel failed on cuda:1 (NVIDIA H200): cuCtxSynchronize returned "
                              "CUDA_ERROR_ILLEGAL_ADDRESS (700)")


def test_a_missing_libcuda_is_named_as_such():
    error = {"step": "load libcuda.so.1", "code": None, "name": "library_not_found",
             "message": "libcuda.so.1: cannot open shared object file: No such file or directory"}
    (found,) = _smoke_findings(with_fact(facts("h200x2-20261121"), "smoke.count", error))
    assert found["code"] == "RUN001" and found["title"].endswith("load libcuda.so.1 returned library_not_found")
    assert found["detail"].startswith("libcuda.so.1 (the driver's CUDA library) cannot be loaded. libcuda.so.1: cannot open")


def test_wrong_results_of_the_kernel():
    f = facts("h200x2-20261121")
    run = {**f["smoke"]["runs"][0], "ok": False, "wrong_elements": 3, "first_wrong": [[7, 1.5, 2.0]]}
    (found,) = _smoke_findings(with_fact(f, "smoke.runs.0", run))
    assert (found["code"], found["severity"], found["subject"]["gpu_index"]) == ("RUN002", "error", 0)
    assert found["title"] == "the smoke kernel computed wrong results on cuda:0 (NVIDIA H200): 3 of 262144 elements"


def test_a_gpu_missing_from_cudas_enumeration():
    f = facts("h200x2-20261121")
    f = with_fact(f, "smoke.count.devices", f["smoke"]["count"]["devices"][:1])
    f = with_fact(f, "smoke.runs", f["smoke"]["runs"][:1])
    assert [(x["code"], x["title"]) for x in _smoke_findings(f)] == [
        ("RUN003", "CUDA enumerates 1 GPU(s) but 2 should be visible")]


# --- 2 x H200 with this session's code (2026-11-23 19:33-19:45 UTC, tests/fixtures/real/README.md) -------------

H200X2_NOW = REAL / "h200x2-20261123"


def _recorded(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())["facts"]


def test_2xh200_deep_check_is_all_clear_with_p2p_and_allreduce_at_their_references():
    """`check --deep` on 2 x H200 (NV18): P2P both ways at 387 GB/s with no wrong element, the NCCL all-reduce
    at 299 GB/s bus bandwidth against the matrix's 298 (within 10%), multicast off in its environment."""
    facts = _recorded(H200X2_NOW / "hostile" / "deep.json")
    assert pipeline.judge(facts)["findings"] == []
    pairs = facts["multigpu"]["p2p"]["pairs"]
    assert sorted((p["src"], p["dst"]) for p in pairs) == [(0, 1), (1, 0)]
    assert all(p["access"] and p["wrong_elements"] == 0 and 350 < p["gbs"] < 420 for p in pairs)
    allreduce = facts["multigpu"]["allreduce"]
    assert allreduce["ok"] and allreduce["correct"] and abs(allreduce["busbw_gbs"] / 298 - 1) < 0.10
    assert allreduce["env"] == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def test_2xh200_torchrun_jobs_are_all_clear():
    """torchrun, 1 node x 2 GPUs and 2 "nodes" x 1 GPU (tools/device/record_cluster.sh h200x2 jobs): nothing
    wrong, NCCL all-reduce about 300 GB/s over P2P/CUMEM. Each "node" of the second job is made with
    CUDA_VISIBLE_DEVICES, so rank 0's report carries the note that names the GPU its programs see."""
    for name, notes in (("job-1x2.json", []), ("job-2x1.json", ["VIS004"])):
        facts = _recorded(H200X2_NOW / "cluster" / name)
        assert [f["code"] for f in pipeline.judge(facts)["findings"]] == notes, name
        assert 270 < facts["cluster"]["allreduce"]["busbw_gbs"] < 330


def test_2xh200_a_process_loading_gpu_1_makes_only_gpu_1_not_judged():
    """Another process ran bf16 matmuls on GPU 1 alone (its context on GPU 1 only) during a full check: GPU 1's
    throughput is shown but not judged (RUN019, a note), GPU 0 is judged as usual and passes."""
    facts = _recorded(H200X2_NOW / "cases" / "shared-gpu1.json")
    found = pipeline.judge(facts)["findings"]
    assert [(f["code"], f["subject"]["gpu_index"]) for f in found] == [("RUN019", 1)]
    assert found[0]["severity"] == "info"


@pytest.mark.parametrize("case", ["mask-1.json", "mask-uuid1.json"])
def test_2xh200_one_gpu_visible_by_number_or_uuid(case):
    """CUDA_VISIBLE_DEVICES=1, and GPU 1's UUID: the workloads ran on that GPU alone as cuda:0, and the only
    finding is the note that says which GPU CUDA programs see."""
    facts = _recorded(H200X2_NOW / "cases" / case)
    found = pipeline.judge(facts)["findings"]
    assert [f["code"] for f in found] == ["VIS004"]
    assert found[0]["title"] == "CUDA programs will see 1 GPU(s): cuda:0 = GPU 1 NVIDIA H200"
    assert {(r["framework"], r["device"]) for r in facts["workload"]["runs"]} == {("torch", "0"), ("jax", "0"), ("cupy", "0")}


# --- multi-GPU on 4 x H100 (NV18 all pairs), recorded 2026-11-27 on nvidia-h100-x4 -------------------------

H100X4 = Path(__file__).parent / "fixtures" / "real" / "h100x4-20261127"


@pytest.mark.parametrize("name, world", [("deep-all", 4), ("deep-01", 2)])
def test_four_h100s_all_reduce_is_judged_against_its_own_reference(name, world):
    """The matrix holds H100 NV18 references for 2 and 4 GPUs (measured there: 298.1 and 340.0 GB/s), so the
    healthy recording passes instead of being left unjudged (RUN026), and 0.69 x the reference is slow."""
    f = json.loads((H100X4 / f"{name}.json").read_text())["facts"]
    assert f["multigpu"]["allreduce"]["world_size"] == world
    assert statuses(f)["acceleration.allreduce"] == "pass"
    assert "RUN026" not in codes(f)
    reference = {2: 298, 4: 340}[world]
    slow = with_fact(f, "multigpu.allreduce.busbw_gbs", 0.69 * reference)
    assert "RUN025" in codes(slow)
    assert "RUN025" not in codes(with_fact(f, "multigpu.allreduce.busbw_gbs", 0.71 * reference))
