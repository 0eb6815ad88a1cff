"""Where a report goes: redaction, the renderer, standard output or a file, and the progress line."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

import click

from gpudoctor import report as rep
from gpudoctor.cli.base import Failure


def emit(report: dict[str, Any], fmt: str, output: Optional[Path], verbose: bool, redact: bool = True,
          quiet: bool = False, fail_on: str = "error") -> None:
    """Redact (secrets always; host names, UUIDs, serials and home directories unless ``redact`` is
    false), then render and print or write. Every report leaves through here."""
    from gpudoctor.redact import redact_report

    report = rep.encodable(redact_report(report, identities=redact))
    if quiet and fmt == "text":
        from gpudoctor.render.quiet import render_quiet

        text = render_quiet(report)
        write(output, text) if output else click.echo(text, nl=False)
        return
    text = render(report, fmt, verbose, to_terminal=output is None, fail_on=fail_on)
    if output is None:
        click.echo(text, nl=False)
        return
    write(output, text)
    click.echo(f"gpudoctor: report written to {output}", err=True)


def render(report: dict[str, Any], fmt: str, verbose: bool, to_terminal: bool, fail_on: str = "error") -> str:
    if fmt == "json":
        return rep.to_json(report)
    if fmt == "junit":
        from gpudoctor.render.junit import render_junit

        return render_junit(report, fail_on)
    if fmt == "markdown":
        from gpudoctor import pipeline
        from gpudoctor.render.markdown import render_markdown

        return render_markdown(report, pipeline.cuda_numbers(report["facts"]))
    from gpudoctor.render.text import render_text

    colour = to_terminal and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    return render_text(report, verbose=verbose, colour=colour, unicode=can_encode("✓✗⏱"))


def can_encode(text: str) -> bool:
    try:
        text.encode(sys.stdout.encoding or "ascii")
        return True
    except (UnicodeEncodeError, LookupError):
        return False


def write(path: Path, text: str) -> None:
    """Write through a temporary file, so a full disk never leaves a truncated report behind.

    A path that exists and is not a regular file (/dev/stdout, a FIFO, /dev/full) is written in
    place: renaming over it would replace the device node or pipe with a file. A symlink to a
    file keeps the link: the file it points to is replaced."""
    try:
        if os.path.exists(path) and not os.path.isfile(path):
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return
        target = Path(os.path.realpath(path)) if os.path.islink(path) else path
        directory = target.parent if str(target.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}") from None


_progress_shown = False
SPINNER = "|/-\\"


def progress_printer() -> Optional[Callable[[Any], None]]:
    """A one-line live display on a terminal (standard error only, so piped or redirected output stays
    clean): a spinner, the probes finished out of all, the seconds so far, and what is still running."""
    if not sys.stderr.isatty():
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
    if _progress_shown:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()


def progress_line(progress: Any, spin: str = "") -> str:
    """``gpudoctor: | 6/9 done, 4 s; running: framework workloads on every GPU, +1 more``."""
    running = list(progress.running)
    what = "" if not running else f"; running: {running[0]}" + (f", +{len(running) - 1} more" if len(running) > 1 else "")
    return f"gpudoctor: {spin + ' ' if spin else ''}{progress.done}/{progress.total} done, {progress.elapsed_s:.0f} s{what}"
