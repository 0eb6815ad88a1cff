"""`check --deep` under torchrun (gpudoctor/distributed.py, probes/multigpu/cluster.py): who is a rank, the
ranks' summary, the nodes' reports carried to rank 0, redaction and merge of a job's report. How the
job is judged (checks/cluster.py: acceleration.cluster, cluster_nodes, cluster_drift, cluster_network)
is tested in test_area_acceleration.py.

The reports were recorded on real 2 x H200 and 4 x H200 machines (tests/fixtures/real/h200x*-20261121/cluster/,
2026-11-21, `tools/device/record_cluster.sh`). The whole path for real on this CPU machine: torchrun with
the PyTorch installed here (any build; no GPU) starts 2 ranks (one node, and two agents as two nodes); the rendezvous, the node's
check and the gather to rank 0 run for real, and the all-reduce is "not measured: CUDA shows this rank no GPU".
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor import distributed, fleet, pipeline
from gpudoctor.cli import cli
from gpudoctor.redact import redact_report
from helpers_facts import with_fact

from helpers_deep import CLUSTER, CLUSTER4, recorded

ROOT = Path(__file__).resolve().parents[1]


def codes(facts: dict[str, Any]) -> list[str]:
    return [f["code"] for f in pipeline.judge(facts)["findings"] if f["code"].startswith("RUN03")]


# The real recordings -------------------------------------------------------------------------------


def test_2_nodes_x_2_gpus_on_4_x_h200():
    """Two torchrun agents on the 4 x H200 machine, CUDA_VISIBLE_DEVICES=0,1 and 2,3: each node ran its own
    --deep check (its pair's P2P and all-reduce), then all 4 ranks one all-reduce across both nodes."""
    cluster = recorded("job-2x2", CLUSTER4)["facts"]["cluster"]
    assert [(n["node_rank"], n["ranks"]) for n in cluster["nodes"]] == [(0, [0, 1]), (1, [2, 3])]
    assert [(r["rank"], r["node_rank"], r["local_rank"], r["device"]) for r in cluster["ranks"]] == [
        (0, 0, 0, 0), (1, 0, 1, 1), (2, 1, 0, 0), (3, 1, 1, 1)]
    node1 = cluster["nodes"][1]["report"]["facts"]
    assert node1["host"]["env"]["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert node1["multigpu"]["allreduce"]["busbw_gbs"] == pytest.approx(299.1, abs=0.1)  # the node's own pair
    assert {r["name"] for r in cluster["ranks"]} == {"NVIDIA H200"}


def test_the_two_node_job_carries_the_other_nodes_report():
    cluster = recorded("job-2x1")["facts"]["cluster"]
    nodes = cluster["nodes"]
    assert [(n["node_rank"], n["ranks"], n.get("self")) for n in nodes] == [(0, [0], True), (1, [1], None)]
    inner = nodes[1]["report"]
    assert inner["summary"]["verdict"] == "ok" and inner["facts"]["host"]["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert inner["facts"]["smoke"]["runs"][0]["ok"] is True


# What a rank reads on its own node ------------------------------------------------------------------

NCCL_LOG = """vm:1234:1300 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
vm:1234:1300 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.1.0.5<0>
vm:1234:1300 [0] NCCL INFO Using network IB
vm:1234:1300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
vm:1234:1300 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA
vm:1234:1300 [0] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [receive] via NET/IB/1/GDRDMA
vm:1234:1300 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via SHM/direct/direct
vm:1234:1301 [0] NCCL WARN NET/IB : Got completion from peer 10.1.0.6<49152> with status=12 opcode=0
"""


def test_ranks_of_one_node_that_would_share_a_gpu_are_named():
    """On 2 x H200 (2026-11-21), a node started with 2 ranks for its 1 GPU: each rank saw one GPU and took it,
    and NCCL refused ("invalid usage"). Two ranks on the same GPU of the same node are caught first."""
    from gpudoctor.probes.multigpu.cluster import shared_gpu

    ready = [{"why": "", "uuid": "GPU-a", "node_rank": 0}, {"why": "", "uuid": "GPU-b", "node_rank": 1},
             {"why": "", "uuid": "GPU-b", "node_rank": 1}, {"why": "", "uuid": "GPU-b", "node_rank": 2}]
    assert shared_gpu(ready, 0) == "" and shared_gpu(ready, 3) == ""  # another node's GPU may have any UUID
    assert shared_gpu(ready, 1) == shared_gpu(ready, 2) == (
        "ranks 1, 2 of node 1 would share one GPU (GPU-b): start one rank per GPU")
    assert shared_gpu([{"why": "CUDA shows this rank no GPU", "uuid": None, "node_rank": 0}], 0) == ""


def test_nccl_log_lines_are_read(tmp_path):
    from gpudoctor.probes.multigpu.cluster import nccl_log

    (tmp_path / "nccl.vm.1234").write_text(NCCL_LOG)
    assert nccl_log(str(tmp_path)) == {
        "nccl_network": "IB", "nccl_transports": ["P2P/CUMEM", "NET/IB", "SHM/direct"],
        "nccl_warnings": ["NET/IB : Got completion from peer 10.1.0.6<49152> with status=12 opcode=0"]}
    (tmp_path / "nccl.vm.1234").write_text("x NCCL INFO Using network AWS Libfabric\n x via NET/AWS Libfabric/0\n")
    assert nccl_log(str(tmp_path))["nccl_network"] == "AWS Libfabric"


# Summarising the ranks --------------------------------------------------------------------------------

RANK = {"rank": 0, "hostname": "a", "median_s": 0.001, "correct": True, "wrong_elements": 0, "nccl_version": "2.28.9",
        "nccl_network": "IB", "nccl_transports": ["NET/IB"]}


def test_summary_of_measured_ranks_is_nccl_tests_bus_bandwidth():
    ranks = [RANK, {**RANK, "rank": 1, "median_s": 0.003, "nccl_transports": ["P2P/CUMEM", "NET/IB"]}]
    out = distributed.summarise(ranks, 2)
    assert out["time_s"] == pytest.approx(0.002)
    assert out["busbw_gbs"] == pytest.approx(256 * 2**20 / 0.002 / 1e9)  # 2(n-1)/n = 1 for two ranks
    assert (out["ok"], out["networks"], out["transports"]) == (True, ["IB"], ["NET/IB", "P2P/CUMEM"])


def test_summary_names_the_first_failed_rank():
    ranks = [{**RANK, "rank": 0, "error": "DistBackendError: boom"}, {**RANK, "rank": 1, "error": "timeout"}]
    out = distributed.summarise(ranks, 2)
    assert (out["ok"], out["error"]) == (False, "rank 0 on a: DistBackendError: boom (and 1 other rank(s) failed)")


def test_summary_prefers_the_rank_that_has_no_gpu_over_the_ones_it_stopped():
    ranks = [{"rank": 0, "hostname": "a", "skipped": "another rank has no GPU to measure on"},
             {"rank": 1, "hostname": "b", "skipped": "CUDA shows this rank no GPU"}]
    assert distributed.summarise(ranks, 2)["skipped"] == "rank 1 on b: CUDA shows this rank no GPU"


def test_summary_of_missing_ranks_is_a_failure():
    assert distributed.summarise([RANK], 2)["error"] == "only 1 of 2 ranks reported a measurement"


def _job(measure: Any, rank0: dict[str, Any]) -> dict[str, Any]:
    """What rank 0's worker printed for the real 2-node job, with its later sections replaced."""
    ranks = recorded("job-2x1")["facts"]["cluster"]["ranks"]
    report = recorded("job-2x1")["facts"]["cluster"]["nodes"][1]["report"]
    joined = [{k: v for k, v in r.items() if k in ("rank", "local_rank", "node_rank", "world_size", "hostname",
                                                  "local_world_size", "infiniband", "torch")} for r in ranks]
    joined[1]["report"] = report
    return {"join": {"ranks": joined}, "measure": measure, "rank": rank0}


def test_a_worker_killed_after_the_join_keeps_every_nodes_report():
    """Rank 0's worker printed the join (every rank, node 1's report) and was killed in the measurement:
    the collective is a failure, and node 1's own findings still count."""
    launch = distributed.Launch(0, 2, 0, 1, 0, "torchrun")
    facts = distributed.cluster_facts(launch, _job(None, {"ok": False, "error": "the cross-node worker gave no "
                                                          "answer within 632 s"}))
    assert [n.get("report", {}).get("summary", {}).get("verdict") for n in facts["nodes"]] == [None, "ok"]
    assert facts["allreduce"]["error"].startswith("rank 0 on ")
    assert "the cross-node worker gave no answer within 632 s" in facts["allreduce"]["error"]
    assert codes({"cluster": facts}) == ["RUN031"]


def test_a_rank_that_never_joined_is_named():
    launch = distributed.Launch(0, 3, 0, 1, 0, "torchrun")
    data = _job(None, {"skipped": "rank(s) 2 never joined within 600 s"})
    data["join"]["ranks"].append(None)
    facts = distributed.cluster_facts(launch, data)
    assert facts["ranks"][2] == {"rank": 2, "error": "rank 2 never joined (its node's check did not finish, or it "
                                                     "could not reach the launcher's store)", "no_answer": True}
    assert "RUN031" in codes({"cluster": facts})


def test_a_worker_that_returned_nothing_is_a_failed_collective():
    launch = distributed.Launch(0, 2, 0, 2, 0, "torchrun")
    facts = distributed.cluster_facts(launch, {"join": None, "measure": None, "rank": {
        "ok": False, "error": "the cross-node worker crashed (SIGSEGV)"}})
    assert facts["allreduce"] == {"ok": False, "error": "the cross-node worker crashed (SIGSEGV)", "stderr_tail": ""}
    assert codes({"cluster": facts}) == ["RUN031"]


# Who is a rank ----------------------------------------------------------------------------------------

TORCHRUN = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
            "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "job7"}


def test_torchrun_environment():
    assert distributed.launch_from_env(TORCHRUN) == distributed.Launch(3, 4, 1, 2, 1, "torchrun")


def test_another_launcher_numbers_nodes_from_the_ranks():
    """RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE without torchrun's GROUP_RANK: node = rank // local;
    without LOCAL_WORLD_SIZE either, the ranks before this one on its node are LOCAL_RANK of them."""
    env = {k: v for k, v in TORCHRUN.items() if k not in ("GROUP_RANK", "TORCHELASTIC_RUN_ID")}
    assert distributed.launch_from_env(env) == distributed.Launch(3, 4, 1, 2, 1, "environment")
    env.pop("LOCAL_WORLD_SIZE")
    assert distributed.launch_from_env(env) == distributed.Launch(3, 4, 1, 1, 2, "environment")


@pytest.mark.parametrize("env", [{}, {**TORCHRUN, "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"},
                                 {k: v for k, v in TORCHRUN.items() if k != "MASTER_PORT"}])
def test_not_a_job_of_two_or_more_ranks(env):
    assert distributed.launch_from_env(env) is None


@pytest.mark.parametrize("change, message", [
    ({"RANK": "x"}, "RANK='x' (set by the launcher) is not a number"),
    ({"RANK": "4"}, "RANK=4, LOCAL_RANK=1, LOCAL_WORLD_SIZE=2 do not fit WORLD_SIZE=4"),
])
def test_nonsense_from_the_launcher_is_bad_input(change, message, monkeypatch):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        distributed.launch_from_env({**TORCHRUN, **change})
    for name, value in {**TORCHRUN, **change}.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, ["check", "--deep"])
    assert result.exit_code == 2 and result.output == f"Error: {message}\n"


def test_without_deep_only_local_rank_0_checks_its_node(monkeypatch):
    """Under torchrun without --deep, the other ranks of a node would check the same GPUs at the same time
    and slow each other's measurements: they leave it to local rank 0."""
    for name, value in TORCHRUN.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, ["check", "--format", "json"])
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == ("gpudoctor: rank 3 of 4: local rank 0 checks this node (add --deep to test the GPUs of "
                             "every node together)\n")


# The combined report leaves through redaction like any other -------------------------------------------

def test_every_nodes_host_name_and_gpu_uuid_is_redacted():
    facts = recorded("job-2x1")["facts"]
    plain = json.loads(json.dumps(facts).replace("host-redacted", "gpu-node-17"))
    plain["cluster"]["nodes"][1]["hostname"] = "gpu-node-18"
    plain["cluster"]["nodes"][1]["report"]["facts"]["host"]["hostname"] = "gpu-node-18"
    plain["cluster"]["nodes"][1]["report"]["facts"]["host"]["env"]["GITHUB_TOKEN"] = "ghp_" + "a" * 36
    text = json.dumps(redact_report(pipeline.judge(plain)))
    assert "gpu-node-17" not in text and "gpu-node-18" not in text and "ghp_" not in text and "GITHUB_TOKEN" not in text
    assert "host-redacted-1" in text and "host-redacted-2" in text


# merge counts a job's nodes --------------------------------------------------------------------------

def test_merge_counts_another_nodes_errors_on_that_node_only():
    """Node 1's error is its own row's; the job's row no longer repeats it as RUN032."""
    node = recorded("job-2x1")["facts"]["cluster"]["nodes"][1]["report"]
    report = recorded("job-2x1")
    ecc = {"code": "GPU101", "severity": "error", "title": "GPU 1 has 2 uncorrectable ECC errors"}
    report["facts"] = with_fact(report["facts"], "cluster.nodes.1.report.findings", [*node["findings"], ecc])
    report["facts"] = with_fact(report["facts"], "cluster.nodes.1.report.facts.gpus.0.ecc.volatile.uncorrected", 2)
    merged = fleet.merge([("job.json", report)])
    rows = {n["name"]: [f["code"] for f in n["findings"]] for n in merged["nodes"]}
    assert "RUN032" not in rows["job"]


def test_merge_expands_a_jobs_nodes(tmp_path):
    path = tmp_path / "job.json"
    path.write_text((CLUSTER / "job-2x1.json").read_text())
    assert [s for s, _ in fleet.expand_jobs([(str(path), recorded("job-2x1"))])] == [str(path), str(tmp_path / "job-node1.json")]
    merged = fleet.merge([("job.json", recorded("job-2x1"))])
    assert [(n["name"], n["verdict"]) for n in merged["nodes"]] == [("job", "ok"), ("job-node1", "ok")]
    text = CliRunner().invoke(cli, ["merge", str(path)]).stdout
    assert text.startswith("gpudoctor merge: 2 node(s), none with findings at or above --fail-on error\n")


# The real path on this CPU machine ------------------------------------------------------------------

def _torchrun() -> list[str]:
    pytest.importorskip("torch")
    return [sys.executable, "-m", "torch.distributed.run"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def test_one_node_two_ranks_for_real(tmp_path):
    out = tmp_path / "job.json"
    proc = subprocess.run([*_torchrun(), "--nnodes", "1", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                           "--master-port", str(_free_port()), "-m", "gpudoctor", "check", "--deep", "--format", "json",
                           "--output", str(out)], env=_env(), capture_output=True, text=True, timeout=240)
    report = json.loads(out.read_text())
    cluster = report["facts"]["cluster"]
    assert [(r["rank"], r["local_rank"], r["node_rank"]) for r in cluster["ranks"]] == [(0, 0, 0), (1, 1, 0)]
    assert cluster["allreduce"]["skipped"].endswith("CUDA shows this rank no GPU")
    assert "RUN035" in [f["code"] for f in report["findings"]]
    assert "gpudoctor: rank 1 of 2 (node 0): not measured (CUDA shows this rank no GPU); sent that to rank 0" in proc.stderr
    assert f'File "{ROOT / "gpudoctor"}' not in proc.stderr  # torchrun's own report of rank 0's exit 1 is no crash of ours
    # rank 0's exit code is the job's: torchrun exits 1 when rank 0 does (findings at or above --fail-on)
    expected = 1 if any(f["severity"] == "error" for f in report["findings"]) else 0
    assert (proc.returncode != 0) == bool(expected)


def test_two_nodes_for_real_carry_node_1s_report_to_rank_0(tmp_path):
    port = str(_free_port())
    procs = [subprocess.Popen([*_torchrun(), "--nnodes", "2", "--node-rank", str(n), "--nproc-per-node", "1",
                               "--master-addr", "127.0.0.1", "--master-port", port, "-m", "gpudoctor", "check", "--deep",
                               "--format", "json", "--output", str(tmp_path / f"node{n}.json")],
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in (0, 1)]
    outputs = [p.communicate(timeout=240) for p in procs]
    assert not (tmp_path / "node1.json").exists()  # only rank 0 writes
    assert "gpudoctor: rank 1 of 2 (node 1): not measured (CUDA shows this rank no GPU); sent that and its node's " \
           "report to rank 0" in outputs[1][1]
    report = json.loads((tmp_path / "node0.json").read_text())
    nodes = report["facts"]["cluster"]["nodes"]
    assert [(n["node_rank"], n.get("self"), isinstance(n.get("report"), dict)) for n in nodes] == [
        (0, True, False), (1, None, True)]
    inner = nodes[1]["report"]
    assert inner["facts"]["probes"]["frameworks"]["status"] == "ok"  # a whole check ran on node 1
    # node 1's own errors, if this machine gives any, are rank 0's
    own = [f["code"] for f in inner["findings"] if f["severity"] == "error"]
    run032 = [f for f in report["findings"] if f["code"] == "RUN032"]
    assert bool(run032) == bool(own)
    if own:
        assert run032[0]["title"].endswith(", ".join(dict.fromkeys(own)))


def test_rank_0s_own_check_crashing_is_int001_not_all_clear(monkeypatch):
    """Rank 0's node check raised: the combined report says so (INT001), instead of judging empty facts ok."""
    from gpudoctor.cli import check as cli_module
    from gpudoctor.run_options import RunOptions

    data = _job(None, {"ok": False, "error": "x"})
    monkeypatch.setattr(distributed, "run_rank", lambda launch, check, deadline, redact=True: (
        {"facts": {}, "findings": [], "error": "the node's own check failed: OSError: boom"}, data))
    report = cli_module._cluster_check(distributed.Launch(0, 2, 0, 1, 0, "torchrun"), RunOptions(), quiet=True)
    found = [(f["code"], f["title"]) for f in report["findings"] if f["code"] == "INT001"]
    assert found and "the node's own check failed: OSError: boom" in found[0][1]


def test_merge_keeps_a_node_whose_check_failed_on_the_jobs_row():
    report = recorded("job-2x1")
    report["facts"]["cluster"]["nodes"][1]["report"] = {"facts": {}, "findings": [],
                                                        "error": "the node's own check failed: OSError: boom"}
    merged = fleet.merge([("job.json", report)])
    assert [n["name"] for n in merged["nodes"]] == ["job"]
    assert "RUN032" in [f["code"] for f in merged["nodes"][0]["findings"]]
