"""Where a report goes: redaction, the renderer, standard output or a file, and the progress line."""

from __future__ import annotations

import codecs
import errno
import io
import os
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import click

from gpudoctor import report as rep
from gpudoctor.cli.errors import Failure


def emit(report: dict[str, Any], fmt: str, output: Optional[Path], verbose: bool, redact: bool = True,
          quiet: bool = False, fail_on: str = "error") -> None:
    """Redact (secrets always; host names, UUIDs, serials and home directories unless ``redact`` is
    false), then render and print or write. Every report leaves through here; every renderer but JSON
    shows the report's strings as untrusted text (render/safe.py), so nothing reaches the terminal raw."""
    from gpudoctor.redact import redact_report
    from gpudoctor.render.safe import terminal

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
    click.echo(f"gpudoctor: report written to {terminal(output)}", err=True)


def prepare(fmt: str, quiet: bool = False) -> None:
    """Load what judging and emit will need whatever the facts say: the compatibility matrix (read and its
    citations checked), the redaction patterns, the renderer of ``fmt``. Called while the probes run (in
    their children and forked copies), this work is then not added to the wait after them. A matrix that
    cannot be read is left for judging to report."""
    from gpudoctor.compat import data
    from gpudoctor.redact import redact_report  # noqa: F401 - its patterns compile on import
    from gpudoctor.render import safe  # noqa: F401

    for topic in data.topics():
        try:
            data.load_topic(topic)
        except data.MatrixError:
            pass
    if fmt == "junit":
        from gpudoctor.render import junit  # noqa: F401
    elif fmt == "markdown":
        from gpudoctor.render import markdown  # noqa: F401
    elif fmt == "text" and quiet:
        from gpudoctor.render import quiet as quiet_renderer  # noqa: F401
    elif fmt == "text":
        from gpudoctor.render import text  # noqa: F401


def render(report: dict[str, Any], fmt: str, verbose: bool, to_terminal: bool, fail_on: str = "error") -> str:
    """The report in ``fmt``. JSON is the data, exactly (``json`` escapes control characters); text,
    markdown and JUnit each clean every string of the report first (``safe.printable``) and keep data on
    its line or cell, so the report they print may come from anywhere (``analyze``)."""
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

    colour = to_terminal and sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    return render_text(report, verbose=verbose, colour=colour, unicode=can_encode("✓✗⏱"))


def can_encode(text: str) -> bool:
    """Whether standard output's encoding holds ``text`` (else the text renderer uses ASCII forms)."""
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "ascii")
        return True
    except (UnicodeEncodeError, LookupError):
        return False


def set_deadline(deadline: Optional[float]) -> None:
    """The run's --timeout deadline (``time.monotonic()``), which bounds how long writing the report to a
    FIFO or a device may wait for its reader."""
    global _deadline
    _deadline = deadline


_deadline: Optional[float] = None
#: Even past the deadline, a FIFO or device gets this long: a reader that is already waiting is served.
SPECIAL_FILE_GRACE_S = 1.0


def write(path: Path, text: str) -> None:
    """Write the report to ``path`` as the shell's ``>`` would, and say so when it could not.

    The path is opened the normal way (``O_WRONLY | O_CREAT | O_TRUNC``, mode 0666 less the umask): a
    symlink is followed as the kernel allows (``fs.protected_symlinks`` applies), an existing file keeps
    its inode, mode, owner and hard links, a bind-mounted file (``docker -v``, a Kubernetes ``subPath``)
    is written in place, and a file the user may not write is refused. The whole text is encoded in
    memory first, then written, flushed and fsynced; when that fails half-way the file is truncated
    (a regular file is left empty, never holding a partial report) and the error says so, exit 3.
    A FIFO or a device (``/dev/stdout``, a terminal) is opened and written in a helper thread bounded by
    the time left before ``--timeout``'s deadline (at least ``SPECIAL_FILE_GRACE_S``), so a FIFO
    nobody reads never holds gpudoctor past it; without ``--timeout`` it waits, as ``>`` does."""
    data = text.encode("utf-8", ESCAPE_ERRORS)
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        special = False  # not there yet (or unreadable): the open below says why, if anything
    if special and _deadline is not None:
        _write_bounded(path, data, max(_deadline - time.monotonic(), SPECIAL_FILE_GRACE_S))
        return
    _write_file(path, data)


def _write_bounded(path: Path, data: bytes, wait_s: float) -> None:
    """``_write_file`` in a daemon thread, given up on after ``wait_s``: ``open`` of a FIFO with no reader,
    or a write to one whose reader stopped reading, blocks in the kernel where no timer can reach it."""
    outcome: list[BaseException] = []

    def work() -> None:
        try:
            _write_file(path, data)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome.append(exc)
        else:
            outcome.append(SystemExit(0))  # a marker: done

    worker = threading.Thread(target=work, name="gpudoctor-write", daemon=True)
    worker.start()
    worker.join(min(wait_s, threading.TIMEOUT_MAX))
    if not outcome:
        raise Failure(f"could not write the report to {path}: nothing read it before the --timeout deadline "
                      f"(waited {wait_s:.1f} s)")
    if not isinstance(outcome[0], SystemExit):
        raise outcome[0]


def _write_file(path: Path, data: bytes) -> None:
    written = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}") from None
    regular = False
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        view = memoryview(data)
        while written < len(data):
            written += os.write(fd, view[written:])
        if regular:
            try:
                os.fsync(fd)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EROFS):
                    raise
    except OSError as exc:
        part = ""
        if regular:
            try:
                os.ftruncate(fd, 0)  # an empty file rather than a report that stops half-way
                part = " (the file was left empty)" if written else ""
            except OSError:
                part = f" (the report is incomplete: {written} of {len(data)} bytes written)" if written else ""
        elif written:
            part = f" (the report is incomplete: {written} of {len(data)} bytes written)"
        try:
            os.close(fd)
        except OSError:
            pass
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}{part}") from None
    try:
        os.close(fd)  # NFS, for one, reports a failed write only here
    except OSError as exc:
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}") from None


#: The codec error handler for everything gpudoctor prints or writes: a character the output's encoding
#: cannot hold (``PYTHONIOENCODING=latin-1`` and a "–" or "✅"; a lone surrogate) becomes ``\uXXXX``, a
#: valid escape inside a JSON string and readable text elsewhere, never a UnicodeEncodeError.
ESCAPE_ERRORS = "gpudoctor-escape"


def _escape(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        cp = ord(ch)
        if cp > 0xFFFF:  # as JSON writes it: a surrogate pair
            cp -= 0x10000
            out.append(f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}")
        else:
            out.append(f"\\u{cp:04x}")
    return "".join(out), exc.end


codecs.register_error(ESCAPE_ERRORS, _escape)


class OutputClosed(Failure):
    """Standard output was closed (``>&-``) or its reader went away, so the report could not be delivered."""


class _ClosedStream(io.TextIOBase):
    """Stands in for a standard stream that was closed when gpudoctor started (Python then sets it to
    None): writing to a closed standard output is a one-line error, exit 3; a closed standard error
    swallows what is written, so a report written to a file is still written."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, name: str, fail: bool) -> None:
        super().__init__()
        self.name = name
        self._fail = fail

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise io.UnsupportedOperation(f"{self.name} is closed")

    def write(self, text: Any) -> int:
        if not isinstance(text, str):
            raise TypeError("a text stream")  # tells click this is no binary stream
        if text and self._fail:
            raise OutputClosed("standard output is closed: the report could not be delivered "
                               "(redirect it, or give --output FILE)")
        return len(text)

    def flush(self) -> None:
        pass


def guard_standard_streams() -> None:
    """Make gpudoctor safe to start with a standard stream closed, and its output safe to encode.

    A descriptor 0, 1 or 2 that is closed is opened on /dev/null, so that no file gpudoctor opens later
    (the ``--output`` file, a child's pipe) takes its number and receives what a child writes there.
    A ``sys.stdout``/``sys.stderr`` that Python set to None becomes a ``_ClosedStream``. A stream whose
    encoding cannot hold every character escapes it (``ESCAPE_ERRORS``) instead of failing."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:
                continue
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = _ClosedStream("<stdout>", fail=True)
    if sys.stderr is None:
        sys.stderr = _ClosedStream("<stderr>", fail=False)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            try:
                stream.reconfigure(errors=ESCAPE_ERRORS)
            except (ValueError, OSError, io.UnsupportedOperation):
                pass


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
