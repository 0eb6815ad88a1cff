"""The container area (checks/container.py): container.capabilities (CTR002), container.visible_devices
(CTR004), container.shm (CTR005) and container.require_cuda (CTR003): what the NVIDIA container runtime was
asked for, against the host driver. (CTR001 and CTR006, a container without GPU access, are the driver
check's: tests/test_cli.py reaches CTR001 on this GPU-less container.)"""

from __future__ import annotations

from typing import Any

import pytest

from gpudoctor.checks import container
from gpudoctor.checks.registry import run_check
from gpudoctor.findings import ERROR, FAIL, PASS, SKIP, WARN, WARNING

_BY_ID = {c.id: c for c in container.CHECKS}
CAPS, VISIBLE, REQUIRE = (_BY_ID[f"container.{n}"] for n in ("capabilities", "visible_devices", "require_cuda"))

# The value nvidia/cuda:13.0.x images set (the brand alternatives shortened to three).
CUDA_13_IMAGE = ("cuda>=13.0 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 "
                 "brand=tesla,driver>=535,driver<536")


def make_facts(env: dict[str, str], cuda: Any = 13000, driver: Any = "580.95.05") -> dict[str, Any]:
    return {
        "probes": {"host": {"status": "ok"}, "nvml": {"status": "ok"}},
        "host": {"env": env, "container": {"detected": True, "markers": ["/.dockerenv"]}},
        "nvml": {"init": {"ok": True}, "driver_version": driver, "cuda_driver_version": cuda, "device_count": 1},
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}],
    }


def judge(check, env, **kw):
    r = run_check(check, make_facts(env, **kw))
    return r.status, [(f.code, f.severity) for f in r.findings]


# --- NVIDIA_DRIVER_CAPABILITIES -----------------------------------------------------------------

@pytest.mark.parametrize("caps", ["all", "compute,utility", "utility,compute,video", " compute , utility "])
def test_capabilities_enough(caps):
    assert judge(CAPS, {"NVIDIA_DRIVER_CAPABILITIES": caps}) == (PASS, [])


def test_capabilities_utility_only_is_an_error():
    r = run_check(CAPS, make_facts({"NVIDIA_DRIVER_CAPABILITIES": "utility"}))
    assert (r.status, [(f.code, f.severity) for f in r.findings]) == (FAIL, [("CTR002", ERROR)])
    assert r.findings[0].title == "NVIDIA_DRIVER_CAPABILITIES='utility' lacks compute"


def test_capabilities_compute_only_is_a_warning():
    r = run_check(CAPS, make_facts({"NVIDIA_DRIVER_CAPABILITIES": "compute"}))
    assert (r.status, [(f.code, f.severity) for f in r.findings]) == (WARN, [("CTR002", WARNING)])
    assert r.findings[0].title == "NVIDIA_DRIVER_CAPABILITIES='compute' lacks utility"


def test_capabilities_graphics_only_lacks_both():
    r = run_check(CAPS, make_facts({"NVIDIA_DRIVER_CAPABILITIES": "graphics,display"}))
    assert [(f.code, f.severity) for f in r.findings] == [("CTR002", ERROR)]
    assert r.findings[0].title.endswith("lacks compute and utility")


def test_capabilities_unset_skips():
    assert judge(CAPS, {}) == (SKIP, [])


# --- NVIDIA_VISIBLE_DEVICES ---------------------------------------------------------------------

@pytest.mark.parametrize("value", ["none", "void", ""])
def test_visible_devices_none(value):
    assert judge(VISIBLE, {"NVIDIA_VISIBLE_DEVICES": value}) == (WARN, [("CTR004", WARNING)])


@pytest.mark.parametrize("value", ["all", "0,1", "GPU-5c1b2f0e-8d4a-4c36-9a7e-1f2d3c4b5a60"])
def test_visible_devices_some(value):
    assert judge(VISIBLE, {"NVIDIA_VISIBLE_DEVICES": value}) == (PASS, [])


def test_visible_devices_unset_skips():
    assert judge(VISIBLE, {}) == (SKIP, [])


# --- NVIDIA_REQUIRE_CUDA ------------------------------------------------------------------------

def test_require_cuda_satisfied():
    assert judge(REQUIRE, {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}, cuda=13000) == (PASS, [])


def test_require_cuda_unmet():
    """cuda>=13.1 on a 13.0 driver: unmet, but the same major above the 580 floor runs under minor-version
    compatibility, so a warning (docs.nvidia.com/deploy/cuda-compatibility); another major is an error."""
    r = run_check(REQUIRE, make_facts({"NVIDIA_REQUIRE_CUDA": "cuda>=13.1"}, cuda=13000, driver="580.95.05"))
    assert (r.status, [(f.code, f.severity) for f in r.findings]) == (WARN, [("CTR003", WARNING)])
    assert r.findings[0].title == ("the host driver (CUDA 13.0, driver 580.95.05) does not meet "
                                   "NVIDIA_REQUIRE_CUDA='cuda>=13.1': the image's CUDA runs only under "
                                   "minor-version compatibility")
    r = run_check(REQUIRE, make_facts({"NVIDIA_REQUIRE_CUDA": "cuda>=14.0"}, cuda=13000, driver="580.95.05"))
    assert (r.status, [(f.code, f.severity) for f in r.findings]) == (FAIL, [("CTR003", ERROR)])


def test_require_cuda_real_image_value_satisfied_by_first_alternative():
    assert judge(REQUIRE, {"NVIDIA_REQUIRE_CUDA": CUDA_13_IMAGE}, cuda=13000, driver="580.95.05") == (PASS, [])


def test_require_cuda_or_of_alternatives_none_holds():
    # CUDA 12.8 driver: cuda>=13.0 fails; every brand alternative needs a 535 driver, and 570 is not < 536
    assert judge(REQUIRE, {"NVIDIA_REQUIRE_CUDA": CUDA_13_IMAGE}, cuda=12080, driver="570.172.08") == (
        FAIL, [("CTR003", ERROR)])


def test_require_cuda_alternative_needing_brand_is_unknown():
    # a 535 driver fits an alternative's driver range, but whether the brand matches cannot be known
    assert judge(REQUIRE, {"NVIDIA_REQUIRE_CUDA": CUDA_13_IMAGE}, cuda=12020, driver="535.261.03") == (PASS, [])
    assert judge(REQUIRE, {"NVIDIA_REQUIRE_CUDA": "cuda>=13.1 brand=tesla"}, cuda=13000) == (PASS, [])


def test_require_cuda_driver_constraint():
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0,driver>=590"}
    assert judge(REQUIRE, env, cuda=13000, driver="580.95.05") == (FAIL, [("CTR003", ERROR)])
    assert judge(REQUIRE, env, cuda=13000, driver="590.44.01") == (PASS, [])


def test_require_cuda_disabled():
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=13.1", "NVIDIA_DISABLE_REQUIRE": "1"}
    r = run_check(REQUIRE, make_facts(env, cuda=13000))
    assert (r.status, r.findings) == (SKIP, [])
    assert r.reason == "no NVIDIA_REQUIRE_CUDA to check"


def test_require_cuda_unknown_driver_cuda_skips():
    r = run_check(REQUIRE, make_facts({"NVIDIA_REQUIRE_CUDA": "cuda>=13.1"}, cuda={"unavailable": "not_supported"}))
    assert (r.status, r.reason) == (SKIP, "the driver's CUDA version is unknown")


def test_require_cuda_unset_skips():
    assert judge(REQUIRE, {}) == (SKIP, [])


def test_require_cuda_is_judged_with_minor_version_compatibility():
    """NVIDIA_REQUIRE_CUDA gets the same driver verdict as a framework build (MVC: same major, driver above
    the major's floor, docs.nvidia.com/deploy/cuda-compatibility): a warning within the major, an error across it."""
    import json
    from pathlib import Path

    from gpudoctor import pipeline
    from helpers_facts import with_fact

    facts = json.loads((Path(__file__).parent / "fixtures/real/h200x2-20261121/report.json").read_text())["facts"]

    def ctr003(require):
        report = pipeline.judge(with_fact(facts, "host.env.NVIDIA_REQUIRE_CUDA", require))
        return [(f["severity"], "minor-version" in f["title"]) for f in report["findings"] if f["code"] == "CTR003"]

    assert ctr003("cuda>=13.0") == []  # the recorded image's requirement on its own driver
    assert ctr003("cuda>=13.1 brand=tesla,driver>=535,driver<536") == [("warning", True)]
    assert ctr003("cuda>=14.0") == [("error", False)]



def test_dev_shm_too_small_in_a_container():
    """Docker's 64 MiB /dev/shm: a warning with several GPUs (NCCL's shared-memory transport), a note with one;
    quiet at 1 GiB and above, and outside containers."""
    import json
    from pathlib import Path

    from gpudoctor import pipeline
    from helpers_facts import with_fact

    facts = json.loads((Path(__file__).parent / "fixtures/real/h200x2-20261121/report.json").read_text())["facts"]

    def ctr005(f):
        return [(x["severity"]) for x in pipeline.judge(f)["findings"] if x["code"] == "CTR005"]

    small = with_fact(facts, "host.container.dev_shm_bytes", 64 * 2**20)
    assert ctr005(small) == ["warning"]
    assert ctr005(with_fact(small, "gpus", facts["gpus"][:1])) == ["info"]
    assert ctr005(with_fact(facts, "host.container.dev_shm_bytes", 16 * 2**30)) == []
    assert ctr005(with_fact(small, "host.container.detected", False)) == []


def test_devices_passed_in_without_the_driver_libraries():
    """docker run --device /dev/nvidia0 ... without the NVIDIA runtime: device files, no libnvidia-ml."""
    from gpudoctor import pipeline

    facts = {
        "host": {"os": "Linux", "wsl": False, "container": {"detected": True, "markers": ["/.dockerenv"]}},
        "driver": {"pci_devices": [], "nvml_library_files": [],
                   "device_nodes": {"/dev/nvidiactl": {"exists": True, "accessible": True},
                                    "/dev/nvidia0": {"exists": True, "accessible": True}}},
        "nvml": {"init": {"ok": False, "reason": "library_not_found", "code": 12, "message": "x"}},
    }
    assert [f["code"] for f in pipeline.judge(facts)["findings"]] == ["CTR006"]
