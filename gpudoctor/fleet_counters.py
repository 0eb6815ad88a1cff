"""Error counters across the nodes of a ``merge``: the node whose count stands out from the fleet's.

A node's figure for a counter is its largest count on any GPU since the driver loaded; an NVLink
counter is the GPU's total over its links, as the driver sums it (a report that kept each link is summed
the same way, so old and new reports compare alike). A node is an outlier for a counter when at least
``MIN_NODES`` nodes recorded it and its figure is more than ``FAR_ABOVE`` times the median of the other
nodes' figures, a median below 1 counting as 1: on a fleet of zeros a count of 10 or less never stands
out, and on healthy nodes alike a node stands out only past ten times the fleet's usual count.
Counters only grow, so higher is always worse. This compares nodes with each other; the limits a single
GPU is judged by (compat_matrix/error_counters.json) are ``check``'s, and their findings are in each
node's row already. Reports without counters add nothing, and ``merge`` then prints what it always did.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from gpudoctor.nvlink_totals import nvlink_totals, read_count
from gpudoctor.snapshot import gpus, known

FAR_ABOVE = 10
MIN_NODES = 3
#: (key, title): the counters compared, as the facts name them (counters.pcie_replay, nvlink_errors.<name>).
COUNTERS = (
    ("nvlink_crc_flit", "NVLink CRC-flit errors of one GPU"),
    ("nvlink_crc_data", "NVLink CRC-data errors of one GPU"),
    ("nvlink_replay", "NVLink replay errors of one GPU"),
    ("nvlink_recovery", "NVLink recovery errors of one GPU"),
    ("pcie_replay", "PCIe replays of one GPU"),
)


def node_figures(facts: dict[str, Any]) -> dict[str, tuple[int, str]]:
    """Counter key -> (the node's largest count, where it is: "GPU 3")."""
    best: dict[str, tuple[int, str]] = {}

    def offer(key: str, value: Optional[int], where: str) -> None:
        if value is not None and (key not in best or value > best[key][0]):
            best[key] = (value, where)

    for gpu in gpus(facts):
        counters = gpu.get("counters")
        if not isinstance(counters, dict):
            continue
        offer("pcie_replay", read_count(known(counters.get("pcie_replay"))), f"GPU {gpu.get('index')}")
        for name, value in (nvlink_totals(counters.get("nvlink_errors")) or {}).items():
            offer(f"nvlink_{name}", read_count(known(value)), f"GPU {gpu.get('index')}")
    return best


def counter_outliers(names: Sequence[str], facts: Sequence[dict[str, Any]],
                     median_without: Callable[[Sequence[float], int], float]) -> Optional[dict[str, Any]]:
    """The ``counters`` section of ``merge``'s output, or None when no node recorded a counter.
    ``median_without(sorted values, k)``: the median of the values less the k-th (fleet.py's)."""
    figures = [node_figures(f) for f in facts]
    if not any(figures):
        return None
    out = []
    for key, title in COUNTERS:
        group = [(name, fig[key]) for name, fig in zip(names, figures) if key in fig]
        if not group:
            continue
        entry: dict[str, Any] = {"counter": key, "title": title, "nodes": len(group),
                                 "compared": len(group) >= MIN_NODES, "outliers": []}
        if entry["compared"]:
            ranked = sorted(range(len(group)), key=lambda i: group[i][1][0])
            values = [float(group[i][1][0]) for i in ranked]
            rank = {i: r for r, i in enumerate(ranked)}
            for i, (name, (value, where)) in enumerate(group):
                median = median_without(values, rank[i])
                if value > FAR_ABOVE * max(median, 1.0):
                    entry["outliers"].append({"node": name, "subject": where, "value": value, "peers_median": median})
        out.append(entry)
    return {"far_above": FAR_ABOVE, "min_nodes": MIN_NODES, "counters": out}
