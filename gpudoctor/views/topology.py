"""How the GPUs are linked, and what was measured between them: views shared by the topology and
multi-GPU checks and by the renderers (the devices table, the facts lines, the proof table).

``nvidia-smi topo -m``'s cell for a pair (NV# or the PCIe path), the pair a finding is about, the
slowest measured P2P copy, the PCIe rate a host link should reach, and the reference all-reduce
bandwidth a set of GPUs is judged by (compat_matrix/performance.json) are each read here once, so a
check and a renderer never disagree on them.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Optional

from gpudoctor.findings import Subject
from gpudoctor.snapshot import known
from gpudoctor.views.visibility import resolve

Facts = dict[str, Any]

#: PCIe bandwidth per lane and direction in GB/s, after encoding, by PCIe generation.
PCIE_GB_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


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


def pair_subject(facts: Facts, a: int, b: int) -> Subject:
    """The subject of a finding about GPUs ``a`` and ``b`` (NVML indices), with their UUIDs where known."""
    uuids = {g.get("index"): known(g.get("uuid")) for g in facts.get("gpus") or []}
    return Subject("pair", a, uuids.get(a), b, uuids.get(b))


def links_by_pair(facts: Facts) -> dict[frozenset, dict[str, Any]]:
    """NVML's topology pairs, keyed by the pair of NVML indices."""
    pairs = (facts.get("topology") or {}).get("pairs") or []
    return {frozenset(p["gpus"]): p for p in pairs if isinstance(p, dict) and len(p.get("gpus") or []) == 2}


def cuda_to_nvml(facts: Facts, multigpu: dict[str, Any]) -> dict[Any, int]:
    """CUDA ordinal of the multi-GPU probe -> NVML index: by UUID, else as views/visibility.py resolves
    CUDA's numbering."""
    by_uuid = {known(g.get("uuid")): g.get("index") for g in facts.get("gpus") or [] if isinstance(known(g.get("uuid")), str)}
    mapping = {d.get("ordinal"): by_uuid[d["uuid"]] for d in multigpu.get("devices") or [] if d.get("uuid") in by_uuid}
    if not mapping and ((facts.get("nvml") or {}).get("init") or {}).get("ok"):
        mapping = {d.cuda_index: d.gpu_index for d in resolve(facts).devices if not d.mig_uuid}
    return mapping


def allreduce_setting(facts: Facts, multigpu: dict[str, Any], world: Any) -> tuple[Any, str]:
    """(GPU model, or None for mixed models; link type among the GPUs) of an all-reduce across ``world``
    GPUs: what the matrix's reference figure is looked up by (compat/rules.py allreduce_row), for
    acceleration.allreduce and the proof table alike."""
    names = {d.get("name") for d in multigpu.get("devices") or []} - {None}
    index = cuda_to_nvml(facts, multigpu)
    gpus = sorted(i for i in index.values() if i is not None)
    links = links_by_pair(facts)
    labels = {link_label(links[frozenset((a, b))]) for n, a in enumerate(gpus) for b in gpus[n + 1:]
              if frozenset((a, b)) in links}
    complete = len(gpus) == world and all(frozenset((a, b)) in links for n, a in enumerate(gpus) for b in gpus[n + 1:])
    label = next(iter(labels)) if len(labels) == 1 and complete else ("links " + ", ".join(sorted(labels)) if labels else "links unknown")
    model = next(iter(names)) if len(names) == 1 else None
    return model, label
