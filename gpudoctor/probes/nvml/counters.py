"""One GPU's error counters and fabric state, read through NVML getters only; nothing is reset.

Command-line equivalents: ``nvidia-smi nvlink -e`` (NVLink error counters per link), ``nvidia-smi -q -d
PCIE`` ("Replays Since Reset"), the "Fabric" block of ``nvidia-smi -q`` and ``nvidia-smi -q -d
PERFORMANCE`` ("Clocks Event Reasons Counters": time with clocks held down, per cause).

The counters accumulate from the driver's load, so the host's uptime is kept beside them: it is the
longest window they can cover. Every reading is a value or ``{"unavailable": reason}``; a counter that
could not be read is never a 0.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from gpudoctor.probes.nvml import _binding as nv
from gpudoctor.snapshot import is_unavailable, unavailable

#: The NVLink error counter enum of nvml.h: our name -> (pynvml constant, its value in nvml.h).
NVLINK_COUNTERS = {
    "replay": ("NVML_NVLINK_ERROR_DL_REPLAY", 0),
    "recovery": ("NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    "crc_flit": ("NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    "crc_data": ("NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
}
#: The field ids (nvml.h NVML_FI_DEV_CLOCKS_EVENT_REASON_*) of the time, in ns, that clocks were held down per
#: cause since the driver loaded: what ``nvidia-smi -q -d PERFORMANCE`` prints as "Clocks Event Reasons Counters".
#: Named as clock_event_reasons names the causes; stored as ``violation_ns``, NVML's word for this time.
CLOCK_EVENT_FIELDS = {
    "sw_power_cap": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP", 74),
    "sync_boost": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST", 76),
    "sw_thermal_slowdown": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN", 269),
    "hw_thermal_slowdown": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN", 270),
    "hw_power_brake_slowdown": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN", 271),
}
#: The value type enum of nvml.h -> the member of the value union that holds it.
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
FABRIC_SUMMARIES = {0: "not_supported", 1: "healthy", 2: "unhealthy", 3: "limited_capacity"}
#: Reasons that hold for every link or cause of the GPU: after the first, asking again only costs time.
_WHOLE_GPU = ("not_supported", "function_not_found", "no_permission", "gpu_lost", "bindings_mismatch", "bindings_missing")


def read_counters(handle: Any, nvlink: Any) -> dict[str, Any]:
    """The counters of the GPU behind ``handle``; ``nvlink`` is its link facts (only active links are read)."""
    return {
        "uptime_s": _uptime_s(),
        "pcie_replay": nv.query("nvmlDeviceGetPcieReplayCounter", handle),
        "nvlink_errors": _nvlink_errors(handle, nvlink),
        "violation_ns": _clock_event_times(handle),
    }


def _uptime_s() -> Any:
    """The longer of /proc/uptime and the time since /proc/stat's boot time: a container whose /proc is
    virtualised (lxcfs) may show its own start in one of them, and a window too short would overstate
    every rate computed over it."""
    seen = []
    try:
        with open("/proc/uptime") as fh:
            seen.append(float(fh.read().split()[0]))
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/proc/stat") as fh:
            boot = next((float(line.split()[1]) for line in fh if line.startswith("btime ")), None)
        if boot:
            seen.append(time.time() - boot)
    except (OSError, ValueError, IndexError):
        pass
    return round(max(seen), 1) if seen else unavailable("not_found")


def _nvlink_errors(handle: Any, nvlink: Any) -> Any:
    """``[{"link", "replay", "recovery", "crc_flit", "crc_data"}]`` for each active link (18 on an H100: 72 calls)."""
    if is_unavailable(nvlink):
        return nvlink
    active = [e["link"] for e in nvlink.get("links", []) if e.get("active")]
    out: list[dict[str, Any]] = []
    for link in active:
        entry: dict[str, Any] = {"link": link}
        for name, (constant, default) in NVLINK_COUNTERS.items():
            value = nv.query("nvmlDeviceGetNvLinkErrorCounter", handle, link, nv.constant(constant, default))
            whole = _whole_gpu(value)
            if whole and not out and len(entry) == 1:
                return whole  # the first call says this GPU keeps no such counter
            entry[name] = value
        out.append(entry)
    return out


def _clock_event_times(handle: Any) -> Any:
    """All five causes in one nvmlDeviceGetFieldValues call; each field carries its own status."""
    ids = [nv.constant(name, default) for name, default in CLOCK_EVENT_FIELDS.values()]
    try:
        values = nv.call("nvmlDeviceGetFieldValues", handle, ids)
    except nv.NvmlFailure as exc:
        return unavailable(exc.reason)
    return {name: _field(value) for name, value in zip(CLOCK_EVENT_FIELDS, values)}


def _field(value: Any) -> Any:
    status = int(getattr(value, "nvmlReturn", 0))
    if status:
        return unavailable(nv.reason_for_code(status))
    member = _VALUE_MEMBERS.get(int(getattr(value, "valueType", -1)))
    number = getattr(value.value, member, None) if member else None
    return int(number) if isinstance(number, (int, float)) else unavailable("unknown")


def _whole_gpu(value: Any) -> Optional[dict[str, Any]]:
    return value if is_unavailable(value) and value["unavailable"] in _WHOLE_GPU else None


def read_fabric(handle: Any) -> Any:
    """The GPU's registration with an NVSwitch fabric: ``{"state", "status", "health_summary", "api"}``.
    NOT_SUPPORTED (a GPU on no fabric, on the call or in the state) is a fact like any other, judged quiet.
    nvmlDeviceGetGpuFabricInfoV (driver 550 on) is tried with the newest struct first; the versionless
    call is the fallback for older drivers."""
    for struct_name in ("c_nvmlGpuFabricInfo_v3_t", "c_nvmlGpuFabricInfo_v2_t"):
        try:
            info = nv.fill("nvmlDeviceGetGpuFabricInfoV", handle, struct_name)
        except nv.NvmlFailure as exc:
            if exc.reason in ("function_not_found", "bindings_mismatch"):
                nv.missing_functions.discard("nvmlDeviceGetGpuFabricInfoV")  # the older call below reads the same
                break
            if exc.code == 25:  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH: an older driver; try the older struct
                continue
            return unavailable(exc.reason)
        return _fabric(info, "v3" if struct_name.endswith("v3_t") else "v2")
    try:
        return _fabric(nv.fill("nvmlDeviceGetGpuFabricInfo", handle, "c_nvmlGpuFabricInfo_t"), "v1")
    except nv.NvmlFailure as exc:
        return unavailable(exc.reason)


def _fabric(info: Any, api: str) -> dict[str, Any]:
    status = int(getattr(info, "status", 0))
    out: dict[str, Any] = {
        "state": FABRIC_STATES.get(int(info.state), f"unknown_{int(info.state)}"),
        "status": "success" if status == 0 else nv.reason_for_code(status),
        "api": api,
    }
    if hasattr(info, "healthSummary"):
        out["health_summary"] = FABRIC_SUMMARIES.get(int(info.healthSummary), f"unknown_{int(info.healthSummary)}")
    return out
