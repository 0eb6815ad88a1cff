"""Where a run's time goes across its processes: with ``GPUDOCTOR_TRACE=FILE`` in the environment,
the check and each of its children append one line per event to FILE (wall clock, process, thread,
what), which tools/device/timeline.py lines up. Per-probe and per-step durations say how long each
part took; only a shared clock shows what waited for what (one process's CUDA start-up behind
another's, a timed step behind another framework's compile). Off unless set: then one dictionary
lookup per event."""

from __future__ import annotations

import os
import threading
import time

ENV = "GPUDOCTOR_TRACE"


def mark(what: str) -> None:
    """Append ``what`` to the trace, if one is kept; a trace that cannot be written is dropped."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = f"{time.time():.4f} {os.getpid()} {threading.current_thread().name} {what}\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())  # one write under O_APPEND: lines from processes never interleave
        finally:
            os.close(fd)
    except OSError:
        pass
