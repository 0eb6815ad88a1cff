"""Checks and renderers on reports recorded on real GPU machines, and on faults derived from them
one fact at a time. Each fault asserts the exact code it must produce; the healthy recordings
assert that no check raises a warning or an error there (no wrong alarms)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpudoctor import pipeline
from gpudoctor.snapshot import unavailable
from helpers_facts import with_fact
from gpudoctor.views.visibility import resolve
from nvidia_smi import compare_smi_xml, compare_topology

from conftest import load_facts

#: Info notes a healthy recording may carry (none today); anything else is a wrong alarm.
HEALTHY_NOTES: set[str] = set()


def codes(facts: dict[str, Any]) -> set[str]:
    return {f["code"] for f in pipeline.judge(facts)["findings"]}


def test_real_report_matches_nvidia_smi(real_dir):
    facts = load_facts(real_dir)
    smi = compare_smi_xml(facts, (real_dir / "nvidia-smi-q.xml").read_text())
    assert smi.mismatches == []
    assert len(smi.compared) >= 30
    topo = compare_topology(facts, (real_dir / "topo-m.txt").read_text(), (real_dir / "topo-p2p-r.txt").read_text())
    assert topo.mismatches == []


def test_real_report_is_all_clear(real_dir):
    report = pipeline.judge(load_facts(real_dir))
    bad = [(f["code"], f["title"]) for f in report["findings"] if f["severity"] != "info"]
    assert bad == []
    assert {f["code"] for f in report["findings"]} <= HEALTHY_NOTES
    assert report["summary"]["verdict"] == "ok"
    assert {c["status"] for c in report["checks"]} <= {"pass", "skip"}


def test_cuda_visible_devices_rules_agree_with_libcuda(real_dir):
    """Replays the masks tried against the real CUDA driver (tools/device/cuda_visible.py)."""
    facts = load_facts(real_dir)
    lines = [json.loads(x) for x in (real_dir / "cuda-visible.jsonl").read_text().splitlines() if x.startswith("{")]
    assert len(lines) >= 10
    for line in lines:
        predicted = [d.uuid for d in resolve(with_fact(facts, "host.env.CUDA_VISIBLE_DEVICES", line["mask"])).devices]
        assert predicted == line["driver"]["uuids"], line["mask"]


def _not_supported_everywhere(gpu: dict[str, Any]) -> dict[str, Any]:
    keep = {"index", "name", "uuid", "pci", "minor_number"}
    return {k: (v if k in keep else unavailable("not_supported")) for k, v in gpu.items()}


FAULTS = [
    # (fact path, value, expected code)  -- GPU 1 of the 2 x H200 recording unless the path says otherwise
    ("gpus.1.ecc.uncorrected_volatile", 3, "GPU111"),
    ("gpus.1.retired_pages", {"pending": True, "single_bit_count": 0, "double_bit_count": 1}, "GPU112"),
    ("gpus.1.remapped_rows.pending", True, "GPU113"),
    ("gpus.1.remapped_rows.failure", True, "GPU114"),
    ("gpus.1.clock_event_reasons", {"mask": 0x8, "active": ["hw_slowdown"]}, "GPU121"),
    ("gpus.1.clock_event_reasons", {"mask": 0x80, "active": ["hw_power_brake_slowdown"]}, "GPU121"),
    ("gpus.1.clock_event_reasons", {"mask": 0x20, "active": ["sw_thermal_slowdown"]}, "GPU122"),
    ("gpus.1.temperature.current_c", 86, "GPU123"),
    ("gpus.1.pcie.width_current", 4, "GPU131"),
    ("gpus.1.persistence_mode", "disabled", "GPU141"),
    ("gpus.1.compute_mode", "prohibited", "GPU142"),
    ("gpus.1.compute_mode", "exclusive_process", "GPU143"),
    ("gpus.1.memory.used_bytes", 120 * 1024**3, "GPU151"),
    ("gpus.1.mig", {"current": "enabled", "pending": "enabled",
                    "devices": [{"index": 0, "uuid": "MIG-5c1a2b3c-0000-0000-0000-000000000001", "name": "NVIDIA H200 MIG 1g.18gb",
                                 "memory_total_bytes": 18 * 1024**3}]}, "GPU161"),
    ("gpus.1.mig.pending", "enabled", "GPU162"),
    ("gpus.1.name", "NVIDIA H100 80GB HBM3", "GPU171"),
    ("gpus.1.nvlink.active_count", 12, "GPU181"),
    ("gpus.1.handle", unavailable("timeout"), "GPU102"),
    ("gpus.1.power.draw_mw", unavailable("gpu_lost"), "GPU101"),
    ("topology.pairs.0.p2p.read", "disabled_by_regkey", "TOPO201"),
    ("host.env.CUDA_VISIBLE_DEVICES", "", "VIS001"),
    ("host.env.CUDA_VISIBLE_DEVICES", "-1", "VIS001"),
    ("host.env.CUDA_VISIBLE_DEVICES", "0,0", "VIS001"),
    ("host.env.CUDA_VISIBLE_DEVICES", "1,3", "VIS002"),
    ("host.env.CUDA_VISIBLE_DEVICES", "1", "VIS004"),
    ("host.env.NVIDIA_DRIVER_CAPABILITIES", "utility", "CTR002"),
    ("host.env.NVIDIA_VISIBLE_DEVICES", "void", "CTR004"),
    ("nvml.cuda_driver_version", 12080, "CTR003"),  # also CMP001: the recorded torch/jax/cupy are CUDA 13 builds
    ("driver.nouveau_loaded", True, "DRV007"),
    ("driver.device_nodes./dev/nvidia1", {"exists": False, "accessible": False}, "DRV015"),
    ("driver.device_nodes./dev/nvidiactl", {"exists": True, "accessible": False}, "DRV016"),
    ("driver.device_nodes./dev/nvidia-uvm", {"exists": False, "accessible": False}, "DRV017"),
    ("nvml.missing_functions", ["nvmlDeviceGetRemappedRows"], "DRV018"),
    ("nvml.device_count", 0, "DRV012"),
]


@pytest.mark.parametrize("path,value,expected", FAULTS, ids=[f"{c}-{p}" for p, _, c in FAULTS])
def test_fault_from_real_report(h200x2, path, value, expected):
    facts = with_fact(h200x2, path, value)
    if path == "nvml.device_count":
        facts["gpus"], facts["topology"]["pairs"] = [], []
    found = codes(facts)
    assert expected in found
    # one fact changed: nothing else should start complaining, except what that fact also implies
    also = {"CMP001", "CMP006"} if path == "nvml.cuda_driver_version" else set()
    assert found - {expected} <= ({"VIS004"} | HEALTHY_NOTES | also), found
    if also:
        assert also <= found


def test_idle_gpu_lowering_pcie_generation_is_not_a_problem(h200x2):
    facts = with_fact(h200x2, "gpus.0.pcie.gen_current", 1)
    assert codes(facts) == set()


def test_not_supported_everywhere_stays_quiet(h200x2):
    """A GPU that supports none of the optional queries (GeForce, MIG, old boards) is not a failure."""
    facts = dict(h200x2)
    facts["gpus"] = [_not_supported_everywhere(g) for g in h200x2["gpus"]]
    report = pipeline.judge(facts)
    assert [f["code"] for f in report["findings"] if f["severity"] != "info"] == []


@pytest.mark.parametrize("reason,expected", [
    ("driver_not_loaded", "DRV002"), ("driver_library_mismatch", "DRV003"), ("no_permission", "DRV004"),
    ("gpu_lost", "DRV005"), ("unknown", "DRV006"), ("library_not_found", "DRV001"),
])
def test_init_errors(h200x2, reason, expected):
    facts = with_fact(h200x2, "nvml.init", {"ok": False, "reason": reason, "code": 0, "message": "fake"})
    facts = with_fact(facts, "host.container", {"detected": False, "markers": []})
    facts["gpus"], facts["topology"]["pairs"] = [], []
    assert codes(facts) == {expected}


def test_library_not_found_tells_no_gpu_from_missing_driver(h200x2):
    base = with_fact(h200x2, "nvml.init", {"ok": False, "reason": "library_not_found", "code": 12, "message": "x"})
    base = with_fact(base, "host.container", {"detected": False, "markers": []})
    base["gpus"] = []
    no_gpu = with_fact(with_fact(base, "driver.pci_devices", []), "driver.nvml_library_files", [])
    assert codes(no_gpu) == {"DRV011"}
    in_container = with_fact(no_gpu, "host.container", {"detected": True, "markers": ["/.dockerenv"]})
    in_container = with_fact(in_container, "driver.device_nodes", {})
    assert codes(in_container) == {"CTR001"}
    wsl = with_fact(no_gpu, "host.wsl", True)
    report = pipeline.judge(wsl)
    assert [f["code"] for f in report["findings"]] == ["DRV001"]
    assert any("/usr/lib/wsl/lib" in c for c in report["findings"][0]["remediation"]["commands"])


def test_driver_mismatch_names_both_versions(h200x2):
    facts = with_fact(h200x2, "nvml.init", {"ok": False, "reason": "driver_library_mismatch", "code": 18, "message": "x"})
    facts = with_fact(facts, "driver.kernel_module.version", "575.57.08")
    facts = with_fact(facts, "driver.nvml_library_files", ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05"])
    facts["gpus"] = []
    (finding,) = pipeline.judge(facts)["findings"]
    assert "575.57.08" in finding["title"] and "580.95.05" in finding["title"]


def test_gpu_fallen_off_outside_container(h200x2):
    facts = with_fact(h200x2, "host.container", {"detected": False, "markers": []})
    extra = {"bus_id": "0000:00:08.0", "device_id": "0x2335", "class": "0x030200", "driver": "nvidia"}
    facts = with_fact(facts, "driver.pci_devices", h200x2["driver"]["pci_devices"] + [extra])
    assert codes(facts) == {"DRV013"}
    unbound = dict(extra, driver=None)
    facts = with_fact(facts, "driver.pci_devices", h200x2["driver"]["pci_devices"] + [unbound])
    assert codes(facts) == {"DRV014"}


def test_container_sys_showing_host_gpus_is_not_a_lost_gpu(h200x2):
    """A container's /sys lists every host GPU, not just those it was given: no DRV013 there."""
    extra = {"bus_id": "0000:00:08.0", "device_id": "0x2335", "class": "0x030200", "driver": "nvidia"}
    facts = with_fact(h200x2, "driver.pci_devices", h200x2["driver"]["pci_devices"] + [extra])
    assert codes(facts) == set()


def test_nvml_hang_is_reported(h200x2):
    facts = dict(h200x2)
    facts["nvml"] = {"timed_out": True, "incomplete": {"while": "nvmlInit", "reason": "timeout"}}
    facts["gpus"] = []
    assert codes(facts) == {"DRV009"}


def test_real_container_requirement_string_is_satisfied(h200x2):
    """The recorded image's NVIDIA_REQUIRE_CUDA (cuda>=13.0 or branch ranges) holds on driver 580 / CUDA 13.0."""
    assert h200x2["host"]["env"]["NVIDIA_REQUIRE_CUDA"].startswith("cuda>=13.0 ")
    assert "CTR003" not in codes(h200x2)


@pytest.mark.parametrize("during,expected", [("topology", "DRV009"), ("system", "DRV009"), ("GPU 1", "GPU102")])
def test_nvml_hang_after_init_is_reported(h200x2, during, expected):
    facts = with_fact(h200x2, "nvml.incomplete", {"while": during, "reason": "timeout", "returncode": -9, "stderr_tail": ""})
    if during == "GPU 1":
        facts = with_fact(facts, "gpus.1", {"index": 1, "handle": unavailable("timeout")})
    assert expected in codes(facts)


def test_nvml_worker_crash_after_init_is_reported(h200x2):
    facts = with_fact(h200x2, "nvml.incomplete", {"while": "topology", "reason": "crashed", "returncode": -11,
                                                  "stderr_tail": "Segmentation fault"})
    facts = with_fact(facts, "gpus.1", {"index": 1, "handle": unavailable("unknown")})
    assert {"DRV019", "GPU103"} <= codes(facts)


def test_unreadable_gpu_keeps_its_cuda_position(h200x2):
    """CUDA numbers every GPU the driver has, so GPU 0 being unreadable must not shift cuda:0 to GPU 1."""
    facts = with_fact(h200x2, "gpus.0", {"index": 0, "handle": unavailable("timeout")})
    vis = resolve(with_fact(facts, "host.env.CUDA_VISIBLE_DEVICES", "1"))
    assert [d.gpu_index for d in vis.devices] == [1]


def test_malformed_probe_record_in_a_saved_report_does_not_crash(h200x2):
    facts = with_fact(h200x2, "probes.nvml", "garbage")
    report = pipeline.judge(facts)
    assert report["summary"]["verdict"] in ("ok", "warning")
