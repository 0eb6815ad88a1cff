"""gpudoctor's own Markdown report (``check --format markdown``), pasted back into `analyze`.

Two ways, the first that works: the report's facts, when it carries them, which are then judged
exactly as a saved JSON report; else what the Markdown shows in words: the area table's Driver, GPUs,
Python and Frameworks cells and the devices table's compute capabilities, which feed the same checks
as any other paste. Today's renderer (gpudoctor/render/markdown.py) carries the facts compressed, so
that the report fits a GitHub issue: a ```` ```gpudoctor-facts ```` block whose first line names the
format ("zlib+base64 json v1", and what was left out to fit) and whose other lines are base64 of the
zlib-compressed JSON; reports written before it carry them as plain JSON under "All facts (JSON)",
which is still read. A Markdown report that was cut short loses its facts block first (zlib's
checksum then fails), so the second way is what keeps a long report that did not fit a ticket readable.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from typing import Any, Optional

# [ \t], never \s, after a multi-line ^: \s would run over every blank line that follows, at each one
TITLE = re.compile(r"^[ \t]*#{1,6}[ \t]*gpudoctor report[ \t]*:[ \t]*(\w+)", re.M)
_FACTS_BLOCK = re.compile(r"(?:All facts|Facts)[^\n]*\(JSON\)[^\n]*\n\s*(`{3,}|~{3,})json[ \t]*\n(.*?)(?:\n\1[ \t]*(?:\n|$)|\Z)", re.S)
_COMPRESSED = re.compile(r"^[ \t>]*(`{3,}|~{3,})gpudoctor-facts[ \t]*\n(.*?)(?:\n[ \t>]*\1[ \t]*$|\Z)", re.S | re.M)
_QUOTED = re.compile(r"^\s{0,3}(?:>\s?)*")
_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*(.*?)\s*\|\s*$")
_DRIVER = re.compile(r"^([\d.]+)\b.*?supports CUDA up to ([\d.]+)")
_GPUS = re.compile(r"(\d+) x (.+?)(?: \((\d+) MiB\))?(?:,|$)")
_FRAMEWORK = re.compile(r"(torch|tensorflow|jax|cupy) (\S+) \(([^)]*)\)")
_PYTHON = re.compile(r"(?:^|; )(\d+\.\d+(?:\.\d+)?) \((virtualenv|conda|system)\) at (\S+)")


#: The most GPUs one machine's report can list (NVML numbers a host's GPUs; the largest hosts hold 16):
#: a paste's claim of more is bounded here, so the work follows what was pasted, not what it claims.
MAX_GPUS = 64


def claimed(count: int, what: str, notes: list[str]) -> int:
    """How many GPUs to read of ``count`` claimed: at most MAX_GPUS, with a note when the claim is cut."""
    if count <= MAX_GPUS:
        return count
    if len(notes) < 10:  # one note per claim, up to ten: a cell of thousands of claims is not ten thousand notes
        notes.append(f"{what}: claims {count} GPUs, more than one machine holds; read as {MAX_GPUS}")
    return MAX_GPUS


def looks_like(text: str) -> bool:
    return bool(TITLE.search(text))


def outside(text: str) -> str:
    """The body around a gpudoctor Markdown report: what comes before its title, and what follows its facts
    block when it has one. A report without one (cut short, or written without facts) may run to the end, so
    then the whole body is given: the fixed layouts read from it (collect_env, nvidia-smi) are no part of
    the report's own words."""
    title = TITLE.search(text)
    if title is None:
        return text
    end = _COMPRESSED.search(text, title.end()) or _FACTS_BLOCK.search(text, title.end())
    return text if end is None else text[:title.start()] + "\n" + text[end.end():]


def embedded_facts(text: str) -> Optional[dict[str, Any]]:
    """The facts object the Markdown carries (compressed, or as JSON in older reports), or None (absent,
    cut short, damaged, larger than a saved report may be, or not an object)."""
    m = _COMPRESSED.search(text)
    if m:
        data = _decompress(m.group(2))
    else:
        m = _FACTS_BLOCK.search(text)
        if not m:
            return None
        try:
            data = json.loads(m.group(2))
        except (ValueError, RecursionError):
            return None
    return data if isinstance(data, dict) else None


def facts_left_out(text: str) -> list[str]:
    """What the report left out of its compressed facts to fit an issue, as its header line names it."""
    m = _COMPRESSED.search(text)
    header = _unquote(m.group(2)).split("\n", 1)[0] if m else ""
    _, _, left = header.partition("; left out to fit: ")
    return [part.strip() for part in left.split("; ") if part.strip()]


#: The checks that read each part of the facts a report may leave out to fit an issue (render/markdown.py
#: DROP_ORDER names each by its path, in parentheses): judged without it, they would judge its absence.
CHECKS_READING = {
    "cluster.nodes[].report": ("acceleration.cluster",),
    "libraries.copies": ("libraries.",),
    "python.distributions": ("python.conflicts", "compat."),
    "frameworks.*.info.loaded_libraries": ("libraries.", "frameworks.cudnn", "compat."),
    "multigpu": ("acceleration.p2p", "acceleration.allreduce"),
    "workload": ("acceleration.workload", "acceleration.throughput"),
    "gpus": ("gpus.", "topology.", "visibility.", "driver.gpu_count", "driver.device_nodes", "driver.branch",
             "frameworks.gpu", "compat.", "acceleration."),
}


def not_judged(left_out: list[str], check_ids: list[str]) -> dict[str, str]:
    """For each check that reads facts the report left out, why it is not judged here. A part this version
    does not know leaves every check unjudged: nothing may pass on what is missing."""
    out: dict[str, str] = {}
    for words in left_out:
        m = re.search(r"\(([^()]+)\)\s*$", words)
        prefixes = CHECKS_READING.get(m.group(1) if m else "", ("",))
        for check in check_ids:
            if check.startswith(prefixes) and not check.startswith("doctor."):
                out.setdefault(check, f"not judged: the Markdown report left out {words} to fit an issue")
    return out


#: One finding of the report's own list: "- **RUN032** (error) node ... reports 1 problem(s) of its own: DRV003".
_SHOWN = re.compile(r"^[ \t>]*- \*\*([A-Z]{2,4}\d{3})\*\* \((error|warning)\) (.{1,1000}?)\s*$", re.M)
_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
#: The most findings carried from one report's words: its list is cut to fit an issue long before this.
MAX_SHOWN = 200


def shown_findings(text: str) -> list[dict[str, str]]:
    """The errors and warnings the report's own Findings list shows (code, severity, title), in its order: what
    it concluded from the whole facts, before any part of them was left out to fit."""
    return [{"code": m.group(1), "severity": m.group(2), "title": _ESCAPED.sub(r"\1", m.group(3))}
            for m, _ in zip(_SHOWN.finditer(text), range(MAX_SHOWN))]


def carry_shown(report: dict[str, Any], shown: list[dict[str, str]], reasons: dict[str, str]) -> dict[str, Any]:
    """``report`` with the findings the Markdown showed for the checks not judged here (their facts were left
    out to fit): the report's own verdict on those facts stands, quoted as shown, so that what was left out
    is never "no problems found"."""
    from gpudoctor import report as rep
    from gpudoctor.checks.registry import CHECKS, status_of
    from gpudoctor.findings import CheckResult, Finding, Remediation

    owner = {code: c.id for c in CHECKS if c.id in reasons for code in c.codes}
    carried: dict[str, list[Finding]] = {}
    for item in shown:
        check = owner.get(item["code"])
        if check:
            carried.setdefault(check, []).append(Finding(
                item["code"], item["severity"], item["title"], check=check,
                detail="as the Markdown report showed it: the facts it judged were left out to fit an issue, so it is "
                       "carried, not judged again",
                remediation=Remediation(text="The JSON report (--format json --output report.json) holds every fact.")))
    if not carried:
        return report
    results = []
    kept: dict[str, list[Finding]] = {}
    for f in report.get("findings") or []:
        kept.setdefault(str(f.get("check")), []).append(Finding.from_dict(f))
    for c in report.get("checks") or []:
        found = carried.get(c["id"]) or kept.get(c["id"], [])
        results.append(CheckResult(c["id"], c["area"], c["title"], status_of(found) if c["id"] in carried else c["status"],
                                   float(c.get("duration_s") or 0.0), found, c.get("reason") or ""))
    return rep.build(report["facts"], results, created=report.get("created"))


def _unquote(block: str) -> str:
    """The block's lines without the quote markers a reply adds (``> ``) or surrounding blanks."""
    return "\n".join(_QUOTED.sub("", line).strip() for line in block.splitlines())


def _decompress(block: str) -> Any:
    """The JSON value in a compressed facts block, or None. Decompression stops past the size a saved
    report may have (a small block that inflates without end is refused, not held in memory)."""
    from gpudoctor.report import MAX_REPORT_BYTES

    lines = _unquote(block).split("\n")
    if not lines or not lines[0].startswith("zlib+base64 json"):
        return None
    try:
        raw = base64.b64decode("".join(lines[1:]), validate=True)
        inflate = zlib.decompressobj()
        data = inflate.decompress(raw, MAX_REPORT_BYTES + 1)
        if len(data) > MAX_REPORT_BYTES or inflate.unconsumed_tail or not inflate.eof:
            return None
        return json.loads(data.decode("utf-8"))
    except (binascii.Error, zlib.error, ValueError, RecursionError):
        return None


def parse_shown(text: str) -> dict[str, Any]:
    """What the report shows in words, as plain values (the fields a collect_env paste has, where they match)."""
    out: dict[str, Any] = {"notes": [], "gpus": [], "frameworks": []}
    title = TITLE.search(text)
    out["verdict"] = title.group(1) if title else None
    for line in text.splitlines():
        row = _ROW.match(line.strip())
        if not row:
            continue
        area, cell = row.group(1).strip(), row.group(3).replace("\\|", "|")
        if area == "Driver":
            m = _DRIVER.match(cell)
            if m:
                out["driver_version"], out["cuda_version"] = m.group(1), m.group(2)
        elif area == "GPUs":
            for count, name, mib in _GPUS.findall(cell.split(": ", 1)[-1]):
                room = MAX_GPUS - len(out["gpus"])  # the whole cell's GPUs, however many entries claim them
                for _ in range(min(claimed(int(count), f"the GPUs cell's {name.strip()[:80]}", out["notes"]), room)):
                    out["gpus"].append({"index": len(out["gpus"]), "name": name.strip(),
                                        **({"memory_total_mib": int(mib)} if mib else {})})
        elif area == "Frameworks":
            for name, version, build in _FRAMEWORK.findall(cell):
                out["frameworks"].append({"name": name, "version": version, "build": build})
        elif area == "Python":
            m = _PYTHON.search(cell)
            if m:
                out["python_version"], out["python_env"], out["python_executable"] = m.groups()
    _capabilities(text, out["gpus"])
    if not (out.get("driver_version") or out["gpus"] or out["frameworks"]):
        out["notes"].append("gpudoctor Markdown report: neither its facts (JSON) nor its area table could be read")
    return out


def _capabilities(text: str, gpus: list[dict[str, Any]]) -> None:
    """The CC column of the devices table (`gpudoctor devices` layout: columns split by two spaces)."""
    header: Optional[list[str]] = None
    for line in text.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[:3] == ["GPU", "cuda", "Name"] and "CC" in cells:
            header = cells
            continue
        if header and cells and cells[0].isascii() and cells[0].isdigit() and len(cells) >= len(header) - 1:
            index = int(cells[0])
            row = dict(zip(header, cells))
            cc = row.get("CC", "")
            for gpu in gpus:
                if gpu["index"] == index and re.fullmatch(r"\d+\.\d+", cc):
                    gpu["compute_capability"] = cc
        elif header and not line.strip():
            header = None
