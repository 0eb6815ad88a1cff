"""``check --deep`` under torchrun: each node checks itself, then every rank takes part in one NCCL
all-reduce across the whole job, and rank 0 writes one report that holds them all.

    torchrun --nnodes 2 --nproc-per-node gpu --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m gpudoctor check --deep --format json --output cluster.json

torchrun starts one gpudoctor process per GPU and tells each who it is (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK) and where to meet (MASTER_ADDR, MASTER_PORT). Then:

1. each node's local rank 0 runs the node's own ``check --deep`` (its GPUs, its P2P links, its
   all-reduce); the node's other ranks do nothing on the GPUs meanwhile;
2. every rank starts the cross-node worker (probes/multigpu/cluster.py), which waits for all ranks
   (so for every node's check) before it touches a GPU, then all-reduces across all ranks and sends
   its measurement, and each node's report, to rank 0;
3. rank 0 adds those as ``facts["cluster"]`` to its own node's facts and judges the whole: the
   collective (checks/cluster.py), every other node's own verdict, and drift between nodes.

Only rank 0 prints or writes a report, and its exit code is the job's verdict; the other ranks print
one line to standard error and exit 0 (a rank exiting non-zero would make torchrun stop rank 0
before it writes). Each node's report travels with its secrets removed; rank 0 redacts the
combined report as any other (host names, UUIDs and serials of every node, unless --no-redact).

Nothing here imports a framework: the worker does, in its own process.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from gpudoctor.probes.child import ChildResult, child_env, kill_all, reopen, run_module
from gpudoctor.probes.multigpu import SAFE_ENV
from gpudoctor.probes.multigpu.worker import BYTES, busbw

#: The variables that say a launcher started this process as one rank of a job.
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
WORKER = "gpudoctor.probes.multigpu.cluster"
#: How long a rank waits for every node to finish its own check and join, when --timeout does not say.
JOIN_TIMEOUT_S = 600.0
#: The worker's own limits are inside this margin: it reports a failed rendezvous itself.
KILL_MARGIN_S = 30.0


@dataclass(frozen=True)
class Launch:
    """This process's place in the job, as the launcher numbered it."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    launcher: str


def launch_from_env(env: Mapping[str, str] = os.environ) -> Optional[Launch]:
    """The job this process is a rank of, or None when it was not started as one of two or more ranks.
    A launcher's variable that is not a number, or a rank outside the job, is a ValueError."""
    if not all(env.get(name) for name in LAUNCH_VARS):
        return None
    numbers = {}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        value = env.get(name)
        if value is None:
            continue
        try:
            numbers[name] = int(value)
        except ValueError:
            raise ValueError(f"{name}={value!r} (set by the launcher) is not a number") from None
    world, rank, local = numbers["WORLD_SIZE"], numbers["RANK"], numbers["LOCAL_RANK"]
    if world < 2:
        return None
    local_world = numbers.get("LOCAL_WORLD_SIZE", 1)
    if not (0 <= rank < world and 0 <= local < local_world <= world):
        raise ValueError(f"RANK={rank}, LOCAL_RANK={local}, LOCAL_WORLD_SIZE={local_world} do not fit "
                         f"WORLD_SIZE={world}")
    return Launch(rank=rank, world_size=world, local_rank=local, local_world_size=local_world,
                  node_rank=numbers.get("GROUP_RANK", rank // local_world),
                  launcher="torchrun" if env.get("TORCHELASTIC_RUN_ID") else "environment")


def run_rank(launch: Launch, node_check: Callable[[], dict[str, Any]],
             deadline: Optional[float] = None) -> tuple[Optional[dict[str, Any]], dict[str, Any]]:
    """This rank's part: (its node's judged report, on each node's local rank 0, else None; what the
    cross-node worker returned: on rank 0 every rank's part and every node's report)."""
    from gpudoctor.redact import redact_report

    report = node_check() if launch.local_rank == 0 else None
    reopen()  # the node's check closed the door on new children when it finished
    timeout = JOIN_TIMEOUT_S if deadline is None else max(1.0, deadline - time.monotonic())
    with tempfile.TemporaryDirectory(prefix="gpudoctor-cluster-") as folder:
        args = [f"{timeout:.1f}"]
        if report is not None and launch.rank != 0:  # rank 0 keeps its own: its facts head the combined report
            path = os.path.join(folder, "node-report.json")
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(redact_report(report, identities=False), fh)
            args.append(path)
        try:
            child = run_module(WORKER, args, timeout_s=timeout + KILL_MARGIN_S, env=child_env(SAFE_ENV))
        finally:
            kill_all()
    return report, child.section("cluster") or _failure(child, timeout + KILL_MARGIN_S)


def _failure(child: ChildResult, timeout_s: float) -> dict[str, Any]:
    if child.start_error:
        why = child.start_error
    elif child.timed_out:
        why = f"the cross-node worker gave no answer within {timeout_s:g} s"
    else:
        why = f"the cross-node worker crashed ({child.signal_name or f'exit status {child.returncode}'})"
    return {"ok": False, "error": why, "stderr_tail": child.stderr_tail[-1500:]}


def describe_rank(launch: Launch, data: dict[str, Any], node_report: Optional[dict[str, Any]]) -> str:
    """The one line a rank other than 0 prints: what it contributed, or why it could not."""
    me = f"gpudoctor: rank {launch.rank} of {launch.world_size} (node {launch.node_rank})"
    sent = " and its node's report" if node_report is not None else ""
    if data.get("ok") is False or "error" in data:
        return f"{me}: {data.get('error', 'failed')}; rank 0 reports it"
    if data.get("skipped"):
        return f"{me}: not measured ({data['skipped']}); sent that{sent} to rank 0"
    return f"{me}: sent its all-reduce measurement{sent} to rank 0, which writes the report"


# The combined facts, on rank 0 -----------------------------------------------------------------

def cluster_facts(launch: Launch, data: dict[str, Any]) -> dict[str, Any]:
    """``facts["cluster"]``: the job, its nodes (each other node's report inside), every rank's part,
    and the all-reduce across all of them."""
    out: dict[str, Any] = {"launcher": launch.launcher, "world_size": launch.world_size,
                           "local_world_size": launch.local_world_size, "bytes": BYTES}
    ranks = data.get("ranks")
    if not isinstance(ranks, list):
        out["allreduce"] = {"ok": False, "error": data.get("error") or "rank 0's cross-node worker returned nothing",
                            "stderr_tail": data.get("stderr_tail", "")}
        return out
    reports = data.get("reports") or {}
    out["ranks"] = [{k: v for k, v in r.items() if k not in ("times_s", "checks")} for r in ranks]
    out["nodes"] = _nodes(ranks, reports, launch.node_rank)
    out["allreduce"] = summarise(ranks, launch.world_size)
    return out


def _nodes(ranks: list[dict[str, Any]], reports: dict[str, Any], own: int) -> list[dict[str, Any]]:
    nodes: dict[int, dict[str, Any]] = {}
    for r in ranks:
        node = nodes.setdefault(r.get("node_rank", -1), {"node_rank": r.get("node_rank"), "hostname": r.get("hostname"),
                                                          "infiniband": r.get("infiniband"), "ranks": []})
        node["ranks"].append(r.get("rank"))
    for number, node in nodes.items():
        if number == own:
            node["self"] = True  # its facts are the report's own
        else:
            node["report"] = reports.get(str(number))
    return [nodes[n] for n in sorted(nodes, key=lambda n: (n is None, n))]


def summarise(ranks: list[dict[str, Any]], world: int) -> dict[str, Any]:
    """The all-reduce as one measurement: failed (the first rank's own error), not measured (why),
    or its bandwidth as nccl-tests reports it (the ranks' median times averaged)."""
    out: dict[str, Any] = {"world_size": world, "backend": "nccl", "dtype": "float32", "bytes": BYTES,
                           "env": dict(SAFE_ENV)}
    failed = [r for r in ranks if r.get("error")]
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} other rank(s) failed)" if len(failed) > 1 else ""
        out.update(ok=False, error=f"rank {first.get('rank')} on {first.get('hostname')}: {first['error']}{more}",
                   stderr_tail=first.get("traceback_tail", ""))
        return out
    skipped = [r for r in ranks if r.get("skipped")]
    own = [r for r in skipped if r["skipped"] != "another rank has no GPU to measure on"]
    if skipped:
        first = (own or skipped)[0]
        out["skipped"] = f"rank {first.get('rank')} on {first.get('hostname')}: {first['skipped']}"
        return out
    if len(ranks) < world or not all(isinstance(r.get("median_s"), (int, float)) for r in ranks):
        out.update(ok=False, error=f"only {len(ranks)} of {world} ranks reported a measurement")
        return out
    seconds = statistics.mean(r["median_s"] for r in ranks)
    algbw, bus = busbw(world, seconds)
    out.update(correct=all(r.get("correct") for r in ranks), wrong_elements=sum(r.get("wrong_elements", 0) for r in ranks),
               time_s=seconds, algbw_gbs=algbw, busbw_gbs=bus,
               nccl_versions=sorted({str(r["nccl_version"]) for r in ranks if r.get("nccl_version")}),
               networks=sorted({str(r["nccl_network"]) for r in ranks if r.get("nccl_network")}),
               transports=sorted({str(t) for r in ranks for t in r.get("nccl_transports") or []}))
    out["ok"] = out["correct"]
    return out
