"""The CUDA-stack probes against what this machine really has, and real framework facts judged.

This machine (the project's CI container) has no GPU and no driver, but a real CUDA 13.0 toolkit:
nvcc 13.0.88 at /usr/local/bin/nvcc, a wrapper script exec'ing /usr/local/cuda-13.0/bin/nvcc, the
toolkit at /usr/local/cuda-13.0 (/usr/local/cuda links to it) with libcudart.so.13. The test extra
installs torch and tensorflow-cpu; the framework tests skip where they are absent. Which torch build
the index served (CPU, CUDA or ROCm) is read from torch itself (helpers_builds), and the tests assert
what gpudoctor must say about that build.

The real framework facts are then put into the 2 x H200 recording (driver 580, CUDA 13.0) in place of
the GPU builds recorded there: a CPU-only build on a GPU machine must give FWK001 with a command
installing the CUDA build that driver runs; a GPU build that saw no GPU here (there is none) must give
FWK002 with the framework's own reason.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from gpudoctor import pipeline
from gpudoctor.checks import registry
from gpudoctor.probes.frameworks import probe_frameworks
from gpudoctor.probes.libnames import version_from_library
from gpudoctor.probes.libraries import probe_libraries
from gpudoctor.probes.interpreter import own
from gpudoctor.probes.pyenv import probe_python
from gpudoctor.probes.toolkit import probe_toolkit
from helpers_builds import installed_or_skip, tensorflow_build, torch_build

ROOT = Path(__file__).resolve().parents[1]
TOOLKIT = "/usr/local/cuda-13.0"
STACK_AREAS = {"frameworks", "libraries", "toolkit", "python"}
AREA = {c.id: c.area for c in registry.CHECKS}


@pytest.fixture(scope="module")
def toolkit() -> dict[str, Any]:
    return probe_toolkit()


@pytest.fixture(scope="module")
def real_frameworks() -> dict[str, Any]:
    """One real run of the framework workers (each framework in its own child process)."""
    installed_or_skip("torch")
    installed_or_skip("tensorflow")
    return probe_frameworks(own(), timeout_s=180.0)["frameworks"]


def _findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return pipeline.judge(facts)["findings"]


# --- toolkit ----------------------------------------------------------------------------------------

def test_toolkit_finds_nvcc_through_its_wrapper_script(toolkit):
    nvcc = toolkit["nvcc"]
    assert nvcc["found"] is True
    assert nvcc["path"] == "/usr/local/bin/nvcc"
    assert nvcc["version"] == "13.0.88"
    assert nvcc["release"] == "13.0"
    # /usr/local/bin/nvcc is a shell script: its toolkit is the one it execs, not /usr/local
    assert nvcc["toolkit_root"] == TOOLKIT


def test_toolkit_lists_the_installed_toolkit(toolkit):
    installs = {i["real_path"]: i for i in toolkit["installs"]}
    assert TOOLKIT in installs
    install = installs[TOOLKIT]
    assert install["version"] == "13.0"
    assert install["version_source"] in ("version.json", "version.txt", "include/cuda.h")
    assert install["has_nvcc"] is True
    # every install found is really a toolkit, and /usr/local/cuda is recognised as the same one
    assert all(os.path.exists(os.path.join(i["path"], "include", "cuda.h")) for i in toolkit["installs"])
    if os.path.islink("/usr/local/cuda"):
        assert {i["real_path"] for i in toolkit["installs"] if i["path"] == "/usr/local/cuda"} == {TOOLKIT}


def test_toolkit_env_reflects_cuda_home(monkeypatch):
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    monkeypatch.setenv("CUDA_PATH", "/nonexistent/cuda-12.1")
    env = probe_toolkit()["env"]
    assert env["CUDA_HOME"] == {"path": "/usr/local/cuda", "exists": True, "real_path": os.path.realpath("/usr/local/cuda"),
                                "version": "13.0"}
    assert env["CUDA_PATH"]["exists"] is False
    assert env["CUDA_PATH"]["version"] == {"unavailable": "not_found"}


# --- libraries --------------------------------------------------------------------------------------

def test_libraries_find_libcudart_with_its_own_version(toolkit):
    libs = probe_libraries([i["path"] for i in toolkit["installs"]], own())
    cudart = [c for c in libs["copies"] if c["family"] == "libcudart"]
    assert cudart, libs["copies"]
    in_toolkit = [c for c in cudart if c["real_path"].startswith(TOOLKIT + "/")]
    assert in_toolkit
    for copy_ in in_toolkit:
        assert os.path.basename(copy_["path"]) == "libcudart.so.13"
        assert "toolkit" in copy_["origins"]
        assert copy_["stub"] is False
        # "13.0" is what cudaRuntimeGetVersion answered; the file name alone says only "13"
        assert copy_["version"] == "13.0"
        assert copy_["version_from_name"] != "13.0"
    assert version_from_library("libcudart", in_toolkit[0]["real_path"]) == "13.0"


def test_libraries_honour_ld_library_path(toolkit, monkeypatch):
    lib_dir = os.path.dirname(os.path.realpath(os.path.join(TOOLKIT, "lib64", "libcudart.so.13")))
    monkeypatch.setenv("LD_LIBRARY_PATH", lib_dir)
    libs = probe_libraries([], own(), read_versions=False)
    assert libs["ld_library_path"] == [lib_dir]
    found = [c for c in libs["copies"] if c["family"] == "libcudart" and os.path.dirname(c["path"]) == lib_dir]
    assert found and all("LD_LIBRARY_PATH" in c["origins"] for c in found)


# --- python -----------------------------------------------------------------------------------------

def test_python_lists_the_environment():
    import sys
    from importlib import metadata

    py = probe_python(own())
    assert py["executable"] == sys.executable
    assert py["prefix"] == sys.prefix
    assert py["version"].split(".")[:2] == [str(sys.version_info.major), str(sys.version_info.minor)]
    names = {d["name"] for d in py["distributions"]}
    assert "nvidia-ml-py" in names  # a dependency of gpudoctor itself
    for d in py["distributions"]:
        assert d["version"] and os.path.isdir(d["location"]), d
    for name in ("torch", "tensorflow-cpu"):
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            assert name not in names
        else:
            assert {"name": name, "version": version} in [{"name": d["name"], "version": d["version"]}
                                                        for d in py["distributions"]]


# --- real frameworks --------------------------------------------------------------------------------

def test_real_torch_facts_are_those_of_its_build(real_frameworks):
    build = torch_build()
    torch = real_frameworks["torch"]
    assert torch["installed"] is True
    assert torch["status"] == "ok", torch
    info = torch["info"]
    assert info["version"] == build.version
    assert info["built_cuda"] == build.cuda
    assert info["cpu_only_build"] is (build.flavour == "cpu")
    if build.flavour == "cpu":
        assert "Torch not compiled with CUDA enabled" in info["init_error"]
    elif build.flavour == "cuda":
        assert "NVIDIA driver" in info["init_error"]  # torch's own reason: this machine has none
    # no GPU and no driver here, whichever the build
    assert info["devices"] == [] and info["cuda_available"] is False
    assert not [lib for lib in info["loaded_libraries"] if lib["family"] == "libcuda"]


def test_real_tensorflow_facts_are_those_of_its_build(real_frameworks):
    build = tensorflow_build()
    tf = real_frameworks["tensorflow"]
    assert tf["installed"] is True
    assert tf["status"] == "ok", tf
    info = tf["info"]
    assert info["version"] == build.version
    assert info["cpu_only_build"] is (build.flavour == "cpu")
    assert info["devices"] == [] and info["cuda_available"] is False
    assert "smoke" not in info


def test_frameworks_not_installed_are_marked_so(real_frameworks):
    from gpudoctor.probes.frameworks import installed

    for name in ("jax", "cupy"):
        if not installed(name, own()):
            assert real_frameworks[name] == {"installed": False}


def _on_h200(h200x2: dict[str, Any], name: str, record: dict[str, Any]) -> dict[str, Any]:
    facts = copy.deepcopy(h200x2)
    facts["frameworks"][name] = copy.deepcopy(record)
    return facts


def test_real_torch_on_h200_gets_the_finding_its_build_calls_for(real_frameworks, h200x2):
    """A CPU-only build: FWK001 and the CUDA wheel this driver runs. A GPU build, which saw no GPU on this
    machine: FWK002, naming torch's own reason."""
    build = torch_build()
    assert h200x2["nvml"]["cuda_driver_version"] == 13000
    findings = _findings(_on_h200(h200x2, "torch", real_frameworks["torch"]))
    if build.flavour != "cpu":
        # A GPU build loaded its CUDA libraries from this venv's wheels, which the recording's Python does
        # not hold: LIB001 judges that mix of two machines' facts, one finding per such library.
        mixed = [f for f in findings if f["code"] == "LIB001"]
        assert all(f["title"].startswith("PyTorch loaded ") and f" from {sys.prefix}/" in f["title"] for f in mixed), mixed
        findings = [f for f in findings if f not in mixed]
    stack = [f for f in findings if AREA[f["check"]] in STACK_AREAS]
    code = "FWK001" if build.flavour == "cpu" else "FWK002"
    assert [f["code"] for f in stack] == [code], stack
    fwk = stack[0]
    assert fwk["severity"] == "error"
    assert {f["code"] for f in findings} == {code}
    assert "PyTorch" in fwk["title"]
    assert real_frameworks["torch"]["info"]["init_error"] in fwk["detail"]
    if build.flavour == "cpu":
        assert build.version in fwk["title"] and "2 GPU(s)" in fwk["title"]
        assert "Torch not compiled with CUDA enabled" in fwk["detail"]
        assert any("--index-url https://download.pytorch.org/whl/cu130" in c for c in fwk["remediation"]["commands"])
        assert all(c.startswith(h200x2["python"]["executable"]) for c in fwk["remediation"]["commands"])
    else:
        assert "sees no GPU, but CUDA programs here should see 2" in fwk["title"]


def test_real_tensorflow_cpu_on_h200_gives_fwk001_with_and_cuda(real_frameworks, h200x2):
    findings = _findings(_on_h200(h200x2, "tensorflow", real_frameworks["tensorflow"]))
    assert [f["code"] for f in findings] == ["FWK001"], findings
    fwk = findings[0]
    assert "TensorFlow" in fwk["title"]
    assert any("tensorflow[and-cuda]" in c for c in fwk["remediation"]["commands"])
    assert any("uninstall -y tensorflow-cpu" in c for c in fwk["remediation"]["commands"])


def _newest_wheel_run_fully(release: str, driver_cuda: str) -> str:
    """The newest CUDA wheel of PyTorch ``release`` in the bundled matrix that a driver for ``driver_cuda``
    runs without minor-version compatibility: a driver runs every CUDA up to its own."""
    entries = json.loads(ROOT.joinpath("compat_matrix", "pytorch.json").read_text())["entries"]
    variants = next(e for e in entries if e["version"] == release)["variants"]
    fits = [v for v in variants if v.get("cuda") and Version(v["cuda"]) <= Version(driver_cuda)]
    return max(fits, key=lambda v: Version(v["cuda"]))["name"]


def test_real_frameworks_on_an_old_driver_get_an_older_wheel(real_frameworks, h200x2):
    """The wheel offered follows the driver and keeps the release: torch 2.13 ships cu126, cu130 and cu132
    (compat_matrix/pytorch.json), so a driver for CUDA 12.8 gets 2.13's cu126, not cu130. A CPU-only
    build is offered it by FWK001, a CUDA build the driver cannot run by CMP001; a CUDA build it runs
    fully is offered nothing."""
    build = torch_build()
    facts = _on_h200(h200x2, "torch", real_frameworks["torch"])
    facts["nvml"]["cuda_driver_version"] = 12080
    findings = [f for f in _findings(facts) if f["title"].startswith("PyTorch ")]  # the recording's JAX and CuPy have theirs
    codes = {f["code"] for f in findings}
    if build.flavour == "cuda" and Version(build.cuda).major == 12 and Version(build.cuda) > Version("12.8"):
        assert "CMP002" in codes and not {"FWK001", "CMP001"} & codes, findings  # minor-version compatibility
        return
    if build.flavour == "cpu":
        code = "FWK001"
    elif build.flavour == "cuda" and Version(build.cuda).major > 12:
        code = "CMP001"
    else:  # a CUDA build this driver runs fully, or a ROCm build: no wheel to offer for the driver's sake
        assert not {"FWK001", "CMP001", "CMP002"} & codes, findings
        return
    offered = [f for f in findings if f["code"] == code]
    assert len(offered) == 1, findings
    wheel = _newest_wheel_run_fully(build.release, "12.8")
    assert any(f"'torch=={build.release}.*'" in c and c.endswith(f"--index-url https://download.pytorch.org/whl/{wheel}")
               for c in offered[0]["remediation"]["commands"]), offered
