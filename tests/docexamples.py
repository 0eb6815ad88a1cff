"""Facts that make each finding code appear: the examples in docs/findings.md, and a test fixture.

``EXAMPLES`` maps every code in the catalogue to a minimal snapshot (the layout of
docs/report-format.md, with only the parts the owning check reads). The doc generator
(tools/docgen.py) runs the owning check on it and prints what the check really reported, so the
documentation cannot drift from the code; tests/test_docs.py runs every check on every example to
prove that each check can emit each code it declares and no code it does not. It lives beside the
tests, not in the package: nothing gpudoctor runs reads it, so the wheel does not carry it.

Each example is meant to make its check emit exactly that code. Where the check always reports
another code beside it, ``COMPANIONS`` says which (VIS004, the GPUs CUDA will see, accompanies
every other finding about a CUDA_VISIBLE_DEVICES that still leaves some GPU visible).

INT003 is not emitted by a check but by the registry, for any check that raises; its example is
``CRASHING_CHECK`` run on ``EXAMPLES["INT003"]``.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from gpudoctor.checks.base import Check, Facts, finding
from gpudoctor.findings import Finding

GIB = 1024**3

_A100 = "NVIDIA A100-SXM4-80GB"
_H100 = "NVIDIA H100 80GB HBM3"
_H200 = "NVIDIA H200"
_L4 = "NVIDIA L4"
_L40S = "NVIDIA L40S"
_UUID = (
    "GPU-3f8c1a52-6d0e-4b7a-9c21-5e4d8f0a7b13",
    "GPU-b2e7d9c4-1a3f-4e68-8d05-7c9a2b6e4f10",
    "GPU-9a41c7e2-58d3-4f16-b0e9-2c7d15a8e364",
)
_BUS = ("00000000:01:00.0", "00000000:41:00.0")


def _nvml(device_count: int = 1, **extra: Any) -> dict[str, Any]:
    """The ``nvml`` section of a driver that started, reduced to what the checks read."""
    return {"init": {"ok": True}, "device_count": device_count, **extra}


def _nvml_failed(reason: str, code: int, message: str) -> dict[str, Any]:
    """The ``nvml`` section when nvmlInit failed."""
    return {"bindings": {"import_error": None}, "init": {"ok": False, "reason": reason, "code": code, "message": message}}


def _gpu(index: int = 0, name: str = _A100, **extra: Any) -> dict[str, Any]:
    """One GPU as the NVML probe records it, reduced to its identity plus ``extra``."""
    return {"index": index, "name": name, "uuid": _UUID[index], **extra}


def _env(**values: str) -> dict[str, Any]:
    return {"env": values}


def _nodes(**overrides: dict[str, bool]) -> dict[str, dict[str, bool]]:
    """Device files of a healthy one-GPU machine, with some replaced (keys: ctl, gpu0, uvm)."""
    ok = {"exists": True, "accessible": True}
    paths = {"ctl": "/dev/nvidiactl", "gpu0": "/dev/nvidia0", "uvm": "/dev/nvidia-uvm"}
    nodes = {path: dict(ok) for path in paths.values()}
    for key, node in overrides.items():
        nodes[paths[key]] = node
    return nodes


def _pci(bus_id: str, driver: Any, device_id: str = "0x20b2") -> dict[str, Any]:
    return {"bus_id": bus_id, "device_id": device_id, "class": "0x030200", "driver": driver}


_NOT_LOADED_MODULE = {"loaded": False, "version": {"unavailable": "not_found"}, "flavour": {"unavailable": "not_found"}}
_LOADED_MODULE = {"loaded": True, "version": "570.133.20", "flavour": "open"}
_NO_CONTAINER = {"detected": False, "markers": []}


def _pair(p2p_read: str, nvlink_count: int, ancestor: str) -> dict[str, Any]:
    return {
        "gpus": [0, 1],
        "common_ancestor": ancestor,
        "p2p": {"read": p2p_read, "write": p2p_read, "nvlink": p2p_read, "atomics": p2p_read, "pci": p2p_read},
        "nvlink_count": nvlink_count,
    }


_VENV = "/opt/venv/lib/python3.12/site-packages"
_TORCH_REFUSAL = ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 19, 0) but found runtime "
                  "version (9, 14, 0). PyTorch already comes bundled with cuDNN. One option to resolving this error is to "
                  "ensure PyTorch can find the bundled cuDNN. one possibility is that there is a conflicting cuDNN in "
                  "LD_LIBRARY_PATH.")


def _torch(status: str = "ok", **info: Any) -> dict[str, Any]:
    """The ``frameworks`` section with PyTorch alone, as the framework probe records it (``info`` reduced to ``info``)."""
    record: dict[str, Any] = {"installed": True, "status": status}
    if status == "ok":
        record["info"] = {"version": "2.11.0+cu130", "built_cuda": "13.0", "cpu_only_build": False, **info}
    else:
        record.update(info)
    return {"torch": record}


def _jax(**info: Any) -> dict[str, Any]:
    """The ``frameworks`` section with JAX alone, as the framework probe records it (``info`` reduced)."""
    return {"jax": {"installed": True, "status": "ok", "info": {"version": "0.11.2", "jaxlib_version": "0.11.2",
                                                                "cpu_only_build": False, **info}}}


_JAX_NO_GPU = ("RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present. "
               "Platforms present are: cpu")


def _lib(family: str, path: str, **extra: Any) -> dict[str, Any]:
    """A library file as the probes describe it: a copy on disk or one a framework mapped."""
    return {"family": family, "path": path, "real_path": path, "stub": "/stubs/" in path, **extra}


def _dist(name: str, version: str, location: str = _VENV) -> dict[str, str]:
    return {"name": name, "version": version, "location": location}


def _toolkit(**env: Any) -> dict[str, Any]:
    """The ``toolkit`` section: nvcc 13.0 on PATH, and CUDA_HOME / CUDA_PATH as given."""
    nvcc = {"found": True, "path": "/usr/local/cuda-13.0/bin/nvcc", "real_path": "/usr/local/cuda-13.0/bin/nvcc",
            "version": "13.0.88", "release": "13.0", "toolkit_root": "/usr/local/cuda-13.0"}
    return {"nvcc": nvcc, "env": {"CUDA_HOME": None, "CUDA_PATH": None, **env}}


def _build(name: str, version: str, built_cuda: str, arch_list: list[str]) -> dict[str, Any]:
    """One framework build that loaded fine, reduced to what the compatibility check reads."""
    return {name: {"installed": True, "status": "ok",
                   "info": {"version": version, "built_cuda": built_cuda, "cpu_only_build": False, "arch_list": arch_list}}}


_TORCH_CU126_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
_TORCH_CU130_ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
_DEVICE0 = {"ordinal": 0, "name": _H100, "uuid": _UUID[0]}
_MIB256 = 256 * 1024**2


def _deep(name: str, n: int, nvlinks: int, ancestor: str = "PHB", **sections: Any) -> dict[str, Any]:
    """``check --deep`` on ``n`` GPUs of one model, every pair joined alike; ``sections``: the multi-GPU
    probe's ``p2p`` and ``allreduce``."""
    return {
        "nvml": _nvml(device_count=n),
        "gpus": [_gpu(i, name) for i in range(n)],
        "topology": {"pairs": [{**_pair("ok", nvlinks, ancestor), "gpus": [a, b]} for a in range(n) for b in range(a + 1, n)]},
        "multigpu": {"devices": [{"ordinal": i, "name": name, "uuid": _UUID[i]} for i in range(n)], **sections},
    }


def _p2p(n: int, gbs: float, changed: Optional[dict[tuple[int, int], dict[str, Any]]] = None) -> dict[str, Any]:
    """The probe's ``p2p`` section: every ordered pair copies at ``gbs``, except what ``changed`` replaces."""
    pairs = [{"src": a, "dst": b, "access": True, "gbs": gbs, "wrong_elements": 0, **(changed or {}).get((a, b), {})}
             for a in range(n) for b in range(n) if a != b]
    return {"ok": True, "bytes": _MIB256, "repeats": 10, "pairs": pairs}


def _allreduce(n: int, busbw: float) -> dict[str, Any]:
    return {"ok": True, "world_size": n, "backend": "nccl", "dtype": "float32", "bytes": _MIB256,
            "expected": n * (n + 1) / 2, "correct": True, "wrong_elements": 0,
            "algbw_gbs": round(busbw * n / (2 * (n - 1)), 1), "busbw_gbs": busbw}



def _cluster(allreduce: Any = None, node_b_findings: Any = (), node_b_torch: str = "2.11.0+cu130",
             node_b_nccl: str = "2.28.9", networks: Any = ("IB",), transports: Any = ("NET/IB", "P2P/CUMEM"),
             infiniband: Any = ("mlx5_0", "mlx5_1"), busbw: float = 41.8) -> dict[str, Any]:
    """``facts["cluster"]`` of a torchrun job of 2 nodes x 2 H200 (node-a is rank 0's own node)."""
    ranks = [{"rank": r, "local_rank": r % 2, "node_rank": r // 2, "hostname": ("node-a", "node-b")[r // 2],
              "world_size": 4, "local_world_size": 2, "infiniband": list(infiniband), "device": r % 2, "name": _H200,
              "torch": "2.11.0+cu130" if r < 2 else node_b_torch, "nccl_version": "2.28.9" if r < 2 else node_b_nccl,
              "median_s": 0.0096, "correct": True, "wrong_elements": 0, "nccl_network": list(networks)[0],
              "nccl_transports": list(transports)} for r in range(4)]
    node_b = {"facts": {"nvml": {"driver_version": "580.159.04", "cuda_driver_version": 13000}},
              "findings": list(node_b_findings), "summary": {"verdict": "error" if node_b_findings else "ok"}}
    return {
        "launcher": "torchrun", "world_size": 4, "local_world_size": 2, "bytes": 268435456, "ranks": ranks,
        "nodes": [{"node_rank": 0, "hostname": "node-a", "infiniband": list(infiniband), "ranks": [0, 1], "self": True},
                  {"node_rank": 1, "hostname": "node-b", "infiniband": list(infiniband), "ranks": [2, 3], "report": node_b}],
        "allreduce": allreduce or {"world_size": 4, "backend": "nccl", "dtype": "float32", "bytes": 268435456, "ok": True,
                                   "correct": True, "wrong_elements": 0, "time_s": 0.0096,
                                   "algbw_gbs": busbw / 1.5, "busbw_gbs": busbw, "nccl_versions": ["2.28.9"],
                                   "networks": list(networks), "transports": list(transports)},
    }

def _said(kind: str, text: str, **values: Any) -> dict[str, Any]:
    """One evidence item as gpudoctor/pastes/forms/messages.py reads it from line 12 of a ticket."""
    return {"kind": kind, **values, "line": 12, "text": text, "where": "issue.md, line 12", "form": "messages"}


def _kernel_log(uptime_s: float, events: Any = (), errors: Any = ()) -> dict[str, Any]:
    """A machine with one H100 at 0000:41:00 whose /dev/kmsg was read (probes/driver_events.py): ``events``
    are (seconds since boot, Xid line), ``errors`` (seconds since boot, other NVRM error line)."""
    from gpudoctor.probes.driver_events import events_of

    read = events_of([*events, *errors])
    return {"nvml": _nvml(), "gpus": [_gpu(0, _H100, pci={"bus_id": "00000000:41:00.0"})],
            "kernel_log": {"read": True, "source": "/dev/kmsg", "complete": True, "records": 2400, "first_s": 0.0,
                           "uptime_s": uptime_s, "boot_time": 1795000000.0, "tried": [], **read}}


EXAMPLES: dict[str, Facts] = {
    # --- driver -------------------------------------------------------------------------------
    "DRV001": {
        "host": {"os": "Linux", "distro": "Ubuntu 24.04.1 LTS", "wsl": False, "container": _NO_CONTAINER},
        "driver": {"kernel_module": _NOT_LOADED_MODULE, "nouveau_loaded": False,
                   "pci_devices": [{"bus_id": "0000:01:00.0", "device_id": "0x2684", "class": "0x030000", "driver": None}],
                   "device_nodes": {}, "nvml_library_files": []},
        "nvml": _nvml_failed("library_not_found", 12, "NVML Shared Library Not Found"),
    },
    "DRV002": {
        "driver": {"kernel_module": _NOT_LOADED_MODULE},
        "nvml": _nvml_failed("driver_not_loaded", 9, "Driver Not Loaded"),
    },
    "DRV003": {
        "driver": {"kernel_module": {"loaded": True, "version": "570.124.06", "flavour": "open"},
                   "nvml_library_files": ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so",
                                          "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                                          "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20"]},
        "nvml": _nvml_failed("driver_library_mismatch", 18, "Driver/library version mismatch"),
    },
    "DRV004": {"nvml": _nvml_failed("no_permission", 4, "Insufficient Permissions")},
    "DRV005": {"nvml": _nvml_failed("gpu_lost", 15, "GPU is lost")},
    "DRV006": {"nvml": _nvml_failed("unknown", 999, "Unknown Error")},
    "DRV007": {
        "driver": {"nouveau_loaded": True, "pci_devices": [_pci("0000:01:00.0", "nouveau", "0x1eb8")]},
    },
    "DRV009": {
        "nvml": {"timed_out": True, "bindings": {"import_error": None},
                 "incomplete": {"while": "nvmlInit", "reason": "timeout", "returncode": -9, "stderr_tail": ""}},
    },
    "DRV019": {
        "nvml": _nvml(timed_out=False, incomplete={"while": "topology", "reason": "crashed", "returncode": -11,
                                                   "stderr_tail": "Segmentation fault"}),
    },
    "DRV010": {
        "nvml": {"timed_out": False,
                 "bindings": {"module_file": None, "import_error": "ModuleNotFoundError: No module named 'pynvml'"},
                 "missing_functions": []},
    },
    "DRV011": {
        "host": {"os": "Linux", "wsl": False, "container": _NO_CONTAINER},
        "driver": {"pci_devices": [], "device_nodes": {}, "nvml_library_files": []},
        "nvml": _nvml_failed("library_not_found", 12, "NVML Shared Library Not Found"),
    },
    "DRV012": {
        "host": {"container": _NO_CONTAINER},
        "driver": {"kernel_module": _LOADED_MODULE, "pci_devices": []},
        "nvml": _nvml(device_count=0),
        "gpus": [],
    },
    "DRV013": {
        "host": {"container": _NO_CONTAINER},
        "driver": {"kernel_module": _LOADED_MODULE,
                   "pci_devices": [_pci("0000:01:00.0", "nvidia"), _pci("0000:41:00.0", "nvidia")]},
        "nvml": _nvml(device_count=1),
        "gpus": [_gpu(0, pci={"bus_id": _BUS[0]})],
    },
    "DRV014": {
        "host": {"container": _NO_CONTAINER},
        "driver": {"kernel_module": _LOADED_MODULE,
                   "pci_devices": [_pci("0000:01:00.0", "nvidia"), _pci("0000:41:00.0", None, "0x1db4")]},
        "nvml": _nvml(device_count=1),
        "gpus": [_gpu(0)],
    },
    "DRV015": {
        "driver": {"device_nodes": _nodes(gpu0={"exists": False, "accessible": False})},
        "nvml": _nvml(),
        "gpus": [_gpu(0, minor_number=0)],
    },
    "DRV016": {
        "driver": {"device_nodes": _nodes(gpu0={"exists": True, "accessible": False})},
        "nvml": _nvml(),
        "gpus": [_gpu(0, minor_number=0)],
    },
    "DRV017": {
        "driver": {"device_nodes": _nodes(uvm={"exists": False, "accessible": False})},
        "nvml": _nvml(),
        "gpus": [_gpu(0, minor_number=0)],
    },
    "DRV018": {
        "nvml": _nvml(missing_functions=["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetGpuMaxPcieLinkGeneration"]),
    },
    # --- gpus ---------------------------------------------------------------------------------
    "DRV021": {
        "host": {"container": _NO_CONTAINER},
        "driver": {"kernel_module": {"loaded": True, "version": "535.104.05", "flavour": "proprietary"},
                   "pci_devices": [_pci("0000:01:00.0", "nvidia"), _pci("0000:41:00.0", None, "0x102d")],
                   "legacy_notices": {"read": True, "notices": [
                       {"name": "Tesla K80", "branch": "470", "driver": "535.104.05"}]}},
        "nvml": _nvml(device_count=1, driver_version="535.104.05"),
        "gpus": [_gpu(0, pci={"bus_id": "00000000:01:00.0"})],
    },
    "GPU101": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, memory={"unavailable": "gpu_lost"}, temperature={"current_c": {"unavailable": "gpu_lost"}})],
    },
    "GPU102": {
        "nvml": _nvml(timed_out=True, incomplete={"while": "GPU 0", "reason": "timeout", "returncode": -9, "stderr_tail": ""}),
        "gpus": [{"index": 0, "handle": {"unavailable": "timeout"}}],
    },
    "GPU103": {
        "nvml": _nvml(),
        "gpus": [{"index": 0, "handle": {"unavailable": "unknown"}}],
    },
    # the lines are real ones (tests/fixtures/kernel_log/index.json), moved to this example's bus 0000:41:00
    "GPU105": _kernel_log(9000.0, [(5107.6, "NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus.")]),
    "GPU106": _kernel_log(9000.0, [(8100.2, "NVRM: Xid (PCI:0000:41:00): 94, pid=7062, Contained: CE User Channel (0x9). "
                                            "RST: No, D-RST: No")]),
    "GPU107": _kernel_log(9000.0, [(8700.4, "NVRM: Xid (PCI:0000:41:00): 13, pid='<unknown>', name=<unknown>, Graphics SM "
                                            "Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter")]),
    "GPU108": _kernel_log(400000.0, [(219.5, "NVRM: Xid (PCI:0000:41:00): 48, pid='<unknown>', name=<unknown>, An "
                                             "uncorrectable double bit error (DBE) has been detected on GPU in the "
                                             "framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1.")]),
    "GPU109": _kernel_log(9000.0, errors=[(218.3, "NVRM: GPU 0000:42:00.0: RmInitAdapter failed! (0x24:0x72:1568)")]),
    "GPU111": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, ecc={"current": "enabled", "pending": "enabled",
                              "uncorrected_volatile": 2, "uncorrected_aggregate": 3})],
    },
    "GPU112": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, retired_pages={"pending": True, "single_bit_count": 0, "double_bit_count": 1})],
    },
    "GPU113": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, remapped_rows={"corrected": 0, "uncorrected": 1, "pending": True, "failure": False})],
    },
    "GPU114": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, remapped_rows={"corrected": 0, "uncorrected": 8, "pending": False, "failure": True})],
    },
    "GPU121": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, clock_event_reasons={"mask": 0x48, "active": ["hw_slowdown", "hw_thermal_slowdown"]},
                      temperature={"current_c": 79, "slowdown_c": 89, "shutdown_c": 92},
                      power={"draw_mw": 212000, "limit_mw": 400000})],
    },
    "GPU122": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, clock_event_reasons={"mask": 0x20, "active": ["sw_thermal_slowdown"]},
                      temperature={"current_c": 87, "slowdown_c": 89, "shutdown_c": 92})],
    },
    "GPU123": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, clock_event_reasons={"mask": 0, "active": []},
                      temperature={"current_c": 85, "slowdown_c": 89, "shutdown_c": 92})],
    },
    "GPU131": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, pci={"bus_id": _BUS[0]}, pcie={"gen_current": 4, "gen_max": 4, "gen_gpu_max": 4, "width_current": 8, "width_max": 16})],
    },
    "GPU132": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100, pcie={"gen_max": 5, "width_max": 16},
                      counters={"uptime_s": 3600.0, "pcie_replay": 250000})],
    },
    "GPU141": {
        "host": {"os": "Linux"},
        "nvml": _nvml(),
        "gpus": [_gpu(0, persistence_mode="disabled")],
    },
    "GPU142": {"nvml": _nvml(), "gpus": [_gpu(0, compute_mode="prohibited")]},
    "GPU143": {"nvml": _nvml(), "gpus": [_gpu(0, compute_mode="exclusive_process")]},
    "GPU151": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, memory={"total_bytes": 80 * GIB, "used_bytes": 61 * GIB, "free_bytes": 19 * GIB},
                      processes=[{"pid": 48213, "type": "compute", "used_memory_bytes": 61 * GIB - 512 * 1024**2,
                                  "name": "python3"}])],
    },
    "GPU161": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, mig={"current": "enabled", "pending": "enabled", "devices": [
            {"index": 0, "uuid": "MIG-5c1e9a7d-2b84-5f3e-a6d0-91c7e3b2f845", "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
             "memory_total_bytes": 40 * GIB},
            {"index": 1, "uuid": "MIG-8d2f4b6a-7e19-53c0-b4a8-0f6d1e9c3a72", "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
             "memory_total_bytes": 40 * GIB},
        ]})],
    },
    "GPU162": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, mig={"current": "disabled", "pending": "enabled", "devices": []})],
    },
    "GPU171": {"nvml": _nvml(device_count=2), "gpus": [_gpu(0, _H100), _gpu(1, _L4)]},
    "GPU181": {
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0, _H100, nvlink={"active_count": 18, "count": 18}),
                 _gpu(1, _H100, nvlink={"active_count": 16, "count": 18})],
    },
    "GPU182": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100, counters={"uptime_s": 3600.0, "nvlink_errors": {
            "replay": 0, "recovery": 96, "crc_flit": 1_250_000, "crc_data": 1_800}})],
    },
    "GPU191": {
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0, _H100, fabric={"state": "not_started", "status": "success", "api": "v3"}),
                 _gpu(1, _H100, fabric={"state": "not_started", "status": "success", "api": "v3"})],
    },
    "GPU192": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100, fabric={"state": "completed", "status": "nvml_error_999", "api": "v3"})],
    },
    "GPU193": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100, fabric={"state": "completed", "status": "success", "api": "v3",
                                        "health_summary": "limited_capacity"})],
    },
    # --- topology -----------------------------------------------------------------------------
    "TOPO201": {
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0), _gpu(1)],
        "topology": {"pairs": [_pair("disabled_by_regkey", 12, "SYS")]},
    },
    "TOPO202": {
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0, _L4), _gpu(1, _L4)],
        "topology": {"pairs": [_pair("chipset_not_supported", 0, "SYS")]},
    },
    # --- visibility ---------------------------------------------------------------------------
    "VIS001": {
        "host": _env(CUDA_VISIBLE_DEVICES=""),
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0), _gpu(1)],
    },
    "VIS002": {
        "host": _env(CUDA_VISIBLE_DEVICES="0,2,1"),
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0), _gpu(1)],
    },
    "VIS003": {
        "host": _env(CUDA_VISIBLE_DEVICES="1"),
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0, _H100), _gpu(1, _L4)],
    },
    "VIS004": {
        "host": _env(CUDA_VISIBLE_DEVICES="1,0"),
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0), _gpu(1)],
    },
    "VIS005": {
        # gpudoctor check --require-gpus 2, on a machine where one of the two GPUs cannot be read
        "options": {"require_gpus": 2},
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0), {"index": 1, "handle": {"unavailable": "unknown"}}],
    },
    # --- container ----------------------------------------------------------------------------
    "CTR001": {
        "host": {"os": "Linux", "wsl": False, "container": {"detected": True, "markers": ["/.dockerenv"]}},
        "driver": {"kernel_module": _LOADED_MODULE,
                   "pci_devices": [_pci("0000:01:00.0", "nvidia"), _pci("0000:41:00.0", "nvidia")],
                   "device_nodes": {"/dev/nvidiactl": {"exists": False, "accessible": False},
                                    "/dev/nvidia-uvm": {"exists": False, "accessible": False}},
                   "nvml_library_files": []},
        "nvml": _nvml_failed("library_not_found", 12, "NVML Shared Library Not Found"),
    },
    "CTR002": {"host": _env(NVIDIA_DRIVER_CAPABILITIES="utility")},
    "CTR003": {
        "host": _env(NVIDIA_REQUIRE_CUDA="cuda>=12.8"),
        "nvml": _nvml(driver_version="550.90.12", cuda_driver_version=12040),
        "gpus": [_gpu(0, compute_capability="8.0")],
    },
    "CTR004": {"host": _env(NVIDIA_VISIBLE_DEVICES="void")},
    # --- toolkit ------------------------------------------------------------------------------
    "CUDA001": {
        "toolkit": _toolkit(CUDA_HOME={"path": "/usr/local/cuda-12.4", "exists": True, "real_path": "/usr/local/cuda-12.4",
                                       "version": "12.4"}),
    },
    "CUDA002": {
        "toolkit": _toolkit(CUDA_HOME={"path": "/usr/local/cuda-12.1", "exists": False, "real_path": "/usr/local/cuda-12.1",
                                       "version": {"unavailable": "not_found"}}),
    },
    # --- libraries ----------------------------------------------------------------------------
    "LIB001": {
        "libraries": {
            "ld_library_path": ["/usr/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64"],
            "copies": [_lib("libcudnn_sub", f"{_VENV}/nvidia/cudnn/lib/libcudnn_graph.so.9", origins=["pip"],
                            version_from_name="9", distribution={"name": "nvidia-cudnn-cu13", "version": "9.19.0.56"}),
                       _lib("libcudnn_sub", "/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.14.0",
                            origins=["LD_LIBRARY_PATH", "system"], version_from_name="9.14.0")],
        },
        "frameworks": _torch(loaded_libraries=[
            _lib("libcudnn_sub", "/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.14.0", version_from_name="9.14.0")]),
    },
    "LIB002": {
        "libraries": {"copies": []},
        "frameworks": _torch(loaded_libraries=[
            _lib("libcuda", "/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libcuda.so.1", version="stub")]),
    },
    "LIB003": {
        "libraries": {
            "ld_library_path": ["/usr/local/cuda-13.0/lib64/stubs"],
            "copies": [_lib("libcuda", "/usr/local/cuda-13.0/lib64/stubs/libcuda.so.1", origins=["LD_LIBRARY_PATH"],
                            version_from_name=None, version="stub")],
        },
    },
    "LIB004": {
        "nvml": _nvml(driver_version="580.159.04"),
        "libraries": {
            "copies": [_lib("libcuda", "/usr/lib/x86_64-linux-gnu/libcuda.so.575.57.08", origins=["system", "ldconfig"],
                            version_from_name="575.57.08", version="12.9")],
        },
    },
    # --- python -------------------------------------------------------------------------------
    "PY001": {
        "python": {"executable": "/opt/venv/bin/python3",
                   "distributions": [_dist("tensorflow", "2.21.0"), _dist("tensorflow-cpu", "2.21.0")]},
    },
    "PY002": {
        # --python naming a Python 3.6 venv (the CPU machine's pyenv 3.6.15, 2026-11-23)
        "python": {"diagnosed": {"executable": "/opt/legacy/bin/python", "own": False, "reason": "--python names it"},
                   "unavailable": "unknown", "executable": "/opt/legacy/bin/python",
                   "error": "SyntaxError: future feature annotations is not defined"},
    },
    # --- frameworks ---------------------------------------------------------------------------
    "FWK001": {
        "nvml": _nvml(cuda_driver_version=13000),
        "gpus": [_gpu(0, _H100, compute_capability="9.0")],
        "python": {"version": "3.12.3"},
        "frameworks": _torch(version="2.13.0+cpu", built_cuda=None, cpu_only_build=True, devices=[],
                             init_error="AssertionError: Torch not compiled with CUDA enabled"),
    },
    "FWK002": {
        "nvml": _nvml(cuda_driver_version=12020),
        "gpus": [_gpu(0, _H100)],
        "frameworks": _torch(cuda_available=False, devices=[],
                             init_error="RuntimeError: The NVIDIA driver on your system is too old (found version 12020). "
                                        "Please update your GPU driver by downloading and installing a new version from the "
                                        "URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
                                        "https://pytorch.org to install a PyTorch version that has been compiled with your "
                                        "version of the CUDA driver."),
    },
    "FWK003": {
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0, _H100), _gpu(1, _H100)],
        "frameworks": _torch(cuda_available=True, devices=[{"index": 0, "name": _H100, "compute_capability": "9.0",
                                                            "uuid": _UUID[0]}]),
    },
    "FWK004": {
        "frameworks": _torch("import_error", error=(
            "ImportError: " + _VENV + "/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: "
            "__nvJitLinkComplete_12_4, version libnvJitLink.so.12")),
    },
    "FWK005": {
        "frameworks": _torch("timeout", error="no answer within 90 s", stderr_tail=""),
    },
    "FWK009": {
        # a pipx gpudoctor whose child needed psutil in a venv without it (gpudoctor before 2026-11-23, 1 x H100)
        "frameworks": _torch("crashed", stage=None, signal=None, started=False,
                             error="its process ended (exit status 1) before it said anything",
                             last_error="ModuleNotFoundError: No module named 'psutil'",
                             stderr_tail="  File \"/opt/gpudoctor/gpudoctor/procs/processes.py\", line 41, in <module>\n"
                                         "    import psutil\nModuleNotFoundError: No module named 'psutil'\n"),
    },
    "FWK006": {
        # a hand-made libcudnn.so.9 -> libcudnn.so.8.9.7 link, the usual way a cuDNN 8 ends up under a cuDNN 9 name
        "frameworks": _torch(built_cudnn="9.19.0", runtime_cudnn="8.9.7", loaded_libraries=[
            _lib("libcudnn", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9", version_from_name="8.9.7", version="8.9.7",
                 real_path="/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7")]),
    },
    "FWK007": {
        "frameworks": _torch(built_cudnn="9.19.0", runtime_cudnn={"unavailable": "unknown", "error": _TORCH_REFUSAL},
                             loaded_libraries=[
                                 _lib("libcudnn", f"{_VENV}/nvidia/cudnn/lib/libcudnn.so.9", version_from_name="9",
                                      version="9.14.0"),
                                 _lib("libcudnn_sub", "/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.14.0",
                                      version_from_name="9.14.0")]),
    },
    "FWK008": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _L4)],
        "frameworks": _torch(cuda_available=True,
                             devices=[{"index": 0, "name": _L4, "compute_capability": "8.9", "uuid": _UUID[0]}],
                             smoke={"unavailable": "unknown",
                                    "error": "AcceleratorError: CUDA error: no kernel image is available for execution "
                                             "on the device"}),
    },
    # --- frameworks: environment variables that steer them (values and messages measured on 1 x H100, JAX 0.11.2,
    # PyTorch 2.11.0+cu130: tests/fixtures/real/h100x1-20261123/env-faults) ------------------------------------
    "FWK101": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100)],
        "host": {"framework_env": {"JAX_PLATFORMS": "cpu"}},
        "frameworks": _jax(devices=[], default_backend="cpu", init_error=_JAX_NO_GPU),
    },
    "FWK102": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100)],
        "host": {"framework_env": {"JAX_PLATFORM_NAME": "cpu"}},
        "frameworks": _jax(devices=[{"index": 0, "name": _H100, "compute_capability": "9.0"}], default_backend="cpu"),
    },
    "FWK103": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100)],
        "host": {"framework_env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:true"}},
        "frameworks": _torch(cuda_available=True,
                             devices=[{"index": 0, "name": _H100, "compute_capability": "9.0", "uuid": _UUID[0]}],
                             smoke={"unavailable": "unknown", "error": "ValueError: Expected 'True' or 'False' at index 2 "
                                                                       "in ConfigTokenizer but got 'true'"}),
    },
    "FWK104": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100)],
        "host": {"framework_env": {"XLA_PYTHON_CLIENT_MEM_FRACTION": "75%"}},
        "frameworks": _jax(devices=[], default_backend="cpu", init_error=_JAX_NO_GPU),
    },
    "FWK105": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100)],
        "host": {"framework_env": {"TF_GPU_ALLOCATOR": "cuda_malloc_asnyc"}},
    },
    "FWK106": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100)],
        "host": {"framework_env": {"CUDA_LAUNCH_BLOCKING": "1"}},
    },
    "FWK107": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100)],
        "host": {"framework_env": {"XLA_FLAGS": "--xla_gpu_autotune_level=0 --xla_gpu_bogus_flag=true"}},
        "frameworks": {"jax": {"installed": True, "status": "crashed",
                               "error": "its process ended (exit status 1) while listing its GPUs",
                               "stderr_tail": "F1123 15:14:58.739388    6620 parse_flags_from_env.cc:234] Unknown flag in "
                                              "XLA_FLAGS: --xla_gpu_bogus_flag=true\n"}},
    },
    # --- what a pasted ticket shows (gpudoctor analyze; the items gpudoctor/pastes/forms/ reads) ------
    "FWK201": {"evidence": [_said("gpu_arch_unsupported", "NVIDIA GeForce RTX 3060 with CUDA capability sm_86 is not "
                                  "compatible with the current PyTorch installation.", gpu="NVIDIA GeForce RTX 3060",
                                  sm="sm_86", supported=["sm_37", "sm_50", "sm_60", "sm_70"])]},
    "FWK202": {"evidence": [_said("driver_too_old", "RuntimeError: The NVIDIA driver on your system is too old (found "
                                  "version 10010).", driver_cuda="10.1")]},
    "FWK203": {"evidence": [_said("no_driver", "RuntimeError: Found no NVIDIA driver on your system. Please check that "
                                  "you have an NVIDIA GPU and installed a driver")]},
    "FWK204": {"evidence": [_said("library_not_loaded", "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] "
                                  "Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open "
                                  "shared object file: No such file or directory", library="libcudnn.so.8")]},
    "FWK205": {"evidence": [_said("torch_cpu_build", "AssertionError: Torch not compiled with CUDA enabled")]},
    "FWK207": {"evidence": [_said("jax_backend_failed", "CUDA backend failed to initialize: Found CUDA version 12010, but JAX "
                                  "was built against version 12020, which is newer. The copy of CUDA that is installed "
                                  "must be at least as new as the version against which JAX was built. (Set "
                                  "TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)", cause="library_too_old",
                                  library="CUDA", found="12.1", built="12.2",
                                  error="Found CUDA version 12010, but JAX was built against version 12020, which is newer.")]},
    "GPU104": {"evidence": [_said("smi_err", "| N/A   29C    P0   ERR! / 250W |    593MiB / 16160MiB |      0%      Default |",
                                  gpu="GPU 1 (Tesla V100-PCIE..., 00008ED0:00:00.0)", index=1, fields=["power draw"])]},
    "FWK206": {"evidence": [{"kind": "contradiction", "what": "torch.cuda.is_available()", "form": "session", "line": 0,
                             "where": "issue.md, line 40 (session)",
                             "text": "PyTorch torch.cuda.is_available(): True in collect_env (issue.md, block 1), False in "
                                     "issue.md (session)"}]},
    "CTR007": {"evidence": [_said("container_no_gpu_driver", "docker: Error response from daemon: could not select device "
                                  "driver \"\" with capabilities: [[gpu]].")]},
    "DRV020": {"evidence": [_said("xid", "NVRM: Xid (PCI:0000:41:00): 79, pid=1234, GPU has fallen off the bus.",
                                  bus_id="0000:41:00", xid=79, detail="pid=1234, GPU has fallen off the bus.")]},
    "DRV024": {"evidence": [_said("gpu_lost_said", "The GPU randomly falls off the bus when I play games.")]},
    "DRV025": {"host": {"os": "Linux", "wsl": True, "wsl_version": 1, "source": "collect_env"}},
    "DRV022": {"evidence": [_said("system_not_ready", "E external/xla/xla/stream_executor/cuda/cuda_driver.cc:152] failed "
                                  "call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: CUDA_ERROR_SYSTEM_NOT_READY: "
                                  "system not yet initialized")]},
    "DRV023": {"evidence": [_said("compat_not_supported", "UserWarning: CUDA initialization: Unexpected error from "
                                  "cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that "
                                  "might have already set an error? Error 804: forward compatibility was attempted on non "
                                  "supported HW")]},
    "FWK209": {"evidence": [_said("no_gpu_visible", "RuntimeError: No CUDA GPUs are available")]},
    "FWK210": {"rocm": {"signs": [{"what": "a ROCm build (+rocm)", "text": "PyTorch version: 2.1.2+rocm5.6",
                                   "where": "issue.md, line 12"},
                                  {"what": "an AMD GPU in a GPU list",
                                   "text": "GPU models and configuration: AMD Radeon RX 7900 XTX", "where": "issue.md, line 24"}],
                        "source": "issue.md, line 12"}},
    "FWK211": {"evidence": [_said("no_gpu_seen", "My machine has an NVIDIA GeForce RTX 3060, but torch.cuda.is_available() is "
                                  "False.", framework="PyTorch", how="said")],
               "gpus": [{"index": 0, "name": "GeForce RTX 3060", "source": "prose (issue.md, line 12)", "stated": True,
                         "compute_capability": "8.6"}]},
    "FWK212": {"evidence": [_said("ptxas_too_old", "W external/org_tensorflow/tensorflow/compiler/xla/stream_executor/gpu/"
                                  "asm_compiler.cc:231] Falling back to the CUDA driver for PTX compilation; ptxas does not "
                                  "support CC 8.9", cc="8.9")]},
    "FWK213": {"evidence": [_said("cudnn_did_not_start", "E tensorflow/stream_executor/cuda/cuda_dnn.cc:334] Could not "
                                  "create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR", status="CUDNN_STATUS_INTERNAL_ERROR")]},
    "FWK214": {"evidence": [_said("bf16_refused", "ValueError: Bfloat16 is only supported on GPUs with compute capability "
                                  "of at least 8.0. Your Tesla V100-SXM2-32GB GPU has compute capability 7.0.",
                                  gpu="Tesla V100-SXM2-32GB", compute_capability="7.0", minimum="8.0")]},
    "FWK208": {"evidence": [_said("gpu_worked", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.69 GiB "
                                  "(GPU 0; 14.56 GiB total capacity; 649.97 MiB already allocated; 1.31 GiB free)",
                                  how="out_of_memory", asked="1.69 GiB", gpu="GPU 0", total="14.56 GiB")]},
    # --- compat -------------------------------------------------------------------------------
    "CMP001": {
        "nvml": _nvml(driver_version="570.172.08", cuda_driver_version=12080),
        "gpus": [_gpu(0, _H100, compute_capability="9.0")],
        "frameworks": _build("torch", "2.11.0+cu130", "13.0", _TORCH_CU130_ARCHS),
    },
    "CMP002": {
        "nvml": _nvml(driver_version="550.90.07", cuda_driver_version=12040),
        "gpus": [_gpu(0, _H100, compute_capability="9.0")],
        "frameworks": _build("torch", "2.8.0+cu128", "12.8", ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]),
    },
    "CMP003": {
        "nvml": _nvml(driver_version="580.95.05", cuda_driver_version=13000),
        "gpus": [_gpu(0, "NVIDIA GeForce RTX 5090", compute_capability="12.0")],
        "frameworks": _build("torch", "2.6.0+cu126", "12.6", _TORCH_CU126_ARCHS),
    },
    "CMP004": {
        "nvml": _nvml(driver_version="580.95.05", cuda_driver_version=13000),
        "gpus": [_gpu(0, "NVIDIA B200", compute_capability="10.0")],
        "frameworks": _build("tensorflow", "2.18.0", "12.5.1", ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]),
    },
    "CMP005": {
        "nvml": _nvml(driver_version="580.95.05", cuda_driver_version=13000),
        "gpus": [_gpu(0, _H100, compute_capability="9.0")],
        "toolkit": {"nvcc": {"found": True, "path": "/usr/local/cuda-11.7/bin/nvcc", "version": "11.7.99", "release": "11.7",
                             "toolkit_root": "/usr/local/cuda-11.7"}},
    },
    "CMP006": {
        "nvml": _nvml(driver_version="550.90.07", cuda_driver_version=12040),
        "gpus": [_gpu(0, _H100, compute_capability="9.0")],
        "toolkit": {"nvcc": {"found": True, "path": "/usr/local/cuda-13.0/bin/nvcc", "version": "13.0.88", "release": "13.0",
                             "toolkit_root": "/usr/local/cuda-13.0"}},
    },
    "CMP007": {
        "nvml": _nvml(driver_version="580.95.05", cuda_driver_version=13000),
        "gpus": [_gpu(0, _H100, compute_capability="9.0")],
        "python": {"version": "3.13.1", "executable": "/usr/local/bin/python3.13"},
        "frameworks": _build("torch", "2.4.1+cu124", "12.4", _TORCH_CU126_ARCHS),
    },
    "CMP008": {
        # a driver whose CUDA version NVML did not report, and a build for a CUDA the matrix does not list yet
        "nvml": _nvml(driver_version="580.95.05"),
        "gpus": [_gpu(0, _H100, compute_capability="9.0")],
        "frameworks": _build("torch", "2.15.0+cu140", "14.0", _TORCH_CU130_ARCHS),
    },
    # --- acceleration -------------------------------------------------------------------------
    "RUN001": {
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0, _H100), _gpu(1, _H100)],
        "smoke": {"count": {"step": "cuInit", "code": 802, "name": "CUDA_ERROR_SYSTEM_NOT_READY"}, "runs": []},
    },
    "RUN002": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100)],
        "smoke": {"count": {"driver_cuda": 13000, "devices": [_DEVICE0]},
                  "runs": [{**_DEVICE0, "ok": False, "elements": 262144, "wrong_elements": 3,
                            "first_wrong": [[4097, 0.0, 80.75], [70000, 0.0, 63.25], [262143, 0.0, 185.0]]}]},
    },
    "RUN003": {
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0, _H100), _gpu(1, _H100)],
        "smoke": {"count": {"driver_cuda": 13000, "devices": [_DEVICE0]},
                  "runs": [{**_DEVICE0, "ok": True, "elements": 262144, "wrong_elements": 0, "first_wrong": []}]},
    },
    "CTR005": {
        "host": {"container": {"detected": True, "markers": ["/.dockerenv"], "dev_shm_bytes": 64 * 2**20}},
        "nvml": _nvml(device_count=2),
        "gpus": [_gpu(0, _H100), _gpu(1, _H100)],
    },
    "CTR006": {
        "host": {"os": "Linux", "wsl": False, "container": {"detected": True, "markers": ["/.dockerenv"]}},
        "driver": {"pci_devices": [], "nvml_library_files": [],
                   "device_nodes": {"/dev/nvidiactl": {"exists": True, "accessible": True},
                                    "/dev/nvidia0": {"exists": True, "accessible": True}}},
        "nvml": _nvml_failed("library_not_found", 12, "NVML Shared Library Not Found"),
    },
    "LIB005": {
        "libraries": {"ld_library_path": ["/opt/old-cuda/lib64"], "copies": [{
            "family": "libcudnn", "path": "/opt/old-cuda/lib64/libcudnn.so.9", "real_path": "/opt/old-cuda/lib64/libcudnn.so.9",
            "version_from_name": "9", "stub": False, "origins": ["LD_LIBRARY_PATH"],
            "version": {"unavailable": "unknown",
                        "error": "/opt/old-cuda/lib64/libcudnn.so.9: invalid ELF header"}}]},
    },
    "CMP009": {
        "host": {"os": "Windows"},
        "nvml": _nvml(driver_version="566.36", cuda_driver_version=12070),
        "gpus": [_gpu(0, "NVIDIA GeForce RTX 4090", compute_capability="8.9")],
        "frameworks": {"tensorflow": {"installed": True, "status": "ok",
                                      "info": {"version": "2.16.1", "cpu_only_build": True, "devices": []}}},
    },
    "CMP010": {
        "nvml": _nvml(driver_version="590.44.01", cuda_driver_version=13010),
        "gpus": [_gpu(0, "Tesla P100-PCIE-16GB", compute_capability="6.0")],
    },
    "CMP011": {
        "host": {"os": "Linux", "wsl": False, "container": _NO_CONTAINER},
        "nvml": _nvml(driver_version="470.57.02", cuda_driver_version=12010),
        "gpus": [_gpu(0, "NVIDIA GeForce RTX 2080 Ti", compute_capability="7.5")],
    },
    "RUN011": {
        "workload": {"gpu": True, "devices": ["0"], "runs": [{
            "framework": "torch", "device": "0", "name": _H100, "version": "2.11.0+cu130",
            "matmul": {"ok": False, "checks": [
                {"ok": True, "rel_error": 3e-7, "tolerance": 1e-5, "what": "matmul float32"},
                {"ok": False, "rel_error": 0.41, "tolerance": 1e-2, "what": "matmul bfloat16"}]}}]},
    },
    "RUN012": {
        "workload": {"gpu": True, "devices": ["0"], "runs": [{
            "framework": "torch", "device": "0", "name": _H100, "version": "2.11.0+cu130",
            "conv": {"ok": False, "error": "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"}}]},
    },
    "RUN013": {
        "workload": {"gpu": True, "devices": ["0"], "runs": [{
            "framework": "torch", "device": "0", "name": _H100, "version": "2.11.0+cu130",
            "training": {"ok": False, "loss_first": 0.6958, "loss_last": float("nan"), "steps": 30,
                         "params_updated": True, "finite": False}}]},
    },
    "RUN014": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100, uuid=_DEVICE0["uuid"], pcie={"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
                      clock_event_reasons={"mask": 4, "active": ["sw_power_cap"]}, power={"draw_mw": 350000, "limit_mw": 350000},
                      processes=[])],
        "smoke": {"count": {"driver_cuda": 13000, "devices": [_DEVICE0]}, "runs": []},
        "workload": {"gpu": True, "devices": ["0"], "runs": [{
            "framework": "torch", "device": "0", "name": _H100, "version": "2.11.0+cu130",
            "throughput": {"ok": True, "matmul_bf16_tflops": 402.0, "matmul_tf32_tflops": 210.0,
                           "device_copy_gbs": 2950.0, "h2d_gbs": 54.0, "d2h_gbs": 55.0}}]},
    },
    "RUN019": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, _H100, uuid=_DEVICE0["uuid"], processes=[])],
        "smoke": {"count": {"driver_cuda": 13000, "devices": [_DEVICE0]}, "runs": []},
        "workload": {"gpu": True, "devices": ["0"], "runs": [{
            "framework": "torch", "device": "0", "name": _H100, "version": "2.11.0+cu130",
            "throughput": {"ok": True, "matmul_bf16_tflops": 306.0, "matmul_tf32_tflops": 150.0,
                           "device_copy_gbs": 2100.0, "h2d_gbs": 54.0, "d2h_gbs": 55.0,
                           "sharing": {"shared": True, "others": [
                               {"pid": 4218, "name": "python3", "used_memory_bytes": 1050673152}]}}}]},
    },
    "RUN015": {
        "workload": {"gpu": True, "devices": ["0"], "runs": [{
            "framework": "torch", "device": "0", "name": _H100, "version": "2.11.0+cu130",
            "skipped": "the GPU is busy: 71.3 of 79.2 GiB in use"}]},
    },
    "RUN016": {
        "workload": {"gpu": True, "devices": ["0"], "runs": [{
            "framework": "torch", "device": "0", "error": "the workload crashed (SIGKILL)",
            "stderr_tail": "Killed"}]},
    },
    "RUN017": {
        "workload": {"gpu": False, "devices": [], "runs": [{
            "framework": "torch", "device": "cpu", "version": "2.13.0+cpu",
            "training": {"ok": True, "loss_first": 0.6958, "loss_last": 0.1577, "steps": 30, "params_updated": True,
                         "finite": True, "device": "cpu"}}]},
    },
    "RUN018": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, "NVIDIA Fictional X9000", uuid=_DEVICE0["uuid"])],
        "smoke": {"count": {"driver_cuda": 13000, "devices": [{**_DEVICE0, "name": "NVIDIA Fictional X9000"}]}, "runs": []},
        "workload": {"gpu": True, "devices": ["0"], "runs": [{
            "framework": "torch", "device": "0", "name": "NVIDIA Fictional X9000", "version": "2.11.0+cu130",
            "throughput": {"ok": True, "matmul_bf16_tflops": 120.0, "matmul_tf32_tflops": 60.0,
                           "device_copy_gbs": 900.0, "h2d_gbs": 25.0, "d2h_gbs": 25.0}}]},
    },
    # --- acceleration: check --deep, between the GPUs ------------------------------------------
    "RUN021": _deep(_L40S, 2, 0, "PXB", p2p=_p2p(2, 21.4, {(0, 1): {"access": False}, (1, 0): {"access": False}})),
    "RUN022": _deep(_H200, 3, 18, p2p=_p2p(3, 372.0, {(1, 2): {"gbs": 96.5}})),
    "RUN023": _deep(_H200, 2, 18, p2p=_p2p(2, 372.0, {(1, 0): {"wrong_elements": 4096}})),
    "RUN024": _deep(_H200, 2, 18, allreduce={
        "ok": False, "world_size": 2, "backend": "nccl",
        "error": "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, unhandled system error (run with "
                 "NCCL_DEBUG=INFO for details), NCCL version 2.28.9 (and 1 other rank(s) failed)",
        "stderr_tail": "Last error:\nError while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)"}),
    "RUN025": _deep(_H200, 2, 18, p2p=_p2p(2, 372.0, {(1, 0): {"gbs": 366.0}}), allreduce=_allreduce(2, 176.0)),
    "RUN026": _deep(_H100, 3, 18, allreduce=_allreduce(3, 310.0)),  # 3 GPUs: no measured reference
    # --- acceleration: check --deep under torchrun, across nodes ------------------------------
    "RUN031": {"cluster": _cluster(allreduce={
        "ok": False, "world_size": 4, "backend": "nccl",
        "error": "rank 2 on node-b: DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, remote process exited "
                 "or there was a network error, NCCL version 2.28.9"})},
    "RUN032": {"cluster": _cluster(node_b_findings=[
        {"code": "GPU101", "severity": "error", "title": "GPU 1 has 2 uncorrectable ECC errors since the driver loaded"}])},
    "RUN033": {"cluster": _cluster(node_b_torch="2.10.0+cu128", node_b_nccl="2.27.3")},
    "RUN034": {"cluster": _cluster(networks=["Socket"], transports=["NET/Socket", "P2P/CUMEM"],
                                   infiniband=["mlx5_0", "mlx5_1"], busbw=2.9)},
    "RUN035": {"cluster": _cluster(allreduce={
        "world_size": 4, "backend": "nccl",
        "skipped": "rank 3 on node-b: local rank 1 has no GPU of its own: CUDA shows 1 GPU(s) (start one rank per GPU)"})},
    # --- internal -----------------------------------------------------------------------------
    "INT001": {
        "probes": {
            "driver_files": {
                "status": "error", "title": "the kernel driver and device nodes", "duration_s": 0.004,
                "error": "PermissionError: [Errno 13] Permission denied: '/sys/bus/pci/devices'",
                "traceback_tail": "PermissionError: [Errno 13] Permission denied: '/sys/bus/pci/devices'\n",
            },
        },
    },
    "INT002": {
        "probes": {
            "host": {"status": "timeout", "duration_s": 5.001, "title": "the host and its environment",
                     "error": "no answer within 5 s"},
        },
    },
    "INT003": {
        "nvml": _nvml(),
        "gpus": [_gpu(0, name=_L4, temperature={"current_c": 41, "slowdown_c": {"unavailable": "not_supported"},
                                                 "shutdown_c": {"unavailable": "not_supported"}})],
    },
    "INT004": {
        # gpudoctor check --timeout 5, on a machine whose CUDA libraries take long to read (a slow network file system)
        "probes": {
            "cuda_stack": {"status": "timeout", "duration_s": 5.0, "title": "the CUDA toolkit and libraries",
                           "error": "unfinished when the --timeout deadline passed"},
        },
    },
    "INT006": {
        # gpudoctor check under `ulimit -n 16`: the NVML probe's pipes could not be made
        "host": {"limits": {"open_files": 16, "processes": 4096, "environment_bytes": 3120, "arg_max_bytes": 2097152}},
        "nvml": {"timed_out": False, "incomplete": {"while": "starting", "reason": "not_started", "returncode": None,
                                                    "stderr_tail": "OSError: [Errno 24] Too many open files"}},
    },
    "INT007": {
        # gpudoctor merge nodes/*.json, one node's copy cut short on its way (tools/docgen.py EMITTED_BY_MERGE)
        "refused": ["nodes/node-17.json", "nodes/node-17.json is not valid JSON (Unterminated string starting at: "
                                          "line 74 column 32 (char 1910))"],
    },
    "INT005": {
        # gpudoctor check --quick --only acceleration: --quick runs no work on the GPUs
        "options": {"only": ["acceleration"]},
        "nvml": _nvml(),
        "gpus": [_gpu(0)],
    },
}

#: Codes an owning check always reports beside the one an example is for.
COMPANIONS: dict[str, tuple[str, ...]] = {
    "VIS002": ("VIS004",),
    "VIS003": ("VIS004",),
}


def _thermal_margin(facts: Facts) -> Iterator[Finding]:
    """A check written without the absent-fact convention in mind: it does arithmetic on a
    threshold that is ``{"unavailable": ...}`` on this GPU, and so raises TypeError."""
    for gpu in facts.get("gpus") or []:
        temperature = gpu["temperature"]
        if temperature["slowdown_c"] - temperature["current_c"] < 5:
            yield finding("GPU123", f"GPU {gpu['index']} is close to its slowdown temperature")


#: Not registered anywhere: it exists to show what the registry reports when a check crashes.
CRASHING_CHECK = Check("example.thermal_margin", "gpus", "an example check that crashes", ("GPU123",),
                       _thermal_margin, ("nvml",))
