"""Ticket forms read into facts and judged: JAX's "CUDA backend failed to initialize" (FWK207), nvidia-smi's ERR!
readings (GPU104), ``cupy.show_config()`` and ``jax.print_environment_info()`` as framework facts, and
``/proc/driver/nvidia/version`` as the driver's version. Each is read from a real ticket in
tests/fixtures/tickets/ (its thread in index.json); the combinations no single ticket holds are built from
real lines of those tickets.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.pastes.detect import find_pastes
from gpudoctor.pastes.forms import messages

TICKETS = Path(__file__).parent / "fixtures" / "tickets"
PROC_470 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  Tue Oct 26 23:05:33 UTC 2021"
PROC_535 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"


def analyze(*args: str, stdin: str = "") -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", *args], input=stdin or None)
    assert result.exit_code in (0, 1, 2), result.output
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}


def findings(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in report.get("findings") or []}


def _lines(name: str) -> list[str]:
    return (TICKETS / name).read_text(encoding="utf-8").split("\n")


# --- JAX's CUDA backend -------------------------------------------------------------------------------

def test_jax_backend_message_names_the_outdated_library() -> None:
    item = messages.read(_lines("gcbfplus-1.md"))["evidence"][0]
    assert (item["kind"], item["cause"], item["library"], item["found"], item["built"]) == \
        ("jax_backend_failed", "library_too_old", "cuDNN", "8.6.0", "8.9.6")
    code, report = analyze(str(TICKETS / "gcbfplus-1.md"))
    jax = findings(report)["FWK207"]
    assert code == 1 and jax["severity"] == "error" and "cuDNN 8.6.0" in jax["title"] and "8.9.6" in jax["title"]
    assert any("jax[cuda12]" in c for c in jax["remediation"]["commands"])


def test_jax_backend_message_in_every_wording() -> None:
    said = {
        "CUDA backend failed to initialize: Found CUDA version 12010, but JAX was built against version 12020, which "
        "is newer. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)": ("library_too_old", "12.1", "12.2"),
        "CUDA backend failed to initialize: Unable to load cuDNN. Is it installed? (Set TF_CPP_MIN_LOG_LEVEL=0 and "
        "rerun for more info.)": ("library_not_loaded", None, None),
        "E0000 xla_bridge.py] CUDA backend failed to initialize: FAILED_PRECONDITION: No visible GPU devices.": ("no_gpu", None, None),
    }
    for line, (cause, found, built) in said.items():
        item = messages.read([line])["evidence"][0]
        assert (item["cause"], item.get("found"), item.get("built")) == (cause, found, built), line
    item = messages.read(_lines("jax-20722.md"))["evidence"][0]
    assert item["cause"] == "cuda_not_started" and "CUDA_ERROR_NOT_INITIALIZED" in item["error"]


def test_jax_seeing_no_gpu_is_an_error_only_where_a_gpu_is_listed() -> None:
    line = "CUDA backend failed to initialize: FAILED_PRECONDITION: No visible GPU devices."
    _, alone = analyze("-", stdin=line + "\n")
    assert findings(alone)["FWK207"]["severity"] == "warning"  # a machine without a GPU: the CPU is all there is
    smi = (TICKETS / "jax-12213-gpu.md").read_text(encoding="utf-8")  # nvidia-smi listing a Tesla T4
    _, listed = analyze("-", stdin=smi + "\n" + line + "\n")
    assert findings(listed)["FWK207"]["severity"] == "error"


def test_a_denied_jax_message_is_not_evidence() -> None:
    assert messages.read(["I no longer see CUDA backend failed to initialize: Unable to load cuDNN."]) is None


# --- nvidia-smi ERR! ----------------------------------------------------------------------------------

def test_err_reading_names_the_gpu_and_the_field() -> None:
    code, report = analyze(str(TICKETS / "azhpc-diagnostics-77.md"))
    err = findings(report)["GPU104"]
    assert code == 0 and report["summary"]["verdict"] == "warning"  # the thread: a transient reading, not broken
    assert "GPU 1 (Tesla V100-PCIE..., 00008ED0:00:00.0)" in err["title"] and "power draw" in err["title"]
    assert err["subject"]["gpu_index"] == 1


def test_err_in_the_fan_column_of_the_wide_table() -> None:
    rows = ["|   0  NVIDIA GeForce RTX 2080 SUPER  Off |   00000000:01:00.0 Off |                  N/A |",
            "|ERR!   45C    P8            N/A  /  N/A  |       1MiB /   8192MiB |      0%      Default |"]
    item = messages.read(rows)["evidence"][0]
    assert item["fields"] == ["fan"] and item["index"] == 0
    assert messages.read(["| ERR! is what nvidia-smi printed |"]) is None  # no GPU row above it


def test_a_gpu_nvidia_smi_cannot_open_is_named() -> None:
    code, report = analyze(str(TICKETS / "workspace-19.md"))
    handle = findings(report)["GPU104"]
    assert code == 1 and handle["severity"] == "error" and "GPU 0000:0B:00.0" in handle["title"]
    assert "Unknown Error" in handle["title"]
    said = "sudo nvidia-smi says: Unable to determine the device handle for GPU0000:07:00.0: Unknown Error"
    assert messages.read([said])["evidence"][0]["bus_id"] == "0000:07:00.0"


# --- cupy.show_config(), jax.print_environment_info() ------------------------------------------------

def test_cupy_show_config_is_judged_as_cupy() -> None:
    code, report = analyze(str(TICKETS / "cupy-3768.md"))
    cupy = report["facts"]["frameworks"]["cupy"]["info"]
    assert code == 0 and report["summary"]["verdict"] == "ok"
    assert (cupy["version"], cupy["built_cuda"], cupy["runtime_cuda"], cupy["runtime_cudnn"], cupy["cuda_root"]) == \
        ("8.0.0", "11.0", "11.0", "7.5.0", "/usr/local/cuda-10.2")
    assert report["facts"]["nvml"]["cuda_driver_version"] == 11000
    assert "driver.nvml" not in report["facts"]["paste"]["judged"]  # CUDA answered CuPy; NVML was not seen


def test_jax_environment_info_is_judged_as_jax() -> None:
    code, report = analyze(str(TICKETS / "jax-12213-gpu.md"))
    jax = report["facts"]["frameworks"]["jax"]["info"]
    assert code == 0 and (jax["version"], jax["jaxlib_version"], jax["cuda_available"]) == ("0.3.17", "0.3.15", True)
    code, report = analyze(str(TICKETS / "jax-12213-cpu.md"))
    assert code == 0 and report["facts"]["frameworks"]["jax"]["info"]["cuda_available"] is False


def test_pip_list_jaxlib_names_its_cuda_major() -> None:
    _, report = analyze(str(TICKETS / "jax-20722.md"))
    jax = report["facts"]["frameworks"]["jax"]["info"]
    assert (jax["version"], jax["jaxlib_version"], jax["cuda_major"]) == ("0.4.26", "0.4.26+cuda12.cudnn89", "12")


# --- /proc/driver/nvidia/version ----------------------------------------------------------------------

def test_kernel_module_version_is_read_beside_a_failing_nvidia_smi() -> None:
    code, report = analyze(str(TICKETS / "truenas-nvidia-drivers-19.md"))
    assert code == 1 and "DRV003" in findings(report)
    assert report["facts"]["driver"]["kernel_module"] == {"loaded": True, "version": "580.173.02", "flavour": "proprietary"}
    assert report["facts"]["nvml"]["init"]["ok"] is False  # nvidia-smi's failure still wins


def test_kernel_module_version_is_the_driver_when_nothing_else_says_it() -> None:
    code, report = analyze("-", stdin=PROC_470 + "\ntorch==2.1.0+cu121\n")
    assert code == 1 and "CMP001" in findings(report)  # CUDA 12.1 needs a CUDA 12 driver; 470 is CUDA 11.4
    assert report["facts"]["nvml"]["driver_version"] == "470.82.01"
    assert "driver.nvml" not in report["facts"]["paste"]["judged"]  # a loaded module is not NVML seen to start
    code, report = analyze("-", stdin=PROC_535 + "\ntorch==2.1.0+cu121\n")
    assert code == 0 and report["summary"]["verdict"] == "ok"


# --- bounds -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "CUDA backend failed to initialize: " + "a" * 1_000_000,
    ("CUDA backend failed to initialize: Found CUDA version 1" + "0" * 30 + "\n") * 20_000,
    ("Backend 'cuda' failed to initialize: Outdated cuDNN installation found.\nInstalled version: 8\n") * 15_000,
    ("|   0  Tesla T4  Off  | 00000000:00:04.0 Off |  0 |\n| ERR!  ERR!  ERR!  ERR! / ERR! | ERR! | ERR! |\n") * 10_000,
    "| " + "ERR! " * 200_000,
    ("failed to initialize " * 50 + "\n") * 1000,
])
def test_a_one_megabyte_body_stays_linear(line: str) -> None:
    start = time.perf_counter()
    find_pastes(line[:1_000_000], "big.md")
    assert time.perf_counter() - start <= 3.0  # about 0.1-0.3 s idle; the bound leaves room for a loaded runner


# --- versions stated in prose -------------------------------------------------------------------------

def _prose(text: str) -> tuple[int, dict[str, Any]]:
    return analyze("-", stdin=text + "\n")


def test_prose_that_states_enough_is_judged() -> None:
    code, report = _prose("RTX 5090 with torch 2.6.0+cu124, it fails")
    assert code == 1 and "CMP003" in findings(report)  # the cu124 build has no sm_120
    gpu = report["facts"]["gpus"][0]
    assert gpu["stated"] is True and gpu["source"].startswith("prose") and gpu["compute_capability"] == "12.0"
    code, report = _prose("TensorFlow 2.15 on Windows 11 with an RTX 3060")
    assert code == 1 and "CMP009" in findings(report)  # no GPU TensorFlow on native Windows after 2.10
    code, report = _prose("driver 470 and torch 2.1.0+cu121 on a Tesla T4")
    assert code == 1 and "CMP001" in findings(report)


def test_prose_of_a_healthy_stack_is_no_error() -> None:
    for text in ("Windows 11, RTX 3060, CUDA 11.8 and cuDNN 8.6, driver 535, PyTorch 2.1",
                 "I use torch 1.13.1+cu117 on Ubuntu 22.04 with Python 3.12 on an RTX 3060",
                 "TensorFlow 2.15 on WSL2 under Windows 11 with an RTX 3060",
                 "RTX 5090, driver 570.124.06, torch 2.7.0+cu128 on Ubuntu 24.04"):
        code, report = _prose(text)
        assert code in (0, 1) and report["summary"]["verdict"] != "error", (text, report["findings"])
    _, report = _prose("TensorFlow 2.15 on WSL2 under Windows 11 with an RTX 3060")
    assert report["facts"]["host"]["os"] == "Linux" and report["facts"]["host"]["wsl"] is True


def test_prose_naming_two_values_names_none() -> None:
    code, report = _prose("upgraded from driver 470 to driver 535, torch 2.1.0+cu121 on a Tesla T4")
    assert "nvml" not in report["facts"] and "CMP001" not in findings(report)
    assert any("2 values for driver version" in n for n in report["facts"]["paste"]["notes"])
    code, report = _prose("the RTX 3090 and the RTX 5090 run torch 2.6.0+cu124")
    assert code == 0 and "gpus" not in report["facts"]  # which GPU is the machine's: unknown, never a guess


def test_prose_never_contradicts_a_stronger_form() -> None:
    smi = (TICKETS / "jax-12213-gpu.md").read_text(encoding="utf-8")  # nvidia-smi: driver 460.32.03, a Tesla T4
    _, report = analyze("-", stdin=smi + "\nI use driver 535 on an RTX 4090 with torch 2.1.0+cu121\n")
    assert report["facts"]["nvml"]["driver_version"] == "460.32.03" and report["facts"]["gpus"][0]["name"] == "Tesla T4"
    assert "prose" not in report["facts"]["paste"]["kinds"]  # beside nvidia-smi, prose only retells it
    assert "driver.nvml" not in _prose("driver 535 and torch 2.1.0+cu121")[1]["facts"]["paste"]["judged"]


def test_prose_in_a_real_ticket() -> None:
    code, report = analyze(str(TICKETS / "berkeley-humanoid-lite-49.md"))
    facts = report["facts"]
    assert code == 1 and "FWK201" in findings(report)
    assert (facts["nvml"]["driver_version"], facts["gpus"][0]["name"], facts["host"]["os"]) == \
        ("590.48.01", "GeForce RTX 5090", "Linux")
    assert facts["frameworks"]["torch"]["info"]["version"] == "2.5.1"
    assert any("NVIDIA GeForce RTX 5090 (sm_120)" in f["title"] for f in report["findings"])


@pytest.mark.parametrize("line", [
    "torch " * 170_000,
    ("RTX 3090 CUDA 11.8 driver 535 torch 2.1.0+cu121 Windows 11 Python 3.12 " * 12 + "\n") * 1100,
    ("CUDA " + "1." * 300 + "\n") * 1600,
    "nvidia " * 150_000,
    "\n".join(f"torch 2.{i % 20}.0+cu12{i % 5} on an RTX 30{i % 10}0, CUDA 12.{i % 9}, driver 5{i % 90:02d}.{i}" for i in range(12_000)),
    "\n".join(f"torch 2.1.0+cu121 on an RTX 3090, CUDA 12.1, driver 535.104.05, run {i}" for i in range(14_000)),
])
def test_a_one_megabyte_prose_body_stays_linear(line: str) -> None:
    start = time.perf_counter()
    find_pastes(line[:1_000_000], "big.md")
    assert time.perf_counter() - start <= 3.0  # a field with two values is no longer looked for; at most 200 lines read
