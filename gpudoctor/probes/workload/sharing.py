"""Who else computes on a GPU while a figure is timed, read from NVML just before and after the step.

A GPU another process keeps busy measures slow (348 instead of 786 bf16 TFLOP/s on an H100 that
another process loaded): that is a shared GPU, not a slow one. NVML lists the processes holding a
context on a GPU; those of this run are told apart by the run's token in their environment
(``GPUDOCTOR_RUN``, which every child of one check inherits), not by process ids alone, since the
run's other children (another framework, the smoke kernel) share the GPU between timed steps.

Where this cannot be told, it says so (``shared`` None) instead of guessing: NVML missing, a GPU it
cannot list processes of (MIG, vGPU), or process ids from another PID namespace (a container that
does not see the host's processes: this process is then not in NVML's list either).

Runs in the workload child under the diagnosed interpreter: standard library only (ctypes).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Optional

from gpudoctor.procs.pids import environ as _environ, parent_pid
from gpudoctor.procs.warden import RUN_ENV, RUN_PID_ENV

_NVML_SUCCESS, _NVML_INSUFFICIENT_SIZE = 0, 7
_lock = threading.Lock()
_nvml: Any = None
_nvml_error = ""


class _ProcessInfo(ctypes.Structure):
    """The process-info record of nvml.h as the _v2/_v3 getters fill it."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _ProcessInfoV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def _library() -> Any:
    """NVML, started once per process; None (with _nvml_error) where it cannot be."""
    global _nvml, _nvml_error
    with _lock:
        if _nvml is None and not _nvml_error:
            try:
                lib = ctypes.CDLL("libnvidia-ml.so.1")
                init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
                rc = init()
                if rc != _NVML_SUCCESS:
                    _nvml_error = f"nvmlInit returned {rc}"
                else:
                    _nvml = lib
            except (OSError, AttributeError) as exc:
                _nvml_error = f"{type(exc).__name__}: {exc}"
        return _nvml


def cuda_uuid(ordinal: int) -> Optional[str]:
    """The UUID of CUDA device ``ordinal`` as this process numbers it, through the libcuda the framework
    already loaded (RTLD_NOLOAD: never one of our own choosing); None before CUDA has started."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        return None
    dev, raw = ctypes.c_int(), ctypes.create_string_buffer(16)
    get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or getattr(cuda, "cuDeviceGetUuid", None)
    if get_uuid is None or cuda.cuDeviceGet(ctypes.byref(dev), ordinal) != 0 or get_uuid(raw, dev) != 0:
        return None
    h = raw.raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def sample(uuid: Optional[str]) -> dict[str, Any]:
    """The processes on GPU ``uuid`` now, split into this run's and others', and its utilisation."""
    lib = _library()
    if lib is None or not uuid:
        return {"known": False, "why": _nvml_error or "the GPU's UUID is unknown"}
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(handle)) != _NVML_SUCCESS:
        return {"known": False, "why": f"NVML does not know {uuid}"}
    pids: dict[int, int] = {}
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        listed = _processes(lib, getter, handle)
        if listed is None:
            return {"known": False, "why": f"{getter} is not supported on this GPU"}
        for pid, used in listed:
            pids[pid] = max(used, pids.get(pid, 0))
    util = _Utilization()
    out: dict[str, Any] = {"known": True, "processes": len(pids)}
    if lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == _NVML_SUCCESS:
        out["utilization_gpu"] = util.gpu
    if os.getpid() not in pids:  # our own context is on this GPU: NVML's ids are not this namespace's
        return {**out, "known": False, "why": "NVML's process ids are not this PID namespace's"}
    out["others"] = [_describe(pid, used) for pid, used in sorted(pids.items()) if not _ours(pid)]
    return out


def _processes(lib: Any, getter: str, handle: Any) -> Optional[list[tuple[int, int]]]:
    """(pid, bytes used) of each process ``getter`` lists, through the newest entry point the driver has."""
    for suffix, struct in (("_v3", _ProcessInfo), ("_v2", _ProcessInfo), ("", _ProcessInfoV1)):
        fn = getattr(lib, getter + suffix, None)
        if fn is None:
            continue
        count = ctypes.c_uint(0)
        rc = fn(handle, ctypes.byref(count), None)
        if rc == _NVML_SUCCESS and count.value == 0:
            return []
        if rc != _NVML_INSUFFICIENT_SIZE:
            return None
        for _ in range(3):  # processes may start between the two calls
            count = ctypes.c_uint(count.value + 8)
            infos = (struct * count.value)()
            rc = fn(handle, ctypes.byref(count), infos)
            if rc == _NVML_SUCCESS:
                return [(infos[i].pid, _bytes(infos[i].usedGpuMemory)) for i in range(count.value)]
            if rc != _NVML_INSUFFICIENT_SIZE:
                return None
        return None
    return None


def _bytes(value: int) -> int:
    return 0 if value >= (1 << 64) - 1 else int(value)  # NVML_VALUE_NOT_AVAILABLE


def _ours(pid: int) -> bool:
    """``pid`` is this run's: this process, or one whose environment holds this run's token. A child of
    the run that has exited and is not yet reaped is still listed on its GPU for a moment, with the memory
    it held, and its environment is gone then: empty, or not readable at all. Such a process is ours where
    it descends from the gpudoctor that started the run (``RUN_PID_ENV``), as every child of the run does;
    another user's process, whose environment cannot be read either, does not."""
    if pid == os.getpid():
        return True
    token = os.environ.get(RUN_ENV)
    if not token:
        return False
    environ = _environ(pid)
    if environ:
        return f"{RUN_ENV}={token}".encode() in environ.split(b"\0")
    return _descends_from(pid, _run_pid())


def _run_pid() -> int:
    """The gpudoctor this run's processes descend from: as its children are told, else this one's parent."""
    try:
        return int(os.environ.get(RUN_PID_ENV) or os.getppid())
    except ValueError:
        return os.getppid()


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is a parent of ``pid``'s, or of its parent's, and so on. gpudoctor may be init
    itself (a container's entrypoint); a process a runtime put into the container (``docker exec``) has
    no parent there (0), so it descends from no one in it."""
    for _ in range(32):
        pid = parent_pid(pid) or 0
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def _describe(pid: int, used: int) -> dict[str, Any]:
    name = ""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            name = fh.read().strip()
    except OSError:
        pass
    return {"pid": pid, "name": name, "used_memory_bytes": used}


def judged(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """One timed step's verdict: ``shared`` True when another process was on the GPU just before or just
    after it, False when NVML could tell and saw none, None when it could not tell."""
    samples = [s for s in (before, after) if s]
    others = {o["pid"]: o for s in samples for o in s.get("others") or []}
    if others:
        return {"shared": True, "others": list(others.values()), "before": before, "after": after}
    if all(s.get("known") for s in samples) and samples:
        return {"shared": False}
    why = next((s.get("why") for s in samples if not s.get("known")), "not sampled")
    return {"shared": None, "why": why}
