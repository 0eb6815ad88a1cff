"""Where a report goes: redaction, the renderer the format table names (render/formats.py), then standard
output or a file."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import click

from gpudoctor import report as rep
from gpudoctor.cli.streams import can_encode
from gpudoctor.cli.writing import write
from gpudoctor.render import formats

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix


def emit(report: dict[str, Any], fmt: str, output: Optional[Path], verbose: bool, redact: bool = True,
         quiet: bool = False, fail_on: str = "error", duration_s: Optional[float] = None,
         deadline: Optional[float] = None, *, matrix: Matrix) -> None:
    """Redact (secrets always; host names, UUIDs, serials and home directories unless ``redact`` is
    false), then render and print or write (a FIFO or device ``output`` waits for its reader no later than
    ``deadline``, the run's --timeout, a ``time.monotonic()`` value). Every report leaves through here; every renderer but JSON
    shows the report's strings as untrusted text (render/safe.py), so nothing reaches the terminal raw.
    ``matrix`` is the compatibility matrix the report was judged by, which the renderers read again."""
    from gpudoctor.redact import redact_report
    from gpudoctor.render.safe import terminal

    report = rep.encodable(redact_report(report, identities=redact))
    kind = "quiet" if quiet and formats.BY_NAME[fmt].quiet else "report"
    text = render(report, fmt, verbose, to_terminal=output is None, fail_on=fail_on, kind=kind, duration_s=duration_s,
                  matrix=matrix)
    if output is None:
        click.echo(text, nl=False)
        return
    write(output, text, atomic=formats.BY_NAME[fmt].atomic, deadline=deadline)
    if kind != "quiet":  # a quiet check says nothing when healthy, not even where it wrote
        click.echo(f"gpudoctor: report written to {terminal(output)}", err=True)


def prepare(fmt: str, quiet: bool = False, *, matrix: Matrix) -> None:
    """Load what judging and emit will need whatever the facts say: the compatibility ``matrix`` (read and its
    citations checked), the redaction patterns, the renderer of ``fmt``. Called while the probes run (in
    their children and forked copies), this work is then not added to the wait after them. A matrix that
    cannot be read is left for judging to report."""
    from gpudoctor.compat import data
    from gpudoctor.redact import redact_report  # noqa: F401 - its patterns compile on import
    from gpudoctor.render import safe  # noqa: F401

    for topic in data.topics():
        try:
            matrix.topic(topic)
        except data.MatrixError:
            pass
    formats.preload(fmt, "quiet" if quiet and formats.BY_NAME[fmt].quiet else "report")


def render(report: dict[str, Any], fmt: str, verbose: bool, to_terminal: bool, fail_on: str = "error",
           kind: str = "report", duration_s: Optional[float] = None, *, matrix: Matrix) -> str:
    """The report in ``fmt``. JSON is the data, exactly (``json`` escapes control characters); every other
    renderer cleans every string of the report first (``safe.printable``) and keeps data on its line or
    cell, so the report it prints may come from anywhere (``analyze``). Colour only on a terminal that
    wants it; glyphs only where standard output's encoding holds them."""
    colour = (to_terminal and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
              and os.environ.get("TERM") != "dumb")
    options = formats.Options(matrix=matrix, verbose=verbose, colour=colour, unicode=can_encode("✓✗⏱"),
                              fail_on=fail_on, duration_s=duration_s)
    return formats.renderer(fmt, kind)(report, options)
