"""FWK001's install command for a CPU-only PyTorch follows the driver, every visible GPU's compute
capability and the diagnosed Python, as `gpudoctor matrix check` does (compat/stack.py fitting_torch):
the user's release when one of its CUDA variants fits, else the newest release that does, else no
command and a sentence that says why.

The reviewer's case: an RTX 5090 (sm_120) with torch 2.6.0+cpu and driver 570 was told to install
2.6's cu126 wheel, which has code only up to sm_90: the failure of
https://github.com/pytorch/pytorch/issues/150733 (tests/fixtures/pastes/pytorch-150733.txt, whose
user had 2.6.0+cu126 on an RTX 5090 D: "sm_120 is not compatible with the current PyTorch
installation"; fixed by a cu128 build). The architectures each wheel carries are compat_matrix/pytorch.json's.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Optional

import pytest
from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor.cli import cli
from gpudoctor.compat import rules
from gpudoctor.compat.model import Stack
from gpudoctor.compat.stack import fitting_torch
from gpudoctor.snapshot import known
from gpudoctor.compat.data import BUNDLED

from conftest import REAL, load_facts

PASTES = Path(__file__).parent / "fixtures" / "pastes"
COMMAND = re.compile(r"-m pip install --force-reinstall 'torch==(?P<release>[\d.]+)\.\*' "
                     r"--index-url https://download\.pytorch\.org/whl/(?P<variant>cu\d+)$")
CPU_TORCH = {"cpu_only_build": True, "built_cuda": None, "devices": [], "cuda_available": False,
             "init_error": "AssertionError: Torch not compiled with CUDA enabled"}


def _fwk001(facts: dict[str, Any]) -> dict[str, Any]:
    found = [f for f in pipeline.judge(facts)["findings"] if f["code"] == "FWK001"]
    assert len(found) == 1, found
    return found[0]


def _choice(finding: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(release, matrix variant) the finding's one command installs."""
    (command,) = finding["remediation"]["commands"]
    m = COMMAND.search(command)
    assert m, command
    release, variant, name = rules.torch_build(BUNDLED, f"{m['release']}.0+{m['variant']}")
    assert release is not None and variant is not None and name == m["variant"], command
    return m["release"], variant


def _runs_on(variant: dict[str, Any], cc: str) -> str:
    """The matrix's verdict on ``variant``'s code for compute capability ``cc`` (its arch_list and PTX)."""
    return rules.build_runs_on(cc, variant.get("arch_list"), variant.get("ptx")).status


def _synthetic(gpu: str, cc: str, driver: Optional[str], cuda_driver: Optional[int], torch: str,
               python: Optional[str] = "3.12.3") -> dict[str, Any]:
    """A snapshot as `check` records it, reduced to what FWK001 reads."""
    nvml: dict[str, Any] = {"init": {"ok": True}, "device_count": 1}
    if driver:
        nvml["driver_version"] = driver
    if cuda_driver:
        nvml["cuda_driver_version"] = cuda_driver
    facts: dict[str, Any] = {
        "nvml": nvml,
        "gpus": [{"index": 0, "name": gpu, "compute_capability": cc}],
        "host": {"os": "Linux"},
        "python": {"executable": "/opt/venv/bin/python3"},
        "frameworks": {"torch": {"installed": True, "status": "ok", "info": {"version": torch, **CPU_TORCH}}},
    }
    if python:
        facts["python"]["version"] = python
    return facts


def _analyze(path: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", str(path)])
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def _cpu_paste(tmp_path: Path) -> Path:
    """pytorch#150733's collect_env (RTX 5090 D, driver 570.124.04, Python 3.12.9) with its torch made
    the CPU-only build of the same release: collect_env alone, no nvidia-smi table."""
    text = (PASTES / "pytorch-150733.txt").read_text(encoding="utf-8")
    assert "PyTorch version: 2.6.0+cu126" in text and "Nvidia driver version: 570.124.04" in text
    text = text.replace("PyTorch version: 2.6.0+cu126", "PyTorch version: 2.6.0+cpu")
    text = text.replace("CUDA used to build PyTorch: 12.6", "CUDA used to build PyTorch: None")
    text = text.replace("Is CUDA available: True", "Is CUDA available: False")
    path = tmp_path / "ce_5090_cpu.txt"
    path.write_text(text, encoding="utf-8")
    return path


# --- the reviewer's case: RTX 5090, torch 2.6.0+cpu, driver 570 (CUDA 12.8) -------------------------

def test_5090_gets_a_build_with_sm_120_not_2_6_cu126():
    facts = _synthetic("NVIDIA GeForce RTX 5090", "12.0", "570.133.07", 12080, "2.6.0+cpu")
    finding = _fwk001(facts)
    release, variant = _choice(finding)
    assert _runs_on(variant, "12.0") == rules.OK, variant
    assert (release, variant["name"]) != ("2.6", "cu126")
    # 2.6 has no variant with sm_120 (compat_matrix/pytorch.json): the newest release that fits is named, and why
    assert release != "2.6"
    assert "No CUDA build of PyTorch 2.6 runs here" in finding["remediation"]["text"]
    assert "compute capability 12.0" in finding["remediation"]["text"]
    assert rules.driver_runs_cuda(BUNDLED, variant["cuda"], "570.133.07", "12.8").status in (rules.OK, rules.LIMITED)
    # the same choice as `gpudoctor matrix check --gpu 'NVIDIA GeForce RTX 5090' --driver 570.133.07 --python 3.12`
    same = fitting_torch(BUNDLED, Stack(driver="570.133.07", driver_cuda="12.8", gpus=[("RTX 5090", "12.0")], python="3.12"), "2.6")
    assert same is not None and (release, variant["name"]) == (same[0]["version"], same[1]["name"])
    assert finding["remediation"]["commands"][0].startswith("/opt/venv/bin/python3 -m pip")


def test_5090_collect_env_alone_gets_a_command_from_the_driver_version(tmp_path):
    """No nvidia-smi: the driver's CUDA comes from its version (Table 3, rules.driver_cuda_of)."""
    report = _analyze(_cpu_paste(tmp_path))
    assert known(report["facts"]["nvml"].get("cuda_driver_version")) is None
    assert report["facts"]["nvml"]["driver_version"] == "570.124.04"
    (finding,) = [f for f in report["findings"] if f["code"] == "FWK001"]
    release, variant = _choice(finding)
    assert _runs_on(variant, "12.0") == rules.OK
    assert rules.driver_runs_cuda(BUNDLED, variant["cuda"], "570.124.04").status in (rules.OK, rules.LIMITED)
    assert "Python 3.12" in finding["remediation"]["text"]
    assert rules.python_in(rules.torch_build(BUNDLED, f"{release}.0")[0]["python"], "3.12") is True


# --- H100 with driver 580 (CUDA 13.0): the user's release is kept --------------------------------------

@pytest.fixture
def h100_cpu_torch() -> dict[str, Any]:
    """The real 1 x H100 recording (driver 580.159.04, CUDA 13.0, Python 3.12.3) with its torch 2.11.0+cu130
    replaced by the CPU-only build of the same release."""
    facts = copy.deepcopy(load_facts(REAL / "h100x1-20261121"))
    assert facts["frameworks"]["torch"]["info"]["version"] == "2.11.0+cu130"
    facts["frameworks"]["torch"]["info"].update(version="2.11.0+cpu", **CPU_TORCH)
    return facts


def test_h100_driver_580_keeps_the_release_with_a_cuda_13_or_12_8_build(h100_cpu_torch):
    finding = _fwk001(h100_cpu_torch)
    release, variant = _choice(finding)
    assert release == "2.11" and variant["name"] in ("cu130", "cu128")
    assert _runs_on(variant, "9.0") == rules.OK
    assert finding["remediation"]["text"].startswith(f"Install the {variant['name']} build of PyTorch 2.11")
    assert finding["remediation"]["commands"][0].startswith(h100_cpu_torch["python"]["executable"] + " -m pip")


def test_h100_driver_known_only_by_version_gets_the_same_command(h100_cpu_torch):
    with_cuda = _fwk001(h100_cpu_torch)["remediation"]["commands"]
    del h100_cpu_torch["nvml"]["cuda_driver_version"]
    assert _fwk001(h100_cpu_torch)["remediation"]["commands"] == with_cuda


# --- an old GPU: GTX 1080 (sm_61), driver 535 (CUDA 12.2) -----------------------------------------------

def test_gtx_1080_is_not_offered_a_build_without_pascal_code():
    facts = _synthetic("NVIDIA GeForce GTX 1080", "6.1", "535.183.01", 12020, "2.11.0+cpu")
    finding = _fwk001(facts)
    release, variant = _choice(finding)
    assert _runs_on(variant, "6.1") == rules.OK, variant  # sm_60 machine code runs on 6.1
    # 2.11's cu128 and cu130 start at sm_75 (compat_matrix/pytorch.json): not those
    assert variant["name"] not in ("cu128", "cu130")
    assert release == "2.11"
    # CUDA 12.6 on a 12.2 driver: minor-version compatibility, and the text says so
    assert rules.driver_runs_cuda(BUNDLED, variant["cuda"], "535.183.01", "12.2").status == rules.LIMITED
    assert "minor-version compatibility" in finding["remediation"]["text"]


# --- nothing fits: no command, and why --------------------------------------------------------------

def test_no_release_for_the_python_gives_no_command_and_says_so():
    """Python 3.8: the releases with a 3.8 wheel (up to 2.4) have no sm_120 code."""
    finding = _fwk001(_synthetic("NVIDIA GeForce RTX 5090", "12.0", "570.133.07", 12080, "2.4.1+cpu", python="3.8.10"))
    assert finding["remediation"]["commands"] == []
    assert "no wheel for Python 3.8" in finding["remediation"]["text"]


def test_a_driver_too_old_for_every_build_gives_no_command_and_says_so():
    finding = _fwk001(_synthetic("NVIDIA H100 80GB HBM3", "9.0", "418.226.00", 10010, "2.11.0+cpu"))
    assert finding["remediation"]["commands"] == []
    assert "driver 418.226.00" in finding["remediation"]["text"]
    # the matrix holds CUDA 10 builds that driver 418 runs (PyTorch 1.x), none with code for an H100
    assert "no CUDA build that driver 418.226.00 runs has code for GPU 0" in finding["remediation"]["text"]


def test_an_unknown_driver_gives_no_command():
    facts = _synthetic("NVIDIA H100 80GB HBM3", "9.0", None, None, "2.11.0+cpu")
    finding = _fwk001(facts)
    assert finding["remediation"]["commands"] == []
    assert "driver's version is not known" in finding["remediation"]["text"]


def test_an_unknown_compute_capability_is_said_not_checked():
    facts = _synthetic("NVIDIA H100 80GB HBM3", "9.0", "580.159.04", 13000, "2.11.0+cpu")
    del facts["gpus"][0]["compute_capability"]
    finding = _fwk001(facts)
    assert len(finding["remediation"]["commands"]) == 1
    assert "compute capability of 1 GPU(s) is not known" in finding["remediation"]["text"]
