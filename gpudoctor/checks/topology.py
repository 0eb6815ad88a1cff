"""Links between GPUs: peer-to-peer access where NVLink or PCIe should allow it."""

from __future__ import annotations

from typing import Any, Iterator

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, require_gpus
from gpudoctor.findings import Finding
from gpudoctor.snapshot import known
from gpudoctor.views.topology import pair_subject


def check_p2p(facts: Facts) -> Iterator[Finding]:
    if len(require_gpus(facts)) < 2:
        raise NotApplicable("fewer than two GPUs")
    pairs: list[dict[str, Any]] = (facts.get("topology") or {}).get("pairs") or []
    no_pcie_p2p = []
    for pair in pairs:
        a, b = pair["gpus"]
        read = known((pair.get("p2p") or {}).get("read"))
        if read in (None, "ok"):
            continue
        if pair.get("nvlink_count"):
            yield finding("TOPO201", f"GPU {a} and GPU {b} share {pair['nvlink_count']} NVLinks but P2P access is {read}",
                          subject=pair_subject(facts, a, b),
                          text="CUDA and NCCL cannot use the links and copy through host memory instead. Look for a "
                               "driver setting or hypervisor configuration that disables P2P.",
                          commands=["nvidia-smi topo -p2p r", "nvidia-smi topo -m"])
        else:
            no_pcie_p2p.append(f"{a}-{b} ({read})")
    if no_pcie_p2p:
        yield finding("TOPO202", f"{len(no_pcie_p2p)} GPU pair(s) without NVLink cannot use P2P over PCIe",
                      detail="Pairs: " + ", ".join(no_pcie_p2p) + ".",
                      text="NCCL and CUDA copy through host memory instead; normal on many consumer GPUs and in VMs. "
                           "If you expected P2P, check the IOMMU and ACS settings in the BIOS.",
                      commands=["nvidia-smi topo -p2p r"])


CHECKS = (
    Check("topology.p2p", "topology", "GPUs can reach each other peer to peer", ("TOPO201", "TOPO202"), check_p2p, ("nvml",)),
)
