"""The command line: parse, run the pipeline, pick a renderer, choose the exit code. Nothing else.

Each command lives in the module named for what it works on; importing them registers them on ``cli``."""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

from gpudoctor.cli import catalogue, check, matrix, reports  # noqa: F401 - registers the commands
from gpudoctor.cli.base import cli
from gpudoctor.cli.progress import progress_line

__all__ = ["cli", "main", "progress_line"]


def main() -> None:
    """The entry point. SIGTERM and SIGHUP (the terminal closed, a job scheduler's stop) end gpudoctor as
    Ctrl-C does: through the same clean-up, children killed, exit 3. A hang-up that was ignored when
    gpudoctor started (``nohup``) stays ignored. Nothing gpudoctor starts outlives it (procs/warden.py):
    the warden is started first, while this process is still one thread."""
    import signal

    from gpudoctor.procs import warden

    warden.start()

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds through the same clean-up as Ctrl-C: children killed, exit 3

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _terminate)
    try:
        cli(prog_name="gpudoctor")
    except SystemExit as exc:
        _exit_now(exc.code)
        raise


def _exit_now(code: Any) -> None:
    """End the process at once with ``code``. Python's own exit frees every module and object one by one:
    40-60 ms of a `check --quick` that is meant to take half a second, more than judging takes. What has to
    happen at exit still does: the standard streams are flushed and the atexit functions run (the GPU lock
    folder is removed). A code Python would print (a message), or an output that cannot be flushed (a
    reader that closed its pipe), returns, and takes Python's own way out."""
    if code is not None and not isinstance(code, int):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    atexit._run_exitfuncs()
    os._exit(code or 0)
