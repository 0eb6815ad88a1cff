"""Healthy machines and healthy tickets that read like faults: each must pass without a false alarm.

A false alarm on a healthy machine is the worst defect gpudoctor can have. These cases come from a review of
the kernel-log Xid reader, the NVML error counters and fabric state, and the ticket readers: a mention of a
ROCm package beside a CUDA PyTorch, benign NVRM lines, an API mismatch the driver has since got over, a
fabric registration still under way at boot.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor.checks.xid_events import check_xid_events
from gpudoctor.cli import cli
from gpudoctor.findings import INFO, WARNING
from gpudoctor.pastes.forms import observed, rocm
from gpudoctor.probes import driver_events
from gpudoctor.compat.data import BUNDLED


def analyze_text(tmp_path: Any, text: str) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "ticket.md"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", str(path)])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


# --- a ROCm package named beside an NVIDIA stack ---------------------------------------------------------

PIP_LIST_CU = """pip list
Package              Version
-------------------- ----------
{extra}torch                2.5.1+cu124
numpy                1.26.4
Everything works, torch.cuda.is_available() is True.
"""


def test_a_rocm_package_asked_about_in_prose_is_no_sign() -> None:
    assert rocm.read(["Do I need pytorch-triton-rocm? Someone told me to install it but I have an NVIDIA card."]) is None
    assert rocm.read(["tensorflow-rocm is for AMD, right?"]) is None


def test_a_rocm_package_in_a_list_or_an_install_command_is_a_sign() -> None:
    for line in ("pytorch-triton-rocm  3.1.0", "[pip3] pytorch-triton-rocm==3.1.0", "tensorflow-rocm==2.14.0.600",
                 "$ pip install tensorflow-rocm"):
        assert rocm.read([line])["signs"][0]["what"].endswith("-rocm package"), line


def test_a_cuda_pytorch_with_a_rocm_package_mentioned_is_judged_as_nvidias(tmp_path: Any) -> None:
    code, report = analyze_text(tmp_path, PIP_LIST_CU.format(extra="") + "Do I need pytorch-triton-rocm too?\n")
    assert code == 0 and "rocm" not in report["facts"]
    assert "FWK210" not in {f["code"] for f in report["findings"]}


def test_a_cuda_pytorch_with_a_rocm_package_installed_is_judged_as_nvidias(tmp_path: Any) -> None:
    """The package sits in the list, but torch is a +cu124 wheel: torch.cuda is CUDA's."""
    code, report = analyze_text(tmp_path, PIP_LIST_CU.format(extra="pytorch-triton-rocm  3.1.0\n"))
    assert code == 0 and "rocm" not in report["facts"]
    assert report["facts"]["frameworks"]["torch"]["info"]["backend"] == "cuda"


# --- NVRM lines of the kernel log ----------------------------------------------------------------------

REAL_NVRM = Path(__file__).parent / "fixtures" / "real" / "h100x1-20261127" / "kernel-log-0447" / "nvrm-lines.txt"
#: NVRM lines healthy machines log (loading, GSP firmware, probe notes, the FBHUB interrupt a healthy H100 clears).
BENIGN_NVRM = [
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023",
    "NVRM: The NVIDIA probe routine was not called for 1 device(s).",
    "NVRM: GPU at PCI:0000:41:00: GPU-2d5b5c1a-1111-2222-3333-444455556666",
    "NVRM: GPU Board Serial Number: 1652823004567",
    "NVRM: nvCheckOkFailedNoLog: Check failed: Call not supported [NV_ERR_NOT_SUPPORTED] (0x00000056) returned from "
    "pRmApi->Control(pRmApi, RES_GET_CLIENT_HANDLE(pKernelChannel)",
    "NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:1c82) installed in this system is not supported by open nvidia.ko "
    "because it does not include the required GPU System Processor (GSP).",
]
MISMATCH = "NVRM: API mismatch: the client has the version 550.54.15, but this kernel module has the version 550.54.14."


def _xid_facts(lines: list[str], module: str = "550.54.15") -> dict[str, Any]:
    log = driver_events.events_of([(100.0 + i, line) for i, line in enumerate(lines)])
    return {"nvml": {"init": {"ok": True}, "device_count": 1},
            "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "pci": {"bus_id": "00000000:41:00.0"}}],
            "driver": {"kernel_module": {"loaded": True, "version": module}},
            "kernel_log": {"read": True, "source": "/dev/kmsg", "complete": True, "records": 900, "first_s": 0.0,
                           "uptime_s": 3600.0, "boot_time": 1795000000.0, "tried": [], **log}}


def test_benign_nvrm_lines_give_no_finding() -> None:
    lines = [line.split("] ", 1)[-1] for line in REAL_NVRM.read_text().splitlines() if "NVRM:" in line] + BENIGN_NVRM
    assert list(check_xid_events(_xid_facts(lines), BUNDLED)) == []


def test_an_init_failure_of_a_gpu_nvml_answers_for_now_is_a_note() -> None:
    [found] = check_xid_events(_xid_facts(["NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x22:0x56:667)"]), BUNDLED)
    assert (found.code, found.severity) == ("GPU109", INFO) and "NVML answers for this GPU now" in found.title


def test_an_init_failure_of_a_gpu_nvml_does_not_list_stays_a_warning() -> None:
    [found] = check_xid_events(_xid_facts(["NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x22:0x56:667)"]), BUNDLED)
    assert (found.code, found.severity) == ("GPU109", WARNING) and "not listed by NVML now" in found.title


def test_an_api_mismatch_the_module_was_reloaded_after_is_a_note() -> None:
    """The libraries were upgraded to 550.54.15 under a loaded 550.54.14 module, which was then reloaded."""
    [found] = check_xid_events(_xid_facts([MISMATCH], module="550.54.15"), BUNDLED)
    assert (found.code, found.severity) == ("GPU109", INFO) and "the module was reloaded since" in found.title


def test_an_api_mismatch_with_the_module_still_older_stays_a_warning() -> None:
    [found] = check_xid_events(_xid_facts([MISMATCH], module="550.54.14"), BUNDLED)
    assert (found.code, found.severity) == ("GPU109", WARNING)


# --- NVSwitch fabric registration ------------------------------------------------------------------------

def _fabric_node(h200x2: dict[str, Any], state: str, uptime_s: float, smoke: bool) -> dict[str, Any]:
    facts = copy.deepcopy(h200x2)
    if not smoke:
        del facts["smoke"]
    for gpu in facts["gpus"]:
        gpu["counters"] = {"uptime_s": uptime_s, "pcie_replay": 0}
        gpu["fabric"] = {"state": state, "status": "success", "api": "v3", "health_summary": "not_supported"}
    return facts


def _fabric_findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in pipeline.judge(facts)["findings"] if f["check"] == "gpus.fabric"]


def test_registration_under_way_minutes_after_boot_is_a_note(h200x2: dict[str, Any]) -> None:
    [found] = _fabric_findings(_fabric_node(h200x2, "in_progress", 45.0, smoke=False))
    assert (found["code"], found["severity"]) == ("GPU191", "info") and "after boot" in found["title"]


def test_registration_under_way_long_after_boot_stays_a_warning(h200x2: dict[str, Any]) -> None:
    [found] = _fabric_findings(_fabric_node(h200x2, "in_progress", 3600.0, smoke=False))
    assert (found["code"], found["severity"]) == ("GPU191", "warning")


def test_a_gpu_the_smoke_kernel_ran_on_was_registered_by_then(h200x2: dict[str, Any]) -> None:
    """The state was read a moment before CUDA ran on the GPU, which it refuses to do on an unregistered one."""
    for state in ("not_started", "in_progress"):
        assert _fabric_findings(_fabric_node(h200x2, state, 45.0, smoke=True)) == []


def test_fabric_manager_not_running_at_boot_is_still_an_error(h200x2: dict[str, Any]) -> None:
    [found] = _fabric_findings(_fabric_node(h200x2, "not_started", 45.0, smoke=False))
    assert (found["code"], found["severity"]) == ("GPU191", "error")


# --- a ticket's Xids ---------------------------------------------------------------------------------------

PROGRAM_CRASH = """$ sudo dmesg | grep NVRM
[    3.5] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  (dvs-builder@U16-I3-B03-4-3)
[    3.6] NVRM: Persistence mode is deprecated and will be removed in a future release. Please use nvidia-persistenced instead.
[ 3600.1] NVRM: Xid (PCI:0000:01:00): 13, pid=12345, name=python, Graphics Exception: ESR 0x514648=0x1000000 0x514650=0x0
[ 3600.2] NVRM: Xid (PCI:0000:01:00): 31, pid=12345, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS
[ 3600.3] NVRM: Xid (PCI:0000:01:00): 43, pid=12345, name=python, Ch 00000008
My training crashed with an illegal memory access, is it my code? torch.cuda.is_available() is True.
"""


def test_a_programs_own_crash_in_a_ticket_is_no_error_and_xid_43_is_a_note(tmp_path: Any) -> None:
    code, report = analyze_text(tmp_path, PROGRAM_CRASH)
    severities = {f["title"].split(" (")[0]: f["severity"] for f in report["findings"] if f["code"] == "DRV020"}
    assert code == 0 and severities == {"the kernel log shows Xid 13": "warning", "the kernel log shows Xid 31": "warning",
                                        "the kernel log shows Xid 43": "info"}


# --- what the reporter says they saw ---------------------------------------------------------------------

NVIDIA_SMI_4090 = """$ nvidia-smi
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0 Off |                  Off |
+-----------------------------------------+------------------------+----------------------+
"""


def test_a_statement_the_reporter_says_is_over_is_not_what_they_see() -> None:
    for line in ("torch.cuda.is_available() returned False before I installed the driver, now True.",
                 "torch.cuda.is_available() was False until I rebooted; now everything works.",
                 "EDIT: solved. is_available() returned False because CUDA_VISIBLE_DEVICES was empty.",
                 "My GPU fell off the bus last week, I replaced the riser and it is fine now."):
        assert observed.read([line]) is None, line


def test_a_statement_still_true_is_read() -> None:
    for line in ("I reinstalled the driver but torch.cuda.is_available() still returns False, it used to work.",
                 "torch.cuda.is_available() returns False even after I installed the driver",
                 "The GPU fell off the bus again after I replaced the riser."):
        assert observed.read([line])["evidence"], line


def test_a_later_true_makes_an_earlier_false_the_past(tmp_path: Any) -> None:
    said = ["torch.cuda.is_available() returned False.", "I installed the driver and now torch.cuda.is_available() returns True."]
    assert observed.read(said) is None
    code, report = analyze_text(tmp_path, NVIDIA_SMI_4090 + "\n".join(said) + "\n")
    assert code == 0 and report["findings"] == []


def test_a_resolved_no_gpu_beside_nvidia_smi_is_no_error(tmp_path: Any) -> None:
    code, report = analyze_text(tmp_path, NVIDIA_SMI_4090 + "torch.cuda.is_available() was False until I installed "
                                                           "the driver; now it returns True.\n")
    assert code == 0 and "FWK211" not in {f["code"] for f in report["findings"]}


def test_an_xid_before_the_module_was_loaded_again_is_listed_not_judged() -> None:
    """A GPU reset workflow (stop its users, rmmod, nvidia-smi -r, modprobe) after an Xid 48: the driver that
    logged it is gone and the reload initialised the GPU anew; NVML judges its memory now."""
    lines = ["NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build",
             "NVRM: Xid (PCI:0000:41:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error",
             "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x22:0x56:667)",
             "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build"]
    [found] = check_xid_events(_xid_facts(lines), BUNDLED)
    assert (found.code, found.severity) == ("GPU108", INFO) and "before the NVIDIA kernel module was loaded again" in found.title
    assert "Xid 48" in found.title and "init_failed" in found.title


def test_an_xid_after_the_module_loaded_is_judged() -> None:
    lines = ["NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build",
             "NVRM: Xid (PCI:0000:41:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error"]
    [found] = check_xid_events(_xid_facts(lines), BUNDLED)
    assert (found.code, found.severity) == ("GPU105", "error")


# --- error counters over a long uptime, and GPUs without NVLink in use --------------------------------------

def _counters_node(h200x2: dict[str, Any], gen: int, replays: int, uptime_s: float) -> dict[str, Any]:
    facts = copy.deepcopy(h200x2)
    for gpu in facts["gpus"]:
        gpu["pcie"] = {"gen_current": 1, "gen_max": gen, "width_current": 16, "width_max": 16}
        gpu["nvlink"] = {"unavailable": "not_supported"}  # a PCIe card, or a consumer GPU
        gpu["counters"] = {"uptime_s": uptime_s, "pcie_replay": replays, "nvlink_errors": {"unavailable": "not_supported"}}
        gpu["fabric"] = {"state": "not_supported", "status": "success", "api": "v3", "health_summary": "not_supported"}
    return facts


def test_a_few_hundred_replays_over_months_on_gen3_and_gen4_are_quiet(h200x2: dict[str, Any]) -> None:
    for gen in (3, 4):
        judged = pipeline.judge(_counters_node(h200x2, gen, 400, 90 * 86400.0))
        assert [f for f in judged["findings"] if f["check"].startswith("gpus.")] == [], gen
        status = {c["id"]: c["status"] for c in judged["checks"]}
        assert status["gpus.pcie_replays"] == "pass" and status["gpus.fabric"] == "pass"
        assert status["gpus.nvlink_errors"] == "skip"  # no NVLink: nothing to judge, not a pass


def test_in_a_container_an_xid_on_a_host_gpu_it_was_not_given_is_a_note() -> None:
    """A pod given one GPU of eight reads the host's kernel log: another tenant's Xid 79 is not this pod's fault."""
    facts = _xid_facts(["NVRM: Xid (PCI:0000:c1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                        "NVRM: GPU 0000:c1:00.0: GPU has fallen off the bus."])
    facts["host"] = {"container": {"detected": True, "markers": ["/.dockerenv"]}}
    found = list(check_xid_events(facts, BUNDLED))
    assert [(f.code, f.severity) for f in found] == [("GPU107", INFO), ("GPU109", INFO)]
    assert "not given to this container" in found[0].title and "not given to this container" in found[1].title


def test_on_the_host_or_with_a_gpu_nvml_cannot_read_an_unlisted_gpus_xid_is_judged() -> None:
    line = "NVRM: Xid (PCI:0000:c1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    [found] = check_xid_events(_xid_facts([line]), BUNDLED)  # not in a container: the machine's own GPU is lost
    assert (found.code, found.severity) == ("GPU105", "error")
    facts = _xid_facts([line])
    facts["host"] = {"container": {"detected": True, "markers": []}}
    facts["nvml"]["device_count"] = 2  # a second GPU is counted but could not be read: it may be this one
    [found] = check_xid_events(facts, BUNDLED)
    assert (found.code, found.severity) == ("GPU105", "error")


def test_a_cuda_pytorch_on_an_amd_machine_stays_outside_the_nvidia_checks(tmp_path: Any) -> None:
    """rocm-smi shows the machine's GPUs are AMD's: a +cu124 wheel there is the wrong build on an AMD machine."""
    code, report = analyze_text(tmp_path, PIP_LIST_CU.format(extra="") + "$ rocm-smi\n"
                                "========================= ROCm System Management Interface =========================\n")
    assert [f["code"] for f in report["findings"]] == ["FWK210"] and report["facts"]["rocm"]["signs"]
