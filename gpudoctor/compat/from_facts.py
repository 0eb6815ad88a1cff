"""The Stack a snapshot describes, for `check` and `analyze`: the driver, the compute capabilities of the
GPUs a CUDA program sees there (views/visibility.py resolve), the OS, the Python, and each installed
framework as a Build: what it said about itself when imported, completed from the matrix when it was
only read from package metadata (so `check --quick` and `matrix check` judge one build alike)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, cast

from gpudoctor import frameworks_table
from gpudoctor.compat import rules
from gpudoctor.compat.data import Matrix, MatrixError
from gpudoctor.compat.model import Build, Facts, Stack
from gpudoctor.compat.stack import build_from_matrix
from gpudoctor.snapshot import get, known

if TYPE_CHECKING:
    from gpudoctor.facts_types import FrameworkFacts, FrameworkInfo, FrameworksFacts


def os_of(facts: Facts) -> Optional[str]:
    """The matrix's name for the snapshot's OS ("linux", "wsl", "windows", "macos"), or None where it is not known."""
    os_name = {"Linux": "linux", "Windows": "windows", "Darwin": "macos"}.get(str(get(facts, "host.os") or ""))
    return "wsl" if os_name == "linux" and get(facts, "host.wsl") is True else os_name


def stack_from_facts(matrix: Matrix, facts: Facts) -> Stack:
    """The stack a snapshot describes. Only the compute capabilities of the GPUs a CUDA program sees
    there (views/visibility.py resolve) are judged."""
    from gpudoctor.compat.forward import forward_cuda, supported_where
    from gpudoctor.views.visibility import resolve

    raw = known(get(facts, "nvml.cuda_driver_version"))
    os_name = os_of(facts)
    stack = Stack(
        driver=known(get(facts, "nvml.driver_version")),
        driver_cuda=rules.parse_driver_cuda(raw) if isinstance(raw, int) and raw > 0 else None,
        python=get(facts, "python.version"),
        # python3 is not a command on Windows: python.org's installer puts the py launcher there (as the ticket
        # reply, render/reply.py, writes it)
        python_executable=str(get(facts, "python.executable") or ("py" if os_name == "windows" else "python3")),
        os=os_name,
    )
    if stack.driver_cuda is None and stack.driver and os_name:
        # a paste (a Windows collect_env) gives the driver, not its CUDA: Table 3 maps one to the other, per OS
        stack.driver_cuda = rules.driver_cuda_of(matrix, stack.driver, stack.driver_os, bounded=True)
    devices = resolve(facts).devices
    forward = forward_cuda(matrix, stack.driver, stack.driver_cuda, os_name)
    if forward and supported_where(matrix, [str(d.name) for d in devices]) == "no":
        # the cuda-compat package's CUDA does not run on a GeForce: programs get the driver's own (CMP011 says why)
        stack.driver_cuda = forward.native
    by_index = {g.get("index"): g for g in facts.get("gpus") or []}
    for dev in devices:
        cc = known((by_index.get(dev.gpu_index) or {}).get("compute_capability"))
        if isinstance(cc, str):
            stack.gpus.append((f"GPU {dev.gpu_index} ({dev.name})", cc))
    stack.gpus_named = bool(devices)
    for name, fw in cast("FrameworksFacts", facts.get("frameworks") or {}).items():
        build = _build_from_probe(matrix, name, fw or {}, facts, stack)
        if build:
            stack.builds.append(build)
    nvcc = get(facts, "toolkit.nvcc") or {}
    if nvcc.get("found") and isinstance(known(nvcc.get("release")), str):
        stack.toolkit_cuda = nvcc["release"]
    return stack


def _build_from_probe(matrix: Matrix, name: str, fw: FrameworkFacts, facts: Facts, stack: Stack) -> Optional[Build]:
    """The installed build: what it said about itself, completed from the matrix (architectures when
    it was only read from package metadata). Unknown to the matrix is not an error here: the build
    exists, so only its own facts are judged."""
    info = fw.get("info") or {}
    if fw.get("status") not in ("ok", "metadata") or name not in frameworks_table.NAMES:
        return None
    version = str(info.get("version") or "")
    label = f"{frameworks_table.NAMES[name]} {version}"
    if info.get("cpu_only_build") is True:
        return Build(label, name, None, version=version, cpu_only=True, installed=True)
    # package metadata may name only the CUDA major it targets (a cu13 requirement): judged as a major
    cuda = info.get("built_cuda") or (info.get("cuda_major") if info.get("cuda_build") is True else None)
    row = frameworks_table.get(name)
    if row and row.cuda_package:
        cuda = cuda or _package_cuda_major(row.cuda_package, facts)
    scratch = Stack(os=stack.os)  # what the matrix does not know is not reported for an installed build
    try:
        from_matrix = build_from_matrix(matrix, name, _matrix_version(name, version, cuda, facts), scratch, installed=True) if version else None
    except MatrixError:
        from_matrix = None
    arch = info.get("arch_list")
    real_arch = [a for a in arch if isinstance(a, str)] if isinstance(arch, list) and arch else None
    build = Build(label, name, cuda, arch_list=real_arch or [], version=version, installed=True,
                  ran=fw.get("status") == "ok" and info.get("cuda_available") is True, arch_measured=real_arch is not None,
                  # a pasted "Is CUDA available: True": the framework's own answer, read without importing it
                  cuda_started=fw.get("status") == "metadata" and info.get("cuda_available") is True)
    # PyPI's lists in the matrix are the x86_64 wheels'; an Arm machine's wheels are built for other archs
    x86 = str(get(facts, "host.machine") or "x86_64").lower() in ("x86_64", "amd64")
    if from_matrix is not None and not from_matrix.cpu_only:
        build.release, build.python_spec = from_matrix.release, from_matrix.python_spec
        build.cudnn_floors, build.cudnn_loaded = from_matrix.cudnn_floors, _loaded_cudnn(info)
        if build.cuda is None and "+cuda" in from_matrix.version:  # a jaxlib wheel's local version names its CUDA
            build.cuda = from_matrix.cuda
        build.min_cc, build.arch_by_toolkit = from_matrix.min_cc, from_matrix.arch_by_toolkit
        if real_arch is None and x86 and _same_cuda(from_matrix.cuda, cuda):
            build.sass, build.ptx = from_matrix.sass, from_matrix.ptx
            build.ptx_floor, build.ptx_floor_why = from_matrix.ptx_floor, from_matrix.ptx_floor_why
    return build  # without a CUDA version only the known-bad combinations can judge it


def _matrix_version(name: str, version: str, cuda: Optional[str], facts: Facts) -> str:
    if name == "cupy":
        dist = next((d.get("name") for d in get(facts, "python.distributions") or [] if str(d.get("name", "")).startswith("cupy-cuda")), None)
        m = re.match(r"^cupy-(cuda\d+x?)$", str(dist or ""))
        return f"{version}+{m.group(1)}" if m else (f"{version}+cuda{cuda}x" if cuda and "." not in cuda else version)
    jaxlib = next((str(d.get("version")) for d in get(facts, "python.distributions") or [] if d.get("name") == "jaxlib"), "")
    if name == "jax" and "+cuda" in jaxlib:  # "0.3.25+cuda11.cudnn82": the wheel itself, whose cuDNN floor decides
        return jaxlib
    if name == "jax" and cuda:
        return f"{version}+cuda{str(cuda).split('.')[0]}"
    return version


def _loaded_cudnn(info: FrameworkInfo) -> Optional[str]:
    """The cuDNN a framework's own process loaded: what it reported, else what the library it mapped says."""
    runtime = info.get("runtime_cudnn")
    if isinstance(runtime, str) and rules.version(runtime):
        return runtime
    lib = next((x for x in info.get("loaded_libraries") or [] if isinstance(x, dict) and x.get("family") == "libcudnn"), {})
    return lib.get("version") if isinstance(lib.get("version"), str) and rules.version(lib["version"]) else None


def _same_cuda(a: Optional[str], b: Optional[str]) -> bool:
    va, vb = rules.major_minor(a), rules.major_minor(b)
    return va is not None and va == vb


def _package_cuda_major(pattern: str, facts: Facts) -> Optional[str]:
    """jax-cuda13-plugin, cupy-cuda13x: the CUDA major is in the package name (cupy-cuda101: CUDA 10.1 itself),
    as the framework's ``cuda_package`` pattern reads it."""
    for dist in get(facts, "python.distributions") or []:
        m = re.match(pattern, dist.get("name", ""))
        if m:
            return m.group("major") or f"{m.group('exact')}.{m.group('minor')}"  # cupy-cuda101: CUDA 10.1
    return None
