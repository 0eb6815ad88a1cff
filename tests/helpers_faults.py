"""Shared helpers for fault-injection tests: a fake ``pynvml`` for the NVML worker child process.

The fake is written into a temporary directory that the test puts on PYTHONPATH; the worker
child (started through procs/child.py, whose child_env() keeps PYTHONPATH after the package
root) then imports it instead of the real nvidia-ml-py. One fake serves every case; its faults
are chosen by environment variables read when the child imports it:

FAKE_NVML_IMPORT_ERROR=text       raise ImportError(text) at import
FAKE_NVML_FAIL=spec[,spec...]     spec is NAME[@GPU]:CODE; the call raises NVMLError(CODE),
                                  or AttributeError when CODE is "attr". NAME "*" means every
                                  per-device query (every function given a device handle).
FAKE_NVML_HANG=NAME[@GPU][,...]   the call blocks forever (time.sleep)
FAKE_NVML_MISSING=NAME[,NAME...]  the function is absent from the module (older bindings)

Without faults it models two H100 SXM5 80GB GPUs on driver 580.95.05 (CUDA 13.0), each with 18
active NVLinks to NVSwitches, as ``nvidia-smi -q`` reports such a machine when idle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional

from gpudoctor.probes.system import ENV_NAMES

FAKE_PYNVML = r'''
"""Fake nvidia-ml-py for gpudoctor tests (see tests/helpers_faults.py)."""
import os
import time

if os.environ.get("FAKE_NVML_IMPORT_ERROR"):
    raise ImportError(os.environ["FAKE_NVML_IMPORT_ERROR"])

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
nvmlMemory_v2 = 0x02000028

_MESSAGES = {
    1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
    9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 13: "Function Not Found",
    15: "GPU is lost", 18: "RM has detected an NVML/RM version mismatch.", 999: "Unknown Error",
}


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return _MESSAGES.get(self.value, "Unknown Error %d" % self.value)


class NVMLLibraryMismatchError(Exception):
    pass


class _Struct:
    def __init__(self, **fields):
        self.__dict__.update(fields)


class _Handle:
    def __init__(self, index):
        self.index = index


def _specs(var):
    out = []
    for item in os.environ.get(var, "").split(","):
        item = item.strip()
        if not item:
            continue
        name, _, code = item.partition(":")
        name, _, gpu = name.partition("@")
        out.append((name, int(gpu) if gpu else None, code))
    return out


_FAILS = _specs("FAKE_NVML_FAIL")
_HANGS = _specs("FAKE_NVML_HANG")
_STATE = {"initialized": False}

MIB = 1024 * 1024
_GPUS = [
    {
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5c1b2f0e-8d4a-4c36-9a7e-1f2d3c4b5a60",
        "serial": "1654922000101", "bus_id": b"00000000:19:00.0", "minor": 0,
    },
    {
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-a7e9d3c2-41b6-4f0a-8c5d-9e8f7a6b5c41",
        "serial": "1654922000102", "bus_id": b"00000000:3B:00.0", "minor": 1,
    },
]


def _hit(spec_name, spec_gpu, name, gpu, per_device):
    if spec_name != name and not (spec_name == "*" and per_device):
        return False
    return spec_gpu is None or spec_gpu == gpu


def _enter(name, handle=None, gpu=None):
    """Apply the configured faults to one call; device calls also need nvmlInit first.

    A call is a per-device query (matched by "*") when it is given a device handle.
    """
    per_device = isinstance(handle, _Handle)
    if per_device:
        gpu = handle.index
    for spec_name, spec_gpu, _ in _HANGS:
        if _hit(spec_name, spec_gpu, name, gpu, per_device):
            while True:
                time.sleep(3600)
    for spec_name, spec_gpu, code in _FAILS:
        if _hit(spec_name, spec_gpu, name, gpu, per_device):
            if code == "attr":
                raise AttributeError("function %s not found" % name)
            raise NVMLError(int(code))
    if name != "nvmlInit" and not _STATE["initialized"]:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)


def _gpu(handle):
    return _GPUS[handle.index]


def nvmlInit():
    _enter("nvmlInit")
    _STATE["initialized"] = True


def nvmlShutdown():
    _enter("nvmlShutdown")
    _STATE["initialized"] = False


def nvmlErrorString(code):
    return _MESSAGES.get(code, "Unknown Error")


def nvmlSystemGetDriverVersion():
    _enter("nvmlSystemGetDriverVersion")
    return "580.95.05"


def nvmlSystemGetNVMLVersion():
    _enter("nvmlSystemGetNVMLVersion")
    return "13.580.95.05"


def nvmlSystemGetCudaDriverVersion():
    _enter("nvmlSystemGetCudaDriverVersion")
    return 13000


def nvmlSystemGetCudaDriverVersion_v2():
    _enter("nvmlSystemGetCudaDriverVersion_v2")
    return 13000


def nvmlDeviceGetCount():
    _enter("nvmlDeviceGetCount")
    return len(_GPUS)


def nvmlDeviceGetHandleByIndex(index):
    _enter("nvmlDeviceGetHandleByIndex", gpu=index)
    if not 0 <= index < len(_GPUS):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(index)


def nvmlDeviceGetName(handle):
    _enter("nvmlDeviceGetName", handle)
    return _gpu(handle)["name"]


def nvmlDeviceGetUUID(handle):
    _enter("nvmlDeviceGetUUID", handle)
    return _gpu(handle)["uuid"]


def nvmlDeviceGetSerial(handle):
    _enter("nvmlDeviceGetSerial", handle)
    return _gpu(handle)["serial"]


def nvmlDeviceGetPciInfo(handle):
    _enter("nvmlDeviceGetPciInfo", handle)
    return _Struct(busId=_gpu(handle)["bus_id"], pciDeviceId=0x233010DE, pciSubSystemId=0x16C110DE,
                   domain=0, bus=int(_gpu(handle)["bus_id"][9:11], 16), device=0)


def nvmlDeviceGetCpuAffinity(handle, cpuSetSize):
    _enter("nvmlDeviceGetCpuAffinity", handle)
    return [0xFFFFFFFF] + [0] * (cpuSetSize - 1)


def nvmlDeviceGetMemoryAffinity(handle, nodeSetSize, scope):
    _enter("nvmlDeviceGetMemoryAffinity", handle)
    return [0x1] + [0] * (nodeSetSize - 1)


def nvmlDeviceGetMinorNumber(handle):
    _enter("nvmlDeviceGetMinorNumber", handle)
    return _gpu(handle)["minor"]


def nvmlDeviceGetCudaComputeCapability(handle):
    _enter("nvmlDeviceGetCudaComputeCapability", handle)
    return (9, 0)


def nvmlDeviceGetArchitecture(handle):
    _enter("nvmlDeviceGetArchitecture", handle)
    return 9  # NVML_DEVICE_ARCH_HOPPER


def nvmlDeviceGetVbiosVersion(handle):
    _enter("nvmlDeviceGetVbiosVersion", handle)
    return "96.00.99.00.01"


def nvmlDeviceGetBoardPartNumber(handle):
    _enter("nvmlDeviceGetBoardPartNumber", handle)
    return "692-2G520-0200-000"


def nvmlDeviceGetMemoryInfo(handle, version=None):
    _enter("nvmlDeviceGetMemoryInfo", handle)
    total, reserved, used = 81559 * MIB, 551 * MIB, 1 * MIB
    if version == nvmlMemory_v2:
        return _Struct(version=version, total=total, reserved=reserved, used=used, free=total - reserved - used)
    return _Struct(total=total, used=used + reserved, free=total - reserved - used)


def nvmlDeviceGetPersistenceMode(handle):
    _enter("nvmlDeviceGetPersistenceMode", handle)
    return 1


def nvmlDeviceGetComputeMode(handle):
    _enter("nvmlDeviceGetComputeMode", handle)
    return 0


def nvmlDeviceGetMigMode(handle):
    _enter("nvmlDeviceGetMigMode", handle)
    return [0, 0]


def nvmlDeviceGetMaxMigDeviceCount(handle):
    _enter("nvmlDeviceGetMaxMigDeviceCount", handle)
    return 7


def nvmlDeviceGetMigDeviceHandleByIndex(handle, index):
    _enter("nvmlDeviceGetMigDeviceHandleByIndex", handle)
    raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)


def nvmlDeviceGetCurrPcieLinkGeneration(handle):
    _enter("nvmlDeviceGetCurrPcieLinkGeneration", handle)
    return 5


def nvmlDeviceGetMaxPcieLinkGeneration(handle):
    _enter("nvmlDeviceGetMaxPcieLinkGeneration", handle)
    return 5


def nvmlDeviceGetGpuMaxPcieLinkGeneration(handle):
    _enter("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle)
    return 5


def nvmlDeviceGetCurrPcieLinkWidth(handle):
    _enter("nvmlDeviceGetCurrPcieLinkWidth", handle)
    return 16


def nvmlDeviceGetMaxPcieLinkWidth(handle):
    _enter("nvmlDeviceGetMaxPcieLinkWidth", handle)
    return 16


def nvmlDeviceGetTemperature(handle, sensor):
    _enter("nvmlDeviceGetTemperature", handle)
    return 33 + handle.index


def nvmlDeviceGetTemperatureThreshold(handle, threshold):
    _enter("nvmlDeviceGetTemperatureThreshold", handle)
    return {0: 92, 1: 87}.get(threshold, 85)  # shutdown, slowdown


def nvmlDeviceGetPowerUsage(handle):
    _enter("nvmlDeviceGetPowerUsage", handle)
    return 71250


def nvmlDeviceGetEnforcedPowerLimit(handle):
    _enter("nvmlDeviceGetEnforcedPowerLimit", handle)
    return 700000


def nvmlDeviceGetUtilizationRates(handle):
    _enter("nvmlDeviceGetUtilizationRates", handle)
    return _Struct(gpu=0, memory=0)


def nvmlDeviceGetCurrentClocksEventReasons(handle):
    _enter("nvmlDeviceGetCurrentClocksEventReasons", handle)
    return 0x1  # GPU idle


def nvmlDeviceGetCurrentClocksThrottleReasons(handle):
    _enter("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    return 0x1


def nvmlDeviceGetEccMode(handle):
    _enter("nvmlDeviceGetEccMode", handle)
    return [1, 1]


def nvmlDeviceGetTotalEccErrors(handle, errorType, counterType):
    _enter("nvmlDeviceGetTotalEccErrors", handle)
    return 0


def nvmlDeviceGetRetiredPagesPendingStatus(handle):
    _enter("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # Hopper remaps rows instead of retiring pages


def nvmlDeviceGetRetiredPages(handle, sourceFilter):
    _enter("nvmlDeviceGetRetiredPages", handle)
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)


def nvmlDeviceGetRemappedRows(handle):
    _enter("nvmlDeviceGetRemappedRows", handle)
    return (0, 0, 0, 0)


def nvmlDeviceGetComputeRunningProcesses(handle):
    _enter("nvmlDeviceGetComputeRunningProcesses", handle)
    return []


def nvmlDeviceGetGraphicsRunningProcesses(handle):
    _enter("nvmlDeviceGetGraphicsRunningProcesses", handle)
    return []


def nvmlDeviceGetNvLinkState(handle, link):
    _enter("nvmlDeviceGetNvLinkState", handle)
    if link >= 18:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return 1


def nvmlDeviceGetNvLinkRemotePciInfo(handle, link):
    _enter("nvmlDeviceGetNvLinkRemotePciInfo", handle)
    return _Struct(busId=b"00000000:%02X:00.0" % (0x05 + link % 4))


def nvmlDeviceGetNvLinkRemoteDeviceType(handle, link):
    _enter("nvmlDeviceGetNvLinkRemoteDeviceType", handle)
    return 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH


def nvmlDeviceGetTopologyCommonAncestor(handle1, handle2):
    _enter("nvmlDeviceGetTopologyCommonAncestor", handle1)
    return 40  # NVML_TOPOLOGY_NODE


def nvmlDeviceGetP2PStatus(handle1, handle2, p2pIndex):
    _enter("nvmlDeviceGetP2PStatus", handle1)
    return 0  # NVML_P2P_STATUS_OK


# Error counters and fabric state with the real bindings' signatures; the values are what a healthy
# 4 x H100 (NVSwitch) read on 2026-11-26: recovery 1-24 per link, every other NVLink counter 0, PCIe replay 0-2.
import ctypes

NVML_NVLINK_ERROR_DL_REPLAY = 0
NVML_NVLINK_ERROR_DL_RECOVERY = 1
NVML_NVLINK_ERROR_DL_CRC_FLIT = 2
NVML_NVLINK_ERROR_DL_CRC_DATA = 3
NVML_GPU_FABRIC_STATE_COMPLETED = 3


class c_nvmlGpuFabricInfo_t(ctypes.Structure):
    _fields_ = [("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_uint), ("cliqueId", ctypes.c_uint32),
                ("state", ctypes.c_uint)]


class c_nvmlGpuFabricInfo_v3_t(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_uint),
                ("cliqueId", ctypes.c_uint32), ("state", ctypes.c_uint), ("healthMask", ctypes.c_uint32),
                ("healthSummary", ctypes.c_uint8)]

    def __init__(self):
        super().__init__(version=0x3000028)


def nvmlDeviceGetPcieReplayCounter(handle):
    _enter("nvmlDeviceGetPcieReplayCounter", handle)
    return handle.index % 3


#: FAKE_NVML_NVLINK=per_link_only: the driver of a 4 x H200 (580.159.04) on 2026-11-27, which keeps no NVLink totals
#: (field ids 38, 45, 52, 59 NOT_SUPPORTED) and whose healthy links count CRC-data errors from boot (1-27 a link).
PER_LINK_ONLY = os.environ.get("FAKE_NVML_NVLINK") == "per_link_only"


def nvmlDeviceGetNvLinkErrorCounter(device, link, counter):
    _enter("nvmlDeviceGetNvLinkErrorCounter", device)
    if PER_LINK_ONLY:
        return (link * 5 + device.index) % 27 + 1 if counter == NVML_NVLINK_ERROR_DL_CRC_DATA else 0
    return (link * 7 + device.index) % 24 + 1 if counter == NVML_NVLINK_ERROR_DL_RECOVERY else 0


def _fill_fabric(gpuFabricInfo):
    info = gpuFabricInfo._obj  # a ctypes.byref() argument, as the real library is given a pointer
    info.state, info.status = NVML_GPU_FABRIC_STATE_COMPLETED, NVML_SUCCESS
    if hasattr(info, "healthSummary"):
        info.healthSummary = 1  # healthy
    return NVML_SUCCESS


def nvmlDeviceGetGpuFabricInfo(device, gpuFabricInfo):
    _enter("nvmlDeviceGetGpuFabricInfo", device)
    return _fill_fabric(gpuFabricInfo)


def nvmlDeviceGetGpuFabricInfoV(device, gpuFabricInfo):
    _enter("nvmlDeviceGetGpuFabricInfoV", device)
    return _fill_fabric(gpuFabricInfo)


#: nvml.h field ids -> the healthy value: the NVLink totals over 18 links (59: recovery, the sum of the per-link
#: counts above; 38, 45, 52: CRC-flit, CRC-data, replay), the PCIe replay counter (94), and the clocks event
#: reasons counters in ns (74: power capping as an idle-then-busy GPU shows it; 269-271: 0).
def _field_value(handle, field):
    if field == 59:
        return sum((link * 7 + handle.index) % 24 + 1 for link in range(18))
    if field == 94:
        return handle.index % 3
    return 1_500_000_000 if field == 74 else 0


def nvmlDeviceGetFieldValues(handle, fieldIds):
    _enter("nvmlDeviceGetFieldValues", handle)
    # sync boost (76) is NOT_SUPPORTED per field, as on a GPU in no sync-boost group
    out = []
    for field in fieldIds:
        if field == 76 or (PER_LINK_ONLY and field in (38, 45, 52, 59)):
            out.append(_Struct(fieldId=field, nvmlReturn=NVML_ERROR_NOT_SUPPORTED, valueType=3, value=_Struct(ullVal=0)))
        else:
            out.append(_Struct(fieldId=field, nvmlReturn=NVML_SUCCESS, valueType=3,
                               value=_Struct(ullVal=_field_value(handle, field))))
    return out


for _name in os.environ.get("FAKE_NVML_MISSING", "").split(","):
    if _name.strip():
        globals().pop(_name.strip(), None)
'''

#: Environment variables that change what the host probe reports about CUDA and containers: the probe's own
#: list (gpudoctor.probes.system.ENV_NAMES), less the library and toolkit paths some tests keep.
HOST_ENV = tuple(n for n in ENV_NAMES if n not in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"))
FAKE_ENV = ("FAKE_NVML_IMPORT_ERROR", "FAKE_NVML_FAIL", "FAKE_NVML_HANG", "FAKE_NVML_MISSING", "FAKE_NVML_NVLINK")


def install_fake_pynvml(tmp_path: Path, monkeypatch: Any, **faults: Optional[str]) -> Path:
    """Write the fake pynvml under tmp_path, put it on PYTHONPATH and set its fault variables.

    ``faults`` keys are the variable names without the FAKE_NVML_ prefix, lower case:
    ``install_fake_pynvml(tmp_path, monkeypatch, fail="nvmlInit:12")``.
    """
    fake_dir = tmp_path / "fake_pynvml"
    fake_dir.mkdir(exist_ok=True)
    (fake_dir / "pynvml.py").write_text(FAKE_PYNVML)
    monkeypatch.setenv("PYTHONPATH", str(fake_dir))
    for name in HOST_ENV + FAKE_ENV:
        monkeypatch.delenv(name, raising=False)
    for key, value in faults.items():
        if value is not None:
            monkeypatch.setenv(f"FAKE_NVML_{key.upper()}", value)
    return fake_dir


def full_facts(nvml_timeout_s: float = 10.0, quick: bool = False) -> dict[str, Any]:
    """This machine's host and driver facts with NVML read through whatever pynvml the child imports;
    ``quick``: as ``check --quick`` reads NVML.

    Runs the real probes through the real runner, so ``facts["probes"]`` is filled in as in a run.
    """
    from gpudoctor.probes.nvml import probe_nvml
    from gpudoctor.probes.system import probe_driver_files, probe_host
    from gpudoctor.run_options import RunOptions
    from gpudoctor.runner import Probe, run_probes

    return run_probes((
        Probe("host", "the host and its environment", lambda target, scope: {"host": probe_host()}, 5.0),
        Probe("driver_files", "the kernel driver and device nodes", lambda target, scope: {"driver": probe_driver_files()}, 5.0),
        Probe("nvml", "the driver and GPUs through NVML", lambda target, scope: probe_nvml(nvml_timeout_s, quick=quick),
              nvml_timeout_s + 5.0),
    ), RunOptions())


def codes(results: Iterable[Any]) -> list[str]:
    """Finding codes of a list of CheckResult, in order."""
    return [f.code for r in results for f in r.findings]


def findings(results: Iterable[Any], code: str) -> list[Any]:
    return [f for r in results for f in r.findings if f.code == code]


def result_of(results: Iterable[Any], check_id: str) -> Any:
    for r in results:
        if r.id == check_id:
            return r
    raise KeyError(check_id)

#: A fake `cupy` whose CUDA runtime is newer than the driver: getDeviceCount raises at CUDA init, as the real one does.
CUPY_ON_OLD_DRIVER = """
    __version__ = "14.2.0"


    class CUDARuntimeError(RuntimeError):
        pass


    class _Runtime:
        @staticmethod
        def runtimeGetVersion():
            return 13020

        @staticmethod
        def driverGetVersion():
            return 12020

        @staticmethod
        def getDeviceCount():
            raise CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")


    class _Cuda:
        runtime = _Runtime()


    cuda = _Cuda()
"""
