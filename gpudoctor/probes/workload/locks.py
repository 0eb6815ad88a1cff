"""The locks that keep a workload child's measurements honest: per GPU between processes, global in one.

A figure timed while other work runs on the same GPU measures the other work too. The per-GPU lock
(``_lock``, a flock in the folder the parent names) is taken by every child that works on a GPU: the
workload children of each framework, the multi-GPU tests. Inside one child, a thread per GPU shares
the interpreter and the framework's process-wide state, which process-global locks guard
(_TF32, _DEFAULT_RNG, _HOST_TIMED). An XLA compile takes the GPU's lock only while XLA autotunes on the GPU
(xla_compile_lock).

Runs in the workload child under the diagnosed interpreter: standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from typing import Any, Iterator

from gpudoctor.probes.workload import NO_AUTOTUNE, autotune_levels

#: Held around framework state that is global to the process, not the thread, so that one GPU's thread does
#: not change it under another's feet: PyTorch's tf32 switch (_TF32) and its default random generator
#: (_DEFAULT_RNG). Two locks, as the two have nothing to do with each other: a thread timing tf32 matmuls
#: holds the switch for that whole timing, and a thread making its training model must not wait for it.
_TF32 = threading.Lock()
_DEFAULT_RNG = threading.Lock()
#: Held around the loops timed by the host clock (the training steps): threads of one process share the
#: interpreter, and two GPUs' timed loops interleaved would each be timed too slow. It does not keep the
#: other threads' untimed work off the interpreter: a warm step can still read somewhat slow.
_HOST_TIMED = threading.Lock()


@contextlib.contextmanager
def _lock(name: str, shared: bool = False) -> Iterator[None]:
    """Keep measurements on a GPU apart from any other work on it: timed work holds the GPU's lock alone,
    untimed work (a correctness check, a first step that compiles) holds it ``shared`` with other untimed
    work, so compilations in different frameworks overlap each other but never a measurement. A compile
    that runs nothing on the GPU (XLA without autotuning: xla_autotunes) takes no lock: it may share the
    CPU, never the GPU, with a measurement (the CPU machines here have 16-64 cores). Also
    serialises pinned host copies between GPUs (they share host memory bandwidth), and is taken by the
    multi-GPU tests. The parent passes the folder.

    The rule that keeps this free of deadlocks, between threads (flock locks of one process do not nest:
    each acquisition opens the file anew) and with the multi-GPU ranks (each holds its GPU's lock while
    it blocks in a collective): a thread holds at most one GPU's lock; it never asks for a GPU's lock
    while holding _TF32, _DEFAULT_RNG, _HOST_TIMED or a reference() lock; and it lets go of a shared lock
    before asking for the same GPU alone (host_timed)."""
    folder = os.environ.get("GPUDOCTOR_LOCK_DIR")
    if not folder:
        yield
        return
    with open(os.path.join(folder, f"{name}.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def gpu_lock(device: str, shared: bool = False) -> Any:
    """The GPU's lock (see _lock); the CPU has none."""
    return _lock(f"gpu{device}", shared) if device != "cpu" else contextlib.nullcontext()


def xla_autotunes() -> bool:
    """Whether XLA will time candidate kernels on the GPU while it compiles (its default): then a compile
    is GPU work and holds the GPU's lock shared. Without autotuning (workload.xla_flags turns it off
    unless the user chose a level) it is CPU work: it takes no lock, so another framework's measurement on
    the same GPU need not wait the 0.8 s that compiling the training step takes."""
    levels = autotune_levels(os.environ.get("XLA_FLAGS", ""))
    return not levels or levels[-1] != NO_AUTOTUNE


def xla_compile_lock(device: str) -> Any:
    """What an XLA compile holds: the GPU's lock shared while XLA autotunes on the GPU, else nothing."""
    return gpu_lock(device, shared=True) if xla_autotunes() else contextlib.nullcontext()
