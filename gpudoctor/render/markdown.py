"""A report to paste into a GitHub issue: verdict first, then findings with fixes, then the facts."""

from __future__ import annotations

import json
from typing import Any

from gpudoctor.render import facts_text as ft
from gpudoctor.render.devices import render_devices
from gpudoctor.render.text import AREA_TITLES

STATUS_WORDS = {"pass": "✅ pass", "warn": "⚠️ warning", "fail": "❌ fail", "skip": "➖ skipped", "timeout": "⏱️ timed out"}


def render_markdown(report: dict[str, Any], visible: dict[int, list[int]]) -> str:
    facts = report.get("facts") or {}
    summary = report.get("summary") or {}
    counts = summary.get("counts") or {}
    tool = report.get("tool") or {}
    out = [
        f"## gpudoctor report: {summary.get('verdict', '?')}",
        "",
        f"{counts.get('error', 0)} error(s), {counts.get('warning', 0)} warning(s), {counts.get('info', 0)} note(s). "
        f"gpudoctor {tool.get('version', '?')}, {report.get('created', '?')}.",
        "",
        "| Area | Status | |",
        "|---|---|---|",
    ]
    for area, status in (summary.get("areas") or {}).items():
        out.append(f"| {AREA_TITLES.get(area, area)} | {STATUS_WORDS.get(status, status)} | {_cell(ft.area_headline(area, facts))} |")
    findings = report.get("findings") or []
    if findings:
        out += ["", "### Findings", ""]
        for f in sorted(findings, key=lambda f: ("error", "warning", "info").index(f.get("severity", "info"))):
            out += _finding(f)
    out += ["", "<details><summary>Devices and topology</summary>", "", "```", render_devices(facts, visible).rstrip(), "```",
            "", "</details>", "", "<details><summary>Checks</summary>", "", "| Check | Status | Time |", "|---|---|---|"]
    for c in report.get("checks") or []:
        out.append(f"| `{c['id']}` | {c['status']}{': ' + _cell(c['reason']) if c.get('reason') else ''} | "
                   f"{c.get('duration_s', 0) * 1000:.1f} ms |")
    out += ["", "</details>", "", "<details><summary>All facts (JSON)</summary>", "", "```json",
            json.dumps(facts, indent=2, ensure_ascii=False), "```", "", "</details>", ""]
    return "\n".join(out)


def _finding(f: dict[str, Any]) -> list[str]:
    rem = f.get("remediation") or {}
    out = [f"- **{f['code']}** ({f.get('severity')}) {f['title']}"]
    if f.get("detail"):
        out.append(f"  {f['detail']}")
    if rem.get("text"):
        out.append(f"  *Fix:* {rem['text']}")
    if rem.get("commands"):
        out += ["  ```sh", *[f"  {c}" for c in rem["commands"]], "  ```"]
    for link in rem.get("links") or []:
        out.append(f"  See <{link}>")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
