"""gpudoctor's own Markdown report (``check --format markdown``), pasted back into `analyze`.

Two ways, the first that works: the report's facts, when it carries them as JSON (today's renderer
puts them in a "<details><summary>All facts (JSON)" block; gpudoctor/render/markdown.py), which are
then judged exactly as a saved JSON report; else what the Markdown shows in words: the area table's
Driver, GPUs, Python and Frameworks cells and the devices table's compute capabilities, which feed
the same checks as any other paste. A Markdown report that was cut short loses its JSON block first,
so the second way is what keeps a long report that did not fit a ticket readable.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

TITLE = re.compile(r"^\s*#{1,6}\s*gpudoctor report\s*:\s*(\w+)", re.M)
_FACTS_BLOCK = re.compile(r"(?:All facts|Facts)[^\n]*\(JSON\)[^\n]*\n\s*(`{3,}|~{3,})json[ \t]*\n(.*?)(?:\n\1[ \t]*(?:\n|$)|\Z)", re.S)
_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*(.*?)\s*\|\s*$")
_DRIVER = re.compile(r"^([\d.]+)\b.*?supports CUDA up to ([\d.]+)")
_GPUS = re.compile(r"(\d+) x (.+?)(?: \((\d+) MiB\))?(?:,|$)")
_FRAMEWORK = re.compile(r"(torch|tensorflow|jax|cupy) (\S+) \(([^)]*)\)")
_PYTHON = re.compile(r"(?:^|; )(\d+\.\d+(?:\.\d+)?) \((virtualenv|conda|system)\) at (\S+)")


def looks_like(text: str) -> bool:
    return bool(TITLE.search(text))


def embedded_facts(text: str) -> Optional[dict[str, Any]]:
    """The facts object the Markdown carries as JSON, or None (absent, cut short, or not an object)."""
    m = _FACTS_BLOCK.search(text)
    if not m:
        return None
    try:
        data = json.loads(m.group(2))
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


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
                for _ in range(int(count)):
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
        if header and cells and cells[0].isdigit() and len(cells) >= len(header) - 1:
            index = int(cells[0])
            row = dict(zip(header, cells))
            cc = row.get("CC", "")
            for gpu in gpus:
                if gpu["index"] == index and re.fullmatch(r"\d+\.\d+", cc):
                    gpu["compute_capability"] = cc
        elif header and not line.strip():
            header = None
