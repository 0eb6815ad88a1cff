"""`check --deep`: the multi-GPU probe (P2P between every pair, an NCCL all-reduce across all GPUs), without
a GPU. How its figures are judged (acceleration.p2p, acceleration.allreduce) is tested in
test_area_acceleration.py.

The probe's processes (the P2P worker, the launcher and one rank per GPU) run for real against a
stand-in for PyTorch (tests/fakes/torch), so their environment, locks, deadlines and output are
tested too, and what they write is judged on the real 4 x H200 recording (helpers_deep.py); on this
machine, without PyTorch or a GPU, the real probe skips cleanly.
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

from gpudoctor.procs.scope import RunScope
from gpudoctor import pipeline
from gpudoctor.cli import cli
from gpudoctor.probes import multigpu
from gpudoctor.procs.child import PACKAGE_ROOT, ChildResult, child_env, run_module
from gpudoctor.probes.interpreter import own
from gpudoctor.runner import DEEP_ONLY, GPU_WORK, PROBES, select_probes
from gpudoctor.compat.data import BUNDLED

from helpers_deep import GB, REAL, deep, deep_section

FAKES = str(Path(__file__).parent / "fakes")


def findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return pipeline.judge(facts)["findings"]


def codes(facts: dict[str, Any]) -> list[str]:
    return sorted(f["code"] for f in findings(facts))


def statuses(facts: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in pipeline.judge(facts)["checks"] if c["id"] in ("acceleration.p2p", "acceleration.allreduce")}


# --- the headline ---------------------------------------------------------------------------------------

def test_the_headline_reports_the_slowest_pair_against_the_median():
    from gpudoctor.render.facts_text import area_headline

    line = area_headline("acceleration", deep(gbs={(2, 0): 361.0}), BUNDLED)
    assert "slowest cuda:2 -> cuda:0 361 GB/s" in line and "P2P median" in line and "over 12 pairs" in line
    assert "NCCL all-reduce on 4 GPUs 337 GB/s busbw" in line


# --- the probe and its processes -----------------------------------------------------------------------

def test_the_probe_skips_cleanly_here():
    """This machine has neither PyTorch nor a GPU."""
    data = multigpu.probe_multigpu(own(), RunScope())["multigpu"]
    assert data["skipped"] and "p2p" not in data and "allreduce" not in data


def test_the_probe_says_cuda_could_not_count_where_there_is_no_driver(monkeypatch):
    """No libcuda here: CUDA counted nothing, which is not "fewer than two GPUs"."""
    monkeypatch.setattr(multigpu, "installed", lambda name, target: True)
    data = multigpu.probe_multigpu(own(), RunScope())["multigpu"]
    assert data == {"devices": [], "skipped": "CUDA could not count the GPUs here: load libcuda.so.1 returned library_not_found"}


def test_the_probe_takes_the_runs_count_and_starts_no_cuda_of_its_own(monkeypatch):
    """The count the smoke kernel and the workloads use, made once in the run: the same GPUs for every
    probe, and no second process starting CUDA on every GPU beside theirs."""
    from gpudoctor.probes import smoke

    one = {"devices": [{"ordinal": 0, "name": "NVIDIA H200", "uuid": "GPU-1"}]}
    counts: list[RunScope] = []
    monkeypatch.setattr(smoke, "_count", lambda scope: counts.append(scope) or
                        ChildResult(lines=[{"section": "count", "data": one}], returncode=0))
    started: list[Any] = []
    monkeypatch.setattr(multigpu, "installed", lambda name, target: True)
    monkeypatch.setattr(multigpu, "run_module", lambda module, args=(), **kw: started.append(module))
    scope = RunScope()
    assert smoke.count_gpus(scope).section("count") == one  # as the workload probe asks for it
    data = multigpu.probe_multigpu(own(), scope)["multigpu"]
    assert data == {"devices": one["devices"], "skipped": "CUDA enumerates 1 GPU(s); the multi-GPU tests need two or more"}
    assert counts == [scope] and started == []


def _counted(monkeypatch: pytest.MonkeyPatch, result: ChildResult) -> dict[str, Any]:
    monkeypatch.setattr(multigpu, "installed", lambda name, target: True)
    monkeypatch.setattr(multigpu, "count_gpus", lambda scope: result)
    return multigpu.probe_multigpu(own(), RunScope())["multigpu"]


def test_the_probe_skips_below_two_gpus(monkeypatch):
    one = {"driver_cuda": 13000, "devices": [{"ordinal": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1"}]}
    data = _counted(monkeypatch, ChildResult(lines=[{"section": "count", "data": one}], returncode=0))
    assert data["skipped"] == "CUDA enumerates 1 GPU(s); the multi-GPU tests need two or more"
    assert [d["ordinal"] for d in data["devices"]] == [0]


@pytest.mark.parametrize("result, reason", [
    (ChildResult(lines=[{"section": "error", "data": {"step": "cuInit", "code": 999, "name": "CUDA_ERROR_UNKNOWN"}}],
                 returncode=0), "cuInit returned CUDA_ERROR_UNKNOWN (999)"),
    (ChildResult(timed_out=True), f"the count gave no answer within {multigpu.COUNT_TIMEOUT_S:g} s"),
    (ChildResult(returncode=-11), "the count crashed (SIGSEGV)"),
])
def test_a_count_that_failed_is_not_taken_for_fewer_than_two_gpus(monkeypatch, result, reason):
    data = _counted(monkeypatch, result)
    assert data == {"devices": [], "skipped": f"CUDA could not count the GPUs here: {reason}"}
    facts = {"multigpu": data}
    assert statuses(facts) == {"acceleration.p2p": "skip", "acceleration.allreduce": "skip"}


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
        assert module == multigpu.WORKER and all(env[k] == v for k, v in multigpu.SAFE_ENV.items())
        return real_run(module, args, timeout_s=timeout_s, env=env, python=python)

    monkeypatch.setattr(multigpu, "installed", lambda name, target: True)
    monkeypatch.setattr(multigpu, "count_gpus",
                        lambda scope: ChildResult(lines=[{"section": "count", "data": copy.deepcopy(count)}], returncode=0))
    monkeypatch.setattr(multigpu, "run_module", run)
    monkeypatch.setenv("PYTHONPATH", FAKES)
    monkeypatch.setenv("FAKE_TORCH_MODE", mode)
    facts.update(multigpu.probe_multigpu(own(), RunScope()))
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

def test_deep_adds_the_multigpu_probe_and_the_deep_workload(monkeypatch):
    from gpudoctor import runner
    from gpudoctor.probes.interpreter import own

    names = {p.name for p in PROBES}
    assert "multigpu" in GPU_WORK and DEEP_ONLY == ("multigpu",)
    assert "multigpu" not in {p.name for p in select_probes(names)}
    deep_probes = {p.name: p for p in select_probes(names, deep=True)}
    assert "multigpu" in deep_probes
    asked: list[dict] = []
    monkeypatch.setattr(runner, "probe_workload", lambda scope, target, timeout_s, deep=False, smoke=False:
                        asked.append({"deep": deep, "smoke": smoke}) or {"workload": {}})
    assert deep_probes["workload"].variant == "deep"
    deep_probes["workload"].run(own(), RunScope())
    assert asked == [{"deep": True, "smoke": True}]  # the deep workload, hosting the smoke kernel
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
