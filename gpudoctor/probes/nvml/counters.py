"""One GPU's error counters and fabric state, read through NVML getters only; nothing is reset.

Command-line equivalents: ``nvidia-smi nvlink -e`` (NVLink error counters per link; their sums over the
links are what is read here, or the per-link counts where the driver keeps no sums), ``nvidia-smi -q -d
PCIE`` ("Replays Since Reset"), the "Fabric" block of ``nvidia-smi -q`` and ``nvidia-smi -q -d
PERFORMANCE`` ("Clocks Event Reasons Counters": time with clocks held down, per cause).

The counters accumulate from the driver's load, so the host's uptime is kept beside them: it is the
longest window they can cover. Every reading is a value or ``{"unavailable": reason}``; a counter that
could not be read is never a 0.
"""

from __future__ import annotations

import time
from typing import Any

from gpudoctor.nvlink_totals import UNREAD_IN_QUICK
from gpudoctor.probes import boot_clock
from gpudoctor.probes.nvml import _binding as nv
from gpudoctor.snapshot import is_unavailable, unavailable

#: The field ids (nvml.h NVML_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL) of the NVLink error counts summed over all
#: links: our name -> (pynvml constant, its value in nvml.h). The totals are what DCGM's health watch judges,
#: and one field-values call reads them where nvmlDeviceGetNvLinkErrorCounter takes a call per link and kind.
NVLINK_TOTAL_FIELDS = {
    "replay": ("NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 52),
    "recovery": ("NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 59),
    "crc_flit": ("NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 38),
    "crc_data": ("NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 45),
}
#: The NVLink error counter enum of nvml.h (NVML_NVLINK_ERROR_DL_*), for nvmlDeviceGetNvLinkErrorCounter: what
#: a driver that keeps no totals (580 on H200) gives instead, one call per link and kind.
NVLINK_COUNTERS = {
    "replay": ("NVML_NVLINK_ERROR_DL_REPLAY", 0),
    "recovery": ("NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    "crc_flit": ("NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    "crc_data": ("NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
}
#: Reasons a per-link counter failed that hold for every link of the GPU: after the first, asking again only costs time.
_EVERY_LINK = ("not_supported", "function_not_found", "no_permission", "gpu_lost", "bindings_mismatch", "bindings_missing")
#: Reasons the totals were not read that the per-link getter would meet as well.
_NOT_PER_LINK = ("no_permission", "gpu_lost")
#: nvml.h NVML_FI_DEV_PCIE_REPLAY_COUNTER: the value nvmlDeviceGetPcieReplayCounter returns.
PCIE_REPLAY_FIELD = ("NVML_FI_DEV_PCIE_REPLAY_COUNTER", 94)
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


def read_counters(handle: Any, nvlink: Any, quick: bool = False) -> dict[str, Any]:
    """The counters of the GPU behind ``handle``; ``nvlink`` is its link facts (a GPU without NVLink has no
    NVLink totals to read). Every counter comes from one nvmlDeviceGetFieldValues call: the driver serves
    calls one at a time, and a call per link and kind would be 72 calls per GPU on an H100. Where the driver
    keeps no NVLink totals, the full check reads the active links one by one; ``quick`` leaves them unread
    and says so in ``nvlink_errors_unread``."""
    has_nvlink = not is_unavailable(nvlink)
    fields = {**(NVLINK_TOTAL_FIELDS if has_nvlink else {}), "pcie_replay": PCIE_REPLAY_FIELD, **CLOCK_EVENT_FIELDS}
    read = _field_values(handle, fields)
    nvlink_errors = _whole_gpu_of({name: read[name] for name in NVLINK_TOTAL_FIELDS}) if has_nvlink else nvlink
    links = _active_links(nvlink) if has_nvlink and _no_totals(read) else []
    if links and not quick:
        nvlink_errors = _per_link(handle, links)
    out = {
        "uptime_s": _uptime_s(),
        "pcie_replay": _pcie_replay(handle, read["pcie_replay"]),
        "nvlink_errors": nvlink_errors,
        "violation_ns": _whole_gpu_of({name: read[name] for name in CLOCK_EVENT_FIELDS}),
    }
    if links and quick:
        out["nvlink_errors_unread"] = UNREAD_IN_QUICK
    return out


def _no_totals(read: dict[str, Any]) -> bool:
    """No NVLink total was read, for a reason the per-link getter need not share: the driver lacks the
    fields (NOT_SUPPORTED on H200 with driver 580) or the field-values call."""
    totals = [read[name] for name in NVLINK_TOTAL_FIELDS]
    return all(is_unavailable(v) and v["unavailable"] not in _NOT_PER_LINK for v in totals)


def _active_links(nvlink: Any) -> list[int]:
    return [e["link"] for e in nvlink.get("links", []) if isinstance(e, dict) and e.get("active") is True]


def _per_link(handle: Any, links: list[int]) -> Any:
    """``[{"link", "replay", "recovery", "crc_flit", "crc_data"}]`` for each active link, the shape
    nvlink_totals sums. A counter the GPU says it lacks on one link is not asked on the next; where no
    counter was read on any link, the GPU's one absent fact, as a single getter's failure would be."""
    lacking: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for link in links:
        entry: dict[str, Any] = {"link": link}
        for name, (constant, default) in NVLINK_COUNTERS.items():
            value = lacking.get(name) or nv.query("nvmlDeviceGetNvLinkErrorCounter", handle, link,
                                                  nv.constant(constant, default))
            if is_unavailable(value) and value["unavailable"] in _EVERY_LINK:
                lacking[name] = value
            entry[name] = value
        out.append(entry)
    if len(lacking) == len(NVLINK_COUNTERS) and all(is_unavailable(e[k]) for e in out for k in NVLINK_COUNTERS):
        return _whole_gpu_of(lacking)
    return out


def _field_values(handle: Any, fields: dict[str, tuple[str, int]]) -> dict[str, Any]:
    """Our name -> the field's value or absent fact; a failed call makes every field absent with its reason."""
    ids = [nv.constant(name, default) for name, default in fields.values()]
    try:
        values = nv.call("nvmlDeviceGetFieldValues", handle, ids)
    except nv.NvmlFailure as exc:
        return {name: unavailable(exc.reason) for name in fields}
    return {name: _field(value) for name, value in zip(fields, values)}


def _pcie_replay(handle: Any, value: Any) -> Any:
    """The field's value; a driver whose field-values call lacks the field is asked with the getter."""
    if is_unavailable(value) and value["unavailable"] not in ("gpu_lost", "no_permission"):
        return nv.query("nvmlDeviceGetPcieReplayCounter", handle)
    return value


def _whole_gpu_of(values: Any) -> Any:
    """A set of fields that all failed for one reason (the call failed, or the GPU keeps none of them) is
    that one absent fact, as a single getter's failure would be."""
    if not isinstance(values, dict) or is_unavailable(values) or not values:
        return values
    if not all(is_unavailable(v) for v in values.values()):
        return values
    reasons = {str(v["unavailable"]) for v in values.values()}
    return unavailable(reasons.pop()) if len(reasons) == 1 else values


def _uptime_s() -> Any:
    """The longer of /proc/uptime and the time since /proc/stat's boot time: a container whose /proc is
    virtualised (lxcfs) may show its own start in one of them, and a window too short would overstate
    every rate computed over it."""
    uptime, boot = boot_clock.uptime_s(), boot_clock.boot_time()
    seen = [s for s in (uptime, time.time() - boot if boot else None) if s is not None]
    return round(max(seen), 1) if seen else unavailable("not_found")


def _field(value: Any) -> Any:
    status = int(getattr(value, "nvmlReturn", 0))
    if status:
        return unavailable(nv.reason_for_code(status))
    member = _VALUE_MEMBERS.get(int(getattr(value, "valueType", -1)))
    number = getattr(value.value, member, None) if member else None
    return int(number) if isinstance(number, (int, float)) else unavailable("unknown")


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
