"""CuPy's workload on one GPU: element-wise and matmul checks against the float64 references.

No GPU: nothing to run. CuPy is imported inside run_cupy: the child imports only the framework it
was asked for.

Runs in the workload child under the diagnosed interpreter: standard library only at module level.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.probes.workload.common import _check, _np_elementwise, _np_matmul, _step, cuda_index, reference, rel_err


def run_cupy(device: str, deep: bool) -> dict[str, Any]:
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
