"""`gpudoctor matrix show`: the bundled matrix (and any --matrix overlay over it) as aligned tables, one per topic.

An overlay's strings are untrusted: each is shown in its own line or cell with its control characters
escaped (render/safe.py)."""

from __future__ import annotations

from typing import Any, Optional

from gpudoctor.compat.data import Matrix, topics
from gpudoctor.render.safe import terminal

_MAX_CELL = 48


def show(matrix: Matrix, topic: Optional[str]) -> str:
    """Each topic of ``matrix`` as an aligned table: one row per entry (a PyTorch release's variants and a JAX release's
    extras get a row each), one column per field, the source last; then the sources. An overlay's strings
    are untrusted: each is shown on its own line or cell with its control characters escaped."""
    names = [topic] if topic else topics()
    out: list[str] = []
    for name in names:
        data = matrix.topic(name)
        out.append(terminal(f"== {name}: {data.get('title', '')} (as of {data.get('as_of')})"))
        rows = _rows(data["entries"])
        keys = [c for c in _columns(rows) if c != "source"] + ["source"]
        columns = [terminal(c) for c in keys]
        table = [[_cell(row.get(c)) for c in keys] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in table]) for i, c in enumerate(columns)]
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
        out.append("  " + "  ".join("-" * w for w in widths))
        out += ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in table]
        out.append("  sources:")
        sources = {terminal(k): terminal(v) for k, v in data["sources"].items()}
        width = max((len(k) for k in sources), default=0)
        out += [f"    {k.ljust(width)}  {v}" for k, v in sources.items()]
        out.append("")
    return "\n".join(out).rstrip("\n")


def _rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for entry in entries:
        nested = next((k for k in ("variants", "extras", "cupy_releases") if isinstance(entry.get(k), list)
                       and entry[k] and all(isinstance(v, dict) for v in entry[k])), None)
        if nested is None:
            rows.append(entry)
            continue
        parent = {k: v for k, v in entry.items() if k != nested}
        for item in entry[nested]:
            rows.append({**parent, **{(f"{nested[:-1]}.{k}" if k in parent else k): v for k, v in item.items()}})
    return rows


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            if not (key.endswith("note") or key == "text" or key.endswith("_source")):
                seen.setdefault(key, None)
    return list(seen)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        text = " ".join(_cell(v) if not isinstance(v, dict) else v.get("name", "?") for v in value) or "[]"
    elif isinstance(value, dict):
        text = " ".join(f"{k}:{_cell(v)}" for k, v in value.items())
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    else:
        text = terminal(value)
    return text if len(text) <= _MAX_CELL else text[:_MAX_CELL - 3] + "..."
