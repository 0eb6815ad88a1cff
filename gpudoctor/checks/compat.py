"""Compatibility verdicts: will each part of this stack run on this driver and these GPUs?

A snapshot (or the arguments of `gpudoctor matrix check`) is reduced to a Stack: the driver,
the GPUs' compute capabilities, and each consumer of CUDA (a framework build, the toolkit) with
the CUDA it was built for and the architectures it carries. judge_stack() applies the rules in
gpudoctor/compat.py to it. An input the matrix does not know gives CMP008 (unknown), never an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from gpudoctor import compat
from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, nvml_ready
from gpudoctor.checks.visibility import resolve
from gpudoctor.findings import Finding
from gpudoctor.matrix import MatrixError
from gpudoctor.snapshot import get, known

COMPAT_DOCS = "https://docs.nvidia.com/deploy/cuda-compatibility/"
NAMES = {"torch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX", "cupy": "CuPy"}


@dataclass
class Build:
    label: str  # "PyTorch 2.11.0+cu130"
    framework: str  # torch | tensorflow | jax | cupy | toolkit
    cuda: Optional[str]  # the CUDA it was built for; major-only builds give "13"
    arch_list: list[str] = field(default_factory=list)
    python_spec: Optional[str] = None


@dataclass
class Stack:
    driver: Optional[str] = None
    driver_cuda: Optional[str] = None
    gpus: list[tuple[str, str]] = field(default_factory=list)  # (label, compute capability)
    builds: list[Build] = field(default_factory=list)
    toolkit_cuda: Optional[str] = None
    python: Optional[str] = None
    python_executable: str = "python3"
    unknown: list[str] = field(default_factory=list)  # inputs the matrix does not know


def judge_stack(stack: Stack) -> list[Finding]:
    out: list[Finding] = [finding("CMP008", f"{what} is beyond gpudoctor's compatibility matrix",
                                  text="The verdicts that need it are unknown. Update gpudoctor, or pass --matrix FILE "
                                       "with the missing entries.") for what in stack.unknown]
    for build in stack.builds:
        out += _driver_findings(stack, build)
        for label, cc in stack.gpus:
            out += _arch_findings(build, label, cc)
        if stack.python and compat.python_in(build.python_spec, stack.python) is False:
            out.append(finding("CMP007", f"{build.label} does not support Python {stack.python} (it supports {build.python_spec})",
                               text="Use a Python version inside that range, or a release of the framework that supports this Python."))
    if stack.toolkit_cuda:
        out += _toolkit_findings(stack)
    return out


def _driver_findings(stack: Stack, build: Build) -> list[Finding]:
    if not build.cuda or not (stack.driver or stack.driver_cuda):
        return []
    if "." not in build.cuda:  # major-only (a jax-cuda13 plugin, a cupy-cuda13x wheel): judge the major
        have = compat.major_minor(stack.driver_cuda)
        if have is None or have.major >= int(build.cuda):
            return []
        verdict = compat.driver_runs_cuda(f"{build.cuda}.0", stack.driver, stack.driver_cuda)
    else:
        verdict = compat.driver_runs_cuda(build.cuda, stack.driver, stack.driver_cuda)
    drv = f"driver {stack.driver}" if stack.driver else f"a driver supporting CUDA {stack.driver_cuda}"
    if verdict.status == compat.FAIL:
        return [finding("CMP001", f"{build.label} needs a newer driver than {drv}", detail=verdict.reason,
                        text=_driver_fix(verdict, build, stack), commands=_rebuild_commands(build, stack), links=[COMPAT_DOCS])]
    if verdict.status == compat.LIMITED:
        return [finding("CMP002", f"{build.label} runs on {drv} only under CUDA minor-version compatibility",
                        detail=verdict.reason,
                        text=f"Most work runs; code that JIT-compiles PTX newer than the driver fails. "
                             f"Driver {verdict.needs or 'for CUDA ' + str(build.cuda)} or newer gives full support.",
                        links=[COMPAT_DOCS])]
    if verdict.status == compat.UNKNOWN:
        return [finding("CMP008", f"whether {drv} runs {build.label} is unknown: {verdict.reason}",
                        text="Update gpudoctor, or pass --matrix FILE with the missing entries.")]
    return []


def _driver_fix(verdict: compat.Verdict, build: Build, stack: Stack) -> str:
    parts = [f"Install NVIDIA driver {verdict.needs} or newer" if verdict.needs else "Install a newer NVIDIA driver"]
    if build.framework == "torch" and _rebuild_commands(build, stack):
        parts.append("or the same PyTorch release built for a CUDA this driver supports (the command below)")
    return ", ".join(parts) + "."


def _rebuild_commands(build: Build, stack: Stack) -> list[str]:
    """The same PyTorch release built for a CUDA this driver runs, from the matrix's variants for that release."""
    if build.framework != "torch" or not (stack.driver or stack.driver_cuda):
        return []
    from gpudoctor.checks.frameworks import TORCH_INDEX

    release_version = build.label.split()[1].split("+")[0] if len(build.label.split()) > 1 else ""
    try:
        release, _, _ = compat.torch_build(release_version)
    except MatrixError:
        return []
    if release is None:
        return []
    fits = [v for v in release.get("variants", []) if v.get("cuda") and v["name"].startswith("cu")
            and compat.driver_runs_cuda(v["cuda"], stack.driver, stack.driver_cuda).status == compat.OK]
    if not fits:
        return []
    best = max(fits, key=lambda v: compat.version(v["cuda"]))
    return [f"{stack.python_executable} -m pip install --force-reinstall 'torch=={release['version']}.*' "
            f"--index-url {TORCH_INDEX}/{best['name']}"]


def _arch_findings(build: Build, label: str, cc: str) -> list[Finding]:
    if not build.arch_list:
        return []
    verdict = compat.arch_runs(cc, build.arch_list)
    if verdict.status == compat.FAIL:
        return [finding("CMP003", f"{build.label} has no code for {label} (compute capability {cc})", detail=verdict.reason,
                        text="Install a build that includes this architecture (a newer release, or the CUDA variant "
                             "whose architecture list includes it).", commands=[])]
    if verdict.status == compat.LIMITED:
        return [finding("CMP004", f"{build.label} runs on {label} only through PTX JIT compilation", detail=verdict.reason,
                        text="It works, but the first run compiles every kernel (minutes) and later releases may drop the PTX. "
                             "A build with machine code for this GPU avoids both.")]
    return []


def _toolkit_findings(stack: Stack) -> list[Finding]:
    out = []
    if stack.driver or stack.driver_cuda:
        verdict = compat.driver_runs_cuda(stack.toolkit_cuda, stack.driver, stack.driver_cuda)
        if verdict.status in (compat.FAIL, compat.LIMITED):
            out.append(finding("CMP006", f"the CUDA toolkit ({stack.toolkit_cuda}) is newer than the driver supports",
                               detail=verdict.reason,
                               text="Programs you build with this nvcc may fail to start, and PTX it emits cannot be "
                                    "JIT-compiled by this driver. Install a toolkit no newer than the driver's CUDA, or a newer driver."))
    for label, cc in stack.gpus:
        verdict = compat.toolkit_targets(stack.toolkit_cuda, cc)
        if verdict.status == compat.FAIL:
            out.append(finding("CMP005", f"nvcc {stack.toolkit_cuda} cannot build code for {label} (compute capability {cc})",
                               detail=verdict.reason,
                               text="Extensions you compile here (flash-attn, custom ops) will lack code for this GPU. "
                                    "Use a toolkit that supports it."))
    return out


# --- from a snapshot ------------------------------------------------------------------------------

def stack_from_facts(facts: Facts) -> Stack:
    raw = known(get(facts, "nvml.cuda_driver_version"))
    stack = Stack(
        driver=known(get(facts, "nvml.driver_version")),
        driver_cuda=f"{raw // 1000}.{(raw % 1000) // 10}" if isinstance(raw, int) and raw > 0 else None,
        python=get(facts, "python.version"),
        python_executable=str(get(facts, "python.executable") or "python3"),
    )
    by_index = {g.get("index"): g for g in facts.get("gpus") or []}
    for dev in resolve(facts).devices:
        cc = known((by_index.get(dev.gpu_index) or {}).get("compute_capability"))
        if isinstance(cc, str):
            stack.gpus.append((f"GPU {dev.gpu_index} ({dev.name})", cc))
    for name, fw in (facts.get("frameworks") or {}).items():
        build = _build_from_probe(name, fw or {}, facts)
        if build:
            stack.builds.append(build)
    nvcc = get(facts, "toolkit.nvcc") or {}
    if nvcc.get("found") and isinstance(known(nvcc.get("release")), str):
        stack.toolkit_cuda = nvcc["release"]
    return stack


def _build_from_probe(name: str, fw: dict[str, Any], facts: Facts) -> Optional[Build]:
    info = fw.get("info") or {}
    if fw.get("status") not in ("ok", "metadata") or info.get("cpu_only_build") is True:
        return None
    label = f"{NAMES.get(name, name)} {info.get('version')}"
    # package metadata may name only the CUDA major it targets (a cu13 requirement): judged as a major
    cuda = info.get("built_cuda") or (info.get("cuda_major") if info.get("cuda_build") is True else None)
    if name in ("torch", "tensorflow"):
        return Build(label, name, cuda, list(info.get("arch_list") or []), _python_spec(name, info))
    major = cuda or _package_cuda_major(name, facts)
    return Build(label, name, major) if major else None


def _python_spec(name: str, info: dict[str, Any]) -> Optional[str]:
    try:
        if name == "torch":
            release, _, _ = compat.torch_build(str(info.get("version")))
        else:
            release = compat.tensorflow_release(str(info.get("version")))
    except MatrixError:
        return None
    return (release or {}).get("python")


def _package_cuda_major(name: str, facts: Facts) -> Optional[str]:
    """jax-cuda13-plugin, cupy-cuda13x: the CUDA major is in the package name."""
    import re

    for dist in get(facts, "python.distributions") or []:
        m = re.match(r"^(?:jax-cuda(\d+)-plugin|cupy-cuda(\d+)x)$", dist.get("name", ""))
        if m and dist["name"].startswith("jax" if name == "jax" else "cupy"):
            return m.group(1) or m.group(2)
    return None


def check_compat(facts: Facts) -> Iterator[Finding]:
    if not nvml_ready(facts):
        raise NotApplicable("NVML is not available")
    try:
        yield from judge_stack(stack_from_facts(facts))
    except MatrixError as exc:
        yield finding("CMP008", f"the compatibility matrix could not be read: {exc}")


def check_known_bad(facts: Facts) -> Iterator[Finding]:
    """Combinations the matrix records as broken whatever the versions say: today TensorFlow after 2.10
    on native Windows, which has no GPU support there (tensorflow.json, windows_native_gpu)."""
    tf = (facts.get("frameworks") or {}).get("tensorflow") or {}
    version = ((tf.get("info") or {}).get("version"))
    if get(facts, "host.os") != "Windows" or not version:
        raise NotApplicable("no known-bad combination applies")
    try:
        release = compat.tensorflow_release(str(version))
    except MatrixError:
        return
    if release is not None and release.get("windows_native_gpu") is False:
        yield finding("CMP009", f"TensorFlow {version} has no GPU support on native Windows (the last was 2.10)",
                      text="Run TensorFlow in WSL2 (pip install 'tensorflow[and-cuda]' there), or use TensorFlow 2.10 "
                           "with CUDA 11.2 and cuDNN 8.1 on Windows.",
                      links=["https://www.tensorflow.org/install/pip#windows-wsl2"])


CHECKS = (
    Check("compat.known_bad", "compat", "no known-bad combination", ("CMP009",), check_known_bad, ("frameworks", "host")),
    Check("compat.stack", "compat", "the driver, GPUs, toolkit and framework builds are compatible",
          ("CMP001", "CMP002", "CMP003", "CMP004", "CMP005", "CMP006", "CMP007", "CMP008"), check_compat,
          ("nvml", "frameworks", "cuda_stack", "python")),
)
