"""Cross-node worker: one per rank of a ``torchrun`` job, started by that rank's gpudoctor process.

    python -m gpudoctor.probes.multigpu.cluster JOIN_SECONDS NODE_RANK [NODE_REPORT.json]

The ranks meet through the store the launcher already serves (torchrun's agent store, as
``env://`` reaches it: MASTER_ADDR, MASTER_PORT; rank 0 serves one itself under another launcher),
the one connection the rendezvous has proven to work between the nodes. In two phases:

1. **join**, touching no GPU: every rank writes who it is, and each node's local rank 0 its node's
   report, and waits for all the others. A node's local rank 0 starts this worker only after its
   check, so this completes only once every node's check is done. Rank 0 prints everything at once
   (``{"section": "join"}``): whatever happens next, the nodes' reports are in rank 0's hands.
2. **measure**: each rank says whether it has a GPU of its own; when all do, an NCCL process group
   (on the same store) all-reduces 256 MiB across all ranks with the timing and sum checks of
   ``worker.time_allreduce``, under a watchdog (a thread given up after its time, the process ended
   with os._exit); PyTorch's own NCCL watchdog is told not to abort the process, so the results
   still travel. NCCL logs its INIT and NET decisions (and warnings) to a file per rank, from which
   the network it chose (``Using network IB``), the transports of its connections (``via NET/IB``,
   ``via P2P/...``, ``via SHM``) and its last warnings are read. Every rank writes its result to
   the store; rank 0 prints them all (``{"section": "measure"}``), waiting for the others no
   longer than the measurement's own limit.

NVLink multicast stays off here as in the node's own tests (``SAFE_ENV``).
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
import time
from typing import Any, Callable, Optional

from gpudoctor.probes.multigpu import SAFE_ENV
from gpudoctor.snapshot import unavailable
from gpudoctor.probes.multigpu.worker import BUSY_USED_SHARE, MIN_FREE_BYTES, _error, _nccl_version, busbw, emit, \
    time_allreduce

#: The measurement's limit: under a second over NVLink, about 25 s over 10 Gb/s Ethernet; NCCL that
#: cannot reach a peer (a wrong NCCL_SOCKET_IFNAME, a firewall) would otherwise wait many minutes.
MEASURE_TIMEOUT_S = 90.0
#: Set before torch is imported: a failed or timed-out collective raises, rather than PyTorch's NCCL
#: watchdog taking the process down with what it was about to report.
NCCL_QUIET_ABORT = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_ENABLE_MONITORING": "0",
                    "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}
_NETWORK = re.compile(r"Using network (.+?)\s*$")
_VIA = re.compile(r"\bvia (NET/[^/\s]+|P2P/[A-Za-z0-9_]+|SHM(?:/[A-Za-z0-9_]+)?|CollNet[A-Za-z0-9_]*)")
_WARN = re.compile(r"NCCL WARN (.*)$")


def _env_int(name: str, default: int = 0) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def identity(node_rank: int) -> dict[str, Any]:
    """Who this rank is, as the launcher numbered it, and the RDMA devices its node has."""
    return {"rank": _env_int("RANK"), "local_rank": _env_int("LOCAL_RANK"), "node_rank": node_rank,
            "world_size": _env_int("WORLD_SIZE", 1), "local_world_size": _env_int("LOCAL_WORLD_SIZE", 1),
            "hostname": socket.gethostname(), "infiniband": rdma_devices(), "nccl_settings": nccl_settings()}


def nccl_settings() -> dict[str, str]:
    """The NCCL_* variables the user set (the worker's own log settings are added after this is read):
    a deliberate NCCL_IB_DISABLE=1 or NCCL_NET=Socket is not a fault to report."""
    return {k: v[:200] for k, v in sorted(os.environ.items()) if k.startswith("NCCL_") and k not in SAFE_ENV
            and k not in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")}


def rdma_devices() -> Any:
    """InfiniBand and RoCE devices with an ACTIVE port (/sys/class/infiniband/DEV/ports/N/state): NCCL's IB
    transport needs one. A device whose ports are all down, or that has none, is not counted."""
    root = "/sys/class/infiniband"
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        return unavailable("unknown", f"{type(exc).__name__}: {exc.strerror or exc}")
    active = []
    for name in names:
        for state in glob.glob(os.path.join(root, name, "ports", "*", "state")):
            try:
                with open(state, errors="replace") as fh:
                    if "ACTIVE" in fh.read():
                        active.append(name)
                        break
            except OSError:
                continue
    return active


# The store: the launcher's, reached as env:// reaches it -----------------------------------------

def open_store(dist: Any, timeout_s: float) -> Any:
    """The job's store, under a prefix of gpudoctor's own. Under torchrun, its agent serves it (rank 0's
    process must not try to serve a second one on the same port); otherwise rank 0 serves it."""
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    timeout = datetime.timedelta(seconds=timeout_s)
    world = _env_int("WORLD_SIZE", 1)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        store = dist.TCPStore(host, port, world, False, timeout)
    else:
        store = dist.TCPStore(host, port, world, _env_int("RANK") == 0, timeout, multi_tenant=True)
    attempt = f"{os.environ.get('TORCHELASTIC_RUN_ID', 'job')}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    return dist.PrefixStore(f"gpudoctor/{attempt}/", store)


def _exchange(store: Any, phase: str, rank: int, world: int, mine: Any, timeout_s: float,
              gather: bool) -> Optional[list[Any]]:
    """Write this rank's value for ``phase``; with ``gather``, wait for every rank's and return them
    (a rank that has not written within ``timeout_s`` is None)."""
    store.set(f"{phase}/{rank}", json.dumps(mine, default=str))
    if not gather:
        return None
    end = time.monotonic() + timeout_s
    out: list[Any] = []
    for other in range(world):
        key = f"{phase}/{other}"
        try:
            store.wait([key], datetime.timedelta(seconds=max(0.1, end - time.monotonic())))
            out.append(json.loads(store.get(key)))
        except Exception:  # noqa: BLE001 - that rank never wrote: it is named as missing
            out.append(None)
    return out


# The two phases ------------------------------------------------------------------------------------

def run(join_s: float, node_rank: int, report_path: Optional[str], log_dir: str) -> None:
    import torch
    import torch.distributed as dist

    me = identity(node_rank)
    me["torch"] = torch.__version__
    rank, world, local = me["rank"], me["world_size"], me["local_rank"]
    joined = dict(me)
    if report_path:
        try:
            with open(report_path, encoding="utf-8") as fh:
                joined["report"] = json.load(fh)
        except (OSError, ValueError) as exc:
            joined["report_error"] = f"{type(exc).__name__}: {exc}"
    store = open_store(dist, join_s)
    # every rank waits for every other: the nodes' checks are all done when this returns
    everyone = _exchange(store, "join", rank, world, joined, join_s, gather=True) or []
    if rank == 0:
        emit("join", {"ranks": everyone})
    if any(r is None for r in everyone):
        missing = [i for i, r in enumerate(everyone) if r is None]
        emit("rank", {**me, "skipped": f"rank(s) {', '.join(map(str, missing))} never joined within {join_s:g} s"})
        return
    why, uuid = _no_gpu(torch, local)
    ready = _exchange(store, "gpu", rank, world, {"why": why, "uuid": uuid, "node_rank": node_rank},
                      MEASURE_TIMEOUT_S, gather=True) or []
    why = why or shared_gpu(ready, rank)
    if why:
        me["skipped"] = why
    elif any(not isinstance(r, dict) or r.get("why") or shared_gpu(ready, i) for i, r in enumerate(ready)):
        me["skipped"] = "another rank has no GPU to measure on"
    else:
        me.update(_bounded(lambda: _measure(torch, dist, store, local, rank, world, log_dir), MEASURE_TIMEOUT_S))
    results = _exchange(store, "measure", rank, world, me, MEASURE_TIMEOUT_S + 15.0, gather=rank == 0)
    if rank == 0:
        emit("measure", {"ranks": results})
    emit("rank", me)


def own_gpu(count: int, local: int) -> int:
    """The CUDA index of this rank's GPU: its local rank, unless it sees exactly one GPU (one GPU per
    task or pod), which is then its own whatever its local rank."""
    return 0 if count == 1 else local


def _no_gpu(torch: Any, local: int) -> tuple[str, Optional[str]]:
    """(why this rank cannot take part in the GPU all-reduce, or ""; the UUID of the GPU it would use,
    ``own_gpu``). Two ranks of a node that would use the same GPU are caught by ``shared_gpu``."""
    uuid = None
    try:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            return "CUDA shows this rank no GPU", None
        index = own_gpu(count, local)
        if index >= count:
            return f"local rank {local} has no GPU of its own: CUDA shows {count} GPU(s) (start one rank per GPU)", None
        raw = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        uuid = f"GPU-{raw}" if raw is not None else None
        free, total = torch.cuda.mem_get_info(index)
    except Exception as exc:  # noqa: BLE001 - a GPU that fell off the bus: the node's own check says more
        return f"CUDA failed on this rank's GPU: {type(exc).__name__}: {exc}"[:400], uuid
    if (total - free) / total > BUSY_USED_SHARE or free < MIN_FREE_BYTES:
        return f"cuda:{index} is busy ({(total - free) / 2**30:.1f} of {total / 2**30:.1f} GiB in use)", uuid
    return "", uuid


def shared_gpu(ready: list[Any], rank: int) -> str:
    """Why ``rank`` cannot measure because another rank of its node would use the same GPU, or ""
    (more ranks started than the node has GPUs: NCCL refuses two ranks on one GPU)."""
    me = ready[rank] if rank < len(ready) and isinstance(ready[rank], dict) else {}
    if not me.get("uuid"):
        return ""
    same = [i for i, r in enumerate(ready) if isinstance(r, dict) and r.get("uuid") == me["uuid"]
            and r.get("node_rank") == me.get("node_rank")]
    if len(same) < 2:
        return ""
    return (f"ranks {', '.join(map(str, same))} of node {me.get('node_rank')} would share one GPU "
            f"({me['uuid']}): start one rank per GPU")


def _measure(torch: Any, dist: Any, store: Any, local: int, rank: int, world: int, log_dir: str) -> dict[str, Any]:
    index = own_gpu(torch.cuda.device_count(), local)
    out: dict[str, Any] = {"device": index}
    try:
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
        props = torch.cuda.get_device_properties(device)
        out.update(name=props.name, nccl_version=_nccl_version())
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            out["uuid"] = f"GPU-{uuid}"
        dist.init_process_group("nccl", store=dist.PrefixStore("nccl/", store), rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=MEASURE_TIMEOUT_S), device_id=device)
        out.update(time_allreduce(torch, dist, device, rank, world))
        out["algbw_gbs"], out["busbw_gbs"] = busbw(world, out["median_s"])
    except Exception as exc:  # noqa: BLE001 - a failing collective is the finding; the results still travel
        out.update(_error(exc))
    out.update(nccl_log(log_dir))
    return out


def _bounded(measure: Callable[[], dict[str, Any]], timeout_s: float) -> dict[str, Any]:
    """``measure()`` in a thread of its own, given up after ``timeout_s``: the results go to rank 0
    through the store either way, and the process ends with os._exit, so a stuck NCCL call cannot hold it."""
    result: dict[str, Any] = {}

    def target() -> None:
        result.update(measure())

    thread = threading.Thread(target=target, name="allreduce", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return {"error": f"the all-reduce did not finish within {timeout_s:g} s (NCCL could not reach a peer, "
                         "or the network is very slow)", "timed_out": True}
    return result


def nccl_log(log_dir: str) -> dict[str, Any]:
    """The network NCCL chose, the transports of its connections, and its last warnings, from its log."""
    networks: list[str] = []
    transports: list[str] = []
    warnings: list[str] = []
    for path in sorted(glob.glob(os.path.join(log_dir, "nccl.*"))):
        with open(path, errors="replace") as fh:
            for line in fh:
                for pattern, found in ((_NETWORK, networks), (_VIA, transports)):
                    match = pattern.search(line)
                    if match and match.group(1) not in found:
                        found.append(match.group(1))
                warn = _WARN.search(line)
                if warn:
                    warnings.append(warn.group(1).strip()[:300])
    return {"nccl_network": networks[0] if networks else None, "nccl_transports": transports,
            "nccl_warnings": warnings[-5:]}


def main(argv: list[str]) -> int:
    os.environ.update(SAFE_ENV)  # before torch, and NCCL inside it, is imported
    os.environ.update(NCCL_QUIET_ABORT)
    log_dir = tempfile.mkdtemp(prefix="gpudoctor-nccl-")
    # NCCL reads these when it first initialises, inside the measurement: its own log, not the user's console
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET",
                      NCCL_DEBUG_FILE=os.path.join(log_dir, "nccl.%h.%p"))
    node_rank = int(argv[1]) if len(argv) > 1 else 0
    try:
        run(float(argv[0]), node_rank, argv[2] if len(argv) > 2 else None, log_dir)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - the store unreachable, torch missing: the finding
        emit("rank", {**identity(node_rank), "ok": False, **_error(exc)})
        code = 1
    for path in glob.glob(os.path.join(log_dir, "*")):
        os.unlink(path)
    os.rmdir(log_dir)
    sys.stdout.flush()
    # no destroy_process_group: after a failed or abandoned NCCL call it can hang, and exit frees it all
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
