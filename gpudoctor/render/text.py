"""The terminal report: one line per area with a mark, problems expanded under it with their fix.

Colour only when asked (the CLI decides: a TTY and no NO_COLOR); glyphs fall back to ASCII when
the output cannot encode them.

Every string of the report is data (a GPU name, a framework's error, a saved report's date) and is
cleaned first (render/safe.py): nothing in it reaches the terminal as a control sequence, and a string
placed on one line stays on it. Only this renderer's own colour codes and newlines are printed raw.
"""

from __future__ import annotations

from typing import Any, Callable

from gpudoctor.findings import ERROR, INFO, WARNING
from gpudoctor.render import facts_text as ft
from gpudoctor.render.safe import indented, json_text, printable, terminal

AREA_TITLES = {
    "doctor": "gpudoctor itself",
    "driver": "Driver",
    "gpus": "GPUs",
    "topology": "Topology",
    "visibility": "Visibility",
    "container": "Container",
    "toolkit": "CUDA toolkit",
    "libraries": "CUDA libraries",
    "python": "Python",
    "frameworks": "Frameworks",
    "compat": "Compatibility",
    "acceleration": "Acceleration",
}
MARKS = {"pass": "✓", "warn": "!", "fail": "✗", "skip": "-", "timeout": "⏱"}
ASCII_MARKS = {"pass": "OK", "warn": "!", "fail": "X", "skip": "-", "timeout": "T"}
SEVERITY_MARKS = {ERROR: "✗", WARNING: "!", INFO: "i"}
ASCII_SEVERITY = {ERROR: "X", WARNING: "!", INFO: "i"}
COLOURS = {"pass": "32", "warn": "33", "fail": "31", "timeout": "31", "skip": "2", ERROR: "31", WARNING: "33", INFO: "36"}


def render_text(report: dict[str, Any], verbose: bool = False, colour: bool = False, unicode: bool = True) -> str:
    paint = _painter(colour)
    marks, sev_marks = (MARKS, SEVERITY_MARKS) if unicode else (ASCII_MARKS, ASCII_SEVERITY)
    raw_facts = report.get("facts") or {}
    report = printable(report)
    facts = report.get("facts") or {}
    tool = report.get("tool") or {}
    lines = [f"gpudoctor {terminal(tool.get('version', '?'))} report, {terminal(report.get('created', '?'))}", ""]
    findings = report.get("findings") or []
    areas = (report.get("summary") or {}).get("areas") or {}
    for area, status in areas.items():
        if area == "doctor" and status in ("pass", "skip") and not verbose:
            continue
        lines.append(f"[{paint(marks.get(status, '?'), status)}] {terminal(AREA_TITLES.get(area, area))}: "
                     f"{ft.area_headline(area, facts)}")
        for check in report.get("checks") or []:
            if check.get("area") != area:
                continue
            if verbose:
                lines.append(f"      {terminal(check['status']):<7} {terminal(check['id'])} "
                             f"({check.get('duration_s', 0) * 1000:.1f} ms)"
                             + (f": {terminal(check['reason'])}" if check.get("reason") else ""))
            elif check.get("status") == "timeout":
                lines.append(f"    {paint(marks['timeout'], 'timeout')} {terminal(check['title'])}: "
                             f"{terminal(check.get('reason', ''))}")
            for f in findings:
                if f.get("check") == check["id"]:
                    lines.extend(_finding_lines(f, verbose, paint, sev_marks))
    lines.append("")
    lines.append(_summary_line(report))
    if verbose:
        lines += ["", "Facts", "-----", json_text(raw_facts)]  # the facts as recorded: JSON escapes controls
    return "\n".join(lines) + "\n"


def _finding_lines(f: dict[str, Any], verbose: bool, paint: Callable[[str, str], str], marks: dict[str, str]) -> list[str]:
    sev = f.get("severity", INFO)
    subject = (f.get("subject") or {})
    where = f"GPU {subject.get('gpu_index')}: " if subject.get("kind") == "gpu" and f"GPU {subject.get('gpu_index')}" not in f["title"] else ""
    out = [f"    {paint(marks.get(sev, '?'), sev)} {terminal(f['code'])} {terminal(where)}{terminal(f['title'])}"]
    if sev == INFO and not verbose:
        return out
    if f.get("detail"):  # may be several lines (a framework's last lines): each stays indented
        out.append(f"      {indented(f['detail'], '      ')}")
    rem = f.get("remediation") or {}
    if rem.get("text"):
        out.append(f"      Fix: {indented(rem['text'], '      ')}")
    for cmd in rem.get("commands") or []:
        out.append(f"        $ {terminal(cmd)}")
    for link in rem.get("links") or []:
        out.append(f"      See {terminal(link)}")
    return out


def _summary_line(report: dict[str, Any]) -> str:
    summary = report.get("summary") or {}
    counts = summary.get("counts") or {}
    verdict = {"ok": "No problems found.", "warning": "Works, with warnings.", "error": "Problems found."}
    return (f"{verdict.get(summary.get('verdict'), '')} {counts.get(ERROR, 0)} error(s), "
            f"{counts.get(WARNING, 0)} warning(s), {counts.get(INFO, 0)} note(s).").strip()


def _painter(colour: bool) -> Callable[[str, str], str]:
    if not colour:
        return lambda text, key: text
    return lambda text, key: f"\x1b[{COLOURS.get(key, '0')}m{text}\x1b[0m" if key in COLOURS else text
