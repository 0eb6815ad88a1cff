"""NVML probe worker: runs in a child process and prints one JSON object per line.

A child process, because an NVML call on a wedged driver can block forever in the kernel; the
parent can then give up on the child without freezing the whole run, and keeps every line the
child had already printed (the GPUs it did read). Each section is preceded by a "progress" line
naming what is about to be queried, so a timeout can say where it hung.

Command-line equivalents are given beside each part: ``nvidia-smi -q`` and ``nvidia-smi topo -m``.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from gpudoctor.procs import protocol
from gpudoctor.probes.nvml import _binding as nv
from gpudoctor.probes.nvml.counters import read_counters, read_fabric
from gpudoctor.snapshot import is_unavailable, unavailable
from gpudoctor.trace import mark

ARCHITECTURES = {
    2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing", 7: "ampere",
    8: "ada", 9: "hopper", 10: "blackwell", 13: "rubin",
}
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
TOPOLOGY_LEVELS = {0: "internal", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
P2P_STATUSES = {
    0: "ok", 1: "chipset_not_supported", 2: "gpu_not_supported", 3: "topology_not_supported",
    4: "disabled_by_regkey", 5: "not_supported", 6: "unknown",
}
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}
NVLINK_REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch"}
CLOCK_EVENT_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
MAX_NVLINKS = 36  # NVML_NVLINK_MAX_LINKS in nvml.h 13.x


def emit(section: str, data: Any) -> None:
    protocol.emit(section, data)


def main(argv: Sequence[str] = ()) -> int:
    """``argv``: ``--quick`` under ``check --quick``, which leaves per-link NVLink counters unread (counters.py)."""
    quick = "--quick" in argv
    mark("nvml worker: bindings imported")
    emit("bindings", {"module_file": nv.module_file(), "import_error": nv.IMPORT_ERROR})
    if nv.IMPORT_ERROR is not None:
        emit("end", {"missing_functions": []})
        return 0
    emit("progress", "nvmlInit")
    try:
        nv.call("nvmlInit")
    except nv.NvmlFailure as exc:
        emit("init", {"ok": False, "reason": exc.reason, "code": exc.code, "message": exc.message})
        emit("end", {"missing_functions": sorted(nv.missing_functions)})
        return 0
    emit("init", {"ok": True})
    mark("nvml worker: NVML initialised")
    emit("progress", "system")
    system = probe_system()
    emit("system", system)
    count = system["device_count"]
    handles: dict[int, Any] = {}
    if isinstance(count, int):
        for index, (gpu, handle) in enumerate(at_once(lambda i: probe_gpu(i, quick), range(count),
                                                       lambda i: f"GPU {i}")):
            if handle is not None:
                handles[index] = handle
            emit("gpu", gpu)
    if len(handles) > 1:
        emit("progress", "topology")
        emit("topology", probe_topology(handles))
    emit("end", {"missing_functions": sorted(nv.missing_functions)})
    mark("nvml worker: all read")
    return 0


def at_once(read: Callable[[Any], Any], items: Iterable[Any], progress: Callable[[Any], str]) -> Iterator[Any]:
    """``read`` of every item, each in a thread of its own, yielded in order. NVML's getters for one GPU wait
    on that GPU and its bus, not on the others, and ctypes lets go of the interpreter lock while they do: on
    a node of eight GPUs, reading them one after the other would cost eight GPUs' time. Each item's
    progress line is said before its result is waited for, so a GPU that hangs is the one named."""
    items = list(items)
    results: list[Any] = [None] * len(items)
    errors: list[Optional[BaseException]] = [None] * len(items)

    def one(pos: int) -> None:
        try:
            results[pos] = read(items[pos])
        except BaseException as exc:  # noqa: BLE001 - raised where it is waited for, as if read there
            errors[pos] = exc

    threads = [threading.Thread(target=one, args=(pos,), daemon=True) for pos in range(len(items))]
    if len(threads) > 1:
        for thread in threads:
            thread.start()
    for pos, thread in enumerate(threads):
        emit("progress", progress(items[pos]))
        if len(threads) > 1:
            thread.join()
        else:
            one(pos)
        if errors[pos] is not None:
            raise errors[pos]  # type: ignore[misc]
        yield results[pos]


def probe_system() -> dict[str, Any]:
    """``nvidia-smi -q``: Driver Version, CUDA Version, Attached GPUs."""
    cuda = nv.query("nvmlSystemGetCudaDriverVersion_v2")
    if is_unavailable(cuda):
        cuda = nv.query("nvmlSystemGetCudaDriverVersion")
    return {
        "driver_version": nv.query("nvmlSystemGetDriverVersion"),
        "nvml_version": nv.query("nvmlSystemGetNVMLVersion"),
        "cuda_driver_version": cuda,  # encoded 1000*major + 10*minor, e.g. 13000
        "device_count": nv.query("nvmlDeviceGetCount"),
    }


def probe_gpu(index: int, quick: bool = False) -> tuple[dict[str, Any], Any]:
    """One GPU as ``nvidia-smi -q -i INDEX`` shows it; ``quick`` as main's."""
    try:
        handle = nv.call("nvmlDeviceGetHandleByIndex", index)
    except nv.NvmlFailure as exc:
        return {"index": index, "handle": unavailable(exc.reason)}, None
    q = lambda name, *a, convert=None: nv.query(name, handle, *a, convert=convert)  # noqa: E731
    pci = q("nvmlDeviceGetPciInfo")
    bus_id = pci.busId if not is_unavailable(pci) else pci
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode()
    gpu: dict[str, Any] = {
        "index": index,
        "name": q("nvmlDeviceGetName"),
        "uuid": q("nvmlDeviceGetUUID"),
        "serial": q("nvmlDeviceGetSerial"),
        "pci": {
            "bus_id": bus_id,
            "device_id": pci if is_unavailable(pci) else f"0x{pci.pciDeviceId >> 16:04x}",
            "subsystem_id": pci if is_unavailable(pci) else f"0x{pci.pciSubSystemId:08x}",
        },
        "cpu_affinity": q("nvmlDeviceGetCpuAffinity", _words(os.cpu_count() or 64), convert=_ranges),
        "numa_affinity": q("nvmlDeviceGetMemoryAffinity", 1, 0, convert=_ranges),  # NVML_AFFINITY_SCOPE_NODE
        "minor_number": q("nvmlDeviceGetMinorNumber"),
        "compute_capability": q("nvmlDeviceGetCudaComputeCapability", convert=lambda v: f"{v[0]}.{v[1]}"),
        "architecture": q("nvmlDeviceGetArchitecture", convert=lambda v: ARCHITECTURES.get(v, f"unknown_{v}")),
        "vbios_version": q("nvmlDeviceGetVbiosVersion"),
        "memory": _memory(handle),
        "persistence_mode": q("nvmlDeviceGetPersistenceMode", convert=_enabled),
        "compute_mode": q("nvmlDeviceGetComputeMode", convert=lambda v: COMPUTE_MODES.get(v, str(v))),
        "mig": _mig(handle),
        "pcie": {
            "gen_current": q("nvmlDeviceGetCurrPcieLinkGeneration"),
            "gen_max": q("nvmlDeviceGetMaxPcieLinkGeneration"),
            "gen_gpu_max": q("nvmlDeviceGetGpuMaxPcieLinkGeneration"),
            "width_current": q("nvmlDeviceGetCurrPcieLinkWidth"),
            "width_max": q("nvmlDeviceGetMaxPcieLinkWidth"),
        },
        "temperature": {
            "current_c": q("nvmlDeviceGetTemperature", nv.constant("NVML_TEMPERATURE_GPU", 0)),
            "slowdown_c": q("nvmlDeviceGetTemperatureThreshold", 1),  # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
            "shutdown_c": q("nvmlDeviceGetTemperatureThreshold", 0),  # NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
        },
        "power": {
            "draw_mw": q("nvmlDeviceGetPowerUsage"),
            "limit_mw": q("nvmlDeviceGetEnforcedPowerLimit"),
        },
        "utilization": q("nvmlDeviceGetUtilizationRates", convert=lambda u: {"gpu_percent": u.gpu, "memory_percent": u.memory}),
        "clock_event_reasons": _clock_events(handle),
        "ecc": _ecc(handle),
        "retired_pages": _retired_pages(handle),
        "remapped_rows": q("nvmlDeviceGetRemappedRows", convert=lambda r: {
            "corrected": r[0], "uncorrected": r[1], "pending": bool(r[2]), "failure": bool(r[3])}),
        "processes": _processes(handle),
        "nvlink": _nvlinks(handle),
    }
    gpu["counters"] = read_counters(handle, gpu["nvlink"], quick=quick)
    gpu["fabric"] = read_fabric(handle)
    return gpu, handle


def _enabled(value: int) -> str:
    return "enabled" if value else "disabled"


def _words(bits: int) -> int:
    return max(1, (bits + 63) // 64)


def _ranges(mask_words: Any) -> str:
    """An affinity bitmask as nvidia-smi topo -m prints it: "0-31", "0,2-3"; empty if none."""
    ids = [w * 64 + b for w, word in enumerate(mask_words) for b in range(64) if int(word) >> b & 1]
    out: list[str] = []
    for i in ids:
        if out and int(out[-1].split("-")[-1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def _memory(handle: Any) -> Any:
    """Version 2 reports reserved memory apart from used, as ``nvidia-smi -q`` does."""
    version = nv.constant("nvmlMemory_v2")
    mem: Any = nv.query("nvmlDeviceGetMemoryInfo", handle, version) if version else unavailable("function_not_found")
    if is_unavailable(mem):
        mem = nv.query("nvmlDeviceGetMemoryInfo", handle)
    if is_unavailable(mem):
        return mem
    out = {"total_bytes": mem.total, "used_bytes": mem.used, "free_bytes": mem.free}
    if hasattr(mem, "reserved"):
        out["reserved_bytes"] = mem.reserved
    return out


def _mig(handle: Any) -> Any:
    mode = nv.query("nvmlDeviceGetMigMode", handle)
    if is_unavailable(mode):
        return mode
    out: dict[str, Any] = {"current": _enabled(mode[0]), "pending": _enabled(mode[1]), "devices": []}
    if mode[0]:
        count = nv.query("nvmlDeviceGetMaxMigDeviceCount", handle)
        for i in range(count if isinstance(count, int) else 0):
            try:
                mig = nv.call("nvmlDeviceGetMigDeviceHandleByIndex", handle, i)
            except nv.NvmlFailure:
                continue  # slot not populated
            mem = nv.query("nvmlDeviceGetMemoryInfo", mig)
            out["devices"].append({
                "index": i,
                "uuid": nv.query("nvmlDeviceGetUUID", mig),
                "name": nv.query("nvmlDeviceGetName", mig),
                "memory_total_bytes": mem if is_unavailable(mem) else mem.total,
            })
    return out


def _clock_events(handle: Any) -> Any:
    mask = nv.query("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if is_unavailable(mask) and mask["unavailable"] == "function_not_found":
        mask = nv.query("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    if is_unavailable(mask):
        return mask
    active = [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_BITS)
    if unknown:
        active.append(f"other_0x{unknown:x}")
    return {"mask": mask, "active": active}


def _ecc(handle: Any) -> Any:
    mode = nv.query("nvmlDeviceGetEccMode", handle)
    if is_unavailable(mode):
        return mode
    out = {"current": _enabled(mode[0]), "pending": _enabled(mode[1])}
    uncorrected = nv.constant("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    out["uncorrected_volatile"] = nv.query("nvmlDeviceGetTotalEccErrors", handle, uncorrected, 0)
    out["uncorrected_aggregate"] = nv.query("nvmlDeviceGetTotalEccErrors", handle, uncorrected, 1)
    return out


def _retired_pages(handle: Any) -> Any:
    pending = nv.query("nvmlDeviceGetRetiredPagesPendingStatus", handle, convert=bool)
    if is_unavailable(pending):
        return pending
    return {
        "pending": pending,
        "single_bit_count": nv.query("nvmlDeviceGetRetiredPages", handle, 0, convert=len),
        "double_bit_count": nv.query("nvmlDeviceGetRetiredPages", handle, 1, convert=len),
    }


def _processes(handle: Any) -> Any:
    """Processes holding memory; in a container's PID namespace the list is often empty or nameless."""
    procs: list[dict[str, Any]] = []
    for kind, name in (("compute", "nvmlDeviceGetComputeRunningProcesses"), ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
        found = nv.query(name, handle)
        if is_unavailable(found):
            if kind == "compute":
                return found
            continue
        for p in found:
            used = getattr(p, "usedGpuMemory", None)
            procs.append({
                "pid": p.pid,
                "type": kind,
                "used_memory_bytes": used if isinstance(used, int) else unavailable("not_supported"),
                "name": _process_name(p.pid),
            })
    return procs


def _process_name(pid: int) -> Any:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return unavailable("not_found")  # another PID namespace, or it already exited


def _nvlinks(handle: Any) -> Any:
    links = []
    for link in range(MAX_NVLINKS):
        state = nv.query("nvmlDeviceGetNvLinkState", handle, link)
        if is_unavailable(state):
            if state["unavailable"] in ("not_supported", "nvml_error_2") or link > 0:
                continue  # this GPU has no such link
            return state
        entry: dict[str, Any] = {"link": link, "active": bool(state)}
        if state:
            remote = nv.query("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            entry["remote_bus_id"] = remote if is_unavailable(remote) else _text(remote.busId)
            entry["remote_type"] = nv.query(
                "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link,
                convert=lambda v: NVLINK_REMOTE_TYPES.get(v, "unknown"))
        links.append(entry)
    if not links:
        return unavailable("not_supported")
    return {"links": links, "active_count": sum(1 for e in links if e["active"]), "count": len(links)}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_topology(handles: dict[int, Any]) -> list[dict[str, Any]]:
    """``nvidia-smi topo -m`` (path between each pair) and ``nvidia-smi topo -p2p rwnap`` (P2P status),
    every pair at once (at_once): 28 pairs of six getters on eight GPUs."""
    indices = sorted(handles)
    pairs = [(a, b) for pos, a in enumerate(indices) for b in indices[pos + 1:]]
    return list(at_once(lambda pair: _pair(handles, *pair), pairs, lambda pair: "topology"))


def _pair(handles: dict[int, Any], a: int, b: int) -> dict[str, Any]:
    ha, hb = handles[a], handles[b]
    p2p: dict[str, Any] = {}
    for cap, cap_index in P2P_CAPS.items():
        p2p[cap] = nv.query("nvmlDeviceGetP2PStatus", ha, hb, cap_index, convert=lambda v: P2P_STATUSES.get(v, str(v)))
    return {
        "gpus": [a, b],
        "common_ancestor": nv.query("nvmlDeviceGetTopologyCommonAncestor", ha, hb,
                                    convert=lambda v: TOPOLOGY_LEVELS.get(v, str(v))),
        "p2p": p2p,
    }


if __name__ == "__main__":
    from gpudoctor.procs.ending import end_child

    end_child(main(sys.argv[1:]))  # the parent reads the end without waiting for the process's teardown (~60 ms on an H100)
