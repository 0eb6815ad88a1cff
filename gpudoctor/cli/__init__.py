"""The command line: parse, run the pipeline, pick a renderer, choose the exit code. Nothing else.

Each command lives in the module named for what it works on; importing them registers them on ``cli``."""

from __future__ import annotations

from typing import Any

from gpudoctor.cli import catalogue, check, matrix, reports  # noqa: F401 - registers the commands
from gpudoctor.cli.base import cli
from gpudoctor.cli.output import progress_line

__all__ = ["cli", "main", "progress_line"]


def main() -> None:
    """The entry point. SIGTERM and SIGHUP (the terminal closed, a job scheduler's stop) end gpudoctor as
    Ctrl-C does: through the same clean-up, children killed, exit 3. A hang-up that was ignored when
    gpudoctor started (``nohup``) stays ignored."""
    import signal

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds through the same clean-up as Ctrl-C: children killed, exit 3

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _terminate)
    cli(prog_name="gpudoctor")
