"""``gpudoctor devices``: the device table and the topology matrix, as nvidia-smi topo -m draws it.

The facts may come from a saved report (``devices --report``): every string is cleaned to one line
first (render/safe.py), so a GPU name cannot clear the terminal or add a row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.render.facts_text import mib, show, watts
from gpudoctor.render.safe import printable
from gpudoctor.snapshot import get, gpus, known
from gpudoctor.views.topology import link_label

if TYPE_CHECKING:
    from gpudoctor.facts_types import GpuFacts


def render_devices(facts: dict[str, Any], visible: dict[int, list[int]]) -> str:
    """``visible`` maps a GPU index to the cuda:N numbers a CUDA program gives it."""
    facts = printable(facts, newlines=False)
    found = list(gpus(facts))
    if not found:
        return "No GPU listed by NVML.\n"
    rows: list[tuple[str, ...]] = [("GPU", "cuda", "Name", "UUID", "Bus id", "CC", "Memory used/total", "PCIe now/max", "Temp", "Power", "Persist", "MIG")]
    for g in found:
        pcie = g.get("pcie") or {}
        rows.append((
            str(g["index"]),
            ",".join(f"cuda:{n}" for n in visible.get(g["index"], [])) or "hidden",
            show(g.get("name")),
            show(g.get("uuid")),
            show(get(g, "pci.bus_id")),
            show(g.get("compute_capability")),
            f"{mib(get(g, 'memory.used_bytes'))} / {mib(get(g, 'memory.total_bytes'))}",
            f"{_link(pcie.get('gen_current'), pcie.get('width_current'))} / {_link(pcie.get('gen_max'), pcie.get('width_max'))}",
            show(get(g, "temperature.current_c"), " C"),
            f"{watts(get(g, 'power.draw_mw'))} / {watts(get(g, 'power.limit_mw'))}",
            show(known(g.get("persistence_mode")) or g.get("persistence_mode")),
            show(known(get(g, "mig.current")) or get(g, "mig")),
        ))
    out = _table(rows)
    pairs = (facts.get("topology") or {}).get("pairs") or []
    if pairs:
        out += "\n" + render_matrix(found, pairs)
    return out


def _link(gen: Any, width: Any) -> str:
    """A PCIe link as "Gen4 x16"; a part not known (a paste that gives no link) is left out, not printed
    as "Genn/a", and a link known in no part is n/a."""
    parts = [f"Gen{gen}" if known(gen) is not None else "", f"x{width}" if known(width) is not None else ""]
    return " ".join(p for p in parts if p) or show(gen if gen is not None else width)


def render_matrix(found: list[GpuFacts], pairs: list[dict[str, Any]]) -> str:
    cell: dict[tuple[Any, ...], str] = {}
    for p in pairs:
        a, b = p["gpus"]
        cell[(a, b)] = cell[(b, a)] = link_label(p)
        p2p = known(get(p, "p2p.read"))
        cell[("p2p", a, b)] = cell[("p2p", b, a)] = "OK" if p2p == "ok" else show(get(p, "p2p.read"))
    indices = [g["index"] for g in found]
    rows = [("", *[f"GPU{i}" for i in indices], "CPU Affinity", "NUMA Affinity")]
    for g in found:
        i = g["index"]
        rows.append((f"GPU{i}", *["X" if i == j else cell.get((i, j), "?") for j in indices],
                     show(g.get("cpu_affinity")), show(g.get("numa_affinity"))))
    p2p_rows = [("P2P read", *[f"GPU{i}" for i in indices])]
    for i in indices:
        p2p_rows.append((f"GPU{i}", *["X" if i == j else cell.get(("p2p", i, j), "?") for j in indices]))
    legend = ("  X = self; NV# = # NVLinks; SYS/NODE/PHB/PXB/PIX = PCIe path through the system, "
              "a NUMA node, a host bridge, several or one PCIe switch\n")
    return "Topology\n" + _table(rows) + legend + "\n" + _table(p2p_rows)


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n" for r in rows)
