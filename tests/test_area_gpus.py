"""The gpus area (checks/gpu_health.py): each GPU's own health. gpus.lost (GPU101-GPU103), gpus.memory_errors
(GPU111-GPU114), gpus.throttling (GPU121-GPU123), gpus.pcie_width (GPU131), gpus.modes (GPU141-GPU143),
gpus.memory_held (GPU151), gpus.mig (GPU161, GPU162), gpus.models (GPU171) and gpus.nvlinks (GPU181).

Judged on the real 2 x H200 recording (tests/fixtures/real/README.md) with one fact of one GPU changed at
a time, each asserting the exact findings over every check and that the finding names that GPU by its
NVML index and UUID. Every code of this area in one table over every area: tests/test_real_reports.py.
"""

from __future__ import annotations

import pytest

from gpudoctor.checks import registry
from gpudoctor.checks.messages import PASTE_ONLY
from helpers_facts import with_fact

from helpers_judge import codes, only, statuses


#: Checks of facts this recording predates (error counters, fabric state, the kernel log): not checked, never passed.
NOT_RECORDED = ("gpus.nvlink_errors", "gpus.pcie_replays", "gpus.fabric", "gpus.xid")


def test_the_healthy_recording_passes_every_gpus_check(h200x2):
    judged = {k: v for k, v in statuses(h200x2, "gpus").items() if k not in PASTE_ONLY}
    assert judged == {c.id: "skip" if c.id in NOT_RECORDED else "pass"
                      for c in registry.CHECKS if c.area == "gpus" and c.id not in PASTE_ONLY}
    assert {statuses(h200x2, "gpus").get(c) for c in PASTE_ONLY if c.startswith("gpus.")} <= {"skip", None}  # nothing pasted
    assert codes(h200x2) == set()


@pytest.mark.parametrize("index", [0, 1])
def test_uncorrectable_ecc_errors_name_their_gpu(h200x2, index):
    f = only(with_fact(h200x2, f"gpus.{index}.ecc.uncorrected_volatile", 2), "GPU111")
    gpu = h200x2["gpus"][index]
    assert (f["check"], f["severity"]) == ("gpus.memory_errors", "error")
    assert f["subject"] == {"kind": "gpu", "gpu_index": index, "gpu_uuid": gpu["uuid"]}
    assert f["title"] == f"GPU {index} (NVIDIA H200): 2 uncorrectable ECC error(s) since the driver loaded"


def test_a_narrow_pcie_link(h200x2):
    f = only(with_fact(h200x2, "gpus.0.pcie.width_current", 8), "GPU131")
    assert (f["check"], f["severity"], f["subject"]["gpu_index"]) == ("gpus.pcie_width", "warning", 0)
    assert f["title"] == "GPU 0 (NVIDIA H200): PCIe link runs at x8, the GPU and slot allow x16"


def test_hot_near_the_slowdown_threshold(h200x2):
    threshold = h200x2["gpus"][0]["temperature"]["slowdown_c"]
    f = only(with_fact(h200x2, "gpus.0.temperature.current_c", threshold + 1), "GPU123")
    assert f["title"] == f"GPU 0 (NVIDIA H200): {threshold + 1} C, within 5 C of its slowdown threshold ({threshold} C)"


def test_fewer_nvlinks_than_its_peers(h200x2):
    f = only(with_fact(h200x2, "gpus.1.nvlink.active_count", 12), "GPU181")
    assert (f["check"], f["subject"]["gpu_index"], f["title"]) == (
        "gpus.nvlinks", 1, "GPU 1 (NVIDIA H200): 12 NVLinks active, its peers have 18")
