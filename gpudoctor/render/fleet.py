"""`merge`'s output: the nodes x areas table, the findings, drift and outliers, as text or markdown.

Node names (host names, file names), drift values (a driver version, GPU models) and titles are data
from the merged reports: every string is cleaned to one line first (render/safe.py), so a newline in a
file name cannot break the table, and in markdown each is written as literal text.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.fleet import NOTHING_JUDGED, REFUSED
from gpudoctor.render.markdown import STATUS_WORDS
from gpudoctor.render.safe import code_span, markdown_inline, printable

COMPARED = "the driver, CUDA driver, GPU models and count, framework versions and CUDA toolkit are the same on every node"


def headline(merged: dict[str, Any]) -> str:
    nodes = merged["nodes"]
    fail_on = merged["fail_on"]
    unjudged = [n["name"] for n in nodes if n.get("verdict") == NOTHING_JUDGED]
    empty = f"; {len(unjudged)} with nothing judged (not ok): {', '.join(unjudged)}" if unjudged else ""
    refused = [n["name"] for n in nodes if n.get("verdict") == REFUSED]
    empty += f"; {len(refused)} file(s) refused, not readable reports: {', '.join(refused)}" if refused else ""
    if fail_on == "never":
        return f"{len(nodes)} node(s); --fail-on never: findings do not change the exit status{empty}"
    failing = [n["name"] for n in nodes if n["failing"] and n.get("verdict") not in (NOTHING_JUDGED, REFUSED)]
    if not failing:
        return f"{len(nodes)} node(s), none with findings at or above --fail-on {fail_on}{empty}"
    return (f"{len(nodes)} node(s), {len(failing)} with findings at or above --fail-on {fail_on}: "
            f"{', '.join(failing)}{empty}")


def _num(value: float, unit: str) -> str:
    return f"{value:g}{' ' + unit if unit else ''}"


def _outlier(o: dict[str, Any], unit: str) -> str:
    subject = f" {o['subject']}" if o["subject"] else ""
    ratio = f"{o['ratio']:g} x" if o["ratio"] is not None else "against"
    return f"{o['node']}{subject}: {_num(o['value'], unit)}, {ratio} the peers' median of {_num(o['peers_median'], unit)}"


def _rule(merged: dict[str, Any]) -> str:
    rule = merged["outliers"]
    return (f"worse than {rule['well_below']:g} x the median of peers with the same GPU model "
            f"(at least {rule['min_samples']} samples of a model)")


def _metric_title(m: dict[str, Any]) -> str:
    return f"{m['metric']} ({m['better']} is better)"


def _group_summary(g: dict[str, Any], min_samples: int) -> str:
    if not g["compared"]:
        return f"{g['samples']} sample(s); at least {min_samples} needed to compare"
    if not g["outliers"]:
        return f"{g['samples']} samples; no outlier"
    return f"{g['samples']} samples; {len(g['outliers'])} outlier(s)"


def render_fleet_text(merged: dict[str, Any]) -> str:
    merged = printable(merged, newlines=False)
    areas = merged["areas"]
    rows = [["node", "verdict", *areas]]
    for n in merged["nodes"]:
        rows.append([n["name"], n["verdict"] or "?", *(n["areas"].get(a, "n/a") for a in areas)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"gpudoctor merge: {headline(merged)}", ""]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    findings = [(n["name"], f) for n in merged["nodes"] for f in n["findings"]]
    if findings:
        lines += ["", "Findings (errors and warnings)"]
        lines += [f"  {name}: {f['severity']} {f['code']} [{f['where']}] {f['title']}" for name, f in findings]
    lines.append("")
    if merged["drift"]:
        lines.append("Drift: facts that differ between nodes")
        for d in merged["drift"]:
            lines.append(f"  {d['label']}: " + "; ".join(f"{v['value']} ({', '.join(v['nodes'])})" for v in d["values"]))
    else:
        lines.append(f"Drift: none; {COMPARED}")
    lines += ["", f"Outliers: {_rule(merged)}"]
    min_samples = merged["outliers"]["min_samples"]
    for m in merged["outliers"]["metrics"]:
        if not m["models"]:
            continue
        lines.append(f"  {_metric_title(m)}")
        for g in m["models"]:
            lines.append(f"    {g['model']}: {_group_summary(g, min_samples)}")
            lines += [f"      {_outlier(o, m['unit'])}" for o in g["outliers"]]
    unmeasured = _unmeasured(merged)
    if unmeasured:
        lines.append(f"  not measured in any report: {', '.join(unmeasured)}")
    if "counters" in merged:
        lines += ["", f"Error counters: {_counter_rule(merged['counters'])}"]
        for c in merged["counters"]["counters"]:
            lines.append(f"  {c['title']}: {_counter_summary(c, merged['counters']['min_nodes'])}")
            lines += [f"    {_counter_outlier(o)}" for o in c["outliers"]]
    return "\n".join(lines) + "\n"


def _counter_rule(section: dict[str, Any]) -> str:
    return (f"a node whose largest count is more than {section['far_above']:g} x the other nodes' median "
            f"(a median under 1 counts as 1; at least {section['min_nodes']} nodes)")


def _counter_summary(c: dict[str, Any], min_nodes: int) -> str:
    if not c["compared"]:
        return f"{c['nodes']} node(s); at least {min_nodes} needed to compare"
    return f"{c['nodes']} nodes; " + (f"{len(c['outliers'])} outlier(s)" if c["outliers"] else "no outlier")


def _counter_outlier(o: dict[str, Any]) -> str:
    return f"{o['node']} {o['subject']}: {o['value']:g}, the other nodes' median {o['peers_median']:g}"


def render_fleet_markdown(merged: dict[str, Any]) -> str:
    merged = printable(merged, newlines=False)
    areas = merged["areas"]
    out = [f"## gpudoctor merge: {_text(headline(merged))}", "",
           "| Node | Verdict | " + " | ".join(_cell(a) for a in areas) + " |",
           "|---|---|" + "---|" * len(areas)]
    for n in merged["nodes"]:
        cells = [_cell(STATUS_WORDS.get(n["areas"].get(a, ""), n["areas"].get(a, "n/a"))) for a in areas]
        out.append(f"| {_cell(n['name'])} | {_cell(n['verdict'] or '?')} | " + " | ".join(cells) + " |")
    findings = [(n["name"], f) for n in merged["nodes"] for f in n["findings"]]
    if findings:
        out += ["", "### Findings (errors and warnings)", ""]
        out += [f"- **{_text(name)}** {_text(f['severity'])} {code_span(f['code'])} ({_text(f['where'])}) "
                f"{_text(f['title'])}" for name, f in findings]
    out += ["", "### Drift", ""]
    if merged["drift"]:
        out += ["| Fact | Value | Nodes |", "|---|---|---|"]
        for d in merged["drift"]:
            for v in d["values"]:
                out.append(f"| {_cell(d['label'])} | {_cell(v['value'])} | {_cell(', '.join(v['nodes']))} |")
    else:
        out.append(f"None: {COMPARED}.")
    out += ["", "### Outliers", "", f"A GPU, GPU pair or node {_rule(merged)}.", "",
            "| Metric | GPU model | Samples | Outliers |", "|---|---|---|---|"]
    min_samples = merged["outliers"]["min_samples"]
    for m in merged["outliers"]["metrics"]:
        for g in m["models"]:
            if not g["compared"]:
                verdict = f"not compared: at least {min_samples} samples needed"
            else:
                verdict = "; ".join(_outlier(o, m["unit"]) for o in g["outliers"]) or "none"
            out.append(f"| {code_span(m['metric'])} ({_cell(m['better'])} is better) | {_cell(g['model'])} | "
                       f"{g['samples']} | {_cell(verdict)} |")
    unmeasured = _unmeasured(merged)
    if unmeasured:
        out += ["", "Not measured in any report: " + ", ".join(code_span(u) for u in unmeasured) + "."]
    if "counters" in merged:
        section = merged["counters"]
        out += ["", "### Error counters", "", f"Outlier: {_counter_rule(section)}.", "",
                "| Counter | Nodes | Outliers |", "|---|---|---|"]
        for c in section["counters"]:
            verdict = "; ".join(_counter_outlier(o) for o in c["outliers"]) if c["outliers"] else \
                _counter_summary(c, section["min_nodes"]).split("; ", 1)[-1]
            out.append(f"| {_cell(c['title'])} | {c['nodes']} | {_cell(verdict)} |")
    return "\n".join(out) + "\n"


def _unmeasured(merged: dict[str, Any]) -> list[str]:
    return [m["metric"] for m in merged["outliers"]["metrics"] if not m["models"]]


def _cell(text: Any) -> str:
    """Data in one table cell or line: literal text (pipes, HTML, mentions, backticks escaped)."""
    return markdown_inline(text)


def _text(text: Any) -> str:
    """Data in one line of a list item, outside a table."""
    return markdown_inline(text, table=False)
