"""NVML faults, injected through a fake pynvml that shadows the real one in the worker child.

Everything but pynvml is real: the child process, the worker, the runner, the host probe of this
machine (a Docker container without /dev/nvidia*) and the checks.
"""

from __future__ import annotations

import time

import psutil
import pytest

from gpudoctor.checks.registry import run_checks
from gpudoctor.findings import ERROR, FAIL, INFO, PASS, WARNING
from gpudoctor.probes.nvml import probe_nvml
from gpudoctor.probes.system import probe_host
from helpers_faults import codes, findings, full_facts, install_fake_pynvml, result_of


def test_fake_is_what_the_worker_imports(tmp_path, monkeypatch):
    fake_dir = install_fake_pynvml(tmp_path, monkeypatch)
    facts = probe_nvml(timeout_s=10)
    assert facts["nvml"]["bindings"] == {"module_file": str(fake_dir / "pynvml.py"), "import_error": None}
    assert facts["nvml"]["init"] == {"ok": True}


def test_healthy_two_gpus(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch)
    facts = full_facts()
    nvml = facts["nvml"]
    assert nvml["driver_version"] == "580.95.05"
    assert nvml["cuda_driver_version"] == 13000
    assert nvml["device_count"] == 2
    assert nvml["missing_functions"] == []
    assert "incomplete" not in nvml
    assert [g["index"] for g in facts["gpus"]] == [0, 1]
    gpu0 = facts["gpus"][0]
    assert gpu0["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu0["pci"] == {"bus_id": "00000000:19:00.0", "device_id": "0x2330", "subsystem_id": "0x16c110de"}
    assert gpu0["compute_capability"] == "9.0"
    assert gpu0["architecture"] == "hopper"
    assert gpu0["memory"]["reserved_bytes"] == 551 * 1024 * 1024
    assert gpu0["retired_pages"] == {"unavailable": "not_supported"}
    assert gpu0["clock_event_reasons"] == {"mask": 1, "active": ["gpu_idle"]}
    assert gpu0["nvlink"]["active_count"] == 18
    assert facts["topology"]["pairs"][0]["gpus"] == [0, 1]
    assert facts["topology"]["pairs"][0]["nvlink_count"] == 18

    results = run_checks(facts)
    for check_id in ("driver.nvml", "driver.bindings", "gpus.lost", "gpus.memory_errors", "gpus.throttling",
                     "gpus.pcie_width", "gpus.modes", "gpus.memory_held", "gpus.mig", "gpus.models",
                     "gpus.nvlinks", "topology.p2p"):
        r = result_of(results, check_id)
        assert (r.status, [f.code for f in r.findings]) == (PASS, []), check_id
    # this container has no /dev/nvidia*: the nodes CUDA would open are reported missing
    assert [f.title for f in findings(results, "DRV015")] == [
        "/dev/nvidiactl does not exist", "/dev/nvidia0 does not exist", "/dev/nvidia1 does not exist"]
    assert [f.subject.gpu_index for f in findings(results, "DRV015")] == [None, 0, 1]


# NVML error codes from nvml.h: what nvmlInit returns and the finding it must produce here.
INIT_ERRORS = [
    (9, "driver_not_loaded", "DRV002"),
    (12, "library_not_found", "CTR001"),  # in a container without device nodes or driver libraries
    (18, "driver_library_mismatch", "DRV003"),
    (4, "no_permission", "DRV004"),
    (15, "gpu_lost", "DRV005"),
    (999, "unknown", "DRV006"),
]


@pytest.mark.parametrize("code,reason,expected", INIT_ERRORS, ids=[c for _, _, c in INIT_ERRORS])
def test_init_error(tmp_path, monkeypatch, code, reason, expected):
    install_fake_pynvml(tmp_path, monkeypatch, fail=f"nvmlInit:{code}")
    facts = full_facts()
    assert facts["nvml"]["init"]["ok"] is False
    assert facts["nvml"]["init"]["reason"] == reason
    assert facts["nvml"]["init"]["code"] == code
    assert facts["gpus"] == []
    results = run_checks(facts)
    nvml_check = result_of(results, "driver.nvml")
    assert [f.code for f in nvml_check.findings] == [expected]
    assert nvml_check.status == FAIL
    # nothing can be judged per GPU without NVML
    for check_id in ("gpus.lost", "gpus.modes", "topology.p2p", "driver.device_nodes", "driver.gpu_count"):
        assert result_of(results, check_id).status == "skip", check_id


def test_init_error_12_on_this_machine_is_ctr001_because_of_container_facts(tmp_path, monkeypatch):
    """The same NVML error reads differently depending on the host: check what makes it CTR001 here."""
    install_fake_pynvml(tmp_path, monkeypatch, fail="nvmlInit:12")
    facts = full_facts()
    assert facts["host"]["container"]["detected"] is True
    assert not any(n["exists"] for n in facts["driver"]["device_nodes"].values())
    assert facts["driver"]["nvml_library_files"] == []
    [ctr] = findings(run_checks(facts), "CTR001")
    assert ctr.severity == ERROR
    assert ctr.check == "driver.nvml"


def test_every_device_query_not_supported_is_quiet(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch, fail="*:3")
    facts = full_facts()
    assert facts["nvml"]["init"] == {"ok": True}
    assert facts["nvml"]["missing_functions"] == []
    gpu = facts["gpus"][1]
    assert gpu["name"] == {"unavailable": "not_supported"}
    assert gpu["temperature"]["current_c"] == {"unavailable": "not_supported"}
    assert gpu["nvlink"] == {"unavailable": "not_supported"}
    assert gpu["mig"] == {"unavailable": "not_supported"}
    assert facts["topology"]["pairs"][0]["p2p"]["read"] == {"unavailable": "not_supported"}
    results = run_checks(facts)
    loud = [(r.id, r.status, [f.code for f in r.findings]) for r in results
            if r.area in ("gpus", "topology")
            and (r.status not in (PASS, "skip") or any(f.severity in (ERROR, WARNING) for f in r.findings))]
    assert loud == []
    assert result_of(results, "gpus.lost").status == PASS
    assert result_of(results, "driver.nvml").findings == []


@pytest.mark.parametrize("fail,where", [
    ("nvmlDeviceGetTemperature@1:15", ("temperature", "current_c")),
    ("nvmlDeviceGetHandleByIndex@1:15", ("handle",)),
], ids=["query", "handle"])
def test_device_query_gpu_lost(tmp_path, monkeypatch, fail, where):
    install_fake_pynvml(tmp_path, monkeypatch, fail=fail)
    facts = full_facts()
    node = facts["gpus"][1]
    for key in where:
        node = node[key]
    assert node == {"unavailable": "gpu_lost"}
    assert facts["gpus"][0]["temperature"]["current_c"] == 33
    results = run_checks(facts)
    lost = findings(results, "GPU101")
    assert [(f.severity, f.subject.gpu_index) for f in lost] == [(ERROR, 1)]
    assert result_of(results, "gpus.lost").status == FAIL


def test_device_query_hangs(tmp_path, monkeypatch):
    """GPU 0 is read; GPU 1's temperature query blocks in the 'driver' forever."""
    install_fake_pynvml(tmp_path, monkeypatch, hang="nvmlDeviceGetTemperature@1")
    start = time.monotonic()
    facts = full_facts(nvml_timeout_s=3)
    assert time.monotonic() - start < 6.0
    nvml = facts["nvml"]
    assert nvml["timed_out"] is True
    assert nvml["incomplete"]["reason"] == "timeout"
    assert nvml["incomplete"]["while"] == "GPU 1"
    assert facts["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"  # read before the hang: kept
    assert facts["gpus"][1] == {"index": 1, "handle": {"unavailable": "timeout"}}
    assert facts["probes"]["nvml"]["status"] == "ok"
    results = run_checks(facts)
    assert [(f.code, f.subject.gpu_index) for f in findings(results, "GPU102")] == [("GPU102", 1)]
    assert findings(results, "GPU101") == []
    assert psutil.Process().children(recursive=True) == []  # the hung worker was killed


def test_first_device_query_hangs_marks_every_gpu(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch, hang="nvmlDeviceGetName")
    start = time.monotonic()
    facts = probe_nvml(timeout_s=3)
    assert time.monotonic() - start < 6.0
    assert facts["gpus"] == [{"index": 0, "handle": {"unavailable": "timeout"}},
                             {"index": 1, "handle": {"unavailable": "timeout"}}]
    assert facts["nvml"]["incomplete"]["while"] == "GPU 0"
    facts["host"] = probe_host()
    assert [f.subject.gpu_index for f in findings(run_checks(facts), "GPU102")] == [0, 1]


def test_init_hangs(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch, hang="nvmlInit")
    start = time.monotonic()
    facts = full_facts(nvml_timeout_s=3)
    assert time.monotonic() - start < 6.0
    assert "init" not in facts["nvml"]
    assert facts["nvml"]["incomplete"]["while"] == "nvmlInit"
    results = run_checks(facts)
    [drv009] = findings(results, "DRV009")
    assert drv009.severity == ERROR
    assert drv009.title == "NVML did not answer while starting (nvmlInit)"
    assert result_of(results, "gpus.lost").status == "skip"


def test_bindings_import_error(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch, import_error="libnvidia-ml bindings are broken")
    facts = full_facts()
    assert facts["nvml"]["bindings"]["import_error"] == "ImportError: libnvidia-ml bindings are broken"
    assert "init" not in facts["nvml"]
    results = run_checks(facts)
    assert [f.code for f in result_of(results, "driver.nvml").findings] == ["DRV010"]
    assert findings(results, "DRV010")[0].title == (
        "the NVML bindings cannot be imported: ImportError: libnvidia-ml bindings are broken")


@pytest.mark.parametrize("fault", [
    {"missing": "nvmlDeviceGetGpuMaxPcieLinkGeneration"},  # absent from older bindings
    {"fail": "nvmlDeviceGetGpuMaxPcieLinkGeneration:13"},  # NVML_ERROR_FUNCTION_NOT_FOUND from the driver
    {"fail": "nvmlDeviceGetGpuMaxPcieLinkGeneration:attr"},  # AttributeError inside the bindings
], ids=["absent", "nvml-error-13", "attribute-error"])
def test_missing_function(tmp_path, monkeypatch, fault):
    install_fake_pynvml(tmp_path, monkeypatch, **fault)
    facts = full_facts()
    assert facts["nvml"]["missing_functions"] == ["nvmlDeviceGetGpuMaxPcieLinkGeneration"]
    assert facts["gpus"][0]["pcie"]["gen_gpu_max"] == {"unavailable": "function_not_found"}
    assert facts["gpus"][0]["pcie"]["gen_max"] == 5
    results = run_checks(facts)
    [drv018] = findings(results, "DRV018")
    assert drv018.severity == INFO
    assert "nvmlDeviceGetGpuMaxPcieLinkGeneration" in drv018.title
    assert result_of(results, "driver.bindings").status == PASS
    assert result_of(results, "gpus.pcie_width").findings == []


def test_missing_clock_event_reasons_falls_back_to_throttle_reasons(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch, missing="nvmlDeviceGetCurrentClocksEventReasons")
    facts = full_facts()
    assert facts["gpus"][0]["clock_event_reasons"] == {"mask": 1, "active": ["gpu_idle"]}
    assert facts["nvml"]["missing_functions"] == ["nvmlDeviceGetCurrentClocksEventReasons"]
    assert codes([result_of(run_checks(facts), "driver.bindings")]) == ["DRV018"]


def test_a_short_timeout_is_not_a_wedged_driver(h200x2):
    """NVML stopped at a 1 s --timeout while reading GPU 1 is a warning; after 8 s it is the driver (error);
    with every answer already in (only the thread was late) there is nothing to say."""
    from gpudoctor import pipeline
    from helpers_facts import with_fact

    def at_deadline(seconds, incomplete=True):
        facts = with_fact(h200x2, "probes.nvml", {"status": "timeout", "duration_s": seconds, "title": "NVML",
                                                  "error": "unfinished when the --timeout deadline passed"})
        if incomplete:
            facts = with_fact(facts, "nvml.incomplete", {"while": "GPU 1", "reason": "timeout"})
        return [(f["code"], f["severity"]) for f in pipeline.judge(facts)["findings"] if f["code"] == "DRV009"]

    assert at_deadline(1.0) == [("DRV009", "warning")]
    assert at_deadline(8.0) == [("DRV009", "error")]
    assert at_deadline(1.0, incomplete=False) == []
