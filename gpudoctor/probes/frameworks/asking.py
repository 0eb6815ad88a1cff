"""What every framework's facts probe (``probe_KEY``, children.py) uses as it asks its framework: the step
it is at, a question that may fail, and the versions frameworks give as numbers, as text.

Runs in the framework children under the diagnosed interpreter: standard library only.
"""

from __future__ import annotations

from typing import Any, Callable

from gpudoctor import versions as codes
from gpudoctor.procs import protocol
from gpudoctor.snapshot import unavailable

#: The steps a framework child goes through, in order, as ``stage`` names them.
STAGES = ("import", "cuda_init", "devices", "first_kernel", "libraries")

_stage = "import"


def stage(name: str) -> None:
    """Say which step comes next (STAGES), so that a child that dies in it (a segfault inside a driver
    call, the OOM killer) is reported as having died there, not as a failed import."""
    global _stage
    _stage = name
    protocol.emit("stage", name)


def reached() -> str:
    """The step this child said last."""
    return _stage


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - every framework call may fail in its own way
        return unavailable("unknown", f"{type(exc).__name__}: {exc}"[:500])


def _uuid(value: Any) -> str:
    text = str(value)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def _cudnn_text(v: Any) -> Any:
    """cuDNN's code as text; anything else (None, a string) as the framework gave it."""
    return codes.cudnn(v) or v


def _cuda_text(v: Any) -> Any:
    """CUDA's code as text; anything else (0: no driver, None) as the framework gave it."""
    return codes.cuda(v) or v


def _nccl_text(v: Any) -> Any:
    """NCCL's code as text; anything else as the framework gave it."""
    return codes.nccl(v) or v
