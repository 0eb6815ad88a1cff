"""The command line: parse, run the pipeline, pick a renderer, choose the exit code. Nothing else.

Each command lives in the module named for what it works on; importing them registers them on ``cli``."""

from __future__ import annotations

import _thread
import atexit
import os
import sys
import time
from typing import Any, Callable, Optional

from gpudoctor.cli import catalogue, check, matrix, reports  # noqa: F401 - registers the commands
from gpudoctor.cli.base import cli
from gpudoctor.cli.progress import progress_line
from gpudoctor.status import EXIT_INTERNAL

__all__ = ["cli", "main", "progress_line"]


def main() -> None:
    """The entry point. SIGTERM and SIGHUP (the terminal closed, a job scheduler's stop) end gpudoctor as
    Ctrl-C does: through the same clean-up, children killed, exit 3, and a backstop ends it even where
    Python swallowed that clean-up's KeyboardInterrupt. A stop that was ignored when gpudoctor started
    (``nohup``, a background job's Ctrl-C) stays ignored. Nothing gpudoctor starts outlives it (procs/warden.py):
    the warden is started first, while this process is still one thread."""
    import signal

    from gpudoctor.procs import warden

    warden.start()

    def _terminate(signum: int, frame: Any) -> None:
        _backstop()
        raise KeyboardInterrupt  # unwinds through the same clean-up as Ctrl-C: children killed, exit 3

    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _terminate)
    try:
        cli(prog_name="gpudoctor")
    except SystemExit as exc:
        _exit_now(exc.code)
        raise


#: How long the clean-up of a stop (SIGTERM, SIGHUP) may take before the backstop ends gpudoctor itself.
STOP_GRACE_S = 3.0
_stopping: list[bool] = []


def _backstop() -> None:
    """Once per process: end gpudoctor STOP_GRACE_S after a stop, as its clean-up would, in case the
    KeyboardInterrupt the stop raised was swallowed (Python drops an exception raised while it runs a weakref
    callback or a finaliser, and prints "Exception ignored"), which would leave the run going. A thread of the
    low-level module: the handler may have interrupted the main thread inside threading's own locks, or an
    import, so the thread imports nothing: the children's module, if loaded, is taken from sys.modules here."""
    if _stopping:
        return
    _stopping.append(True)
    children = sys.modules.get("gpudoctor.procs.child")  # not loaded: no child was started
    _thread.start_new_thread(_stop_after_grace, (getattr(children, "kill_all", None),))


def _stop_after_grace(kill_all: Optional[Callable[[], None]]) -> None:
    time.sleep(STOP_GRACE_S)
    try:
        if kill_all is not None:
            kill_all()
        os.write(2, b"gpudoctor: interrupted\n")
    finally:
        os._exit(EXIT_INTERNAL)


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
