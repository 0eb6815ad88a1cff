"""The only module that imports pynvml (nvidia-ml-py).

Every NVML call goes through :func:`call`, which refuses any name outside ``GETTERS``: gpudoctor
never changes GPU state (no setters, resets, clocks, power limits, persistence or compute-mode
changes), and a test reads this allow-list to prove it. NVML errors become reasons here and
nowhere else, so the rest of the code never sees a pynvml exception.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

GETTERS = frozenset(
    {
        "nvmlInit",
        "nvmlDeviceGetHandleByUUID",
        "nvmlShutdown",
        "nvmlErrorString",
        "nvmlSystemGetDriverVersion",
        "nvmlSystemGetNVMLVersion",
        "nvmlSystemGetCudaDriverVersion",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetSerial",
        "nvmlDeviceGetPciInfo",
        "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetCudaComputeCapability",
        "nvmlDeviceGetArchitecture",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetPersistenceMode",
        "nvmlDeviceGetComputeMode",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMaxMigDeviceCount",
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceIsMigDeviceHandle",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetGpuMaxPcieLinkGeneration",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetTemperatureThreshold",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetRetiredPages",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetNvLinkState",
        "nvmlDeviceGetNvLinkRemotePciInfo",
        "nvmlDeviceGetNvLinkRemoteDeviceType",
        "nvmlDeviceGetTopologyCommonAncestor",
        "nvmlDeviceGetP2PStatus",
        "nvmlDeviceGetMinorNumber",
        "nvmlDeviceGetCpuAffinity",
        "nvmlDeviceGetMemoryAffinity",
        "nvmlDeviceGetBoardPartNumber",
        "nvmlDeviceGetVbiosVersion",
        "nvmlDeviceGetPcieReplayCounter",
        "nvmlDeviceGetNvLinkErrorCounter",
        "nvmlDeviceGetGpuFabricInfo",
        "nvmlDeviceGetGpuFabricInfoV",
        "nvmlDeviceGetFieldValues",
    }
)

_REASONS_BY_CODE = {
    1: "uninitialized",
    3: "not_supported",
    4: "no_permission",
    8: "insufficient_power",
    9: "driver_not_loaded",
    10: "timeout",
    12: "library_not_found",
    13: "function_not_found",
    15: "gpu_lost",
    16: "reset_required",
    17: "operating_system",
    18: "driver_library_mismatch",
    28: "gpu_not_found",
    999: "unknown",
}

try:  # nvidia-ml-py is a dependency, but a broken install must still give a report
    import pynvml as _pynvml
except Exception as exc:  # noqa: BLE001 - anything at import is "bindings unusable"
    _pynvml = None
    IMPORT_ERROR: str | None = f"{type(exc).__name__}: {exc}"
else:
    IMPORT_ERROR = None

#: Function names the installed bindings or driver lacked, collected as they are met.
missing_functions: set[str] = set()


class NvmlFailure(Exception):
    """An NVML call failed; ``reason`` is one of the snapshot's reasons."""

    def __init__(self, reason: str, code: int | None, message: str):
        super().__init__(message)
        self.reason, self.code, self.message = reason, code, message


def reason_for_code(code: int) -> str:
    return _REASONS_BY_CODE.get(code, f"nvml_error_{code}")


def module_file() -> str | None:
    return getattr(_pynvml, "__file__", None)


def constant(name: str, default: Any = None) -> Any:
    return getattr(_pynvml, name, default)


def call(name: str, *args: Any) -> Any:
    """Call one allow-listed NVML getter; raise :class:`NvmlFailure` on any NVML error."""
    if name not in GETTERS:
        raise PermissionError(f"{name} is not an allow-listed NVML getter")
    if _pynvml is None:
        raise NvmlFailure("bindings_missing", None, IMPORT_ERROR or "pynvml not importable")
    fn: Callable[..., Any] | None = getattr(_pynvml, name, None)
    if fn is None:
        missing_functions.add(name)
        raise NvmlFailure("function_not_found", 13, f"{name} is not in this nvidia-ml-py")
    try:
        return _decode(fn(*args))
    except _pynvml.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code == 13:
            missing_functions.add(name)
        return _raise(code, exc)
    except (AttributeError, getattr(_pynvml, "NVMLLibraryMismatchError", AttributeError)) as exc:
        # the bindings are newer than this driver's libnvidia-ml
        missing_functions.add(name)
        raise NvmlFailure("function_not_found", 13, str(exc)) from exc
    except TypeError as exc:
        # this nvidia-ml-py wraps the function with another signature (one that fills a struct, say)
        raise NvmlFailure("bindings_mismatch", None, f"{name}: {exc}") from exc


def fill(name: str, handle: Any, struct_name: str) -> Any:
    """Call a getter that writes into a struct passed by reference (nvmlDeviceGetGpuFabricInfoV) and return
    the struct: these wrappers return only NVML_SUCCESS, and a struct passed by value is never written."""
    cls = constant(struct_name)
    if cls is None:
        raise NvmlFailure("function_not_found", 13, f"{struct_name} is not in this nvidia-ml-py")
    struct = cls()
    call(name, handle, ctypes.byref(struct))
    return struct


def _raise(code: int | None, exc: Exception) -> Any:
    reason = reason_for_code(code) if isinstance(code, int) else "unknown"
    raise NvmlFailure(reason, code, str(exc)) from exc


def query(name: str, *args: Any, convert: Callable[[Any], Any] | None = None) -> Any:
    """The value of one getter, or ``{"unavailable": reason}``: the form the snapshot stores."""
    try:
        value = call(name, *args)
    except NvmlFailure as exc:
        return {"unavailable": exc.reason}
    return convert(value) if convert else value


def _decode(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value
