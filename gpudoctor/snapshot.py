"""The snapshot: every fact the probes gathered, as plain JSON-ready data.

Facts are kept as plain dicts and lists (not classes) so that a report saved on one machine
loads unchanged on another, old reports stay readable, and tests can derive a fault from a
real recording by changing one value. The layout is documented in docs/report-format.md.

A fact that could not be read is never None, "N/A" or NaN: it is ``{"unavailable": REASON}``,
so that a check can tell "the GPU does not support this" from "we were not allowed to ask".
"""

from __future__ import annotations

import copy
import statistics
from typing import Any, Iterator, Mapping, Optional

SCHEMA_VERSION = 1

#: Reasons an absent fact may carry. NVML's own error names map onto the first group.
REASONS = (
    "not_supported",
    "no_permission",
    "function_not_found",
    "gpu_lost",
    "driver_not_loaded",
    "library_not_found",
    "timeout",
    "not_applicable",
    "not_found",
    "unknown",
)


def unavailable(reason: str) -> dict[str, str]:
    """The one representation of an absent fact."""
    return {"unavailable": reason}


def is_unavailable(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"unavailable"}


def known(value: Any) -> Any:
    """The value itself, or None when it is absent for any reason (for checks that only care whether it is known)."""
    return None if is_unavailable(value) else value


def get(facts: Mapping[str, Any], path: str, default: Any = None) -> Any:
    """Read ``facts`` at a dotted path ("nvml.driver_version", "gpus.0.name"); absent parts give ``default``."""
    node: Any = facts
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return default
    return node


def with_fact(facts: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``facts`` with one fact replaced: how tests derive a fault from a real recording."""
    out = copy.deepcopy(dict(facts))
    parts = path.split(".")
    node: Any = out
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def gpus(facts: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The GPUs NVML listed, skipping entries that could not be read at all."""
    for gpu in facts.get("gpus") or []:
        if isinstance(gpu, dict) and "index" in gpu:
            yield gpu


def job_nodes(facts: Any) -> list[dict[str, Any]]:
    """The other nodes of a torchrun job whose own reports ``facts.cluster.nodes`` carries (each with a
    ``report`` holding ``facts``)."""
    nodes = get(facts, "cluster.nodes") if isinstance(facts, Mapping) else None
    return [n for n in nodes if isinstance(n, dict) and isinstance(n.get("report"), dict)
            and isinstance(n["report"].get("facts"), dict)] if isinstance(nodes, list) else []


def link_label(pair: Mapping[str, Any]) -> str:
    """The cell ``nvidia-smi topo -m`` prints for a topology pair: NV# for NVLinks, else the PCIe path."""
    if pair.get("nvlink_count"):
        return f"NV{pair['nvlink_count']}"
    return str(known(pair.get("common_ancestor")) or "?")


def slowest_pair(p2p: Any) -> Optional[tuple[dict[str, Any], float, int]]:
    """(the slowest ordered pair, the median copy bandwidth, how many pairs were measured) among the
    multi-GPU probe's P2P figures (``multigpu.p2p``), or None without figures: the one slow link is
    what to look for."""
    pairs = [p for p in (p2p or {}).get("pairs") or [] if isinstance(p, dict) and isinstance(p.get("gbs"), (int, float))]
    if not pairs:
        return None
    return min(pairs, key=lambda p: p["gbs"]), statistics.median(p["gbs"] for p in pairs), len(pairs)
