"""``--format json``: the report exactly, as data (report.to_json escapes what a terminal would act on)."""

from __future__ import annotations

from typing import Any

from gpudoctor.report import to_json


def render_report(report: dict[str, Any], options: Any) -> str:
    """The report as JSON, whatever the options: the data does not depend on how it is read."""
    return to_json(report)
