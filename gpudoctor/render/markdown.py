"""A report to paste into a GitHub issue: verdict first, then findings with fixes, then the facts.

The report is data from someone's machine, pasted where GitHub renders it: every string in it is
written as literal text (render/safe.py), so a GPU name or a framework's error cannot close a
``<details>``, embed an image, ping ``@everyone``, start a heading or a table, or end a code block.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.render import facts_text as ft
from gpudoctor.render.devices import render_devices
from gpudoctor.render.safe import code_span, fence, json_text, markdown_inline, markdown_lines, printable, terminal
from gpudoctor.render.text import AREA_TITLES

STATUS_WORDS = {"pass": "✅ pass", "warn": "⚠️ warning", "fail": "❌ fail", "skip": "➖ skipped", "timeout": "⏱️ timed out"}


def render_markdown(report: dict[str, Any], visible: dict[int, list[int]]) -> str:
    raw_facts = report.get("facts") or {}
    report = printable(report)
    facts = report.get("facts") or {}
    summary = report.get("summary") or {}
    counts = summary.get("counts") or {}
    tool = report.get("tool") or {}
    out = [
        f"## gpudoctor report: {_cell(summary.get('verdict', '?'))}",
        "",
        f"{counts.get('error', 0)} error(s), {counts.get('warning', 0)} warning(s), {counts.get('info', 0)} note(s). "
        f"gpudoctor {_cell(tool.get('version', '?'))}, {_cell(report.get('created', '?'))}.",
        "",
        "| Area | Status | |",
        "|---|---|---|",
    ]
    for area, status in (summary.get("areas") or {}).items():
        out.append(f"| {_cell(AREA_TITLES.get(area, area))} | {_cell(STATUS_WORDS.get(status, status))} | "
                   f"{_cell(ft.area_headline(area, facts))} |")
    findings = report.get("findings") or []
    if findings:
        out += ["", "### Findings", ""]
        for f in sorted(findings, key=lambda f: ("error", "warning", "info").index(f.get("severity", "info"))):
            out += _finding(f)
    devices = render_devices(facts, visible).rstrip()
    opening, closing = fence(devices)
    out += ["", "<details><summary>Devices and topology</summary>", "", opening, devices, closing,
            "", "</details>", "", "<details><summary>Checks</summary>", "", "| Check | Status | Time |", "|---|---|---|"]
    for c in report.get("checks") or []:
        out.append(f"| {code_span(c['id'])} | {_cell(c['status'])}{': ' + _cell(c['reason']) if c.get('reason') else ''} | "
                   f"{c.get('duration_s', 0) * 1000:.1f} ms |")
    facts_json = json_text(raw_facts, markdown=True)  # the facts as recorded; JSON escapes what GitHub would act on
    opening, closing = fence(facts_json, "json")
    out += ["", "</details>", "", "<details><summary>All facts (JSON)</summary>", "", opening,
            facts_json, closing, "", "</details>", ""]
    return "\n".join(out)


def _finding(f: dict[str, Any]) -> list[str]:
    rem = f.get("remediation") or {}
    out = [f"- **{_text(f['code'])}** ({_text(f.get('severity'))}) {_text(f['title'])}"]
    if f.get("detail"):
        out.append(f"  {markdown_lines(f['detail'], '  ')}")
    if rem.get("text"):
        out.append(f"  *Fix:* {markdown_lines(rem['text'], '  ')}")
    if rem.get("commands"):
        commands = [terminal(c) for c in rem["commands"]]
        opening, closing = fence("\n".join(commands), "sh")
        out += [f"  {opening}", *[f"  {c}" for c in commands], f"  {closing}"]
    for link in rem.get("links") or []:
        out.append(f"  See {_link(link)}")
    return out


def _link(link: Any) -> str:
    """An autolink for a plain web address; anything else as text."""
    text = terminal(link)
    if text.startswith(("https://", "http://")) and not any(c in text for c in " <>`\\"):
        return f"<{text}>"
    return _text(text)


def _cell(text: Any) -> str:
    """Data in one table cell (the table's pipes and any HTML in it escaped)."""
    return markdown_inline(text)


def _text(text: Any) -> str:
    """Data in one line of a list item, outside a table."""
    return markdown_inline(text, table=False)
