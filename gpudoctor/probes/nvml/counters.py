"""One GPU's error counters and fabric state, read through NVML getters only; nothing is reset.

Command-line equivalents: ``nvidia-smi nvlink -e`` (NVLink error counters per link), ``nvidia-smi -q -d
PCIE`` ("Replays Since Reset"), the "Fabric" block of ``nvidia-smi -q`` and ``nvidia-smi -q -d
PERFORMANCE`` (time spent with clocks held down, per cause).

The counters accumulate from the driver's load, so the host's uptime is kept beside them: it is the
longest window they can cover. Every reading is a value or ``{"unavailable": reason}``; a counter that
could not be read is never a 0.
"""

from __future__ import annotations

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
#: The performance policy enum of nvml.h: the causes nvmlDeviceGetViolationStatus keeps time for.
VIOLATION_POLICIES = {"power": 0, "thermal": 1, "sync_boost": 2, "board_limit": 3, "low_utilization": 4, "reliability": 5}
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
        "violation_ns": _violations(handle),
    }


def _uptime_s() -> Any:
    try:
        with open("/proc/uptime") as fh:
            return round(float(fh.read().split()[0]), 1)
    except (OSError, ValueError, IndexError):
        return unavailable("not_found")


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


def _violations(handle: Any) -> Any:
    out: dict[str, Any] = {}
    for name, policy in VIOLATION_POLICIES.items():
        value = nv.query("nvmlDeviceGetViolationStatus", handle, nv.constant(f"NVML_PERF_POLICY_{name.upper()}", policy),
                         convert=lambda v: int(v.violationTime))
        whole = _whole_gpu(value)
        if whole and not out and whole["unavailable"] != "not_supported":
            return whole  # a missing function or no permission holds for every cause
        out[name] = value
    return out


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
