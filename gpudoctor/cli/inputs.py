"""Reading a saved report: size-capped, UTF-8, and every failure a one-line BadInput."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudoctor import report as rep
import click

from gpudoctor.cli.base import LOADED_REPORTS
from gpudoctor.cli.errors import BadInput


def load_report(path: Path) -> dict[str, Any]:
    """The saved report at ``path``, validated by ``report.load``; recorded in the command's context, so
    that anything that still raises on it is reported as bad input (exit 2) by ``DoctorGroup``."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta.setdefault(LOADED_REPORTS, []).append(str(path))
    from gpudoctor.files import TooLarge, read_capped

    try:
        text = read_capped(str(path), rep.MAX_REPORT_BYTES).decode("utf-8")
    except TooLarge as exc:
        raise BadInput(f"{path} is not a gpudoctor report ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return rep.load(text, source=str(path))
    except rep.ReportError as exc:
        raise BadInput(str(exc)) from None
