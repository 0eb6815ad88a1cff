"""A report to paste into a GitHub issue: the verdict first, then the problems (one entry per root cause,
each fix once), the areas, the proof of acceleration, and the facts in a form that fits.

It must fit an issue body (GitHub refuses one over 65,536 characters): the whole report stays under
BUDGET bytes on every machine and job recorded. The facts travel compressed (zlib, then base64) in a
collapsed block that `gpudoctor analyze` reads back to re-judge the report exactly as its JSON
(gpudoctor/pastes/markdown_report.py); where even that does not fit, the largest parts are left out in
the order of DROP_ORDER and the report says which. The whole report as a file is
``--format json --output report.json``, to attach; the Markdown says so.

The report is data from someone's machine, pasted where GitHub renders it: every string in it is
written as literal text (render/safe.py), so a GPU name or a framework's error cannot close a
``<details>``, embed an image, ping ``@everyone``, start a heading or a table, or end a code block. The
compressed facts are base64 (letters, digits, ``+``, ``/``, ``=``) in a code block: inert to GitHub.

Each finding is read through render/finding.py, as in every format; the areas' titles are
gpudoctor/areas.py's; the status and severity words are keyed by gpudoctor/findings.py's.
"""

from __future__ import annotations

import base64
import copy
import json
import zlib
from typing import Any, Callable, Optional

from gpudoctor.areas import title as area_title
from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.findings import ERROR, FAIL, INFO, PASS, SKIP, TIMEOUT, WARN, WARNING
from gpudoctor.render import facts_text as ft
from gpudoctor.render import finding, proof
from gpudoctor.render.devices import render_devices
from gpudoctor.render.safe import code_span, fence, markdown_inline, markdown_lines, printable, terminal
from gpudoctor.status import VERDICT_ERROR, VERDICT_OK, VERDICT_WARNING

STATUS_WORDS = {PASS: "✅ pass", WARN: "⚠️ warning", FAIL: "❌ fail", SKIP: "➖ skipped", TIMEOUT: "⏱️ timed out"}
VERDICTS = {VERDICT_OK: "No problems found.", VERDICT_WARNING: "Works, with warnings.", VERDICT_ERROR: "Problems found."}

#: The most bytes (UTF-8) the report may take: under GitHub's 65,536-character issue body, with room
#: for the user's own words around it.
BUDGET = 60_000
#: The code block's info string and first line: what markdown_report.py looks for.
FACTS_INFO = "gpudoctor-facts"
FACTS_FORMAT = "zlib+base64 json v1"
LINE = 100  # base64 characters per line


def _drop_node_reports(facts: dict[str, Any]) -> bool:
    nodes = (facts.get("cluster") or {}).get("nodes") if isinstance(facts.get("cluster"), dict) else None
    dropped = False
    for node in nodes if isinstance(nodes, list) else []:
        if isinstance(node, dict) and node.get("report") is not None:
            node["report"] = None
            dropped = True
    return dropped


def _drop(path: str) -> Callable[[dict[str, Any]], bool]:
    def drop(facts: dict[str, Any]) -> bool:
        node: Any = facts
        *parents, last = path.split(".")
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            del node[last]
            return True
        return False
    return drop


#: What is left out of the compressed facts, in this order, until they fit: first the other nodes' own
#: reports in a torchrun job (each node can attach its own), then the largest sections that judge the
#: least about GPU acceleration. Each with the words the report uses for it.
DROP_ORDER: tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...] = (
    ("the other nodes' own reports (cluster.nodes[].report)", _drop_node_reports),
    ("the CUDA library copies (libraries.copies)", _drop("libraries.copies")),
    ("the Python packages (python.distributions)", _drop("python.distributions")),
    ("the libraries each framework loaded (frameworks.*.info.loaded_libraries)",
     lambda f: any([_drop("info.loaded_libraries")(fw) for fw in (f.get("frameworks") or {}).values() if isinstance(fw, dict)])),
    ("the multi-GPU timings (multigpu)", _drop("multigpu")),
    ("the workload details (workload)", _drop("workload")),
    ("the GPUs' NVML facts (gpus)", _drop("gpus")),
)


def render_markdown(report: dict[str, Any], visible: dict[int, list[int]], matrix: Matrix = BUNDLED) -> str:
    """The report as Markdown for an issue; the compat headline and the proof table read ``matrix``, the one
    it was judged by, and ``visible`` gives each GPU's cuda:N numbers."""
    raw_facts = report.get("facts") or {}
    report = printable(report)
    facts = report.get("facts") or {}
    summary: Any = report.get("summary") or {}
    counts = summary.get("counts") or {}
    tool = report.get("tool") or {}
    findings = report.get("findings") or []
    groups = finding.group_findings(sorted(findings, key=lambda f: _SEVERITIES.index(f.get("severity", INFO))
                                           if f.get("severity") in _SEVERITIES else 3))
    problems = [g for g in groups if g[0].get("severity") in (ERROR, WARNING)]
    verdict = VERDICTS.get(summary.get("verdict"), "")
    head = [
        f"## gpudoctor report: {_cell(summary.get('verdict', '?'))}",
        "",
        f"**{verdict}**" + (f" {len(problems)} problem(s) to fix." if problems else "") +
        f" {counts.get(ERROR, 0)} error(s), {counts.get(WARNING, 0)} warning(s), {counts.get(INFO, 0)} note(s). "
        f"gpudoctor {_cell(tool.get('version', '?'))}, {_cell(report.get('created', '?'))}.",
    ]
    findings_part: list[str] = []
    if groups:
        findings_part += ["", "### Findings", ""]
        shown: dict[tuple[str, ...], str] = {}
        for n, group in enumerate(groups):
            entry = _group(group, shown)
            if _size("\n".join(findings_part + entry)) > BUDGET // 2:  # thousands of findings (a report from anywhere)
                findings_part.append(f"- {len(groups) - n} more finding(s) left out to fit an issue: see the JSON "
                                     "report (`--format json --output report.json`).")
                break
            findings_part += entry
    body = findings_part + ["", "| Area | Status | |", "|---|---|---|"]
    for area, status in (summary.get("areas") or {}).items():
        body.append(f"| {_cell(area_title(area))} | {_cell(STATUS_WORDS.get(status, status))} | "
                    f"{_cell(ft.area_headline(area, facts, matrix, findings))} |")
    body += _proof(facts, matrix)
    devices = render_devices(facts, visible).rstrip()
    opening, closing = fence(devices)
    details = ["", "<details><summary>Devices and topology</summary>", "", opening, devices, closing, "", "</details>",
               "", "<details><summary>Checks</summary>", "", "| Check | Status | Time |", "|---|---|---|"]
    for c in report.get("checks") or []:
        details.append(f"| {code_span(c.get('id', '?'))} | {_cell(c.get('status', '?'))}"
                       f"{': ' + _cell(c['reason']) if c.get('reason') else ''} | "
                       f"{_ms(c.get('duration_s'))} |")
    details += ["", "</details>"]
    text = "\n".join(head + body + details)
    if _size(text) > BUDGET - 2000:  # only a report with an extraordinary number of GPUs or checks
        text = "\n".join(head + body + ["", "The devices and checks tables are left out to fit an issue: see the JSON "
                                             "report (`--format json --output report.json`)."])
    if _size(text) > BUDGET - 2000:  # values no real machine has (GPU names thousands of characters long)
        text = "\n".join(_shorten(line) for line in text.split("\n"))
    if _size(text) > BUDGET - 2000:
        text = "\n".join(_shorten(line) for line in (head + findings_part)[:200]) + (
            "\n\nThe area table is left out to fit an issue: see the JSON report (`--format json --output report.json`).")
    return text + "\n" + facts_block(raw_facts, BUDGET - _size(text) - 1)


#: The longest line of a report that does not fit an issue, in characters: a table row cut there still
#: shows what it is about, and every escape before the cut stays whole (escapes are a few characters long).
LONGEST_LINE = 1000


def _shorten(line: str) -> str:
    """``line`` cut to LONGEST_LINE characters, saying so; a table row is closed again."""
    if len(line) <= LONGEST_LINE:
        return line
    cut = line[:LONGEST_LINE].rstrip("\\")  # never leave an escaping backslash before the marker
    return cut + (" … (cut to fit an issue) |" if line.startswith("|") else " … (cut to fit an issue)")


_SEVERITIES = (ERROR, WARNING, INFO)


def _ms(seconds: Any) -> str:
    return f"{seconds * 1000:.1f} ms" if isinstance(seconds, (int, float)) else "?"


def _size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


def encode_facts(facts: Any) -> str:
    """The facts as compact JSON, zlib-compressed, base64, in lines of LINE characters."""
    # ASCII JSON: a lone surrogate or any other code point travels as a \\u escape and reads back exactly
    data = base64.b64encode(zlib.compress(json.dumps(facts, separators=(",", ":")).encode("ascii"), 9)).decode("ascii")
    return "\n".join(data[i:i + LINE] for i in range(0, len(data), LINE))


def facts_block(facts: dict[str, Any], room: int) -> str:
    """The collapsed block of compressed facts in at most ``room`` bytes: whole if it fits, else with parts
    left out in DROP_ORDER (named in the block), else no facts at all (and the report says so)."""
    attach = ("The whole report as a file to attach: run gpudoctor again with `--format json --output report.json`.")
    left_out: list[str] = []
    trimmed: Optional[dict[str, Any]] = None
    steps = iter(DROP_ORDER)
    while True:
        data = encode_facts(trimmed if trimmed is not None else facts)
        header = FACTS_FORMAT + ("; left out to fit: " + "; ".join(left_out) if left_out else "")
        note = (f"Left out to fit an issue: {', '.join(left_out)}. " if left_out else "")
        block = "\n".join(["", "<details><summary>All facts, compressed (read back by <code>gpudoctor analyze</code>)"
                           "</summary>", "", note + "`gpudoctor analyze` on this Markdown re-judges these facts. " + attach,
                           "", "```" + FACTS_INFO, header, data, "```", "", "</details>", ""])
        if _size(block) <= room:
            return block
        for words, drop in steps:
            if trimmed is None:
                trimmed = copy.deepcopy(facts)
            if drop(trimmed):
                left_out.append(words)
                break
        else:
            return "\n".join(["", f"The facts did not fit an issue and are left out. {attach}", ""])


def _proof(facts: dict[str, Any], matrix: Matrix) -> list[str]:
    rows = proof.rows(facts, matrix)
    if not rows:
        return []
    out = ["", "### Proof of acceleration", "", "| " + " | ".join(_cell(h) for _, h in proof.COLUMNS) + " |",
           "|" + "---|" * len(proof.COLUMNS)]
    out += ["| " + " | ".join(_cell(r[key]) for key, _ in proof.COLUMNS) + " |" for r in rows]
    between = proof.between_gpus(facts, matrix)
    if between:
        out.append("")
        out += [f"- {_text(line)}" for line in between]
    out += ["", f"<sub>{_text(proof.LEGEND)}</sub>"]
    return out


def _group(group: list[dict[str, Any]], shown: dict[tuple[str, ...], str]) -> list[str]:
    """One entry per root cause: the code, each symptom (a GPU, a framework) as one line, the fix once."""
    gp = finding.group_parts(group)
    code, sev = _text(gp.code), _text(gp.severity)
    items, shared, left = finding.group_items(group)
    where = finding.group_where(group)
    if len(items) == 1:
        out = [f"- **{code}** ({sev}) " + (f"{len(group)} x on {_text(where)}: " if where else "") + _text(items[0][0])]
        shared = shared or items[0][1]
        extra: list[str] = []
    else:
        out = [f"- **{code}** ({sev}) {len(group)} findings" + (f" on {_text(where)}" if where else "") + ", one fix:"]
        extra = []
        for title, own in items:
            extra.append(f"  - {_text(title)}")
            if own:
                extra.append(f"    {markdown_lines(own, '    ')}")
        extra.append("")
    if shared:
        out.append(f"  {markdown_lines(shared, '  ')}")
    out += extra
    if left:
        out.append(f"  ({left} more detail(s) in the JSON report)")
    if gp.fix:
        out.append(f"  *Fix:* {markdown_lines(gp.fix, '  ')}")
    if gp.commands and gp.commands in shown:
        out.append(f"  *Commands:* the same as for **{shown[gp.commands]}** above.")
    elif gp.commands:
        lines = [terminal(c) for c in gp.commands]
        opening, closing = fence("\n".join(lines), "sh")
        out += [f"  {opening}", *[f"  {c}" for c in lines], f"  {closing}"]
        shown[gp.commands] = code
    out += [f"  See {_link(link)}" for link in gp.links]
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


def render_report(report: dict[str, Any], options: Any) -> str:
    """``--format markdown`` as the format table (render/formats.py) calls it, with the cuda:N numbers
    each GPU has in the diagnosed environment."""
    from gpudoctor.views.visibility import cuda_numbers

    return render_markdown(report, cuda_numbers(report["facts"]), options.matrix)
