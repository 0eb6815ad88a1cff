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

from gpudoctor.procs.child import child_env, kill_all, reopen, run_module
from gpudoctor.probes.multigpu import SAFE_ENV
from gpudoctor.probes.multigpu.cluster import MEASURE_TIMEOUT_S
from gpudoctor.probes.multigpu.worker import BYTES, busbw

#: The variables that say a launcher started this process as one rank of a job.
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
WORKER = "gpudoctor.probes.multigpu.cluster"
#: How long a rank waits for every node to finish its own check and join, when --timeout does not say.
JOIN_TIMEOUT_S = 600.0
#: Beyond the join and the measurement, what the worker may take before it is killed (without --timeout).
KILL_MARGIN_S = 30.0
#: Under --timeout, the time kept back from the node's own check for the cross-node step (at most a
#: quarter of the whole).
CLUSTER_RESERVE_S = 30.0


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
    local_world = numbers.get("LOCAL_WORLD_SIZE")
    if not (0 <= rank < world and 0 <= local < world and (local_world is None or local < local_world <= world)):
        raise ValueError(f"RANK={rank}, LOCAL_RANK={local}, LOCAL_WORLD_SIZE={local_world} do not fit "
                         f"WORLD_SIZE={world}")
    # without GROUP_RANK (a launcher other than torchrun), ranks are numbered node by node
    node = numbers.get("GROUP_RANK", (rank - local) // local_world if local_world else rank - local)
    return Launch(rank=rank, world_size=world, local_rank=local, local_world_size=local_world or 1,
                  node_rank=node, launcher="torchrun" if env.get("TORCHELASTIC_RUN_ID") else "environment")


def run_rank(launch: Launch, node_check: Callable[[Optional[float]], dict[str, Any]],
             deadline: Optional[float] = None, redact: bool = True) -> tuple[Optional[dict[str, Any]], dict[str, Any]]:
    """This rank's part: (its node's judged report, on each node's local rank 0, else None; what the
    cross-node worker printed: its own part as ``rank``, and on rank 0 every rank's as ``join`` and
    ``measure``). Under --timeout the node's check ends CLUSTER_RESERVE before the deadline, so the
    cross-node step has time of its own. A node's report leaves with its secrets removed, and with
    ``redact`` its home directory too (rank 0 replaces the other identities, consistently across nodes)."""
    from gpudoctor.redact import redact_home, redact_report

    report = None
    if launch.local_rank == 0:
        node_deadline = None if deadline is None else deadline - min(CLUSTER_RESERVE_S, 0.25 * (deadline - time.monotonic()))
        try:
            report = node_check(node_deadline)
        except Exception as exc:  # noqa: BLE001 - the job still meets; the node's failure travels instead
            report = {"facts": {}, "findings": [], "error": f"the node's own check failed: {type(exc).__name__}: {exc}"}
    reopen()  # the node's check closed the door on new children when it finished
    join_s = JOIN_TIMEOUT_S if deadline is None else max(1.0, deadline - time.monotonic())
    kill_s = join_s + MEASURE_TIMEOUT_S + KILL_MARGIN_S if deadline is None else join_s + 2.0
    with tempfile.TemporaryDirectory(prefix="gpudoctor-cluster-") as folder:
        args = [f"{join_s:.1f}", str(launch.node_rank)]
        if report is not None and launch.rank != 0:  # rank 0 keeps its own: its facts head the combined report
            path = os.path.join(folder, "node-report.json")
            with open(path, "w", encoding="utf-8") as fh:
                sent = redact_report(report, identities=False)
                json.dump(redact_home(sent) if redact else sent, fh)
            args.append(path)
        try:
            child = run_module(WORKER, args, timeout_s=kill_s, env=child_env(SAFE_ENV))
        finally:
            kill_all()
    data = {name: child.section(name) for name in ("join", "measure", "rank")}
    if data["rank"] is None:
        data["rank"] = child.failure("the cross-node worker", kill_s)
    return report, data


#: How long rank 0 waits, at most, for the other ranks its launcher started beside it before it exits.
LOCAL_RANKS_WAIT_S = 10.0


def wait_for_local_ranks(launch: Launch, deadline: Optional[float] = None) -> int:
    """On rank 0 of a torchrun job: wait until the other ranks torchrun started on this node have exited (at most
    LOCAL_RANKS_WAIT_S, or until ``deadline``). torchrun stops every rank as soon as one exits with an error, and
    rank 0 exits 1 when the job has findings: a rank still saying what it sent would be cut off. The ranks are the
    launcher's other children of this job (TORCHELASTIC_RUN_ID) with another LOCAL_RANK; a process this rank
    started, or the launcher's other children, are not waited for. Returns how many were still there at the end."""
    from gpudoctor.procs.pids import child_pids, parent_pid, running, start_ticks

    agent = parent_pid(os.getpid())
    job = os.environ.get("TORCHELASTIC_RUN_ID")
    if launch.rank != 0 or launch.launcher != "torchrun" or launch.local_world_size < 2 or not agent or not job:
        return 0
    ranks = {pid: start_ticks(pid) for pid in child_pids(agent)
             if pid != os.getpid() and _rank_of_job(pid, job, str(launch.local_rank))}
    end = time.monotonic() + LOCAL_RANKS_WAIT_S
    if deadline is not None:
        end = min(end, deadline)
    while True:
        left = [pid for pid, ticks in ranks.items() if running(pid, ticks)]
        if not left or time.monotonic() >= end:
            return len(left)
        time.sleep(0.02)


def _rank_of_job(pid: int, job: str, local_rank: str) -> bool:
    """Whether ``pid`` is another local rank of torchrun job ``job``, by its environment (readable for our own uid)."""
    from gpudoctor.procs.pids import environ

    said = environ(pid)
    if said is None:
        return False
    env = dict(item.partition(b"=")[::2] for item in said.split(b"\0") if item)
    return env.get(b"TORCHELASTIC_RUN_ID") == job.encode() and env.get(b"LOCAL_RANK", local_rank.encode()) != local_rank.encode()


def describe_rank(launch: Launch, data: dict[str, Any], node_report: Optional[dict[str, Any]]) -> str:
    """The one line a rank other than 0 prints: what it contributed, or why it could not (and then, on a
    node's local rank 0, the node's own verdict, which may never reach rank 0)."""
    me = f"gpudoctor: rank {launch.rank} of {launch.world_size} (node {launch.node_rank})"
    mine = data.get("rank") or {}
    sent = " and its node's report" if node_report is not None else ""
    if mine.get("error"):
        line = f"{me}: {mine['error']}; rank 0 reports it"
        if node_report is not None:
            problems = [f.get("code") for f in node_report.get("findings") or [] if f.get("severity") in ("error", "warning")]
            verdict = (node_report.get("summary") or {}).get("verdict") or node_report.get("error") or "unknown"
            line += f". This node's own check: {verdict}" + (f" ({', '.join(dict.fromkeys(problems))})" if problems else "")
        return line
    if mine.get("skipped"):
        return f"{me}: not measured ({mine['skipped']}); sent that{sent} to rank 0"
    return f"{me}: sent its all-reduce measurement{sent} to rank 0, which writes the report"


# The combined facts, on rank 0 -----------------------------------------------------------------

def cluster_facts(launch: Launch, data: dict[str, Any]) -> dict[str, Any]:
    """``facts["cluster"]``: the job, its nodes (each other node's report inside), every rank's part,
    and the all-reduce across all of them. ``data`` is what ``run_rank`` returned on rank 0."""
    out: dict[str, Any] = {"launcher": launch.launcher, "world_size": launch.world_size,
                           "local_world_size": launch.local_world_size, "bytes": BYTES}
    join, measure, mine = data.get("join"), data.get("measure"), data.get("rank") or {}
    if not isinstance(join, dict) or not isinstance(join.get("ranks"), list):
        out["allreduce"] = {"ok": False, "error": mine.get("error") or "rank 0's cross-node worker returned nothing",
                            "stderr_tail": mine.get("stderr_tail", "")}
        return out
    ranks = _ranks(join["ranks"], (measure or {}).get("ranks"), mine, launch.world_size)
    reports = {str(j["node_rank"]): j["report"] for j in join["ranks"] if isinstance(j, dict) and "report" in j}
    out["ranks"] = [{k: v for k, v in r.items() if k not in ("times_s", "checks")} for r in ranks]
    out["nodes"] = _nodes([r for r in ranks if "node_rank" in r], reports, launch.node_rank)
    out["allreduce"] = summarise(ranks, launch.world_size)
    return out


def _ranks(joined: list[Any], measured: Any, mine: dict[str, Any], world: int) -> list[dict[str, Any]]:
    """Every rank's part: who it is (the join) and what it measured, or why nothing arrived."""
    measured = measured if isinstance(measured, list) else None
    out = []
    for number in range(world):
        who = joined[number] if number < len(joined) and isinstance(joined[number], dict) else None
        if who is None:
            out.append({"rank": number, "error": f"rank {number} never joined (its node's check did not finish, "
                                                 "or it could not reach the launcher's store)", "no_answer": True})
            continue
        rank = {k: v for k, v in who.items() if k != "report"}
        part = measured[number] if measured is not None and number < len(measured) else None
        if isinstance(part, dict):
            rank.update({k: v for k, v in part.items() if k not in rank or k in ("error", "skipped")})
        elif measured is None:
            rank.update(error=mine.get("error") or mine.get("skipped") or "rank 0's worker ended before the "
                        "measurements were gathered", no_answer=True)
        else:
            rank.update(error=f"rank {number} sent no measurement", no_answer=True)
        out.append(rank)
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
        # a rank's own error names the cause; a silent or timed-out rank is often only the consequence
        first = next((r for r in failed if not r.get("no_answer") and not r.get("timed_out")), failed[0])
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
