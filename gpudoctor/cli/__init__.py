"""The command line: parse, run the pipeline, pick a renderer, choose the exit code. Nothing else.

Each command lives in the module named for what it works on; importing them registers them on ``cli``."""

from __future__ import annotations

from typing import Any

from gpudoctor.cli import catalogue, check, matrix, reports  # noqa: F401 - registers the commands
from gpudoctor.cli.base import cli
from gpudoctor.cli.output import progress_line

__all__ = ["cli", "main", "progress_line"]


def main() -> None:
    import signal

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds through the same clean-up as Ctrl-C: children killed, exit 3

    signal.signal(signal.SIGTERM, _terminate)
    cli(prog_name="gpudoctor")
