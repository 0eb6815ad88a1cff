"""What a test may assert about the child processes gpudoctor started."""

from __future__ import annotations

import time
from typing import Any

import psutil


def children_left(within_s: float = 5.0) -> list[Any]:
    """This process's children still there after ``within_s``: a child that said its exit status is
    reaped in the background (procs/child.py _reap) and may take a moment to be gone."""
    deadline = time.monotonic() + within_s
    while (left := psutil.Process().children(recursive=True)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def default_signals() -> None:
    """For ``preexec_fn``: SIGINT and SIGHUP back to their defaults in a gpudoctor the test starts. A test
    run started with ``nohup`` or in the background of a script has them ignored, and a child inherits
    that: gpudoctor then rightly keeps them ignored, as it does under ``nohup``."""
    import signal

    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
