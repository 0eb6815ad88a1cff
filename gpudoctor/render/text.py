"""The terminal report: the verdict, one line per area with a mark, problems expanded under it with their
fix, and under Acceleration the proof table (render/proof.py).

One root cause seen eight times (a GPU model's slow matmul on every GPU, three frameworks loading the
same stub libcuda) is one entry: the findings with the same code, severity and fix text are grouped
(``group_findings``, which the Markdown renderer shares), each symptom a line under it, the fix once; a
group whose commands were already printed for another points back to them instead of repeating them.

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
from gpudoctor.render import proof
from gpudoctor.render.safe import indented, printable, terminal

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
    lines = [f"gpudoctor {terminal(tool.get('version', '?'))} report, {terminal(report.get('created', '?'))}: "
             f"{_verdict(report)}", ""]
    findings = report.get("findings") or []
    areas = (report.get("summary") or {}).get("areas") or {}
    shown_commands: dict[tuple[str, ...], str] = {}
    for area, status in areas.items():
        if area == "doctor" and status in ("pass", "skip") and not verbose:
            continue
        lines.append(f"[{paint(marks.get(status, '?'), status)}] {terminal(AREA_TITLES.get(area, area))}: "
                     f"{ft.area_headline(area, facts, findings)}")
        if area == "acceleration":
            lines.extend(_proof_lines(facts, verbose))
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
            for group in group_findings([f for f in findings if f.get("check") == check["id"]]):
                lines.extend(_group_lines(group, verbose, paint, sev_marks, shown_commands))
    lines.append("")
    lines.append(_summary_line(report))
    if verbose:  # the facts as a person reads them (sections of Key : value); the JSON stays in --format json
        from gpudoctor.render.facts_view import facts_view

        lines += ["", facts_view(raw_facts)]
    return "\n".join(lines) + "\n"


def group_findings(findings: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Findings with the same code, severity, fix text and links, in first-seen order: one root cause seen
    on eight GPUs (or by three frameworks) is one problem with one fix, not eight. Shared by the Markdown
    renderer."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for f in findings:
        rem = f.get("remediation") or {}
        key = (f.get("code"), f.get("severity"), rem.get("text"), tuple(str(x) for x in rem.get("links") or []))
        groups.setdefault(key, []).append(f)
    return list(groups.values())


def group_commands(group: list[dict[str, Any]]) -> list[str]:
    """The fix commands of a group, each once, in order."""
    return list(dict.fromkeys(str(c) for f in group for c in (f.get("remediation") or {}).get("commands") or []))


def group_where(group: list[dict[str, Any]]) -> str:
    """"GPU 0, 1, 2, 3" when every finding of the group is about one GPU, else ""."""
    subjects = [f.get("subject") or {} for f in group]
    if len(group) > 1 and all(s.get("kind") == "gpu" for s in subjects):
        indices = list(dict.fromkeys(str(s.get("gpu_index")) for s in subjects))
        return ("GPU " if len(indices) == 1 else "GPUs ") + ", ".join(indices)
    return ""


def _title(f: dict[str, Any]) -> str:
    subject = f.get("subject") or {}
    gpu = f"GPU {subject.get('gpu_index')}"
    where = f"{gpu}: " if subject.get("kind") == "gpu" and gpu not in str(f.get("title")) else ""
    return f"{terminal(where)}{terminal(f.get('title', ''))}"


#: At most this many details of one group are printed; the rest are in the JSON report.
MAX_DETAILS = 3


def group_items(group: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], str, int]:
    """A group as (title, its own detail or "") items, the detail they all share ("" if none or not
    shared), and how many details were left out past MAX_DETAILS. Titles repeated exactly are shown once."""
    details = list(dict.fromkeys(str(f.get("detail") or "") for f in group))
    shared = details[0] if len(details) == 1 else ""
    items: dict[tuple[str, str], None] = {}
    shown, left = 0, 0
    for f in group:
        own = "" if shared or not f.get("detail") else str(f["detail"])
        if own and shown >= MAX_DETAILS:
            own, left = "", left + 1
        shown += bool(own)
        items[(_title(f), own)] = None
    return list(items), shared, left


def _group_lines(group: list[dict[str, Any]], verbose: bool, paint: Callable[[str, str], str], marks: dict[str, str],
                 shown: dict[tuple[str, ...], str]) -> list[str]:
    first = group[0]
    sev, code = first.get("severity", INFO), terminal(first.get("code", "?"))
    brief = sev == INFO and not verbose
    items, shared, left = group_items(group)
    mark = paint(marks.get(sev, "?"), sev)
    if len(items) == 1:
        where = terminal(group_where(group))
        out = [f"    {mark} {code} " + (f"{len(group)} x on {where}: " if where else "") + items[0][0]]
        shared = shared or items[0][1]
    else:
        where = terminal(group_where(group))
        out = [f"    {mark} {code} {len(group)} findings{' on ' + where if where else ''}, one fix:"]
        for title, own in items:
            out.append(f"        {title}")
            if own and not brief:  # may be several lines (a framework's last lines): each stays indented
                out.append(f"          {indented(own, '          ')}")
    if brief:
        return out
    if shared:
        out.append(f"      {indented(shared, '      ')}")
    if left:
        out.append(f"      ({left} more detail(s): see the JSON report, --format json)")
    rem = first.get("remediation") or {}
    if rem.get("text"):
        out.append(f"      Fix: {indented(rem['text'], '      ')}")
    commands = tuple(group_commands(group))
    if commands and commands in shown:
        out.append(f"        (the same commands as for {shown[commands]} above)")
    else:
        for cmd in commands:
            out.append(f"        $ {terminal(cmd)}")
        if commands:
            shown[commands] = code
    for link in rem.get("links") or []:
        out.append(f"      See {terminal(link)}")
    return out


def _proof_lines(facts: dict[str, Any], verbose: bool) -> list[str]:
    """The proof of acceleration under the Acceleration line: one row per GPU and framework, aligned."""
    rows = proof.rows(facts)
    if not rows:
        return []
    table = [[header for _, header in proof.COLUMNS]] + [[terminal(r[key]) for key, _ in proof.COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(proof.COLUMNS))]
    out = ["    " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    out += [f"    {terminal(line)}" for line in proof.between_gpus(facts)]
    if verbose:
        out.append(f"    {terminal(proof.LEGEND)}")
    return out


def _verdict(report: dict[str, Any]) -> str:
    verdict = (report.get("summary") or {}).get("verdict")
    problems = group_findings([f for f in report.get("findings") or [] if f.get("severity") in (ERROR, WARNING)])
    words = {"ok": "no problems found", "warning": "works, with warnings", "error": "problems found"}
    text = words.get(verdict, "verdict unknown")
    if problems:
        text += f" ({len(problems)} to fix: {', '.join(dict.fromkeys(terminal(g[0].get('code')) for g in problems))})"
    return text


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
