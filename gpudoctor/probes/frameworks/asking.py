"""What every framework's facts probe (``probe_KEY``, children.py) uses as it asks its framework: the step
it is at, a question that may fail, and the versions frameworks give as numbers, as text.

Runs in the framework children under the diagnosed interpreter: standard library only.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, Optional

from gpudoctor import versions as codes
from gpudoctor.procs import protocol
from gpudoctor.snapshot import unavailable

#: The steps a framework child goes through, in order, as ``stage`` names them.
STAGES = ("import", "cuda_init", "devices", "first_kernel", "libraries")

_stage = "import"
_said = 0  # how many steps this child has said
_beside = 0  # steps under way in threads beside the main thread's (beside)
_beside_said: Optional[int] = None  # the count at which the first of them said its name; None: it said none
_lock = threading.Lock()


def stage(name: str) -> None:
    """Say which step comes next (STAGES), so that a child that dies in it (a segfault inside a driver
    call, the OOM killer) is reported as having died there, not as a failed import."""
    with _lock:
        _say(name)


def _say(name: str) -> None:
    global _stage, _said
    _stage, _said = name, _said + 1
    protocol.emit("stage", name)


@contextlib.contextmanager
def beside(name: str, during: str) -> Iterator[None]:
    """Step ``name`` done by a thread of its own while the main thread is at step ``during`` (CUDA started
    while the framework still imports): a child that dies meanwhile died in ``name``. Said where the child is
    at ``during``; once the last such step ends, ``during`` is said again, unless the main thread has said
    a step of its own meanwhile."""
    global _beside, _beside_said
    with _lock:
        if _beside == 0:
            _beside_said = None
            if _stage == during:
                _say(name)
                _beside_said = _said
        _beside += 1
    try:
        yield
    finally:
        with _lock:
            _beside -= 1
            if _beside == 0 and _beside_said == _said:
                _say(during)


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
