"""`check --quiet`: only the problems, one line each, for logs; nothing at all when there are none.

One line each also when a title holds data: every string is cleaned to one line first (render/safe.py).
A finding's parts are read by render/finding.py, as in every format."""

from __future__ import annotations

from typing import Any

from gpudoctor.findings import INFO, TIMEOUT
from gpudoctor.render import finding
from gpudoctor.render.safe import printable


def render_quiet(report: dict[str, Any]) -> str:
    report = printable(report, newlines=False)
    lines = []
    for f in report.get("findings") or []:
        p = finding.parts(f)
        if p.severity == INFO:
            continue
        where = f"gpu{p.subject.gpu_index}" if p.subject.kind == "gpu" else p.subject.kind
        lines.append(p.head("gpudoctor: {severity} {code} [{where}] {title}", where=where))
    for c in report.get("checks") or []:
        if c.get("status") == TIMEOUT:
            lines.append(f"gpudoctor: {TIMEOUT} {c['id']}: {c.get('reason', '')}")
    return "".join(line + "\n" for line in lines)


def render_report(report: dict[str, Any], options: Any) -> str:
    """``check --quiet`` as the format table (render/formats.py) calls it."""
    return render_quiet(report)
