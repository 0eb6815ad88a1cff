"""The CUDA stack (toolkit, libraries, Python environment, frameworks) judged on the real 2 x H200
recording, with faults derived from it one fact at a time, and on the two faults recorded for
real on that machine (tests/fixtures/real/h200x2-20261121/faults).

Each fault asserts the exact codes it must give, over every check: the one expected, and nothing
else starting to complain.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
from typing import Any

import pytest

from gpudoctor import pipeline
from gpudoctor.checks import registry
from gpudoctor.snapshot import with_fact

from conftest import REAL

AREA = {c.id: c.area for c in registry.CHECKS}
STACK_AREAS = {"frameworks", "libraries", "toolkit", "python"}
FAULTS_DIR = REAL / "h200x2-20261121" / "faults"
TORCH_REFUSAL = ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 19, 0) but found runtime "
                 "version (9, 14, 0). PyTorch already comes bundled with cuDNN.")
STUB = "/usr/local/cuda-13.0/lib64/stubs/libcuda.so.1"
STALE_LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.575.57.08"


def findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return pipeline.judge(facts)["findings"]


def codes(facts: dict[str, Any]) -> set[str]:
    return {f["code"] for f in findings(facts)}


def only(facts: dict[str, Any], code: str) -> dict[str, Any]:
    """The one finding ``facts`` give, which must carry ``code``."""
    found = findings(facts)
    assert [f["code"] for f in found] == [code], [(f["code"], f["title"]) for f in found]
    return found[0]


def lib_index(facts: dict[str, Any], framework: str, family: str) -> int:
    libs = facts["frameworks"][framework]["info"]["loaded_libraries"]
    return next(i for i, lib in enumerate(libs) if lib["family"] == family)


def load_fault(name: str) -> dict[str, Any]:
    return json.loads((FAULTS_DIR / f"{name}.json").read_text())["facts"]


# --- the healthy recording --------------------------------------------------------------------------

def test_healthy_recording_has_no_stack_finding(h200x2):
    report = pipeline.judge(h200x2)
    stack = [(f["code"], f["title"]) for f in report["findings"] if AREA[f["check"]] in STACK_AREAS]
    assert stack == []
    statuses = {c["id"]: c["status"] for c in report["checks"] if c["area"] in STACK_AREAS}
    assert set(statuses) == {c.id for c in registry.CHECKS if c.area in STACK_AREAS}
    assert set(statuses.values()) == {"pass"}, statuses  # every stack fact was there to judge
    assert codes(h200x2) == set()


# --- frameworks -------------------------------------------------------------------------------------

def test_torch_seeing_no_gpu_quotes_its_message(h200x2):
    message = ("RuntimeError: The NVIDIA driver on your system is too old (found version 12020). Please update your "
               "GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx")
    facts = with_fact(h200x2, "frameworks.torch.info.devices", [])
    facts = with_fact(facts, "frameworks.torch.info.init_error", message)
    f = only(facts, "FWK002")
    assert f["severity"] == "error"
    assert f["title"] == "PyTorch sees no GPU, but CUDA programs here should see 2"
    assert message in f["detail"]


def test_torch_seeing_one_of_two(h200x2):
    facts = with_fact(h200x2, "frameworks.torch.info.devices", h200x2["frameworks"]["torch"]["info"]["devices"][:1])
    f = only(facts, "FWK003")
    assert f["severity"] == "warning"
    assert "1 of the 2" in f["title"]


def test_jax_seeing_one_of_two_with_one_gpu_selected_is_fine(h200x2):
    """CUDA_VISIBLE_DEVICES=1 leaves one GPU: a framework seeing one is not missing any."""
    facts = with_fact(h200x2, "host.env.CUDA_VISIBLE_DEVICES", "1")
    for name in ("torch", "jax", "cupy"):
        facts = with_fact(facts, f"frameworks.{name}.info.devices", facts["frameworks"][name]["info"]["devices"][:1])
    assert codes(facts) == {"VIS004"}


def test_smoke_failure(h200x2):
    error = "AcceleratorError: CUDA error: an illegal memory access was encountered"
    facts = with_fact(h200x2, "frameworks.torch.info.smoke", {"unavailable": "unknown", "error": error})
    f = only(facts, "FWK008")
    assert f["severity"] == "error"
    assert error in f["title"]


def test_cudnn_major_differs(h200x2):
    f = only(with_fact(h200x2, "frameworks.torch.info.runtime_cudnn", "8.9.7"), "FWK006")
    assert f["severity"] == "error"
    assert "9.19.0" in f["title"] and "8.9.7" in f["title"]


def test_older_cudnn_minor_without_refusal_is_a_warning(h200x2):
    f = only(with_fact(h200x2, "frameworks.torch.info.runtime_cudnn", "9.14.0"), "FWK007")
    assert f["severity"] == "warning"
    assert f["detail"] == ""


def test_older_cudnn_minor_refused_is_an_error(h200x2):
    facts = with_fact(h200x2, "frameworks.torch.info.runtime_cudnn", {"unavailable": "unknown", "error": TORCH_REFUSAL})
    i = lib_index(facts, "torch", "libcudnn")
    facts = with_fact(facts, f"frameworks.torch.info.loaded_libraries.{i}.version", "9.14.0")
    f = only(facts, "FWK007")
    assert f["severity"] == "error"
    assert TORCH_REFUSAL in f["detail"]
    assert "9.19.0" in f["title"] and "9.14.0" in f["title"]


def test_newer_cudnn_minor_is_fine(h200x2):
    assert codes(with_fact(h200x2, "frameworks.torch.info.runtime_cudnn", "9.20.1")) == set()


CPU_JAX = {
    "version": "0.11.2", "jaxlib_version": "0.11.2", "default_backend": "cpu", "devices": [], "cuda_available": False,
    "init_error": "RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present. "
                  "Platforms present are: cpu",
    "cpu_only_build": True, "plugins": [], "import_and_probe_s": 1.2, "loaded_libraries": [],
}


def test_cpu_only_jax(h200x2):
    f = only(with_fact(h200x2, "frameworks.jax.info", CPU_JAX), "FWK001")
    assert f["severity"] == "error"
    assert f["title"].startswith("JAX 0.11.2 is a CPU-only build")
    assert "Unknown backend" in f["detail"]
    assert f["remediation"]["commands"] == [f"{h200x2['python']['executable']} -m pip install -U 'jax[cuda13]'"]


def test_cpu_only_jax_on_a_cuda_12_driver_gets_cuda12(h200x2):
    facts = with_fact(with_fact(h200x2, "frameworks.jax.info", CPU_JAX), "nvml.cuda_driver_version", 12080)
    (f,) = [f for f in findings(facts) if f["code"] == "FWK001"]
    assert f["remediation"]["commands"][0].endswith("'jax[cuda12]'")


# --- libraries --------------------------------------------------------------------------------------

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


# --- toolkit ----------------------------------------------------------------------------------------

CUDA_124 = {"path": "/usr/local/cuda-12.4", "exists": True, "real_path": "/usr/local/cuda-12.4", "version": "12.4"}


def test_cuda_home_on_another_toolkit(h200x2):
    assert h200x2["toolkit"]["nvcc"]["release"] == "13.0"
    f = only(with_fact(h200x2, "toolkit.env.CUDA_HOME", CUDA_124), "CUDA001")
    assert f["severity"] == "warning"
    assert "13.0" in f["title"] and "12.4" in f["title"] and "/usr/local/cuda-12.4" in f["title"]


def _after(commands: list[str], env: dict[str, str]) -> dict[str, str]:
    """The environment after running a finding's export/unset commands in order, as a shell would."""
    env = dict(env)
    for command in commands:
        words = shlex.split(command)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value.replace("$PATH", env.get("PATH", ""))
        elif words[0] == "unset":
            env.pop(words[1], None)
    return env


def test_cuda_home_fix_leaves_nvcc_and_cuda_home_agreeing(h200x2):
    """Running the commands of the finding, in order, must end the mismatch rather than swap it."""
    f = only(with_fact(h200x2, "toolkit.env.CUDA_HOME", CUDA_124), "CUDA001")
    before = {"PATH": "/usr/local/cuda/bin:/usr/bin", "CUDA_HOME": "/usr/local/cuda-12.4"}
    after = _after(list(f["remediation"]["commands"]), before)
    nvcc_dir = next(d for d in after["PATH"].split(":") if d.endswith("/bin") and "cuda" in d)
    nvcc_root = os.path.dirname(nvcc_dir)
    roots = {"/usr/local/cuda": "/usr/local/cuda-13.0"}  # the recorded machine's symlink
    assert roots.get(nvcc_root, nvcc_root) == roots.get(after["CUDA_HOME"], after["CUDA_HOME"]), (f["remediation"], after)


def test_cuda_home_on_the_same_release_elsewhere_is_fine(h200x2):
    same = {"path": "/usr/local/cuda-13", "exists": True, "real_path": "/usr/local/cuda-13", "version": "13.0"}
    assert codes(with_fact(h200x2, "toolkit.env.CUDA_HOME", same)) == set()


def test_cuda_home_missing(h200x2):
    missing = {"path": "/usr/local/cuda-12.1", "exists": False, "real_path": "/usr/local/cuda-12.1",
               "version": {"unavailable": "not_found"}}
    f = only(with_fact(h200x2, "toolkit.env.CUDA_HOME", missing), "CUDA002")
    assert "/usr/local/cuda-12.1" in f["title"]
    assert "unset CUDA_HOME" in f["remediation"]["commands"]


# --- python -----------------------------------------------------------------------------------------

VENV = "/opt/torch/.venv/lib/python3.12/site-packages"


def _dist(name: str, version: str, location: str = VENV) -> dict[str, str]:
    return {"name": name, "version": version, "location": location}


@pytest.mark.parametrize("extra,words", [
    ([_dist("tensorflow", "2.21.0"), _dist("tensorflow-cpu", "2.21.0")], ["tensorflow-cpu"]),
    ([_dist("cupy-cuda12x", "13.6.0")], ["cupy-cuda12x", "cupy-cuda13x"]),
    ([_dist("pynvml", "11.5.0")], ["pynvml 11.5.0"]),
    ([_dist("nvidia-ml-py3", "7.352.0")], ["nvidia-ml-py3"]),
    ([_dist("tensorflow-gpu", "2.12.0")], ["tensorflow-gpu"]),
    ([_dist("jax", "0.4.30", "/root/.local/lib/python3.12/site-packages")], ["jax", "0.4.30", "0.11.2"]),
], ids=["tensorflow-and-cpu", "two-cupys", "legacy-pynvml", "nvidia-ml-py3", "tensorflow-gpu", "installed-twice"])
def test_conflicting_distributions(h200x2, extra, words):
    facts = with_fact(h200x2, "python.distributions", h200x2["python"]["distributions"] + extra)
    f = only(facts, "PY001")
    assert f["severity"] == "warning"
    for word in words:
        assert word in f["title"]
    assert f["remediation"]["commands"]


def test_modern_pynvml_wrapper_is_fine(h200x2):
    """pynvml >= 12 is a thin package that imports nvidia-ml-py's module: no shadowing."""
    facts = with_fact(h200x2, "python.distributions", h200x2["python"]["distributions"] + [_dist("pynvml", "12.0.0")])
    assert codes(facts) == set()


# --- the two faults recorded for real on 2 x H200 ---------------------------------------------------

def test_recorded_cuda_visible_devices_1():
    facts = load_fault("cuda-visible-devices-1")
    assert facts["host"]["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    found = findings(facts)
    assert [(f["code"], f["severity"]) for f in found] == [("VIS004", "info")]
    for name in ("torch", "jax", "cupy"):
        info = facts["frameworks"][name]["info"]
        assert facts["frameworks"][name]["status"] == "ok"
        assert len(info["devices"]) == 1, name
    assert pipeline.judge(facts)["summary"]["verdict"] == "ok"


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
    fixed = _after(list(lib001["remediation"]["commands"]), {"LD_LIBRARY_PATH": fault["host"]["env"]["LD_LIBRARY_PATH"]})
    assert fixed["LD_LIBRARY_PATH"] == healthy["host"]["env"]["LD_LIBRARY_PATH"]
    assert fixed["LD_LIBRARY_PATH"].split(":") == healthy["libraries"]["ld_library_path"]
    assert codes(copy.deepcopy(healthy)) == set()
