"""How a framework child ends, and what its parent (child.run_json_lines) reads of it."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from gpudoctor.procs import protocol

#: The section of the last line a child prints through end_child: its exit status, said before it exits.
EXIT_SECTION = "exit"


def end_child(code: int) -> NoReturn:
    """Say the exit status, close stdout and stderr, and exit at once.

    The parent returns as soon as it has read the status and both pipes are closed, so the rest of the
    exit, the driver freeing the child's GPU contexts (longer the more GPUs), does not delay the run.
    os._exit skips the interpreter's teardown (a framework's exit handlers, freeing every tensor and
    cached GPU block one by one), which takes a noticeable part of a second for PyTorch and TensorFlow
    and is not needed: the kernel and the driver free everything at exit."""
    try:
        sys.stderr.flush()
        sys.stdout.flush()
        protocol.emit(EXIT_SECTION, code)
        protocol.close()
        os.close(1)
        os.close(2)
    except (OSError, ValueError):
        pass  # the parent then waits for the exit itself
    os._exit(code)
