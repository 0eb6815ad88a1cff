"""The live progress line on a terminal while the probes run."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional


_progress_shown = False
SPINNER = "|/-\\"


def progress_printer() -> Optional[Callable[[Any], None]]:
    """A one-line live display on a terminal (standard error only, so piped or redirected output stays
    clean): a spinner, the probes finished out of all, the seconds so far, and what is still running."""
    if sys.stderr is None or not sys.stderr.isatty():
        return None
    import shutil

    ticks = [0]

    def show(progress: Any) -> None:
        global _progress_shown
        _progress_shown = True
        ticks[0] += 1
        line = progress_line(progress, SPINNER[ticks[0] % len(SPINNER)])
        try:
            columns = os.get_terminal_size(sys.stderr.fileno()).columns  # stderr: stdout may be a file
        except OSError:
            columns = 0
        if columns <= 0:  # no size known (a fresh pseudo-terminal says 0): $COLUMNS, else 80
            columns = shutil.get_terminal_size((80, 24)).columns
        width = max(20, columns - 1)
        sys.stderr.write("\r\x1b[2K" + (line if len(line) <= width else line[:width - 3] + "..."))
        sys.stderr.flush()

    return show


def clear_progress() -> None:
    if _progress_shown and sys.stderr is not None:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()


def progress_line(progress: Any, spin: str = "") -> str:
    """``gpudoctor: | 6/9 done, 4 s; running: framework workloads on every GPU, +1 more``."""
    running = list(progress.running)
    what = "" if not running else f"; running: {running[0]}" + (f", +{len(running) - 1} more" if len(running) > 1 else "")
    return f"gpudoctor: {spin + ' ' if spin else ''}{progress.done}/{progress.total} done, {progress.elapsed_s:.0f} s{what}"
