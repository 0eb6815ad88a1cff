"""The standard streams made safe before anything is printed: a closed descriptor, a stream Python set to
None, an encoding that cannot hold every character."""

from __future__ import annotations

import codecs
import io
import os
import sys
from typing import Any

from gpudoctor.cli.errors import Failure


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


def can_encode(text: str) -> bool:
    """Whether standard output's encoding holds ``text`` (else the text renderer uses ASCII forms)."""
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "ascii")
        return True
    except (UnicodeEncodeError, LookupError):
        return False
