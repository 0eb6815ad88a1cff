"""Cross-node worker: one per rank of a ``torchrun`` job, started by that rank's gpudoctor process.

    python -m gpudoctor.probes.multigpu.cluster SECONDS [NODE_REPORT.json]

Every rank joins one process group through the launcher's rendezvous (``env://``: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT and torchrun's agent store), first with the gloo backend only, which touches
no GPU: a rank waits there, holding no CUDA context, until every node has finished its own check.
Then, when every rank has a GPU (``LOCAL_RANK`` < the GPUs CUDA shows it), an NCCL group all-reduces
256 MiB across all ranks with the timing and sum checks of ``worker.time_allreduce``; NCCL logs its
INIT and NET decisions to a file per rank, from which the network it chose (``Using network IB``)
and the transports of its connections (``via NET/IB``, ``via P2P/...``, ``via SHM``) are read.
Last, every rank sends what it measured, and each node's local rank 0 its node's report, to rank 0
over gloo (``gather_object``); rank 0 prints them all.

NVLink multicast stays off here as in the node's own tests (``SAFE_ENV``). Prints one JSON line:
{"section": "cluster", "data": {...}}; rank 0's data holds ``ranks`` (every rank's part, in rank
order) and ``reports`` (node rank -> that node's report).
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import re
import socket
import sys
import tempfile
import threading
from typing import Any, Callable, Optional

from gpudoctor.probes.multigpu import SAFE_ENV
from gpudoctor.probes.multigpu.worker import BUSY_USED_SHARE, MIN_FREE_BYTES, _error, _nccl_version, busbw, emit, \
    time_allreduce

#: A measurement that has not finished after this long is reported as such, and the reports still travel:
#: NCCL that cannot reach a peer (a wrong NCCL_SOCKET_IFNAME, a firewall) can wait on it for many minutes.
#: The measurement itself takes under a second over NVLink and about 25 s over 10 Gb/s Ethernet.
MEASURE_TIMEOUT_S = 90.0
_NETWORK = re.compile(r"Using network (\S+)")
_VIA = re.compile(r"\bvia ((?:NET|P2P|SHM|CollNet)(?:/[A-Za-z0-9_]+)?)")


def _env_int(name: str, default: int = 0) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def identity() -> dict[str, Any]:
    """Who this rank is, as the launcher numbered it, and the RDMA devices its node has."""
    return {"rank": _env_int("RANK"), "local_rank": _env_int("LOCAL_RANK"), "node_rank": _env_int("GROUP_RANK"),
            "world_size": _env_int("WORLD_SIZE", 1), "local_world_size": _env_int("LOCAL_WORLD_SIZE", 1),
            "hostname": socket.gethostname(), "infiniband": _rdma_devices()}


def _rdma_devices() -> Any:
    """InfiniBand and RoCE devices (/sys/class/infiniband): NCCL's IB transport needs one."""
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except FileNotFoundError:
        return []
    except OSError as exc:
        return {"unavailable": f"{type(exc).__name__}: {exc.strerror or exc}"}


def run(timeout_s: float, report_path: Optional[str], log_dir: str) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    me = identity()
    me["torch"] = torch.__version__
    rank, world, local = me["rank"], me["world_size"], me["local_rank"]
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0  # no context is created here
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    # from here on every node has finished its own check: each node's local rank 0 joins only then
    why = _no_gpu(torch, local, count)
    flags = torch.tensor([0 if why else 1], dtype=torch.int32)
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    if why:
        me["skipped"] = why
    elif not int(flags[0]):
        me["skipped"] = "another rank has no GPU to measure on"
    else:
        me.update(_bounded(lambda: _measure(torch, dist, local, rank, world, log_dir), MEASURE_TIMEOUT_S))
    if report_path:
        with open(report_path, encoding="utf-8") as fh:
            me["report"] = json.load(fh)
    gathered: Optional[list[Any]] = [None] * world if rank == 0 else None
    dist.gather_object(me, gathered, dst=0)
    dist.barrier()  # every rank, rank 0 included, is past the gather before any exits
    if rank != 0:
        return {k: v for k, v in me.items() if k != "report"}
    ranks = [r for r in gathered or [] if isinstance(r, dict)]
    reports = {str(r["node_rank"]): r.pop("report") for r in ranks if "report" in r}
    return {**{k: v for k, v in me.items() if k != "report"}, "ranks": ranks, "reports": reports}


def _no_gpu(torch: Any, local: int, count: int) -> str:
    """Why this rank cannot take part in the GPU all-reduce, or "" when it can."""
    if count == 0:
        return "CUDA shows this rank no GPU"
    if local >= count:
        return f"local rank {local} has no GPU of its own: CUDA shows {count} GPU(s) (start one rank per GPU)"
    free, total = torch.cuda.mem_get_info(local)
    if (total - free) / total > BUSY_USED_SHARE or free < MIN_FREE_BYTES:
        return f"cuda:{local} is busy ({(total - free) / 2**30:.1f} of {total / 2**30:.1f} GiB in use)"
    return ""


def _measure(torch: Any, dist: Any, local: int, rank: int, world: int, log_dir: str) -> dict[str, Any]:
    out: dict[str, Any] = {"device": local}
    try:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        props = torch.cuda.get_device_properties(device)
        out.update(name=props.name, nccl_version=_nccl_version())
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            out["uuid"] = f"GPU-{uuid}"
        group = dist.new_group(backend="nccl", timeout=datetime.timedelta(seconds=MEASURE_TIMEOUT_S))
        out.update(time_allreduce(torch, dist, device, rank, world, group=group))
        out["algbw_gbs"], out["busbw_gbs"] = busbw(world, out["median_s"])
    except Exception as exc:  # noqa: BLE001 - a failing collective is the finding; the reports still travel
        out.update(_error(exc))
    out.update(nccl_log(log_dir))
    return out


def _bounded(measure: Callable[[], dict[str, Any]], timeout_s: float) -> dict[str, Any]:
    """``measure()`` in a thread of its own, given up after ``timeout_s``: the gather to rank 0 runs over
    gloo in this thread either way, and the process ends with os._exit, so a stuck NCCL call cannot hold it."""
    result: dict[str, Any] = {}

    def target() -> None:
        result.update(measure())

    thread = threading.Thread(target=target, name="allreduce", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return {"error": f"the all-reduce did not finish within {timeout_s:g} s (NCCL could not reach a peer, "
                         "or the network is very slow)"}
    return result


def nccl_log(log_dir: str) -> dict[str, Any]:
    """The network NCCL chose and the transports of its connections, from its INIT/NET log lines."""
    networks: list[str] = []
    transports: list[str] = []
    for path in sorted(glob.glob(os.path.join(log_dir, "nccl.*"))):
        with open(path, errors="replace") as fh:
            for line in fh:
                for pattern, found in ((_NETWORK, networks), (_VIA, transports)):
                    match = pattern.search(line)
                    if match and match.group(1) not in found:
                        found.append(match.group(1))
    return {"nccl_network": networks[0] if networks else None, "nccl_transports": transports}


def main(argv: list[str]) -> int:
    os.environ.update(SAFE_ENV)  # before torch, and NCCL inside it, is imported
    log_dir = tempfile.mkdtemp(prefix="gpudoctor-nccl-")
    # NCCL reads these when it first initialises, inside the measurement: its own log, not the user's console
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET",
                      NCCL_DEBUG_FILE=os.path.join(log_dir, "nccl.%h.%p"))
    try:
        data = run(float(argv[0]), argv[1] if len(argv) > 1 else None, log_dir)
    except BaseException as exc:  # noqa: BLE001 - the rendezvous or the import failing is the finding
        _remove(log_dir)
        emit("cluster", {**identity(), "ok": False, **_error(exc)})
        os._exit(1)  # a process group left after a failure can hang on exit
    _remove(log_dir)
    emit("cluster", data)
    # no destroy_process_group: after a failed or abandoned NCCL call it can hang, and exit frees it all
    os._exit(0)


def _remove(folder: str) -> None:
    for path in glob.glob(os.path.join(folder, "*")):
        os.unlink(path)
    os.rmdir(folder)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
