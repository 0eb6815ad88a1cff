"""`check --deep`: the multi-GPU probe (P2P between every pair, an NCCL all-reduce across all GPUs) and
how its figures are judged, without a GPU.

Judging runs on the real 4 x H200 recording (tests/fixtures/real/h200x4-20261121/report.json: NV18
between all pairs, NVML P2P reads ok) with a synthetic ``multigpu`` section shaped as the probe writes
it. The probe's processes (the P2P worker, the launcher and one rank per GPU) run for real against a
stand-in for PyTorch (tests/fakes/torch), so their environment, locks, deadlines and output are
tested too; on this machine, without PyTorch or a GPU, the real probe skips cleanly.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Optional

import psutil
import pytest
from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor.cli import cli
from gpudoctor.probes import multigpu
from gpudoctor.probes.child import PACKAGE_ROOT, ChildResult, child_env, run_module
from gpudoctor.runner import DEEP_ONLY, GPU_WORK, PROBES, select_probes
from gpudoctor.snapshot import with_fact

REAL = Path(__file__).parent / "fixtures" / "real"
FAKES = str(Path(__file__).parent / "fakes")
GB = 1e9


def h200x4() -> dict[str, Any]:
    return json.loads((REAL / "h200x4-20261121" / "report.json").read_text())["facts"]


def deep_section(facts: dict[str, Any], gbs: Optional[dict[tuple[int, int], float]] = None, busbw: float = 337.0,
                 order: Optional[list[int]] = None) -> dict[str, Any]:
    """What the probe writes on these GPUs: every ordered pair at about 370 GB/s (``gbs`` overrides), an
    all-reduce at ``busbw``. ``order``: the NVML index of each CUDA ordinal (default: the same)."""
    gpus = facts["gpus"]
    order = order or [g["index"] for g in gpus]
    devices = [{"ordinal": o, "name": gpus[i]["name"], "uuid": gpus[i]["uuid"]} for o, i in enumerate(order)]
    n = len(devices)
    pairs = [{"src": a, "dst": b, "access": True, "gbs": (gbs or {}).get((a, b), 365.0 + a + 2 * b), "wrong_elements": 0}
             for a in range(n) for b in range(n) if a != b]
    algbw = busbw * n / (2 * (n - 1))
    ranks = [{"rank": r, "device": r, "name": "NVIDIA H200", "nccl_version": "2.28.9", "median_s": 256 * 2**20 / algbw / GB,
              "correct": True, "wrong_elements": 0, "elements": 64 * 2**20,
              "checks": [{"wrong_elements": 0, "expected": n * (n + 1) / 2}] * 2} for r in range(n)]
    return {
        "devices": devices,
        "p2p": {"torch": "2.11.0+cu130", "device_count": n, "bytes": 256 * 2**20, "warmup": 3, "repeats": 10,
                "pairs": pairs, "ok": True},
        "allreduce": {"world_size": n, "backend": "nccl", "dtype": "float32", "bytes": 256 * 2**20, "warmup": 3,
                      "repeats": 10, "batch": 4, "expected": n * (n + 1) / 2, "env": dict(multigpu.SAFE_ENV),
                      "ranks": ranks, "nccl_version": "2.28.9", "correct": True, "wrong_elements": 0,
                      "elements": n * 64 * 2**20, "time_s": 256 * 2**20 / algbw / GB, "algbw_gbs": algbw,
                      "busbw_gbs": busbw, "ok": True},
    }


def deep(**kwargs: Any) -> dict[str, Any]:
    facts = h200x4()
    facts["multigpu"] = deep_section(facts, **kwargs)
    return facts


def findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return pipeline.judge(facts)["findings"]


def codes(facts: dict[str, Any]) -> list[str]:
    return sorted(f["code"] for f in findings(facts))


def statuses(facts: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in pipeline.judge(facts)["checks"] if c["id"] in ("acceleration.p2p", "acceleration.allreduce")}


# --- judging ------------------------------------------------------------------------------------------

def test_healthy_four_h200s_give_no_findings():
    facts = deep()
    assert len(facts["multigpu"]["p2p"]["pairs"]) == 12
    assert findings(facts) == []
    assert statuses(facts) == {"acceleration.p2p": "pass", "acceleration.allreduce": "pass"}


def test_the_headline_reports_the_slowest_pair_against_the_median():
    from gpudoctor.render.facts_text import area_headline

    line = area_headline("acceleration", deep(gbs={(2, 0): 361.0}))
    assert "slowest cuda:2 -> cuda:0 361 GB/s" in line and "P2P median" in line and "over 12 pairs" in line
    assert "NCCL all-reduce on 4 GPUs 337 GB/s busbw" in line


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


# --- the probe and its processes -----------------------------------------------------------------------

def test_the_probe_skips_cleanly_here():
    """This machine has neither PyTorch nor a GPU."""
    data = multigpu.probe_multigpu()["multigpu"]
    assert data["skipped"] and "p2p" not in data and "allreduce" not in data


def test_the_probe_skips_below_two_gpus(monkeypatch):
    monkeypatch.setattr(multigpu, "installed", lambda name: True)
    data = multigpu.probe_multigpu()["multigpu"]  # no libcuda here: CUDA enumerates nothing
    assert data == {"devices": [], "skipped": "CUDA enumerates 0 GPU(s); the multi-GPU tests need two or more"}


def _fake_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return child_env({"PYTHONPATH": os.pathsep.join([PACKAGE_ROOT, FAKES]), "GPUDOCTOR_LOCK_DIR": str(tmp_path),
                      **multigpu.SAFE_ENV, **extra})


def _launch(tmp_path: Path, mode: str = "ok", budget_s: float = 30.0, gpus: int = 2) -> dict[str, Any]:
    child = run_module(multigpu.WORKER, ["allreduce", str(gpus), str(budget_s)], timeout_s=budget_s + 30,
                       env=_fake_env(tmp_path, FAKE_TORCH_MODE=mode, FAKE_TORCH_GPUS=str(gpus)))
    assert not child.timed_out, child.stderr_tail
    [line] = [line for line in child.lines if line.get("section") == "allreduce"]
    return line["data"]


def _ranks_left(tmp_path) -> list[psutil.Process]:
    """This test's rank processes still alive: found by this test's GPUDOCTOR_LOCK_DIR (tmp_path) in their
    environment, so ranks of another test run on the same machine at the same time are not counted."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "gpudoctor.probes.multigpu.worker rank" not in cmdline:
            continue
        try:
            if proc.environ().get("GPUDOCTOR_LOCK_DIR") == str(tmp_path):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_the_all_reduce_launcher_runs_one_rank_per_gpu(tmp_path):
    """The fake torch.distributed refuses to start without MASTER_ADDR=127.0.0.1, a port, RANK/WORLD_SIZE and
    the three variables that keep NVLink multicast off; it sums as NCCL would."""
    data = _launch(tmp_path, gpus=4)
    assert data["ok"] and data["correct"] and data["wrong_elements"] == 0, data
    assert [r["rank"] for r in data["ranks"]] == [0, 1, 2, 3]
    assert data["env"] == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    assert data["nccl_version"] == "2.28.9" and data["expected"] == 10.0
    # every timed call took the fake's 0.72 ms: algbw = 256 MiB / 0.72 ms, busbw = algbw x 2(n-1)/n
    assert data["algbw_gbs"] == pytest.approx(256 * 2**20 / 0.72e-3 / GB)
    assert data["busbw_gbs"] == pytest.approx(data["algbw_gbs"] * 1.5)
    assert {p.name for p in tmp_path.iterdir()} == {f"gpu{i}.lock" for i in range(4)}  # each rank took its GPU's lock
    assert _ranks_left(tmp_path) == []


@pytest.mark.parametrize("mode,error", [
    ("raise", "RuntimeError: NCCL error: unhandled system error (fake), NCCL version 2.28.9"),
    ("crash", "rank 1 died (SIGABRT)"),
])
def test_a_failing_rank_is_reported(tmp_path, mode, error):
    data = _launch(tmp_path, mode)
    assert data["ok"] is False and data["error"] == error
    assert "error" not in data["ranks"][0] and "error" in data["ranks"][1]
    assert _ranks_left(tmp_path) == []


def test_a_hanging_rank_is_killed_at_the_deadline(tmp_path):
    data = _launch(tmp_path, "hang", budget_s=4.0)
    assert data["ok"] is False and data["error"] == "rank 1 gave no answer within 4 s"
    assert data["timed_out_after_s"] == 4.0
    assert _ranks_left(tmp_path) == []


def test_wrong_sums_are_caught_and_judged(tmp_path):
    data = _launch(tmp_path, "wrong")
    assert data["ok"] is False and data["correct"] is False and data["wrong_elements"] == 1
    assert data["ranks"][1]["checks"][0] == {"wrong_elements": 1, "expected": 3.0, "first_wrong_index": 12345,
                                             "first_wrong_value": 9.0}
    facts = json.loads((REAL / "h200x2-20261121" / "report.json").read_text())["facts"]
    facts["multigpu"] = {**deep_section(facts), "allreduce": data}
    assert codes(facts) == ["RUN024"]


def _probe_with_fake_torch(monkeypatch, tmp_path: Path, mode: str = "ok") -> dict[str, Any]:
    """The whole probe against the fake: CUDA's count comes from the recording (no libcuda here)."""
    facts = json.loads((REAL / "h200x2-20261121" / "report.json").read_text())["facts"]
    count = facts["smoke"]["count"]
    real_run = multigpu.run_module

    def run(module: str, args: Any = (), timeout_s: float = 10.0, env: Optional[dict[str, str]] = None,
            python: Optional[str] = None) -> ChildResult:
        if module == multigpu.SMOKE:
            return ChildResult(lines=[{"section": "count", "data": copy.deepcopy(count)}], returncode=0)
        assert all(env[k] == v for k, v in multigpu.SAFE_ENV.items())
        return real_run(module, args, timeout_s=timeout_s, env=env, python=python)

    monkeypatch.setattr(multigpu, "installed", lambda name: True)
    monkeypatch.setattr(multigpu, "run_module", run)
    monkeypatch.setenv("PYTHONPATH", FAKES)
    monkeypatch.setenv("FAKE_TORCH_MODE", mode)
    facts.update(multigpu.probe_multigpu())
    return facts


def test_the_whole_probe_on_two_fake_gpus_is_judged_healthy(monkeypatch, tmp_path):
    facts = _probe_with_fake_torch(monkeypatch, tmp_path)
    data = facts["multigpu"]
    assert [d["ordinal"] for d in data["devices"]] == [0, 1]
    assert [(p["src"], p["dst"], p["access"], p["wrong_elements"]) for p in data["p2p"]["pairs"]] == [(0, 1, True, 0),
                                                                                                       (1, 0, True, 0)]
    assert data["p2p"]["pairs"][0]["gbs"] == pytest.approx(256 * 2**20 / 0.72e-3 / GB)
    assert data["allreduce"]["ok"] is True
    assert findings(facts) == []  # 2 x H200 NV18: 373 GB/s bus bandwidth against 298 measured
    assert statuses(facts) == {"acceleration.p2p": "pass", "acceleration.allreduce": "pass"}


@pytest.mark.parametrize("mode,code", [("no-peer", "RUN021"), ("corrupt", "RUN023")])
def test_the_whole_probe_reports_p2p_faults(monkeypatch, tmp_path, mode, code):
    facts = _probe_with_fake_torch(monkeypatch, tmp_path, mode)
    assert codes(facts) == [code]


# --- selection: --deep, --quick ------------------------------------------------------------------------

def test_deep_adds_the_multigpu_probe_and_the_deep_workload():
    names = {p.name for p in PROBES}
    assert "multigpu" in GPU_WORK and DEEP_ONLY == ("multigpu",)
    assert "multigpu" not in {p.name for p in select_probes(names)}
    deep_probes = {p.name: p for p in select_probes(names, deep=True)}
    assert "multigpu" in deep_probes
    workload = next(p for p in PROBES if p.name == "workload")
    assert deep_probes["workload"].run is workload.deep_run
    assert {p.name for p in select_probes(names, quick=True, deep=True)} == names - set(GPU_WORK)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_check_deep_quick_runs_no_gpu_work(runner):
    """--quick wins: with both flags no GPU work runs, and the multi-GPU checks say how to run them."""
    result = runner.invoke(cli, ["check", "--deep", "--quick", "--only", "acceleration", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    assert not set(report["facts"]["probes"]) & set(GPU_WORK)
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["acceleration.p2p"]["status"] == "skip" and "check --deep" in checks["acceleration.p2p"]["reason"]
    help_text = " ".join(runner.invoke(cli, ["check", "--help"]).output.split())
    assert "Wins over --deep" in help_text and "Ignored with --quick" in help_text


def test_check_deep_here_runs_the_probe_and_skips_with_the_reason(runner):
    result = runner.invoke(cli, ["check", "--deep", "--only", "acceleration", "--format", "json"])
    report = json.loads(result.stdout)
    assert report["facts"]["probes"]["multigpu"]["status"] == "ok"
    assert report["facts"]["multigpu"]["skipped"]
    reasons = {c["id"]: c["reason"] for c in report["checks"] if c["id"] in ("acceleration.p2p", "acceleration.allreduce")}
    assert all(r.startswith("the multi-GPU tests were skipped: ") for r in reasons.values())


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


def test_the_nodes_own_allreduce_leaves_an_outer_torchrun_job_alone():
    """Under `check --deep` in a torchrun job (recorded on 2 x H200, 2026-11-21), the node's own all-reduce
    ranks inherited TORCHELASTIC_USE_AGENT_STORE=True and waited for a store nobody served, until their
    limit: they must start as a job of their own."""
    from gpudoctor.probes.multigpu.worker import own_job_env

    outer = {"PATH": "/usr/bin", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "GROUP_RANK": "0",
             "ROLE_RANK": "1", "ROLE_NAME": "default", "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": "2",
             "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RUN_ID": "none", "MASTER_PORT": "29500",
             "NCCL_SOCKET_IFNAME": "eth0"}
    assert own_job_env(outer) == {"PATH": "/usr/bin", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2",
                                  "MASTER_PORT": "29500", "NCCL_SOCKET_IFNAME": "eth0"}
