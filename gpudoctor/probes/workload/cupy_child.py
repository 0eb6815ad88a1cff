"""CuPy under the diagnosed interpreter (probes/frameworks/children.py): its facts once imported
(probe_cupy), what its package says of its build without importing it (read_cupy, for ``check
--quick``), and its workload on one GPU (run_cupy): element-wise and matmul checks against the float64
references.

No GPU: nothing to run. CuPy is imported inside the functions that ask it: a child imports only the
framework it was asked for.

Runs in the framework and workload children under the diagnosed interpreter: standard library only at
module level.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from gpudoctor.probes.frameworks.asking import _cuda_text, _cudnn_text, _nccl_text, _try, stage
from gpudoctor.probes.frameworks.metadata import Package, _norm, header
from gpudoctor.probes.workload.common import _check, _np_elementwise, _np_matmul, _step, cuda_index, reference, rel_err


# --- its facts, once imported (probes/frameworks/worker.py) -------------------------------------------

def probe_cupy() -> dict[str, Any]:
    import cupy

    rt = cupy.cuda.runtime
    info: dict[str, Any] = {"version": cupy.__version__, "cpu_only_build": False}
    info["runtime_cuda"] = _try(lambda: _cuda_text(rt.runtimeGetVersion()))
    info["driver_cuda"] = _try(lambda: _cuda_text(rt.driverGetVersion()))
    devices = []
    stage("devices")
    try:
        count = rt.getDeviceCount()
    except Exception as exc:  # noqa: BLE001
        count = 0
        info["init_error"] = f"{type(exc).__name__}: {exc}"[:800]
    for i in range(count):
        props = rt.getDeviceProperties(i)
        name = props.get("name", b"")
        devices.append({"index": i, "name": name.decode() if isinstance(name, bytes) else str(name),
                        "compute_capability": f"{props.get('major')}.{props.get('minor')}"})
    info["devices"] = devices
    info["cuda_available"] = bool(devices)
    if devices:
        info["runtime_cudnn"] = _try(lambda: _cudnn_text(__import__("cupy.cuda.cudnn", fromlist=["getVersion"]).getVersion()))
        info["runtime_nccl"] = _try(lambda: _nccl_text(__import__("cupy.cuda.nccl", fromlist=["get_version"]).get_version()))
        stage("first_kernel")
        info["smoke"] = _try(lambda: float((cupy.ones((2, 2)) @ cupy.ones((2, 2))).sum()))
    return info


# --- its package, read without importing it (probes/frameworks/metadata.py, check --quick) ------------

def read_cupy(package: Package) -> Optional[str]:
    """A CuPy package is named for the CUDA it is built for (cupy-cuda12x, cupy-cuda101, cupy-rocm-5-0)."""
    owners, claims = package.owners, package.claims
    for dist in owners:
        name = _norm(header(dist, "Name"))
        wide = re.fullmatch(r"cupy-cuda(\d+)x", name)
        exact = re.fullmatch(r"cupy-cuda(\d+)(\d)", name)
        if wide:
            claims.add("cuda", f"distribution name {name}", wide.group(1))
        elif exact:
            claims.add("cuda", f"distribution name {name}", exact.group(1), f"{exact.group(1)}.{exact.group(2)}")
        elif name.startswith("cupy-rocm"):
            claims.add("rocm", f"distribution name {name}")
        elif name == "cupy":
            claims.note("distribution name cupy: built from source, for whichever CUDA (or ROCm) it found")
    return None


# --- its workload (worker.py) -------------------------------------------------------------------------

def run_cupy(device: str, deep: bool, checks_on: Optional[str] = None) -> dict[str, Any]:
    import cupy
    import numpy as np

    out: dict[str, Any] = {"framework": "cupy", "device": device, "version": cupy.__version__}
    if device == "cpu":
        out["skipped"] = "no GPU"
        return out
    x, y, ew = reference("np.elementwise", lambda: _np_elementwise(np))
    a, b, mm = reference("np.matmul", lambda: _np_matmul(np))
    with cupy.cuda.Device(cuda_index(device)):  # the current device is this thread's own
        _step(out, "elementwise", lambda: _check("sin(2.5x+y) float32", rel_err(
            cupy.asnumpy(cupy.sin(2.5 * cupy.asarray(x) + cupy.asarray(y))), ew), 1e-5))
        _step(out, "matmul", lambda: _check("matmul float32", rel_err(
            cupy.asnumpy(cupy.asarray(a) @ cupy.asarray(b)), mm), 1e-5))
    return out
