"""Live tests on a real GPU machine: `python -m pytest -m gpu tests/test_gpu_live.py` (through the
device tool; CI has no GPU and deselects them). Each compares gpudoctor with the driver's own
tools or the frameworks' own answers on the same machine, in the same minute."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from nvidia_smi import compare_smi_xml, compare_topology

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def checked() -> tuple[dict, str]:
    """The report, and nvidia-smi's XML read just before it: gpudoctor reads NVML first and then runs its
    workloads, which warm the GPU, so a read after the check can differ in temperature or clock reasons."""
    before = _smi("-q", "-x")
    # unredacted: the UUIDs, serials and host name are compared with nvidia-smi's
    out = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--format", "json", "--no-redact"],
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout), before


@pytest.fixture(scope="module")
def report(checked) -> dict:
    return checked[0]


def _smi(*args: str) -> str:
    if not shutil.which("nvidia-smi"):
        pytest.skip("no nvidia-smi")
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60).stdout


def test_every_fact_matches_nvidia_smi(checked):
    """Every fact matches nvidia-smi's read before the check or the one after it (a value that moves, like
    the temperature, may have moved between gpudoctor's NVML read and either)."""
    report, before = checked
    field = lambda mismatch: mismatch.split(":")[0]  # noqa: E731
    after = compare_smi_xml(report["facts"], _smi("-q", "-x")).mismatches
    earlier = {field(m) for m in compare_smi_xml(report["facts"], before).mismatches}
    assert [m for m in after if field(m) in earlier] == []
    topo = compare_topology(report["facts"], _smi("topo", "-m"), _smi("topo", "-p2p", "r"))
    assert topo.mismatches == []


def test_smoke_kernel_correct_on_every_gpu(report):
    runs = report["facts"]["smoke"]["runs"]
    assert len(runs) == report["facts"]["nvml"]["device_count"]
    assert all(r["ok"] and r["wrong_elements"] == 0 for r in runs), runs


def test_a_healthy_machine_is_all_clear(report):
    assert [(f["code"], f["title"]) for f in report["findings"] if f["severity"] != "info"] == []
    assert report["summary"]["verdict"] == "ok"


def test_frameworks_see_every_gpu_as_they_say_themselves(report):
    torch = pytest.importorskip("torch")
    info = report["facts"]["frameworks"]["torch"]["info"]
    assert len(info["devices"]) == torch.cuda.device_count()
    v = torch.backends.cudnn.version()  # e.g. 91900 for cuDNN 9.19.0
    assert info["runtime_cudnn"] == f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    loaded = {lib["family"]: lib["path"] for lib in info["loaded_libraries"]}
    torch.backends.cudnn.version()
    maps = [line.split()[-1] for line in open("/proc/self/maps") if "libcudnn.so" in line]
    assert loaded["libcudnn"] in maps


def test_pytorch_checks_each_model_once_and_measures_every_gpu(report):
    """A default check: the first GPU of each model makes PyTorch's correctness checks and training step, the
    others check their matmuls and say which GPU made the rest; every GPU measures its throughput and runs the
    smoke kernel."""
    runs = [r for r in report["facts"]["workload"]["runs"] if r["framework"] == "torch"]
    names = {r["device"]: r["name"] for r in runs}
    first = {}
    for device in sorted(names, key=int):
        first.setdefault(names[device], device)
    for run in runs:
        assert run["throughput"]["ok"], run["device"]
        if first[run["name"]] == run["device"]:
            assert "checks_on" not in run and run["training"]["ok"] and run["conv"]["ok"]
        else:
            assert run["checks_on"] == first[run["name"]] and "training" not in run and "conv" not in run
            assert run["matmul"]["ok"]  # tensor cores are each GPU's own: their results are checked everywhere
