"""The topology area (checks/topology.py): topology.p2p, peer-to-peer access between GPUs where their links
should allow it (TOPO201 for NVLinked GPUs, TOPO202 for PCIe pairs without it).

Judged on the real 2 x H200 recording (one pair, 18 NVLinks, NVML P2P reads ok; tests/fixtures/real/README.md)
with the pair's P2P status changed, each asserting the exact findings over every check. Whether copies
between the GPUs really run, and how fast, is the acceleration area's (check --deep, test_area_acceleration.py).
"""

from __future__ import annotations

from helpers_facts import with_fact

from helpers_judge import codes, only, statuses


def test_the_healthy_recording_passes(h200x2):
    assert h200x2["topology"]["pairs"][0]["p2p"]["read"] == "ok" and h200x2["topology"]["pairs"][0]["nvlink_count"] == 18
    assert statuses(h200x2, "topology") == {"topology.p2p": "pass"}
    assert codes(h200x2) == set()


def test_nvlinked_gpus_with_p2p_disabled_name_the_pair(h200x2):
    f = only(with_fact(h200x2, "topology.pairs.0.p2p.read", "disabled_by_regkey"), "TOPO201")
    uuids = [g["uuid"] for g in h200x2["gpus"]]
    assert (f["check"], f["severity"]) == ("topology.p2p", "warning")
    assert f["subject"] == {"kind": "pair", "gpu_index": 0, "gpu_uuid": uuids[0], "peer_index": 1, "peer_uuid": uuids[1]}
    assert f["title"] == "GPU 0 and GPU 1 share 18 NVLinks but P2P access is disabled_by_regkey"


def test_a_pcie_pair_without_p2p_is_one_finding_for_all_such_pairs(h200x2):
    facts = with_fact(h200x2, "topology.pairs.0.nvlink_count", 0)
    facts = with_fact(facts, "topology.pairs.0.p2p.read", "chipset_not_supported")
    facts = with_fact(facts, "gpus.0.nvlink.active_count", 0)
    facts = with_fact(facts, "gpus.1.nvlink.active_count", 0)
    f = only(facts, "TOPO202")
    assert f["title"] == "1 GPU pair(s) without NVLink cannot use P2P over PCIe"
    assert f["detail"] == "Pairs: 0-1 (chipset_not_supported)."


def test_one_gpu_has_no_pairs_to_judge(h200x2):
    facts = with_fact(h200x2, "gpus", h200x2["gpus"][:1])
    assert statuses(facts, "topology") == {"topology.p2p": "skip"}
