"""`check --quick` must not invent facts: what a framework's installed package says
about its build (gpudoctor/probes/frameworks/metadata.py), and the verdicts that rest on it.

The fake environments below are folders of ``<name>-<version>.dist-info`` (METADATA, RECORD, WHEEL)
beside the module folders, read through ``read_builds(path=[that folder])`` as another interpreter's
site-packages would be. Where a case copies a real package, the lines are the real ones:

* torch 2.11.0, the PyPI wheel on the lent GPU machines (1 x H100, image 'cuda', 2026-11-23): its
  METADATA ``Requires-Dist`` lines, the ``torch/lib/*`` entries of its RECORD and its ``torch/version.py``,
  read there from /opt/torch/.venv/lib/python3.12/site-packages; the same requirements are those of
  https://files.pythonhosted.org/packages/1a/c9/82638ef24d7877510f83baf821f5619a61b45568ce21c0a87a91576510aa/torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl
  (``pip install --dry-run --report``, which reads the wheel's METADATA from PyPI).
* torch 2.5.1 from PyPI (nvidia-*-cu12 pins, cuda runtime 12.4.127), tensorflow 2.21.0 (the ``and-cuda``
  extra), jax-cuda12-plugin 0.11.2 and cupy-cuda12x 14.2.0: their PyPI METADATA, read the same way.
* tests/fixtures/real/h100x1-20261123/before/: `check --quick` and `check` recorded on 1 x H100 with the
  code before this fix (the false FWK001), and the metadata of torch, jax, jaxlib, the jax-cuda13
  plugin, cupy-cuda13x and cuda-toolkit as installed there (``metadata.txt``).
* jaxlib 0.11.2 as installed on the GPU machines: a RECORD with no jaxlib/cuda, jaxlib/rocm or
  jaxlib/gpu files (its CUDA support is the jax-cuda13-plugin and jax-cuda13-pjrt distributions).
"""

from __future__ import annotations

import ast
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from gpudoctor import pipeline
from gpudoctor.checks import registry
from gpudoctor.frameworks_table import KEYS
from gpudoctor.probes.frameworks import metadata as md
from gpudoctor.probes.frameworks import probe_frameworks_metadata
from gpudoctor.procs.child import command
from gpudoctor.render.facts_text import frameworks_line
from helpers_builds import tensorflow_build, torch_build
from helpers_stdlib import stdlib_module_names

AREA = {c.id: c.area for c in registry.CHECKS}

# --- real data ------------------------------------------------------------------------------------

TORCH_211_REQUIRES = [
    "filelock", "typing-extensions>=4.10.0", "setuptools<82", "sympy>=1.13.3", "networkx>=2.5.1", "jinja2",
    "fsspec>=0.8.5",
    'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2; platform_system == "Linux"',
    'cuda-bindings<14,>=13.0.3; platform_system == "Linux"',
    'nvidia-cudnn-cu13==9.19.0.56; platform_system == "Linux"',
    'nvidia-cusparselt-cu13==0.8.0; platform_system == "Linux"',
    'nvidia-nccl-cu13==2.28.9; platform_system == "Linux"',
    'nvidia-nvshmem-cu13==3.4.5; platform_system == "Linux"',
    'triton==3.6.0; platform_system == "Linux"',
    'optree>=0.13.0; extra == "optree"', 'opt-einsum>=3.3; extra == "opt-einsum"', 'pyyaml; extra == "pyyaml"',
]
TORCH_211_LIBS = [
    "torch/lib/libc10.so", "torch/lib/libc10_cuda.so", "torch/lib/libcaffe2_nvrtc.so", "torch/lib/libgomp.so.1",
    "torch/lib/libshm.so", "torch/lib/libtorch.so", "torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so",
    "torch/lib/libtorch_cuda_linalg.so", "torch/lib/libtorch_global_deps.so", "torch/lib/libtorch_nvshmem.so",
    "torch/lib/libtorch_python.so",
]
TORCH_211_VERSION_PY = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.11.0+cu130'
debug = False
cuda: Optional[str] = '13.0'
git_version = '70d99e998b4955e0049d13a98d77ae1b14db1f45'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""
#: The CUDA packages torch 2.11.0 pulls in, as installed beside it on the GPU machines.
TORCH_211_CUDA_DISTS = [("cuda-toolkit", "13.0.2"), ("nvidia-cuda-runtime", "13.0.96"), ("nvidia-cublas", "13.1.0.3"),
                        ("nvidia-cudnn-cu13", "9.19.0.56"), ("nvidia-nccl-cu13", "2.28.9"),
                        ("nvidia-cusparselt-cu13", "0.8.0"), ("nvidia-nvshmem-cu13", "3.4.5")]
TORCH_251_REQUIRES = [
    "filelock", "typing-extensions (>=4.8.0)", "networkx", "jinja2", "fsspec",
    'nvidia-cuda-nvrtc-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cuda-runtime-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cuda-cupti-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cublas-cu12 (==12.4.5.8) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-nccl-cu12 (==2.21.5) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'triton (==3.1.0) ; platform_system == "Linux" and platform_machine == "x86_64" and python_version < "3.13"',
    "opt-einsum (>=3.3) ; extra == 'opt-einsum'",
]
TF_AND_CUDA = [f'{n}; extra == "and-cuda"' for n in (
    "nvidia-cublas-cu12<13.0,>=12.5.3.2", "nvidia-cuda-cupti-cu12<13.0,>=12.5.82", "nvidia-cuda-nvcc-cu12<13.0,>=12.5.82",
    "nvidia-cuda-nvrtc-cu12<13.0,>=12.5.82", "nvidia-cuda-runtime-cu12<13.0,>=12.5.82", "nvidia-cudnn-cu12<10.0,>=9.3.0.75",
    "nvidia-cufft-cu12<12.0,>=11.2.3.61", "nvidia-curand-cu12<11.0,>=10.3.6.82", "nvidia-cusolver-cu12<12.0,>=11.6.3.83",
    "nvidia-cusparse-cu12<13.0,>=12.5.1.3", "nvidia-nccl-cu12<3.0,>=2.27.7", "nvidia-nvjitlink-cu12<13.0,>=12.5.82")]
TF_221_REQUIRES = ["absl-py>=1.0.0", "numpy>=1.26.0", "keras>=3.12.0", *TF_AND_CUDA]
JAX_CUDA12_PLUGIN_REQUIRES = ["jax-cuda12-pjrt==0.11.2",
                              'nvidia-cuda-runtime-cu12>=12.1.105; sys_platform == "linux" and extra == "with-cuda"',
                              'nvidia-cudnn-cu12<10.0,>=9.10.2.21; sys_platform == "linux" and extra == "with-cuda"']
CUPY_REQUIRES = ["numpy<2.6,>=2.0", "cuda-pathfinder==1.*,>=1.3.4",
                 'cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==12.*; extra == "ctk"']
LINUX_WHEEL = "cp312-cp312-manylinux_2_28_x86_64"


# --- a fake site-packages ---------------------------------------------------------------------------

def dist(site: Path, name: str, version: str, requires: tuple = (), record: Optional[list] = None,
         wheel_tag: Optional[str] = None, module: Optional[str] = None, files: Optional[dict] = None) -> Path:
    """Install a fake distribution: its dist-info (RECORD only when ``record`` is a list) and, with
    ``module``, the package folder ``import module`` finds, with ``files`` (relative path -> text)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"] + [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    if record is not None:
        entries = list(record) + [f"{info.name}/METADATA", f"{info.name}/RECORD"]
        (info / "RECORD").write_text("".join(f"{p},sha256=x,1\n" for p in entries))
    if wheel_tag:
        (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {wheel_tag}\n")
    if module:
        (site / module).mkdir(exist_ok=True)
        (site / module / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    for rel, text in (files or {}).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    return info


def read(site: Path, name: str) -> dict[str, Any]:
    return md.read_builds([str(site)])[name]


def pypi_torch_211(site: Path, version_py: bool = False) -> None:
    dist(site, "torch", "2.11.0", TORCH_211_REQUIRES, record=["torch/__init__.py", *TORCH_211_LIBS],
         wheel_tag=LINUX_WHEEL, module="torch", files={"torch/version.py": TORCH_211_VERSION_PY} if version_py else None)
    for name, version in TORCH_211_CUDA_DISTS:
        dist(site, name, version)


# --- torch ------------------------------------------------------------------------------------------

def test_pypi_torch_2_11_cu13_is_a_cuda_13_0_build_from_metadata_alone(tmp_path):
    pypi_torch_211(tmp_path)
    torch = read(tmp_path, "torch")
    assert torch["installed"] is True and torch["version"] == "2.11.0" and torch["distribution"] == "torch"
    assert (torch["cuda_build"], torch["cpu_only_build"], torch["backend"]) == (True, False, "cuda")
    assert (torch["cuda_major"], torch["built_cuda"]) == ("13", "13.0")
    assert torch["evidence"][0].startswith("Requires-Dist cuda-toolkit[cublas,")
    assert "==13.0.2" in torch["evidence"][0]
    assert "RECORD lists torch/lib/libtorch_cuda.so" in torch["evidence"]
    assert str(tmp_path) in torch["source"]


def test_pypi_torch_2_11_with_its_version_file_reads_what_torch_version_cuda_says(tmp_path):
    pypi_torch_211(tmp_path, version_py=True)
    torch = read(tmp_path, "torch")
    assert torch["version"] == "2.11.0+cu130"  # torch.__version__, as the imported framework reports it
    assert (torch["cuda_build"], torch["cuda_major"], torch["built_cuda"]) == (True, "13", "13.0")
    assert torch["evidence"][0] == "torch/version.py says cuda = '13.0'"


def test_torch_cu121_local_tag(tmp_path):
    dist(tmp_path, "torch", "2.5.1+cu121", module="torch")
    torch = read(tmp_path, "torch")
    assert (torch["cuda_build"], torch["cuda_major"], torch["built_cuda"]) == (True, "12", "12.1")
    assert torch["evidence"] == ["local version tag +cu121"]


def test_plain_pypi_torch_2_5_1_reads_the_cuda_runtime_it_pins(tmp_path):
    dist(tmp_path, "torch", "2.5.1", TORCH_251_REQUIRES, module="torch")
    torch = read(tmp_path, "torch")
    assert (torch["cuda_build"], torch["cuda_major"], torch["built_cuda"]) == (True, "12", "12.4")
    assert torch["evidence"][0].startswith("Requires-Dist nvidia-cuda-runtime-cu12==12.4.127")


def test_torch_cpu_local_tag_and_record(tmp_path):
    dist(tmp_path, "torch", "2.13.0+cpu", record=["torch/lib/libc10.so", "torch/lib/libtorch_cpu.so"], module="torch")
    torch = read(tmp_path, "torch")
    assert (torch["cuda_build"], torch["cpu_only_build"], torch["backend"]) == (False, True, "cpu")
    assert torch["evidence"] == ["local version tag +cpu",
                                 "RECORD lists torch/lib/libtorch_cpu.so but no torch/lib/libtorch_cuda.so"]


def test_torch_record_without_cuda_libraries_is_cpu_only(tmp_path):
    dist(tmp_path, "torch", "2.13.0", record=["torch/lib/libc10.so", "torch/lib/libtorch_cpu.so"], module="torch")
    assert read(tmp_path, "torch")["cpu_only_build"] is True


def test_torch_that_metadata_cannot_place_is_unknown(tmp_path):
    """No local tag, no CUDA requirement, no RECORD (a conda or source install): unknown, never CPU-only."""
    dist(tmp_path, "torch", "2.11.0", ["filelock", "sympy>=1.13.3"], module="torch")
    torch = read(tmp_path, "torch")
    assert torch["installed"] is True and torch["version"] == "2.11.0"
    assert (torch["cuda_build"], torch["cpu_only_build"], torch["cuda_major"], torch["built_cuda"]) == (None, None, None, None)
    assert torch["evidence"] == []


def test_pre_split_torch_record_is_not_taken_for_cpu_only(tmp_path):
    """PyTorch before 1.5 had one libtorch.so with CUDA inside: no libtorch_cpu.so, so no verdict."""
    dist(tmp_path, "torch", "1.4.0", record=["torch/lib/libtorch.so", "torch/lib/libc10.so"], module="torch")
    assert read(tmp_path, "torch")["cuda_build"] is None


def test_disagreeing_torch_evidence_is_unknown(tmp_path):
    dist(tmp_path, "torch", "2.13.0+cpu", record=["torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cpu.so"], module="torch")
    torch = read(tmp_path, "torch")
    assert (torch["cuda_build"], torch["cpu_only_build"]) == (None, None)
    assert any("disagrees" in e for e in torch["evidence"])


def test_rocm_torch_is_neither_cuda_nor_cpu_only(tmp_path):
    dist(tmp_path, "torch", "2.5.1+rocm6.2", module="torch")
    torch = read(tmp_path, "torch")
    assert (torch["backend"], torch["cuda_build"], torch["cpu_only_build"]) == ("rocm", False, False)


def test_torch_source_tree_without_metadata_is_installed_with_nothing_known(tmp_path):
    tree = tmp_path / "src"
    (tree / "torch").mkdir(parents=True)
    (tree / "torch" / "__init__.py").write_text("")
    torch = read(tree, "torch")
    assert torch["installed"] is True
    assert (torch["version"], torch["distribution"], torch["cuda_build"], torch["cpu_only_build"]) == (None, None, None, None)
    assert "no distribution metadata" in torch["source"]


def test_a_shadowed_copys_metadata_is_not_the_imported_torchs(tmp_path):
    """A source tree first on the path shadows a pip torch: the pip copy's +cpu says nothing of it."""
    tree, site = tmp_path / "src", tmp_path / "site"
    (tree / "torch").mkdir(parents=True)
    (tree / "torch" / "__init__.py").write_text("")
    dist(site, "torch", "2.13.0+cpu", record=["torch/lib/libtorch_cpu.so"], module="torch")
    torch = md.read_builds([str(tree), str(site)])["torch"]
    assert (torch["version"], torch["cpu_only_build"]) == (None, None)
    assert md.read_builds([str(site), str(tree)])["torch"]["cpu_only_build"] is True


def test_a_distribution_without_its_module_is_not_installed(tmp_path):
    dist(tmp_path, "torch", "2.13.0+cpu")
    assert md.read_builds([str(tmp_path)]) == {n: {"installed": False} for n in KEYS}


# --- tensorflow -------------------------------------------------------------------------------------

def test_tensorflow_cpu_is_cpu_only_though_its_metadata_lists_the_and_cuda_extra(tmp_path):
    dist(tmp_path, "tensorflow-cpu", "2.21.0", TF_221_REQUIRES, wheel_tag=LINUX_WHEEL, module="tensorflow")
    tf = read(tmp_path, "tensorflow")
    assert (tf["cuda_build"], tf["cpu_only_build"], tf["version"]) == (False, True, "2.21.0")
    assert tf["evidence"] == ["distribution name tensorflow-cpu"]
    assert tf["distribution"] == "tensorflow-cpu"


def test_tensorflow_on_linux_with_the_and_cuda_packages(tmp_path):
    dist(tmp_path, "tensorflow", "2.21.0", TF_221_REQUIRES, wheel_tag=LINUX_WHEEL, module="tensorflow")
    for req in TF_AND_CUDA:
        dist(tmp_path, req.split("<")[0], "12.9.0")
    tf = read(tmp_path, "tensorflow")
    assert (tf["cuda_build"], tf["cpu_only_build"], tf["cuda_major"], tf["built_cuda"]) == (True, False, "12", None)
    assert tf["cuda_packages_installed"] is True
    assert "the Linux x86_64 tensorflow wheel is a CUDA build since 2.1" in tf["evidence"][0]
    assert any("12 CUDA packages of extra and-cuda are installed" in e for e in tf["evidence"])


def test_tensorflow_on_linux_without_the_and_cuda_packages_is_still_a_cuda_build(tmp_path):
    """The extra's requirements alone prove nothing installed: the build is CUDA 12, its libraries are
    not from pip (they must come from the system), and that is said, not judged."""
    dist(tmp_path, "tensorflow", "2.21.0", TF_221_REQUIRES, wheel_tag=LINUX_WHEEL, module="tensorflow")
    tf = read(tmp_path, "tensorflow")
    assert (tf["cuda_build"], tf["cuda_major"], tf["cuda_packages_installed"]) == (True, "12", False)
    assert any("none is installed" in e for e in tf["evidence"])


def test_tensorflow_elsewhere_or_before_2_1(tmp_path):
    old, arm = tmp_path / "old", tmp_path / "arm"
    dist(old, "tensorflow", "1.15.5", wheel_tag="cp37-cp37m-manylinux2010_x86_64", module="tensorflow")
    dist(arm, "tensorflow", "2.21.0", TF_221_REQUIRES, wheel_tag="cp312-cp312-manylinux_2_27_aarch64", module="tensorflow")
    assert read(old, "tensorflow")["cpu_only_build"] is True
    assert (read(arm, "tensorflow")["cuda_build"], read(arm, "tensorflow")["cpu_only_build"]) == (None, None)


def test_tensorflow_and_tensorflow_cpu_together_are_decided_by_the_build_info_file(tmp_path):
    dist(tmp_path, "tensorflow", "2.21.0", TF_221_REQUIRES, wheel_tag=LINUX_WHEEL, module="tensorflow")
    dist(tmp_path, "tensorflow-cpu", "2.21.0", TF_221_REQUIRES, wheel_tag=LINUX_WHEEL, module="tensorflow")
    assert read(tmp_path, "tensorflow")["cuda_build"] is None  # the names disagree
    build_info = ("build_info = collections.OrderedDict([('cuda_version', '12.5.1'), ('cudnn_version', '9'), "
                  "('is_cuda_build', True), ('is_rocm_build', False), ('is_tensorrt_build', False)])\n")
    (tmp_path / "tensorflow/python/platform").mkdir(parents=True)
    (tmp_path / "tensorflow/python/platform/build_info.py").write_text(build_info)
    tf = read(tmp_path, "tensorflow")
    assert (tf["cuda_build"], tf["cuda_major"], tf["built_cuda"]) == (True, "12", "12.5")
    assert any("that file decides" in e for e in tf["evidence"])


# --- jax --------------------------------------------------------------------------------------------

def jax_site(site: Path, jaxlib_record: Optional[list] = ("jaxlib/__init__.py", "jaxlib/_jax.so")) -> None:
    dist(site, "jax", "0.11.2", ["jaxlib<=0.11.2,>=0.11.2", 'jax-cuda12-plugin[with-cuda]==0.11.2; extra == "cuda12"'],
         record=["jax/__init__.py"], module="jax")
    dist(site, "jaxlib", "0.11.2", record=list(jaxlib_record) if jaxlib_record is not None else None, module="jaxlib")


def test_jax_alone_is_cpu_only(tmp_path):
    jax_site(tmp_path)
    jax = read(tmp_path, "jax")
    assert (jax["cuda_build"], jax["cpu_only_build"], jax["plugins"], jax["jaxlib_version"]) == (False, True, [], "0.11.2")
    assert "no jax-cuda*-plugin" in jax["evidence"][0]


def test_jax_with_the_cuda12_plugin(tmp_path):
    jax_site(tmp_path)
    dist(tmp_path, "jax-cuda12-plugin", "0.11.2", JAX_CUDA12_PLUGIN_REQUIRES, module="jax_cuda12_plugin")
    dist(tmp_path, "jax-cuda12-pjrt", "0.11.2")
    jax = read(tmp_path, "jax")
    assert (jax["cuda_build"], jax["cpu_only_build"], jax["cuda_major"], jax["built_cuda"]) == (True, False, "12", None)
    assert jax["plugins"] == ["jax-cuda12-pjrt", "jax-cuda12-plugin"]


def test_jax_plugin_without_metadata_and_jaxlib_without_record(tmp_path):
    with_module, no_record = tmp_path / "a", tmp_path / "b"
    jax_site(with_module)
    (with_module / "jax_plugins" / "xla_cuda13").mkdir(parents=True)
    assert (read(with_module, "jax")["cuda_build"], read(with_module, "jax")["cuda_major"]) == (True, "13")
    jax_site(no_record, jaxlib_record=None)
    assert read(no_record, "jax")["cpu_only_build"] is None


# --- cupy -------------------------------------------------------------------------------------------

def test_cupy_cuda12x(tmp_path):
    dist(tmp_path, "cupy-cuda12x", "14.2.0", CUPY_REQUIRES, module="cupy")
    cupy = read(tmp_path, "cupy")
    assert (cupy["cuda_build"], cupy["cpu_only_build"], cupy["cuda_major"], cupy["built_cuda"]) == (True, False, "12", None)
    assert cupy["distribution"] == "cupy-cuda12x" and cupy["evidence"][0] == "distribution name cupy-cuda12x"


def test_cupy_from_source_is_unknown_cuda_but_never_cpu_only(tmp_path):
    dist(tmp_path, "cupy", "13.3.0", module="cupy")
    cupy = read(tmp_path, "cupy")
    assert (cupy["cuda_build"], cupy["cpu_only_build"], cupy["cuda_major"]) == (None, False, None)


# --- the module itself, and this machine's real packages --------------------------------------------

def test_the_module_is_stdlib_only_python_3_9_and_runs_as_a_child_under_isolation(tmp_path):
    source = Path(md.__file__).read_text()
    tree = ast.parse(source, feature_version=(3, 9))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(stdlib_module_names()) | {"__future__", "gpudoctor"}, imported
    dist(tmp_path, "torch", "2.5.1+cu121", module="torch")
    out = subprocess.run(command(md.__name__, [json.dumps([str(tmp_path)])], python=sys.executable),
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["torch"]["built_cuda"] == "12.1"


def test_real_torch_and_tensorflow_here():
    """This machine's real packages (the test extra), whichever builds the index served: the metadata says
    what the imported frameworks say of themselves (helpers_builds), with the evidence that decides it."""
    torch_real, tf_real = torch_build(), tensorflow_build()
    builds = md.read_builds()
    torch, tf = builds["torch"], builds["tensorflow"]
    assert torch["version"] == torch_real.version and torch["distribution"] == "torch"
    assert torch["backend"] == torch_real.flavour
    assert (torch["cuda_build"], torch["cpu_only_build"]) == (torch_real.flavour == "cuda", torch_real.flavour == "cpu")
    assert torch["built_cuda"] == torch_real.cuda
    if torch_real.flavour == "cpu":
        tag = ["local version tag +cpu"] if torch_real.version.endswith("+cpu") else []
        assert torch["evidence"] == ["torch/version.py says cuda = None, hip = None", *tag,
                                     "RECORD lists torch/lib/libtorch_cpu.so but no torch/lib/libtorch_cuda.so"]
    elif torch_real.flavour == "cuda":
        assert torch["evidence"][0] == f"torch/version.py says cuda = '{torch_real.cuda}'"
    else:
        assert torch["evidence"][0].startswith("torch/version.py says cuda = None, hip = ")
    assert tf["version"] == tf_real.version and tf["distribution"] == "tensorflow-cpu"
    assert (tf["cuda_build"], tf["cpu_only_build"]) == (tf_real.flavour == "cuda", tf_real.flavour == "cpu")
    assert tf["evidence"] == ["tensorflow/python/platform/build_info.py says is_cuda_build = False, is_rocm_build = False",
                              "distribution name tensorflow-cpu"]


def test_real_torch_quick_and_full_facts_agree():
    """The imported framework's own answer (the worker) and the package's say the same."""
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-m", "gpudoctor.probes.frameworks.worker", "torch"],
                         capture_output=True, text=True, timeout=180)
    full = next(json.loads(line)["data"] for line in out.stdout.splitlines()
                if line.startswith("{") and json.loads(line).get("section") == "framework")
    quick = probe_frameworks_metadata()["frameworks"]["torch"]["info"]
    assert quick["cpu_only_build"] == full["cpu_only_build"]
    assert quick["version"] == full["version"] and quick["built_cuda"] == full["built_cuda"]


# --- verdicts ---------------------------------------------------------------------------------------

def _stack_findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in pipeline.judge(facts)["findings"] if AREA.get(f["check"]) in ("frameworks", "compat")]


def _recorded_site(site: Path, h200x2: dict[str, Any]) -> None:
    """The 2 x H200 machine's recorded distributions as a fake site-packages, torch with its real
    metadata: what `check --quick` reads there."""
    pypi_torch_211(site)
    dist(site, "jaxlib", "0.11.2", record=["jaxlib/__init__.py"], module="jaxlib")
    dist(site, "jax", "0.11.2", module="jax")
    recorded = {d["name"]: d["version"] for d in h200x2["python"]["distributions"]}
    for name, version in recorded.items():
        if not (site / f"{name.replace('-', '_')}-{version}.dist-info").exists():
            dist(site, name, version, module="cupy" if name.startswith("cupy-") else None)


def test_quick_on_the_h200_machine_gives_no_fwk001(tmp_path, h200x2):
    """Stock PyTorch 2.11.0 from PyPI (no +cu tag) on a CUDA 13.0 driver is a CUDA build, not CPU-only."""
    _recorded_site(tmp_path, h200x2)
    frameworks = probe_frameworks_metadata(path=[str(tmp_path)])["frameworks"]
    assert {n: fw["info"]["cuda_build"] for n, fw in frameworks.items() if fw["installed"]} == \
        {"torch": True, "jax": True, "cupy": True}
    assert (frameworks["torch"]["info"]["built_cuda"], frameworks["jax"]["info"]["cuda_major"]) == ("13.0", "13")
    facts = copy.deepcopy(h200x2)
    facts["frameworks"] = frameworks
    assert _stack_findings(facts) == []
    line = frameworks_line(facts)
    assert "torch 2.11.0 (CUDA 13.0, from package metadata)" in line and "CPU-only" not in line


BEFORE = Path(__file__).parent / "fixtures/real/h100x1-20261123/before"


def _site_from_recorded_metadata(site: Path) -> None:
    """A site-packages made of what tests/fixtures/real/h100x1-20261123/before/metadata.txt recorded on
    the 1 x H100 machine: each distribution's Requires-Dist lines and the GPU files of its RECORD."""
    modules = {"torch": "torch", "jax": "jax", "jaxlib": "jaxlib", "cupy-cuda13x": "cupy"}
    current: Optional[dict] = None
    recorded = []
    for line in (BEFORE / "metadata.txt").read_text().splitlines():
        if line.startswith("== "):
            name, version = line[3:].split()
            current = {"name": name, "version": version, "requires": [], "files": []}
            recorded.append(current)
        elif line.strip().startswith("Requires-Dist: "):
            current["requires"].append(line.strip()[len("Requires-Dist: "):])
        elif line.strip().startswith("files: "):
            current["files"] = ast.literal_eval(line.strip()[len("files: "):])
    for d in recorded:
        dist(site, d["name"], d["version"], tuple(d["requires"]), record=d["files"], module=modules.get(d["name"]))


def test_the_recorded_false_fwk001_of_quick_on_the_h100_is_gone(tmp_path):
    """Recorded on 1 x H100 (2026-11-23, code before this fix): `check --quick` exited 1 with FWK001
    "PyTorch 2.11.0 is a CPU-only build" and an error message nothing printed, while the full check found
    nothing. Re-read with this code from the metadata recorded there, the same facts give neither."""
    before = json.loads((BEFORE / "quick.json").read_text())
    assert [(f["code"], f["detail"]) for f in before["findings"]] == \
        [("FWK001", "torch.version.cuda is None (Torch not compiled with CUDA enabled).")]
    full = json.loads((BEFORE / "full.json").read_text())
    _site_from_recorded_metadata(tmp_path)
    facts = copy.deepcopy(before["facts"])
    facts["frameworks"] = probe_frameworks_metadata(path=[str(tmp_path)])["frameworks"]
    torch = facts["frameworks"]["torch"]["info"]
    assert (torch["cuda_build"], torch["cpu_only_build"], torch["built_cuda"]) == (True, False, "13.0")
    assert _stack_findings(facts) == []
    for name, fw in full["facts"]["frameworks"].items():  # the imported frameworks said the same
        if fw.get("installed"):
            assert facts["frameworks"][name]["info"]["cpu_only_build"] == fw["info"]["cpu_only_build"], name
    assert full["facts"]["frameworks"]["torch"]["info"]["built_cuda"] == torch["built_cuda"]


def test_quick_judges_the_cu13_requirement_against_an_old_driver(tmp_path, h200x2):
    _recorded_site(tmp_path, h200x2)
    facts = copy.deepcopy(h200x2)
    facts["frameworks"] = probe_frameworks_metadata(path=[str(tmp_path)])["frameworks"]
    facts["nvml"]["cuda_driver_version"] = 12080
    codes = {f["code"] for f in _stack_findings(facts)}
    assert "CMP001" in codes and "FWK001" not in codes


def test_quick_unknown_build_gives_no_fwk001(tmp_path, h200x2):
    dist(tmp_path, "torch", "2.11.0", ["filelock"], module="torch")
    facts = copy.deepcopy(h200x2)
    facts["frameworks"] = probe_frameworks_metadata(path=[str(tmp_path)])["frameworks"]
    assert facts["frameworks"]["torch"]["info"]["cpu_only_build"] is None
    assert "FWK001" not in {f["code"] for f in _stack_findings(facts)}
    assert "torch 2.11.0 (build unknown, from package metadata)" in frameworks_line(facts)


def test_quick_fwk001_quotes_the_package_evidence_only(tmp_path, h200x2):
    dist(tmp_path, "torch", "2.13.0+cpu", record=["torch/lib/libtorch_cpu.so"], module="torch")
    facts = copy.deepcopy(h200x2)
    facts["frameworks"] = probe_frameworks_metadata(path=[str(tmp_path)])["frameworks"]
    fwk = [f for f in _stack_findings(facts) if f["code"] == "FWK001"]
    assert len(fwk) == 1
    assert fwk[0]["detail"] == ("Read from package metadata (nothing was imported): local version tag +cpu; "
                                "RECORD lists torch/lib/libtorch_cpu.so but no torch/lib/libtorch_cuda.so.")
    assert "Torch not compiled" not in fwk[0]["detail"]
    assert any("download.pytorch.org/whl/cu130" in c for c in fwk[0]["remediation"]["commands"])


def test_quick_jax_without_a_plugin_gives_fwk001_as_the_full_check_does(tmp_path, h200x2):
    jax_site(tmp_path)
    facts = copy.deepcopy(h200x2)
    facts["frameworks"] = probe_frameworks_metadata(path=[str(tmp_path)])["frameworks"]
    assert [f["code"] for f in _stack_findings(facts)] == ["FWK001"]


def test_quick_tensorflow_without_pip_cuda_libraries_gives_no_fwk001(tmp_path, h200x2):
    dist(tmp_path, "tensorflow", "2.21.0", TF_221_REQUIRES, wheel_tag=LINUX_WHEEL, module="tensorflow")
    facts = copy.deepcopy(h200x2)
    facts["frameworks"] = probe_frameworks_metadata(path=[str(tmp_path)])["frameworks"]
    assert "FWK001" not in {f["code"] for f in _stack_findings(facts)}


def test_imported_torch_fwk001_says_only_what_the_child_recorded(h200x2):
    """torch.version.cuda None and no init_error recorded: the detail adds no error message of its own."""
    facts = copy.deepcopy(h200x2)
    facts["frameworks"]["torch"] = {"installed": True, "status": "ok", "info": {
        "version": "2.13.0+cpu", "built_cuda": None, "cpu_only_build": True, "devices": [], "cuda_available": False}}
    fwk = [f for f in _stack_findings(facts) if f["code"] == "FWK001"]
    assert [f["detail"] for f in fwk] == ["torch.version.cuda is None."]
    facts["frameworks"]["torch"]["info"]["init_error"] = "AssertionError: Torch not compiled with CUDA enabled"
    fwk = [f for f in _stack_findings(facts) if f["code"] == "FWK001"]
    assert [f["detail"] for f in fwk] == ["torch.version.cuda is None (AssertionError: Torch not compiled with CUDA enabled)."]


def test_two_dist_infos_of_torch_in_one_folder_are_both_read(tmp_path):
    """A leftover dist-info beside the real one: which one's files are there is not known from metadata."""
    dist(tmp_path, "torch", "2.13.0+cpu", module="torch")
    dist(tmp_path, "torch", "2.5.1+cu121")
    torch = read(tmp_path, "torch")
    assert (torch["version"], torch["cuda_build"], torch["cpu_only_build"]) == (None, None, None)
    assert any("several distributions install torch here" in e for e in torch["evidence"])


def _headers_as_importlib_reads_them(dist: Any) -> dict[str, str]:
    """The reference: the whole METADATA (else PKG-INFO) through importlib's read_text, split at the first
    blank line; md._read_headers reads only the header block of a wheel's METADATA, and must answer alike."""
    text = ""
    for name in ("METADATA", "PKG-INFO"):
        try:
            text = dist.read_text(name) or ""
        except (OSError, UnicodeDecodeError):
            text = ""
        if text:
            break
    out: dict[str, str] = {}
    for line in text.replace("\r\n", "\n").split("\n\n", 1)[0].splitlines():
        field, sep, value = line.partition(":")
        if sep and line[:1] not in (" ", "\t") and field not in out:
            out[field] = value.strip()
    return out


HEADER_CASES = {
    "plain": b"Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n\nName: not-this\n",
    "crlf": b"Metadata-Version: 2.1\r\nName: jax\r\nVersion: 0.11.2\r\n\r\nlong\r\n",
    "cr": b"Metadata-Version: 2.1\rName: cupy\rVersion: 14.2\r\rdescription\r",
    "mixed": b"Name: a\n\r\nVersion: 1\n",
    "bom": b"\xef\xbb\xbfMetadata-Version: 2.1\nName: bommed\n\n",
    "no-blank-line": b"Name: tail\nVersion: 3",
    "long-header": b"Name: long\n" + b"".join(b"Requires-Dist: dep%d\n" % i for i in range(2000)) + b"Version: 9\n\nbody",
    "blank-first": b"\nName: after-blank\n",
    "folded": b"Name: x\nSummary: first\n  continued\nVersion: 1\n\n",
    "latin1-header": b"Name: caf\xe9\nVersion: 1\n\n",
    "chunk-edge": b"Name: edge\n" + b"X: " + b"y" * (8192 - 15) + b"\r" + b"\n\r\nVersion: no\n",  # its CR is the last byte of the first 8 KiB read
}


@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_metadata_headers_read_from_the_header_block_alone(tmp_path, case):
    """Line endings, a byte order mark, a header past the first 8 KiB read, a blank line split across two
    reads, undecodable bytes in the header (then nothing, as importlib gives) or only after it."""
    from importlib import metadata

    info = tmp_path / "pkg-1.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(HEADER_CASES[case])
    dist = metadata.PathDistribution(info)
    md._HEADERS.clear()
    assert md._read_headers(dist) == _headers_as_importlib_reads_them(dist)
    assert md._read_headers(metadata.PathDistribution(info)) == _headers_as_importlib_reads_them(dist)  # cached


def test_metadata_headers_of_every_installed_distribution_as_importlib_reads_them():
    """Every distribution of this test environment (torch, tensorflow-cpu and their dependencies)."""
    from importlib import metadata

    dists = list(metadata.distributions())
    assert len(dists) > 30
    md._HEADERS.clear()
    assert [md._read_headers(d) for d in dists] == [_headers_as_importlib_reads_them(d) for d in dists]


def test_undecodable_description_no_longer_hides_the_name(tmp_path):
    """importlib decodes the whole file: a stray byte in the long description loses every header. Read from
    the header block alone, the name and version stay (the one intended difference from the reference)."""
    from importlib import metadata

    info = tmp_path / "pkg-1.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(b"Name: torch\nVersion: 2.11.0\n\ncaf\xe9 description\n")
    dist = metadata.PathDistribution(info)
    assert _headers_as_importlib_reads_them(dist) == {}
    assert md._read_headers(dist) == {"Name": "torch", "Version": "2.11.0"}
