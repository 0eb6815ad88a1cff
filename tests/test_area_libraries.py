"""The libraries area (checks/libraries.py): libraries.shadowing (LIB001, a library on LD_LIBRARY_PATH
that shadows the one a framework ships), libraries.stub_libcuda (LIB002, LIB003, the toolkit's stub
libcuda loaded or on the search path), libraries.unloadable (LIB005) and libraries.libcuda_version
(LIB004, a stale libcuda of another driver).

Judged on the real 2 x H200 recording with one fact changed at a time, and on the fault recorded for real
on that machine (tests/fixtures/real/h200x2-20261121/faults: the system cuDNN first on LD_LIBRARY_PATH).
Each fault asserts the exact codes over every check. LIB005 (a libcuda that exists but cannot be loaded)
is made for real in tests/test_fault_injection.py.
"""

from __future__ import annotations

import copy
import json

import pytest

from gpudoctor import pipeline
from gpudoctor.checks import registry
from helpers_facts import with_fact

from conftest import REAL
from helpers_judge import after_commands, codes, findings, lib_index, load_fault, only, statuses


def test_the_healthy_recording_passes_every_libraries_check(h200x2):
    """The real 2 x H200 recording: every libraries check had its facts to judge (the library copies found and those each framework loaded) and passes,
    and no check at all finds anything."""
    assert statuses(h200x2, "libraries") == {c.id: "pass" for c in registry.CHECKS if c.area == "libraries"}
    assert codes(h200x2) == set()


STUB = "/usr/local/cuda-13.0/lib64/stubs/libcuda.so.1"


STALE_LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.575.57.08"


def test_stub_libcuda_loaded(h200x2):
    i = lib_index(h200x2, "torch", "libcuda")
    facts = with_fact(h200x2, f"frameworks.torch.info.loaded_libraries.{i}",
                      {"family": "libcuda", "path": STUB, "real_path": "/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libcuda.so",
                       "version_from_name": None, "stub": True, "version": "stub"})
    f = only(facts, "LIB002")
    assert f["severity"] == "error"
    assert "PyTorch" in f["title"] and STUB in f["title"]


@pytest.mark.parametrize("origins", [["LD_LIBRARY_PATH"], ["ldconfig"], ["LD_LIBRARY_PATH", "toolkit"]])
def test_stub_libcuda_on_the_search_path(h200x2, origins):
    stub = {"family": "libcuda", "path": STUB, "real_path": "/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libcuda.so",
            "version_from_name": None, "stub": True, "origins": origins, "version": "stub"}
    facts = with_fact(h200x2, "libraries.copies", h200x2["libraries"]["copies"] + [stub])
    f = only(facts, "LIB003")
    assert f["severity"] == "error"
    assert STUB in f["title"]


def test_stub_libcuda_only_in_the_toolkit_is_fine(h200x2):
    """Every toolkit has lib64/stubs/libcuda.so: only one the loader can reach is a problem."""
    stubs = [c for c in h200x2["libraries"]["copies"] if c["family"] == "libcuda" and c["stub"]]
    assert stubs and all(c["origins"] == ["toolkit"] for c in stubs)
    stub = {"family": "libcuda", "path": STUB, "real_path": STUB, "version_from_name": None, "stub": True,
            "origins": ["toolkit"], "version": "stub"}
    assert codes(with_fact(h200x2, "libraries.copies", h200x2["libraries"]["copies"] + [stub])) == set()


STALE = {"family": "libcuda", "path": STALE_LIBCUDA, "real_path": STALE_LIBCUDA, "version_from_name": "575.57.08",
         "stub": False, "origins": ["ldconfig"], "version": "12.9"}


def test_stale_libcuda_on_ldconfig_is_a_warning(h200x2):
    f = only(with_fact(h200x2, "libraries.copies", h200x2["libraries"]["copies"] + [STALE]), "LIB004")
    assert f["severity"] == "warning"
    assert "575.57.08" in f["title"] and "580.159.04" in f["title"]


def test_stale_libcuda_loaded_by_a_framework_is_an_error(h200x2):
    facts = with_fact(h200x2, "libraries.copies", h200x2["libraries"]["copies"] + [STALE])
    i = lib_index(facts, "torch", "libcuda")
    facts = with_fact(facts, f"frameworks.torch.info.loaded_libraries.{i}",
                      {"family": "libcuda", "path": STALE_LIBCUDA, "real_path": STALE_LIBCUDA,
                       "version_from_name": "575.57.08", "stub": False, "version": "12.9"})
    f = only(facts, "LIB004")
    assert f["severity"] == "error"
    assert "loaded" in f["detail"]


def test_recorded_system_cudnn_first_on_ld_library_path():
    facts = load_fault("system-cudnn-first-on-ld-library-path")
    assert facts["libraries"]["ld_library_path"][0] == "/usr/lib/x86_64-linux-gnu"
    # what really happened: torch refused the cuDNN it got
    assert "cuDNN version incompatibility" in facts["frameworks"]["torch"]["info"]["runtime_cudnn"]["error"]
    found = findings(facts)
    assert sorted(f["code"] for f in found) == ["FWK007", "LIB001", "LIB001"], [(f["code"], f["title"]) for f in found]

    lib001 = [f for f in found if f["code"] == "LIB001"]
    assert sorted(f["title"].split()[0] for f in lib001) == ["JAX", "PyTorch"]
    for f in lib001:
        assert f["severity"] == "error"
        assert "libcudnn_graph.so.9" in f["title"] and "/usr/lib/x86_64-linux-gnu" in f["title"]
        assert "9.14.0" in f["title"] and "9.19.0" in f["title"]
        assert f["remediation"]["commands"] == ["export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib"]

    (fwk,) = [f for f in found if f["code"] == "FWK007"]
    assert fwk["severity"] == "error"
    assert fwk["title"].startswith("PyTorch was built for cuDNN 9.19.0 but loaded the older cuDNN 9.14.0")
    assert "libcudnn_graph.so.9.14.0" in fwk["title"]
    assert "cuDNN version incompatibility" in fwk["detail"]
    assert "PyTorch was compiled  against (9, 19, 0) but found runtime version (9, 14, 0)" in fwk["detail"]

    report = pipeline.judge(facts)
    assert report["summary"]["verdict"] == "error"


def test_recorded_fault_fixed_as_the_finding_says_is_healthy():
    """Applying LIB001's command gives back the healthy recording's LD_LIBRARY_PATH."""
    fault = load_fault("system-cudnn-first-on-ld-library-path")
    healthy = json.loads((REAL / "h200x2-20261121" / "report.json").read_text())["facts"]
    lib001 = next(f for f in findings(fault) if f["code"] == "LIB001")
    fixed = after_commands(list(lib001["remediation"]["commands"]), {"LD_LIBRARY_PATH": fault["host"]["env"]["LD_LIBRARY_PATH"]})
    assert fixed["LD_LIBRARY_PATH"] == healthy["host"]["env"]["LD_LIBRARY_PATH"]
    assert fixed["LD_LIBRARY_PATH"].split(":") == healthy["libraries"]["ld_library_path"]
    assert codes(copy.deepcopy(healthy)) == set()
