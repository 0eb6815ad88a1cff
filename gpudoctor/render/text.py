"""The terminal report: the verdict, one line per area with a mark, problems expanded under it with their
fix, and under Acceleration the proof table (render/proof.py).

One root cause seen eight times (a GPU model's slow matmul on every GPU, three frameworks loading the
same stub libcuda) is one entry: the findings with the same code, severity and fix text are grouped
(render/finding.py, which reads every finding for every format), each symptom a line under it, the fix
once; a group whose commands were already printed for another points back to them instead of repeating
them. The areas' titles are gpudoctor/areas.py's; the marks and colours are keyed by the status and
severity words of gpudoctor/findings.py.

Colour only when asked (the CLI decides: a TTY and no NO_COLOR); glyphs fall back to ASCII when
the output cannot encode them.

Every string of the report is data (a GPU name, a framework's error, a saved report's date) and is
cleaned first (render/safe.py): nothing in it reaches the terminal as a control sequence, and a string
placed on one line stays on it. Only this renderer's own colour codes and newlines are printed raw.
"""

from __future__ import annotations

from typing import Any, Callable

from gpudoctor.areas import title as area_title
from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.findings import ERROR, FAIL, INFO, PASS, SKIP, TIMEOUT, WARN, WARNING
from gpudoctor.render import facts_text as ft
from gpudoctor.render import finding, proof
from gpudoctor.render.finding import group_findings
from gpudoctor.render.safe import indented, printable, terminal
from gpudoctor.status import VERDICT_ERROR, VERDICT_OK, VERDICT_WARNING

MARKS = {PASS: "✓", WARN: "!", FAIL: "✗", SKIP: "-", TIMEOUT: "⏱"}
ASCII_MARKS = {PASS: "OK", WARN: "!", FAIL: "X", SKIP: "-", TIMEOUT: "T"}
SEVERITY_MARKS = {ERROR: "✗", WARNING: "!", INFO: "i"}
ASCII_SEVERITY = {ERROR: "X", WARNING: "!", INFO: "i"}
COLOURS = {PASS: "32", WARN: "33", FAIL: "31", TIMEOUT: "31", SKIP: "2", ERROR: "31", WARNING: "33", INFO: "36"}


def render_text(report: dict[str, Any], verbose: bool = False, colour: bool = False, unicode: bool = True,
                matrix: Matrix = BUNDLED) -> str:
    """The report as text; the compat headline and the proof table read ``matrix``, the one it was judged by."""
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
        if area == "doctor" and status in (PASS, SKIP) and not verbose:
            continue
        lines.append(f"[{paint(marks.get(status, '?'), status)}] {terminal(area_title(area))}: "
                     f"{ft.area_headline(area, facts, matrix, findings)}")
        if area == "acceleration":
            lines.extend(_proof_lines(facts, matrix, verbose))
        for check in report.get("checks") or []:
            if check.get("area") != area:
                continue
            if verbose:
                lines.append(f"      {terminal(check['status']):<7} {terminal(check['id'])} "
                             f"({check.get('duration_s', 0) * 1000:.1f} ms)"
                             + (f": {terminal(check['reason'])}" if check.get("reason") else ""))
            elif check.get("status") == TIMEOUT:
                lines.append(f"    {paint(marks[TIMEOUT], TIMEOUT)} {terminal(check['title'])}: "
                             f"{terminal(check.get('reason', ''))}")
            for group in group_findings([f for f in findings if f.get("check") == check["id"]]):
                lines.extend(_group_lines(group, verbose, paint, sev_marks, shown_commands))
    lines.append("")
    lines.append(_summary_line(report))
    if verbose:  # the facts as a person reads them (sections of Key : value); the JSON stays in --format json
        from gpudoctor.render.facts_view import facts_view

        lines += ["", facts_view(raw_facts)]
    return "\n".join(lines) + "\n"


def _group_lines(group: list[dict[str, Any]], verbose: bool, paint: Callable[[str, str], str], marks: dict[str, str],
                 shown: dict[tuple[str, ...], str]) -> list[str]:
    """A group of findings (render/finding.py) as the lines under its check: its mark and code, each
    symptom, then (unless it is only a note and not -v) the detail, the fix, its commands and links."""
    gp = finding.group_parts(group).for_terminal()
    sev, code = gp.severity, gp.code
    brief = sev == INFO and not verbose
    items, shared, left = finding.group_items(group)
    mark = paint(marks.get(sev, "?"), sev)
    if len(items) == 1:
        where = terminal(finding.group_where(group))
        out = [f"    {mark} {code} " + (f"{len(group)} x on {where}: " if where else "") + items[0][0]]
        shared = shared or items[0][1]
    else:
        where = terminal(finding.group_where(group))
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
    if gp.fix:
        out.append(f"      Fix: {indented(gp.fix, '      ')}")
    if gp.commands and gp.commands in shown:
        out.append(f"        (the same commands as for {shown[gp.commands]} above)")
    else:
        out += [f"        $ {cmd}" for cmd in gp.commands]
        if gp.commands:
            shown[gp.commands] = code
    out += [f"      See {link}" for link in gp.links]
    return out


def _proof_lines(facts: dict[str, Any], matrix: Matrix, verbose: bool) -> list[str]:
    """The proof of acceleration under the Acceleration line: one row per GPU and framework, aligned."""
    rows = proof.rows(facts, matrix)
    if not rows:
        return []
    table = [[header for _, header in proof.COLUMNS]] + [[terminal(r[key]) for key, _ in proof.COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(proof.COLUMNS))]
    out = ["    " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    out += [f"    {terminal(line)}" for line in proof.between_gpus(facts, matrix)]
    if verbose:
        out.append(f"    {terminal(proof.LEGEND)}")
    return out


#: The verdict's words when no area was judged (each is skipped, or only noted what it could not judge: an AMD
#: ROCm stack): "no problems found" would claim a pass on what nobody looked at.
NOTHING_JUDGED = "nothing judged, see the notes"


def nothing_judged(report: dict[str, Any]) -> bool:
    """Whether the report lists its areas and every one but the doctor's own was skipped (a report that does not
    list them is taken as judged, as it was written)."""
    areas = (report.get("summary") or {}).get("areas")
    if not isinstance(areas, dict) or not areas:
        return False
    return all(status == SKIP for area, status in areas.items() if area != "doctor")


def _verdict(report: dict[str, Any]) -> str:
    verdict: Any = (report.get("summary") or {}).get("verdict")
    problems = group_findings([f for f in report.get("findings") or [] if f.get("severity") in (ERROR, WARNING)])
    words = {VERDICT_OK: "no problems found", VERDICT_WARNING: "works, with warnings", VERDICT_ERROR: "problems found"}
    text = NOTHING_JUDGED if verdict == VERDICT_OK and nothing_judged(report) else words.get(verdict, "verdict unknown")
    if problems:
        codes = dict.fromkeys(finding.parts(g[0]).for_terminal().code for g in problems)
        text += f" ({len(problems)} to fix: {', '.join(codes)})"
    return text


def _summary_line(report: dict[str, Any]) -> str:
    summary: Any = report.get("summary") or {}
    counts = summary.get("counts") or {}
    verdict = {VERDICT_OK: NOTHING_JUDGED.capitalize() + "." if nothing_judged(report) else "No problems found.",
               VERDICT_WARNING: "Works, with warnings.", VERDICT_ERROR: "Problems found."}
    return (f"{verdict.get(summary.get('verdict'), '')} {counts.get(ERROR, 0)} error(s), "
            f"{counts.get(WARNING, 0)} warning(s), {counts.get(INFO, 0)} note(s).").strip()


def _painter(colour: bool) -> Callable[[str, str], str]:
    if not colour:
        return lambda text, key: text
    return lambda text, key: f"\x1b[{COLOURS.get(key, '0')}m{text}\x1b[0m" if key in COLOURS else text


def render_report(report: dict[str, Any], options: Any) -> str:
    """``--format text`` as the format table (render/formats.py) calls it."""
    return render_text(report, verbose=options.verbose, colour=options.colour, unicode=options.unicode,
                       matrix=options.matrix)
