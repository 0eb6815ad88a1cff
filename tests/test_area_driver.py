"""The driver area (checks/driver.py): driver.nvml (whether NVML starts, DRV001-DRV006, DRV009-DRV011, DRV019,
and in a container CTR001, CTR006), driver.nouveau (DRV007), driver.gpu_count (DRV012-DRV014),
driver.device_nodes (DRV015-DRV017) and driver.bindings (DRV018).

Judged on the real 2 x H200 recording (tests/fixtures/real/README.md) with one fact changed at a time,
each asserting the exact findings over every check. The same faults in one table over every area, and
NVML's own failures (init errors, hangs, a worker that crashes), are in tests/test_real_reports.py; faults
made for real (a fake pynvml, missing device files) in tests/test_nvml_faults.py and test_fault_injection.py.
"""

from __future__ import annotations

from gpudoctor.checks import registry
from gpudoctor.checks.messages import PASTE_ONLY
from helpers_facts import with_fact

from helpers_judge import codes, only, statuses


def test_the_healthy_recording_passes_every_driver_check(h200x2):
    """NVML started, no nouveau, as many GPUs as the PCI bus shows, every device file there, every NVML
    function the bindings use present."""
    judged = {k: v for k, v in statuses(h200x2, "driver").items() if k not in PASTE_ONLY}
    assert judged == {c.id: "pass" for c in registry.CHECKS if c.area == "driver" and c.id not in PASTE_ONLY}
    assert {statuses(h200x2, "driver").get(c) for c in PASTE_ONLY if c.startswith("driver.")} <= {"skip", None}  # nothing pasted
    assert codes(h200x2) == set()


def test_nouveau_loaded_beside_nvidia_is_an_error_of_the_host(h200x2):
    f = only(with_fact(h200x2, "driver.nouveau_loaded", True), "DRV007")
    assert (f["check"], f["severity"], f["subject"], f["title"]) == (
        "driver.nouveau", "error", {"kind": "host"}, "the nouveau driver is loaded")


def test_a_missing_uvm_device_file_is_only_a_warning(h200x2):
    """/dev/nvidia-uvm is made on first use (nvidia-modprobe -u): its absence is not yet a failure."""
    facts = with_fact(h200x2, "driver.device_nodes./dev/nvidia-uvm", {"exists": False, "accessible": False})
    f = only(facts, "DRV017")
    assert (f["check"], f["severity"], f["title"]) == ("driver.device_nodes", "warning", "/dev/nvidia-uvm does not exist yet")


def test_a_gpu_device_file_missing_or_unreadable(h200x2):
    assert codes(with_fact(h200x2, "driver.device_nodes./dev/nvidia1", {"exists": False, "accessible": False})) == {"DRV015"}
    assert codes(with_fact(h200x2, "driver.device_nodes./dev/nvidiactl", {"exists": True, "accessible": False})) == {"DRV016"}


def test_nvml_functions_the_bindings_lack_are_named(h200x2):
    f = only(with_fact(h200x2, "nvml.missing_functions", ["nvmlDeviceGetRemappedRows"]), "DRV018")
    assert (f["check"], f["severity"]) == ("driver.bindings", "info")
    assert f["title"] == "this driver's NVML lacks 1 function(s) the bindings use: nvmlDeviceGetRemappedRows"
