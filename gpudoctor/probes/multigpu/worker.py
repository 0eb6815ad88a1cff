"""Multi-GPU worker: peer-to-peer copies between every pair of GPUs, and an NCCL all-reduce across all.

    python -m gpudoctor.probes.multigpu.worker p2p
    python -m gpudoctor.probes.multigpu.worker allreduce N SECONDS     (the launcher: one rank per GPU)
    python -m gpudoctor.probes.multigpu.worker rank SECONDS            (started by the launcher only)

``p2p``, in one process that sees every GPU: for each ordered pair (a, b), whether CUDA allows a to
access b's memory (``torch.cuda.can_device_access_peer``), and the bandwidth of copying 256 MiB from
a to b (PyTorch runs a cross-device copy on the source device's current stream, so device events
on that stream time it; warm-up, then the median of repeats), with the copied data checked.

``allreduce`` starts one process per GPU (``rank``) through torch.distributed with the NCCL backend
(MASTER_ADDR=127.0.0.1, a free port), all-reduces a 256 MiB float32 tensor, and reports algorithm
and bus bandwidth as nccl-tests defines them (busbw = algbw x 2(n-1)/n). Every rank fills the
tensor with rank+1, so the sum must be n(n+1)/2 in every element; it is checked before and after
the timed runs. The launcher kills every rank at its deadline, or shortly after one fails.

NVLink multicast (NVLS) stays off in every process started here (``SAFE_ENV``, forced, never
unset): a program that uses it can put a shared host's GPUs out of service. Nothing here asks for
multicast or symmetric memory. Each GPU's lock (GPUDOCTOR_LOCK_DIR, see workload/locks.py) is
held while measuring, so the framework workloads never run on a GPU during these timings.
Prints one JSON line: {"section": "p2p" | "allreduce" | "rank", "data": {...}}.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Iterator

from gpudoctor.procs import protocol
from gpudoctor.procs.child import command
from gpudoctor.probes.multigpu import SAFE_ENV
from gpudoctor.probes.workload.common import BUSY_USED_SHARE
from gpudoctor.probes.workload.locks import _lock

BYTES = 256 << 20
WARMUP = 3
REPEATS = 10
BATCH = 4  # all-reduces back to back between two events: launch gaps and skew between ranks average out
GRACE_S = 10.0  # once one rank has failed or all have answered, how long the others get to exit
MIN_FREE_BYTES = 4 << 30


def emit(section: str, data: dict[str, Any]) -> None:
    """To gpudoctor's channel in the launcher; to stdout (its file) in a rank, which has no channel."""
    protocol.emit(section, data, default=float)


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}"[:800], "traceback_tail": traceback.format_exc()[-1200:]}


@contextlib.contextmanager
def _all_gpus(count: int) -> Iterator[None]:
    """Every GPU's lock, always in ordinal order (each workload thread holds at most one GPU's lock:
    workload/locks.py _lock says the rule)."""
    with contextlib.ExitStack() as stack:
        for ordinal in range(count):
            stack.enter_context(_lock(f"gpu{ordinal}"))
        yield


# --- P2P: access and copy bandwidth for every ordered pair ---------------------------------------------

def run_p2p() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"torch": torch.__version__}
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    out["device_count"] = count
    if count < 2:
        out["skipped"] = f"PyTorch sees {count} GPU(s); the multi-GPU tests need two or more"
        return out
    busy = []
    for ordinal in range(count):
        free, total = torch.cuda.mem_get_info(ordinal)
        if (total - free) / total > BUSY_USED_SHARE or free < MIN_FREE_BYTES:
            busy.append(f"cuda:{ordinal} ({(total - free) / 2**30:.1f} of {total / 2**30:.1f} GiB in use)")
    if busy:
        out["skipped"] = "GPUs busy: " + ", ".join(busy)
        return out
    words = BYTES // 4
    out.update(bytes=BYTES, warmup=WARMUP, repeats=REPEATS)
    with _all_gpus(count):
        # each source holds arange*3 + its ordinal, so a destination can tell where its data came from
        base = [torch.arange(words, dtype=torch.int32, device=f"cuda:{i}").mul_(3) for i in range(count)]
        src = [base[i] + i for i in range(count)]
        dst = [torch.empty_like(base[i]) for i in range(count)]
        for ordinal in range(count):
            torch.cuda.synchronize(ordinal)
        out["pairs"] = [_pair(torch, a, b, src[a], dst[b], base[b]) for a in range(count) for b in range(count) if a != b]
    out["ok"] = all("error" not in p for p in out["pairs"])
    return out


def _pair(torch: Any, a: int, b: int, src: Any, dst: Any, base: Any) -> dict[str, Any]:
    pair: dict[str, Any] = {"src": a, "dst": b}
    try:
        pair["access"] = bool(torch.cuda.can_device_access_peer(a, b))
        dst.fill_(-1)
        stream = torch.cuda.current_stream(a)  # a cross-device copy_ runs on the source's current stream
        with torch.cuda.device(a):
            for _ in range(WARMUP):
                dst.copy_(src)
            torch.cuda.synchronize(a)
            torch.cuda.synchronize(b)
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(REPEATS)]
            for start, end in events:
                start.record(stream)
                dst.copy_(src)
                end.record(stream)
            events[-1][1].synchronize()
        torch.cuda.synchronize(b)
        seconds = statistics.median(start.elapsed_time(end) / 1000.0 for start, end in events)
        pair["gbs"] = BYTES / seconds / 1e9
        pair["wrong_elements"] = int(dst.sub(base).ne_(a).sum())  # dst - arange*3 must be a everywhere
    except Exception as exc:  # noqa: BLE001 - a failing pair is the finding, the other pairs still run
        pair.update(_error(exc))
    return pair


# --- NCCL all-reduce: the launcher ---------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_allreduce(world: int, budget_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + budget_s
    out: dict[str, Any] = {"world_size": world, "backend": "nccl", "dtype": "float32", "bytes": BYTES,
                           "warmup": WARMUP, "repeats": REPEATS, "batch": BATCH, "expected": world * (world + 1) / 2,
                           "env": dict(SAFE_ENV)}
    with tempfile.TemporaryDirectory(prefix="gpudoctor-allreduce-") as folder:
        port = _free_port()
        # the process group's own timeout (rendezvous, collectives) ends well before the launcher's deadline
        pg_timeout = max(10.0, deadline - time.monotonic() - 15.0)
        outs = [os.path.join(folder, f"rank{rank}.out") for rank in range(world)]
        procs: list[subprocess.Popen] = []
        stopped: set[int] = set()
        try:
            for rank in range(world):
                env = {**own_job_env(os.environ), **SAFE_ENV, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                       "LOCAL_WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1"}
                # append mode: the rank's writes never land where the launcher last read
                with open(outs[rank], "ab") as stdout, open(f"{outs[rank]}.err", "ab") as stderr:
                    procs.append(subprocess.Popen(
                        command("gpudoctor.probes.multigpu.worker", ["rank", f"{pg_timeout:.0f}"], python=sys.executable),
                        stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env, cwd="/"))
            timed_out = _wait(procs, outs, deadline)
        finally:
            for rank, proc in enumerate(procs):  # whatever happened, no rank outlives the launcher
                if proc.poll() is None:
                    proc.kill()
                    stopped.add(rank)
            for proc in procs:
                try:
                    proc.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    pass  # stuck in the driver: abandon it rather than hang
        ranks = []
        for rank, proc in enumerate(procs):
            result = _rank_result(outs[rank])
            if result is None:
                why = f"died ({_exit_status(proc.returncode)})" if rank not in stopped else \
                    f"gave no answer within {budget_s:g} s" if timed_out else "was stopped after another rank failed"
                result = {"rank": rank, "error": f"rank {rank} {why}", "no_answer": True}
            if "error" in result or result.get("correct") is False:
                with open(f"{outs[rank]}.err", "rb") as stderr:
                    result["stderr_tail"] = stderr.read()[-1500:].decode(errors="replace")
            ranks.append(result)
    return _summarise(out, ranks, timed_out, budget_s)


#: What a launcher (torchrun) tells its ranks beyond RANK and the like, which the launcher here sets itself.
#: Inherited by these ranks, TORCHELASTIC_USE_AGENT_STORE would send them to a store nobody serves here.
LAUNCHER_VARS = ("GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE")


def own_job_env(env: dict[str, str] | os._Environ) -> dict[str, str]:
    """``env`` without an outer launcher's variables: under `check --deep` in a torchrun job, the node's
    own all-reduce is a job of its own, with its own rendezvous."""
    return {k: v for k, v in env.items() if k not in LAUNCHER_VARS and not k.startswith("TORCHELASTIC_")}


def _exit_status(code: int | None) -> str:
    if code is not None and code < 0:
        import signal

        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def _wait(procs: list[subprocess.Popen], outs: list[str], deadline: float) -> bool:
    """Wait for every rank; True when the deadline passed. One failed rank, or every rank having
    printed its result, leaves the others GRACE_S to finish before they are killed."""
    settle = None
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return False
        if settle is None and (any(c not in (None, 0) for c in codes) or all(_rank_result(o) is not None for o in outs)):
            settle = time.monotonic() + GRACE_S
        if settle is not None and time.monotonic() > settle:
            return False
        time.sleep(0.05)
    return True


def _rank_result(path: str) -> dict[str, Any] | None:
    with open(path, "rb") as fh:
        for raw in fh.read().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a library printed to stdout, or the line is still being written
            if isinstance(line, dict) and line.get("section") == "rank" and isinstance(line.get("data"), dict):
                return line["data"]
    return None


def _summarise(out: dict[str, Any], ranks: list[dict[str, Any]], timed_out: bool, budget_s: float) -> dict[str, Any]:
    out["ranks"] = ranks
    versions: set[Any] = {r.get("nccl_version") for r in ranks if r.get("nccl_version")}
    if versions:
        out["nccl_version"] = sorted(versions)[0]
    failed = [r for r in ranks if "error" in r]
    if failed:
        # a rank's own error names the cause; "rank N died" is often only the consequence
        first = next((r for r in failed if not r.get("no_answer")), failed[0])
        more = f" (and {len(failed) - 1} other rank(s) failed)" if len(failed) > 1 else ""
        out.update(ok=False, error=first["error"] + more, stderr_tail=first.get("stderr_tail", ""))
        if timed_out:
            out["timed_out_after_s"] = budget_s
        return out
    world = out["world_size"]
    seconds = statistics.mean(r["median_s"] for r in ranks)  # nccl-tests averages the ranks' times
    out.update(correct=all(r.get("correct") for r in ranks), wrong_elements=sum(r.get("wrong_elements", 0) for r in ranks),
               elements=sum(r.get("elements", 0) for r in ranks), time_s=seconds)
    out["algbw_gbs"], out["busbw_gbs"] = busbw(world, seconds)
    out["ok"] = out["correct"]
    return out


# --- NCCL all-reduce: one rank -------------------------------------------------------------------------

def run_rank(pg_timeout_s: float) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out: dict[str, Any] = {"rank": rank, "device": rank}
    try:
        import datetime

        import torch
        import torch.distributed as dist

        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        out["name"] = torch.cuda.get_device_name(device)
        out["nccl_version"] = _nccl_version()
        dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=pg_timeout_s), device_id=device)
        # this GPU's lock: no collective completes before every rank holds its own, so all timings run on GPUs
        # the framework workloads leave alone (a workload thread holds one GPU's lock at most: no cycle)
        with _lock(f"gpu{rank}"):
            out.update(time_allreduce(torch, dist, device, rank, world))
    except BaseException as exc:  # noqa: BLE001 - the launcher reports it
        out.update(_error(exc))
        emit("rank", out)
        os._exit(1)  # destroying a process group after a failed collective can hang; exit without clean-up
    emit("rank", out)
    dist.destroy_process_group()


def time_allreduce(torch: Any, dist: Any, device: Any, rank: int, world: int, group: Any = None) -> dict[str, Any]:
    """This rank's part of the measured all-reduce: sums checked before and after the timed runs
    (every rank gives rank+1), warm-up, then REPEATS x BATCH all-reduces between device events."""
    expected = world * (world + 1) / 2
    on = {"group": group} if group is not None else {}  # the default group: the node's own job
    data = torch.full((BYTES // 4,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(data, **on)
    checks = [_verify(torch, data, expected)]
    timing = torch.zeros_like(data)  # its values stay 0: the timed runs never overflow
    for _ in range(WARMUP):
        dist.all_reduce(timing, **on)
    torch.cuda.synchronize(device)
    # events on the current stream: the collective's stream waits on it, and it on the collective
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(REPEATS)]
    for start, end in events:
        start.record()
        for _ in range(BATCH):
            dist.all_reduce(timing, **on)
        end.record()
    torch.cuda.synchronize(device)
    times = [start.elapsed_time(end) / 1000.0 / BATCH for start, end in events]
    data.fill_(float(rank + 1))
    dist.all_reduce(data, **on)
    checks.append(_verify(torch, data, expected))
    return {"median_s": statistics.median(times), "times_s": times, "checks": checks, "elements": data.numel(),
            "wrong_elements": max(c["wrong_elements"] for c in checks),
            "correct": all(c["wrong_elements"] == 0 for c in checks)}


def busbw(world: int, seconds: float) -> tuple[float, float]:
    """(algorithm, bus) bandwidth in GB/s of an all-reduce of BYTES in ``seconds``, as nccl-tests defines them."""
    algbw = BYTES / seconds / 1e9
    return algbw, algbw * 2 * (world - 1) / world


def _nccl_version() -> str | None:
    try:
        from torch.cuda import nccl

        version = nccl.version()
        return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    except Exception:  # noqa: BLE001 - only a label in the report
        return None


def _verify(torch: Any, data: Any, expected: float) -> dict[str, Any]:
    bad = data != expected  # NaN is never equal
    wrong = int(bad.sum())
    check: dict[str, Any] = {"wrong_elements": wrong, "expected": expected}
    if wrong:
        first = int(torch.nonzero(bad)[0][0])
        check.update(first_wrong_index=first, first_wrong_value=float(data[first]))
    return check


def main(argv: list[str]) -> int:
    os.environ.update(SAFE_ENV)  # before torch, and NCCL inside it, is imported; the parent set them too
    mode = argv[0] if argv else ""
    try:
        if mode == "p2p":
            emit("p2p", run_p2p())
        elif mode == "allreduce":
            emit("allreduce", run_allreduce(int(argv[1]), float(argv[2])))
        elif mode == "rank":
            run_rank(float(argv[1]))  # prints its own result, whatever happens
        else:
            sys.stderr.write(__doc__ or "")
            return 2
    except BaseException as exc:  # noqa: BLE001 - the import or CUDA init failing is the finding
        emit(mode or "error", {"ok": False, **_error(exc)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
