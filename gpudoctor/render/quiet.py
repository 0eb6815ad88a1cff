"""`check --quiet`: only the problems, one line each, for logs; nothing at all when there are none.

One line each also when a title holds data: every string is cleaned to one line first (render/safe.py)."""

from __future__ import annotations

from typing import Any

from gpudoctor.render.safe import printable


def render_quiet(report: dict[str, Any]) -> str:
    report = printable(report, newlines=False)
    lines = []
    for f in report.get("findings") or []:
        if f.get("severity") == "info":
            continue
        subject = f.get("subject") or {}
        where = f"gpu{subject['gpu_index']}" if subject.get("kind") == "gpu" else subject.get("kind", "host")
        lines.append(f"gpudoctor: {f['severity']} {f['code']} [{where}] {f['title']}")
    for c in report.get("checks") or []:
        if c.get("status") == "timeout":
            lines.append(f"gpudoctor: timeout {c['id']}: {c.get('reason', '')}")
    return "".join(line + "\n" for line in lines)
