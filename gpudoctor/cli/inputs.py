"""Reading a saved report: size-capped, UTF-8, and every failure a one-line BadInput."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudoctor import report as rep
from gpudoctor.cli.base import BadInput


def load_report(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(rep.MAX_REPORT_BYTES + 1)
        if len(data) > rep.MAX_REPORT_BYTES:
            raise BadInput(f"{path} is not a gpudoctor report (larger than {rep.MAX_REPORT_BYTES // (1024 * 1024)} MiB)")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return rep.load(text, source=str(path))
    except rep.ReportError as exc:
        raise BadInput(str(exc)) from None
