"""How a PyTorch run's throughput figures are read, by the checks and the renderers alike
(``facts.workload.runs[].throughput``, probes/workload/torch_child.py).

A GPU older than compute capability 8.0 has no bf16 units: its run records no bf16 figure, and its tf32
timing is float32's, since tf32 needs those units too. A figure timed while NVML saw another process on
the GPU, or a timing that failed then, says nothing about the GPU itself.
"""

from __future__ import annotations

import math
from typing import Any, Optional


def shared(throughput: dict[str, Any]) -> bool:
    """Whether NVML saw another process on the GPU while its throughput was timed."""
    sharing = throughput.get("sharing")
    return isinstance(sharing, dict) and sharing.get("shared") is True


def without_bf16(throughput: dict[str, Any]) -> bool:
    """A run with no bf16 figure: its GPU has no bf16, and its tf32 timing is float32's."""
    return _number(throughput.get("matmul_bf16_tflops")) is None


def matmul(throughput: dict[str, Any]) -> Optional[tuple[str, float]]:
    """(precision, TFLOP/s) of the matmul figure shown for a run: bf16, else float32; None for neither."""
    if not without_bf16(throughput):
        return "bf16", float(throughput["matmul_bf16_tflops"])
    fp32 = _number(throughput.get("matmul_tf32_tflops"))
    return ("float32", fp32) if fp32 is not None else None


def _number(value: Any) -> Optional[float]:
    """A finite number, else None: a string, a boolean, an absence or NaN is no figure."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
