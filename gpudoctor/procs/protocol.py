"""The channel a child tells gpudoctor what it found: a pipe of its own, never the child's stdout.

A framework prints what it likes on stdout: "loading extensions... " without a newline, a line of
JSON shaped like ours during a failing import, megabytes of one line. Sharing stdout with it let
that text end a line of ours or pass for one. So the parent opens a pipe for each child it starts
with ``run_module`` and names its write end in ``GPUDOCTOR_PROTOCOL_FD``; the child writes one JSON
object per line there (``emit``), and its stdout is only output, kept like stderr.

The variable is taken out of the child's environment as soon as the child starts (``take``, from
childpath.start), so a process the child starts (a torchrun rank, a compiler) never writes to a
descriptor number that means something else in it. Without the variable (a child started by hand,
or a rank writing to a file) lines go to stdout.

Runs in children under the diagnosed interpreter: standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Callable, Optional

ENV = "GPUDOCTOR_PROTOCOL_FD"
#: The longest line a parent reads; a longer one is dropped whole (reports are far smaller: 4 x H200's
#: largest line, the framework facts with their loaded libraries, is about 30 KB).
MAX_LINE_BYTES = 4 << 20
_lock = threading.Lock()
_stream: Any = None


def take() -> None:
    """Open the channel the parent named, and take its name out of this process's environment."""
    global _stream
    value = os.environ.pop(ENV, "")
    if value.isdigit():
        try:
            _stream = os.fdopen(int(value), "w", encoding="utf-8", closefd=True)
        except OSError:
            _stream = None


def emit(section: str, data: Any, default: Optional[Callable[[Any], Any]] = None) -> None:
    """One ``{"section": ..., "data": ...}`` line, written whole (threads of one child share the channel)."""
    line = json.dumps({"section": section, "data": data}, default=default) + "\n"
    with _lock:
        out = _stream or sys.stdout
        out.write(line)
        out.flush()


def close() -> None:
    """Close the channel: the parent then knows this child has said everything."""
    global _stream
    with _lock:
        if _stream is not None:
            try:
                _stream.close()
            except OSError:
                pass
            _stream = None
