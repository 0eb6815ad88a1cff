"""A stack and its one judge: will each part of it run on this driver, these GPUs, this OS?

A snapshot (compat/from_facts.py stack_from_facts, for `check` and `analyze`) or the options of
`gpudoctor matrix check` (compat/queries.py stack_from_args) are reduced to a Stack (compat/model.py):
the driver, the GPUs' compute capabilities, the OS, a system cuDNN, and each consumer of CUDA (a
framework build, the toolkit) with the CUDA it was built for and the architectures it carries.
judge_stack() is the one judge for every entry point: judge_versions() applies the rules of
compat/rules.py, judge_known_bad() (compat/known_bad.py) the sourced combinations in
compat_matrix/known_bad.json. Anything the matrix does not know gives CMP008 (unknown), never an error
and never a silent ok. The checks compat.stack and compat.known_bad (checks/compat.py) run these two.

A build's facts come from the build itself when it was imported (torch.cuda.get_arch_list(),
TensorFlow's build info), else from the matrix (build_from_matrix, here), so `check --quick` and
`matrix check` judge the same build the same way. fitting_torch picks the PyTorch install that fits a
stack, for FWK001's command and `matrix suggest`.

This package sits below checks/ (it never imports checks or render); findings are made here from the
code catalogue, as checks/base.py's finding() makes them.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Optional, cast

from gpudoctor import frameworks_table
from gpudoctor.compat import branches, rules
from gpudoctor.compat.data import Matrix
from gpudoctor.compat.jax_wheels import cudnn_floors, jaxlib_lines_of, refusing_floor, tagged_wheel
from gpudoctor.compat.known_bad import judge_known_bad, settled_by_known_bad
from gpudoctor.compat.model import COMPAT_DOCS, Build, Stack, _os_label, finding
from gpudoctor.compat.torch_pip import pip_args
from gpudoctor.findings import ERROR, WARNING, Finding

def judge_stack(matrix: Matrix, stack: Stack) -> list[Finding]:
    """Every verdict on a stack: versions, architectures, Python, cuDNN, and the known-bad combinations.
    A known-bad error for a build on a GPU replaces the "unknown" or "PTX JIT" the architecture rule
    would give there (TensorFlow's compute_90 PTX does not JIT on 12.x)."""
    return judge_versions(matrix, stack, settled_by_known_bad(matrix, stack)) + judge_known_bad(matrix, stack)


def judge_versions(matrix: Matrix, stack: Stack, settled: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset()) -> list[Finding]:
    out: list[Finding] = [finding("CMP008", f"{what} is beyond gpudoctor's compatibility matrix",
                                  text="The verdicts that need it are unknown. Update gpudoctor, or pass --matrix FILE "
                                       "with the missing entries.") for what in stack.unknown]
    out += branches.stack_findings(matrix, stack)  # a GPU the driver does not drive: no build runs on it
    for build in stack.builds:
        if build.cpu_only:
            out += _cpu_only_findings(matrix, stack, build) + _python_findings(stack, build)
            continue
        if build.installed and not build.cuda:
            continue  # the build did not say which CUDA it uses: nothing to judge but its known-bad combinations
        out += _driver_findings(matrix, stack, build)
        for label, cc in stack.gpus:
            found = _arch_findings(matrix, stack, build, label, cc)
            # a known-bad error on this GPU overrides "unknown" and "runs through PTX JIT" (which it disproves)
            out += [f for f in found if not (f.code in ("CMP004", "CMP008") and (build.label, label) in settled)]
        out += _python_findings(stack, build)
        out += _cudnn_findings(stack, build)
    if stack.toolkit_cuda:
        out += _toolkit_findings(matrix, stack)
    return out


# --- builds from the matrix -----------------------------------------------------------------------

def build_from_matrix(matrix: Matrix, framework: str, text: str, stack: Stack, installed: bool = False) -> Optional[Build]:
    """The Build the matrix describes for ``framework`` at version ``text`` ("2.5.0+cu121", "2.15.0",
    "0.11.2+cuda12", "14.2.0+cuda13x"); what it does not know goes to stack.unknown. None when the
    release itself is unknown. A framework whose matrix needs rules of its own has its maker (_MAKERS);
    any other lists its releases in the shape every framework's matrix may have (_release_build)."""
    maker = _MAKERS.get(framework)
    return maker(matrix, text, stack, installed) if maker else _release_build(matrix, framework, text, stack, installed)


# PyTorch's wheel scripts put "+PTX" on the newest architecture of TORCH_CUDA_ARCH_LIST only ("...;10.0;12.0+PTX":
# pytorch.json PR-145792, PT-BUILD-CUDA-2.8), so a variant whose PTX is not known carries at most that one.
_TORCH_PTX_WHY = "PyTorch's wheel builds add PTX for the newest architecture of their list only"
# a conda package's build string: "py3.9_cuda11.3_cudnn8.2.0_0", "py3.10_cpu_0"
_CONDA_BUILD = re.compile(r"^py(\d+\.\d+)_(?:cuda(\d+\.\d+)_cudnn[\d.]+|cpu)_\d+$")


def _torch(matrix: Matrix, text: str, stack: Stack, installed: bool) -> Optional[Build]:
    if "=" in text:
        return _torch_conda(matrix, text, stack, installed)
    release, variant, name = rules.torch_build(matrix, text)
    if release is None:
        stack.unknown.append(f"PyTorch {text}")
        return None
    python = release.get("python")
    if "+" not in text and stack.os == "windows" and "windows" not in release.get("pypi_wheels", {"windows": ""}):
        # PyPI has no Windows wheel of this release (1.0-1.6), so it came from download.pytorch.org, and the
        # plain version does not say which of its builds (CPU or a CUDA variant) it is
        stack.unknown.append(f"which build PyTorch {text} is on Windows (PyPI has no Windows wheel of it)")
        return Build(f"PyTorch {text}", "torch", None, python_spec=python, version=text, installed=installed, release=release)
    if name == "cpu" or ("+" not in text and stack.os in ("windows", "macos")):
        label = f"PyTorch {text}" + ("" if "+" in text else f" (the plain PyPI wheel on {_os_label(stack.os)} is CPU-only)")
        return Build(label, "torch", None, python_spec=python, version=text, cpu_only=True, installed=installed, release=release)
    label = f"PyTorch {text}" + ("" if "+" in text else f" (plain PyPI wheel: {name})")
    if variant is None:
        stack.unknown.append(f"PyTorch {text} variant {name!r}")
        return Build(label, "torch", None, python_spec=python, version=text, installed=installed, release=release)
    # native-Windows wheels were built with their own TORCH_CUDA_ARCH_LIST (builder windows/cuda<NN>.bat)
    arch = "windows_" if stack.os == "windows" and "windows_arch_list" in variant else ""
    build = Build(label, "torch", variant.get("cuda"), python_spec=python, version=text, sass=_flags(variant.get(f"{arch}arch_list")),
                  ptx=_flags(variant.get(f"{arch}ptx")), installed=installed, release=release)
    if build.sass and build.ptx is None:
        newest = max((p for p in map(rules.parse_arch, build.sass) if p), key=lambda p: p[1], default=None)
        if newest is not None:
            build.ptx_floor, build.ptx_floor_why = f"compute_{newest[1].major}{newest[1].minor}", _TORCH_PTX_WHY
    return build


def _torch_conda(matrix: Matrix, text: str, stack: Stack, installed: bool) -> Optional[Build]:
    """A conda package, "1.12.1=py3.9_cuda11.3_cudnn8.3.2_0": its CUDA is in the build string; its
    architecture list is not the pip wheel's (conda builds are made by other scripts), so only what the CUDA
    version proves is judged."""
    base, _, build_string = text.partition("=")
    m = _CONDA_BUILD.match(build_string.strip())
    release, _, _ = rules.torch_build(matrix, base)
    if release is None or m is None:
        stack.unknown.append(f"PyTorch {text}" + ("" if m else " (expected a conda build string such as py3.9_cuda11.3_cudnn8.2.0_0)"))
        return None
    label, python = f"PyTorch {text}", f"=={m.group(1)}"  # one conda package per Python
    if m.group(2) is None:
        return Build(label, "torch", None, python_spec=python, version=base, cpu_only=True, installed=installed,
                     release=release, package="conda package")
    return Build(label, "torch", m.group(2), python_spec=python, version=base, installed=installed, release=release,
                 package="conda package")


def _tensorflow(matrix: Matrix, text: str, stack: Stack, installed: bool) -> Optional[Build]:
    release = rules.tensorflow_release(matrix, text)
    if release is None:
        stack.unknown.append(f"TensorFlow {text}")
        return None
    sass, ptx = _flags(release.get("arch_list")), _flags(release.get("ptx"))
    if sass is None and isinstance(release.get("compute_capabilities"), list):  # a mixed list as get_build_info gives it
        mixed = [a for a in release["compute_capabilities"] if isinstance(a, str)]
        sass = [a for a in mixed if a.lower().startswith("sm_")]
        ptx = [a for a in mixed if a.lower().startswith("compute_")]
    return Build(f"TensorFlow {text}", "tensorflow", release.get("cuda"), python_spec=release.get("python"), version=text,
                 sass=sass, ptx=ptx, cudnn_built=release.get("cudnn"), installed=installed, release=release)


def _jax(matrix: Matrix, text: str, stack: Stack, installed: bool) -> Optional[Build]:
    base, _, extra = text.partition("+")
    release = rules.jax_release(matrix, base)
    if release is None:
        stack.unknown.append(f"JAX {text}")
        return None
    lines = jaxlib_lines_of(matrix, release, base) if release.get("no_jaxlib") is True else None
    if lines is not None:  # jax 0.2: every jaxlib 0.1 line from the oldest it imports
        release = lines[1]
    paired = f" with jaxlib {lines[0]} or newer" if lines else ""
    wheel = tagged_wheel(release, extra) if extra else None  # +cuda111, +cuda11.cudnn82: one jaxlib wheel
    # a jaxlib 0.1 tag names a CUDA version (cuda92 is 9.2, cuda111 11.1): one the release lacks is not a major
    if wheel is not None:
        extra = f"cuda{wheel.major}"
    elif release.get("no_jaxlib") is True or re.match(r"^cuda(\d{3}|[89]\d)$", extra.lower()):
        stack.unknown.append(f"JAX {text} (" + (f"no jaxlib {base} exists: give the jaxlib version, as pip list shows it"
                                                 if release.get("no_jaxlib") is True else f"no jaxlib {base}+{extra} wheel is known") + ")")
        return None
    majors = [int(m) for m in release.get("cuda_majors") or [] if str(m).isdigit()]
    want = re.match(r"^cuda(\d+)(?:[-_.]?(local|pip))?$", extra.lower()) if extra else None  # cuda12_pip: before 0.6
    if extra and not want:
        stack.unknown.append(f"JAX {text} (extra {extra!r}: expected cuda12, cuda13, cuda12-local or cuda13-local)")
        return None
    major = int(want.group(1)) if want else (max(majors) if majors else None)
    local = want is not None and want.group(2) == "local"
    extra_name = f"jax[cuda{major}{'-local' if local else ''}]" if major else None
    extra_row = next((e for e in release.get("extras") or [] if isinstance(e, dict) and e.get("name") == extra_name), {})
    if major is not None and majors and major not in majors:
        stack.unknown.append(f"JAX {base} with CUDA {major} (the matrix lists CUDA {', '.join(map(str, majors))} for it)")
    label = f"JAX {text}{paired}" + ("" if extra or not extra_name else f" ({extra_name})")
    return Build(label, "jax", wheel.cuda if wheel else (str(major) if major else None), python_spec=release.get("python"),
                 version=text, min_cc=extra_row.get("min_compute_capability"), cudnn_min=release.get("min_cudnn"),
                 cudnn_floors=cudnn_floors(release, major if extra else None, wheel),
                 min_cc_source=_cited(matrix, release, extra_row.get("min_cc_source")),
                 installed=installed, release=release)


@functools.lru_cache(maxsize=64)
def _cupy_packages(matrix: Matrix, want: Any) -> tuple[dict[str, Any], ...]:
    """The CuPy packages that shipped release ``want`` (major.minor), remembered per matrix: every node of a
    fleet asks for the same one."""
    return tuple(row for row in matrix.topic("cupy")["entries"]
                 if any(isinstance(r, dict) and rules.major_minor(r.get("cupy")) == want for r in row.get("cupy_releases") or []))


def _cupy(matrix: Matrix, text: str, stack: Stack, installed: bool) -> Optional[Build]:
    base, _, extra = text.partition("+")
    want = rules.major_minor(base)
    packages = list(_cupy_packages(matrix, want))
    m = re.match(r"^cuda(\d+)x?$", extra.lower()) if extra else None
    if extra and not m:
        stack.unknown.append(f"CuPy {text} (package {extra!r}: expected cuda12x, cuda13x or one CUDA's, as cuda101)")
        return None
    if m:  # cupy-cuda101 names its CUDA; cupy-cuda12x (or "+cuda12") its major
        named = [p for p in packages if p.get("package") == f"cupy-{extra.lower()}"]
        packages = named or [p for p in packages if str(p.get("cuda_major")) == m.group(1)]
    if not packages:
        stack.unknown.append(f"CuPy {text}")
        return None
    package = max(packages, key=lambda p: (int(p.get("cuda_major") or 0), str(p.get("package")).endswith("x"),
                                           rules.version(p.get("cuda")) or rules.version("0")))
    line = next((r for r in package.get("cupy_releases") or [] if isinstance(r, dict) and rules.major_minor(r.get("cupy")) == want), {})
    label = f"CuPy {text}" + ("" if extra else f" ({package.get('package')})")
    return Build(label, "cupy", str(package.get("cuda") or package.get("cuda_major")), version=text, arch_by_toolkit=True,
                 python_spec=line.get("python"), installed=installed, release=package)


#: The frameworks whose matrix needs rules of its own: PyTorch's variants and conda builds, TensorFlow's mixed
#: architecture lists, JAX's change points and jaxlib wheels, CuPy's packages per CUDA.
_MAKERS = {"torch": _torch, "tensorflow": _tensorflow, "jax": _jax, "cupy": _cupy}


def _release_build(matrix: Matrix, framework: str, text: str, stack: Stack, installed: bool) -> Optional[Build]:
    """A framework whose matrix lists one entry per release in the usual shape (compat/data.py RELEASE):
    the entry of version ``text``, else of its major.minor; a local tag after "+" chooses nothing."""
    fw = frameworks_table.get(framework)
    label = f"{fw.label if fw else framework} {text}"
    base = text.partition("+")[0]
    want = rules.version(base)
    rows = matrix.topic(fw.topic)["entries"] if fw and want is not None else []
    release = next((r for r in rows if rules.version(r.get("version")) == want), None) or \
        next((r for r in rows if rules.major_minor(r.get("version")) == rules.major_minor(base)), None)
    if release is None:
        stack.unknown.append(label)
        return None
    return Build(label, framework, release.get("cuda"), python_spec=release.get("python"), version=text,
                 sass=_flags(release.get("arch_list")), ptx=_flags(release.get("ptx")), cudnn_built=release.get("cudnn"),
                 installed=installed, release=release)


def _flags(value: Any) -> Optional[list[str]]:
    return [a for a in value if isinstance(a, str)] if isinstance(value, list) else None



# --- the rules ------------------------------------------------------------------------------------

def _driver_findings(matrix: Matrix, stack: Stack, build: Build) -> list[Finding]:
    if not build.cuda or not (stack.driver or stack.driver_cuda):
        return []
    if "." not in build.cuda:  # major-only (a jax-cuda13 plugin, a cupy-cuda13x wheel): judge the major
        have = rules.major_minor(stack.driver_cuda)
        if have is not None and have.major >= int(build.cuda):
            return []
        verdict = rules.driver_runs_cuda(matrix, f"{build.cuda}.0", stack.driver, stack.driver_cuda, stack.driver_os)
    else:
        verdict = rules.driver_runs_cuda(matrix, build.cuda, stack.driver, stack.driver_cuda, stack.driver_os)
    drv = f"driver {stack.driver}" if stack.driver else f"a driver supporting CUDA {stack.driver_cuda}"
    if verdict.status == rules.FAIL and build.cuda_started:
        return []  # CUDA started under it (NVIDIA's forward-compatibility package does that): what ran outranks the rule
    if verdict.status == rules.FAIL:
        commands = _install_commands(matrix, stack, build)
        return [finding("CMP001", f"{build.label} needs a newer driver than {drv}", detail=verdict.reason,
                        text=_driver_fix(verdict, build, commands) + (WSL_DRIVER if stack.os == "wsl" else ""),
                        commands=commands, links=[COMPAT_DOCS] + ([WSL_DOCS] if stack.os == "wsl" else []))]
    if verdict.status == rules.LIMITED:
        return [finding("CMP002", f"{build.label} runs on {drv} only under CUDA minor-version compatibility",
                        detail=verdict.reason,
                        text=f"Most work runs; code that JIT-compiles PTX newer than the driver fails. "
                             f"Driver {verdict.needs or 'for CUDA ' + str(build.cuda)} or newer gives full support.",
                        links=[COMPAT_DOCS])]
    if verdict.status == rules.UNKNOWN:
        return [finding("CMP008", f"whether {drv} runs {build.label} is unknown: {verdict.reason}",
                        text="Update gpudoctor, or pass --matrix FILE with the missing entries.")]
    return []


def _is_jetson(matrix: Matrix, label: str) -> bool:
    entry = rules.gpu_entry(matrix, label)
    return entry is not None and entry.get("segment") == "jetson"


def _on_tegra(build: Build, cc: str, verdict: rules.Verdict) -> rules.Verdict:
    """Jetson (Tegra) GPUs: "binary compatibility is supported only for the desktop, not for Tegra" (CUDA
    C++ Programming Guide, Binary Compatibility), and the wheels on PyPI are built for ARM servers (SBSA),
    not for Jetson's CUDA (L4T; NVIDIA ships JetPack builds). So only the build's own list, with machine code
    for exactly this compute capability or PTX, can be judged; the matrix's list for a wheel cannot."""
    if not build.arch_measured or build.min_cc is not None or build.arch_by_toolkit:
        return rules.Verdict(rules.UNKNOWN, "this is a Jetson GPU: PyPI's wheels are built for ARM servers (SBSA), not "
                                            "for Jetson's CUDA (JetPack), and Tegra has no binary compatibility between "
                                            "compute capabilities, so the matrix's architecture list does not apply")
    gpu = rules.version(cc)
    exact = [s for s in build.sass or [] if (rules.parse_arch(s) or ("", None, ""))[1] == gpu]
    return rules.build_runs_on(cc, exact, build.ptx)


#: WSL 2 runs the Windows driver, whose libcuda is mapped into /usr/lib/wsl/lib: NVIDIA's CUDA on WSL guide says no
#: Linux NVIDIA driver may be installed inside WSL.
WSL_DOCS = "https://docs.nvidia.com/cuda/wsl-user-guide/"
WSL_DRIVER = " Under WSL 2 that is the Windows NVIDIA driver, installed on Windows; never install a Linux driver inside WSL."


def _driver_fix(verdict: rules.Verdict, build: Build, commands: list[str]) -> str:
    parts = [f"Install NVIDIA driver {verdict.needs} or newer" if verdict.needs else "Install a newer NVIDIA driver"]
    if commands:
        parts.append(f"or a {frameworks_table.label(build.framework)} build for a CUDA this driver supports (the command below)")
    return ", ".join(parts) + "."


def _arch_findings(matrix: Matrix, stack: Stack, build: Build, label: str, cc: str) -> list[Finding]:
    if build.min_cc is not None:
        verdict = _min_cc_verdict(build, cc)
    elif build.arch_by_toolkit:
        verdict = _toolkit_major_verdict(matrix, build, cc)
    else:
        verdict = rules.build_runs_on(cc, build.sass, build.ptx)
        if verdict.status == rules.UNKNOWN and build.sass is None and build.framework == "jax":
            verdict = rules.Verdict(rules.UNKNOWN, "the oldest compute capability this JAX release's CUDA wheels support "
                                                     "is not known to gpudoctor's matrix")
    if _is_jetson(matrix, label) and verdict.status != rules.UNKNOWN:
        verdict = _on_tegra(build, cc, verdict)
    if verdict.status == rules.UNKNOWN:
        verdict = _deduced(matrix, build, cc, verdict)
    if verdict.status == rules.FAIL:
        commands = _install_commands(matrix, stack, build)
        return [finding("CMP003", f"{build.label} has no code for {label} (compute capability {cc})", detail=verdict.reason,
                        text="Install a build that includes this architecture (a newer release, or the CUDA variant "
                             "whose architecture list includes it)" + (": the command below." if commands else "."),
                        commands=commands)]
    if verdict.status == rules.LIMITED:
        return [finding("CMP004", f"{build.label} runs on {label} only through PTX JIT compilation", detail=verdict.reason,
                        text="It works, but the first run compiles every kernel (minutes) and later releases may drop the PTX. "
                             "A build with machine code for this GPU avoids both.")]
    if verdict.status == rules.UNKNOWN and not build.ran:
        return [finding("CMP008", f"whether {build.label} runs on {label} (compute capability {cc}) is unknown",
                        detail=verdict.reason,
                        text=_arch_unknown_fix(build))]
    return []


def _deduced(matrix: Matrix, build: Build, cc: str, verdict: rules.Verdict) -> rules.Verdict:
    """An unknown architecture verdict settled by what the build's CUDA proves (compat/rules.py): a toolkit
    that dropped the GPU built nothing that runs there; PTX runs only on its own architecture or newer; a
    CUDA older than the GPU has no machine code for it, so only PTX could run it."""
    if not build.cuda:
        return verdict
    dropped = rules.cuda_dropped(matrix, build.cuda, cc)
    if dropped is not None:
        return dropped
    if build.sass is not None and build.ptx is None and build.ptx_floor:
        return rules.ptx_floor_verdict(cc, build.ptx_floor, build.ptx_floor_why) or verdict
    too_old = rules.cuda_too_old(matrix, build.cuda, cc) if build.sass is None else None
    if too_old is None:
        return verdict
    if build.ptx is not None:  # its PTX is known: that alone decides
        return rules.build_runs_on(cc, [], build.ptx)
    return rules.Verdict(rules.UNKNOWN, f"{too_old}, so it runs there only through PTX, and whether it carries PTX "
                                        "is not known to gpudoctor's matrix")


def _arch_unknown_fix(build: Build) -> str:
    if build.framework == "jax":
        return ("Update gpudoctor, or pass --matrix FILE with the release's extras and their min_compute_capability "
                "(JAX's installation guide states it per CUDA major).")
    how = {"torch": "torch.cuda.get_arch_list()", "tensorflow": "tf.sysconfig.get_build_info()['cuda_compute_capabilities']"}
    return ("Update gpudoctor, or pass --matrix FILE with the build's architecture lists (arch_list for machine code, "
            "ptx for PTX)" + (f"; on a machine with the build, {how[build.framework]} gives them." if build.framework in how else "."))


def _cited(matrix: Matrix, release: dict, key: Optional[str]) -> str:
    """A source key of jax.json, as the words a finding quotes (the bundled file names them in "sources")."""
    if not key:
        return "JAX's installation guide"
    text = str((matrix.topic("jax").get("sources") or {}).get(key) or "")
    url = re.search(r"https?://\S+", text)
    return f"as {url.group().rstrip('.,;:')} states" if url else "JAX's installation guide"


def _min_cc_verdict(build: Build, cc: str) -> rules.Verdict:
    gpu, floor = rules.version(cc), rules.version(build.min_cc)
    if gpu is None or floor is None:
        return rules.Verdict(rules.UNKNOWN, f"compute capability {cc!r} cannot be read")
    if gpu < floor:
        return rules.Verdict(rules.FAIL, f"its CUDA {build.cuda} wheels support compute capability {floor} and newer "
                                           f"({build.min_cc_source}); this GPU is {gpu}")
    return rules.Verdict(rules.OK, f"its wheels support compute capability {floor} and newer")


def _toolkit_major_verdict(matrix: Matrix, build: Build, cc: str) -> rules.Verdict:
    """CuPy compiles its kernels at run time with NVRTC of its CUDA major: the GPU must be one that major targets."""
    gpu = rules.version(cc)
    row = next((r for r in matrix.topic("cuda_targets")["entries"] if rules.version(r.get("compute_capability")) == gpu), None)
    if gpu is None or row is None or not build.cuda:
        return rules.Verdict(rules.UNKNOWN, f"the matrix does not know which CUDA releases target compute capability {cc}")
    major = int(build.cuda.split(".")[0])  # cupy-cuda101 compiles with NVRTC 10.1: judged by its major
    first, last = rules.major_minor(row.get("first_cuda")), rules.major_minor(row.get("last_cuda"))
    if last is not None and last.major < major:
        return rules.Verdict(rules.FAIL, f"CUDA {major}.x cannot compile for compute capability {gpu}: CUDA {last} was the last "
                                           "toolkit that could, and CuPy compiles its kernels with its CUDA's NVRTC")
    if first is not None and first.major > major:
        return rules.Verdict(rules.FAIL, f"CUDA {major}.x cannot compile for compute capability {gpu}: it arrived in CUDA {first}")
    return rules.Verdict(rules.OK, f"CUDA {major}.x compiles for compute capability {gpu}")


def _python_findings(stack: Stack, build: Build) -> list[Finding]:
    if not stack.python or rules.python_in(build.python_spec, stack.python) is not False:
        return []
    if build.installed:  # it is installed, so a wheel (or a source build) exists: untested, not impossible
        return [finding("CMP007", f"{build.label} does not support Python {stack.python} (it supports {build.python_spec})",
                        text="Use a Python version inside that range, or a release of the framework that supports this Python.",
                        severity=WARNING)]
    return [finding("CMP007", f"no {build.label} {build.package} exists for Python {stack.python} (it supports {build.python_spec})",
                    detail=f"{'conda' if build.package == 'conda package' else 'pip'} finds no matching distribution for this Python"
                           + (" ('No matching distribution found')." if build.package == "wheel" else "."),
                    text="Use a Python version inside that range, or a release of the framework that supports this Python.",
                    severity=ERROR)]


def _cudnn_findings(stack: Stack, build: Build) -> list[Finding]:
    """A cuDNN the user says is in use (matrix check --cudnn) against what the build needs. TensorFlow
    and JAX check the cuDNN they load at start-up and refuse another major or an older minor than they
    were built with (JAX: "Outdated cuDNN installation found ... Minimum supported: 9100"); with the
    pip extras the right one comes along, so a --cudnn given means a different one is loaded. PyTorch
    wheels and CuPy bring or pin their own cuDNN, so a system cuDNN is not judged against them. A JAX
    version may name one jaxlib wheel or stand for all of its release's (compat/jax_wheels.py): its
    cuDNN is refused only when every one of them refuses it. An installed JAX is judged by the cuDNN
    its own process loaded."""
    loaded = build.cudnn_loaded or stack.cudnn
    need = build.cudnn_built or build.cudnn_min
    if build.cudnn_floors and loaded:
        need = refusing_floor(loaded, build.cudnn_floors)
        if need is None:
            return []
    if not loaded or not need or build.framework not in ("tensorflow", "jax"):
        return []
    ok = rules.cudnn_satisfies(loaded, need)
    if ok is not False:
        return []
    have, want = rules.known_version(loaded), rules.known_version(need)  # cudnn_satisfies read both
    code = "FWK006" if have.major != want.major else "FWK007"
    how, commands = _tf_cudnn_fix(stack, build) if build.framework == "tensorflow" else ("", [])
    return [finding(code, f"{build.label} refuses cuDNN {loaded}: it was built with cuDNN {need}",
                    detail=f"It checks at start-up: 'Loaded runtime CuDNN library: {loaded} but source was compiled with: "
                           f"{need}. CuDNN library needs to have matching major version and equal or higher minor version.'",
                    text=f"Use cuDNN {want.major}.x at {need} or newer"
                         + (how if build.framework == "tensorflow" else
                            ", or a jaxlib wheel built for the cuDNN installed" if _before_extras(build.release or {}) else
                            " (the non-local jax[cudaNN] extra brings the matching one)"),
                    commands=commands, severity=ERROR)]


def _tf_cudnn_fix(stack: Stack, build: Build) -> tuple[str, list[str]]:
    """How a TensorFlow release gets its cuDNN. From 2.14 the tensorflow[and-cuda] extra brings it; before, the
    pip package brings neither CUDA nor cuDNN, and TensorFlow's install guide gave conda commands for its tested
    configuration (2.9-2.13; tensorflow.json gpu_install_*, TF-PIP-GUIDE). Older releases name the tested versions."""
    release = build.release or {}
    if release.get("and_cuda_extra") is True:
        return " (pip install 'tensorflow[and-cuda]' brings the matching one)", []
    cuda, cudnn = release.get("cuda"), release.get("cudnn")
    if not (cuda and cudnn):
        return "", []
    tested = f": TensorFlow {release.get('version')} was tested with CUDA {cuda} and cuDNN {cudnn}, and its pip package brings neither"
    listed = release.get("gpu_install_windows" if stack.os == "windows" else "gpu_install_linux")
    commands = [c.replace("python3 -m pip", f"{stack.python_executable} -m pip", 1)
                for c in (listed if isinstance(listed, list) else []) if isinstance(c, str)]  # an overlay's may be anything
    if commands:
        return tested + "; TensorFlow's install guide installs them with conda, into the active conda environment (the commands below)", commands
    return tested + f"; install cuDNN {cudnn} for CUDA {cuda} (the system's packages or conda)", []


def _cpu_only_findings(matrix: Matrix, stack: Stack, build: Build) -> list[Finding]:
    """A CPU-only build where there is a GPU. An installed one is FWK001's (checks/frameworks.py, from
    the build's own facts); a hypothetical one (matrix check --torch X+cpu) is judged here."""
    if build.installed or not stack.gpus:
        return []
    commands = _install_commands(matrix, stack, build)
    return [finding("FWK001", f"{build.label} is a CPU-only build: it will not use the GPU",
                    text="Install the CUDA build for this driver and GPU" + (" (the command below)." if commands else
                                                                             ": none in the matrix fits; see `gpudoctor matrix suggest`."),
                    commands=commands)]


def _toolkit_findings(matrix: Matrix, stack: Stack) -> list[Finding]:
    toolkit = cast(str, stack.toolkit_cuda)  # asked only of a stack that names one
    out = []
    if stack.driver or stack.driver_cuda:
        verdict = rules.driver_runs_cuda(matrix, toolkit, stack.driver, stack.driver_cuda, stack.driver_os)
        if verdict.status == rules.FAIL:
            out.append(finding("CMP006", f"the CUDA toolkit ({stack.toolkit_cuda}) needs a newer driver than this one",
                               detail=verdict.reason, severity=ERROR,
                               text="Programs you build with this nvcc fail to start ('CUDA driver version is insufficient for "
                                    "CUDA runtime version'). Install a toolkit no newer than the driver's CUDA, or "
                                    + (f"driver {verdict.needs} or newer." if verdict.needs else "a newer driver."),
                               links=[COMPAT_DOCS]))
        elif verdict.status == rules.LIMITED:
            out.append(finding("CMP006", f"the CUDA toolkit ({stack.toolkit_cuda}) is newer than the driver supports",
                               detail=verdict.reason, severity=WARNING,
                               text="Programs you build with this nvcc run under minor-version compatibility, and PTX it emits "
                                    "cannot be JIT-compiled by this driver. Install a toolkit no newer than the driver's CUDA, "
                                    "or a newer driver.", links=[COMPAT_DOCS]))
    for label, cc in stack.gpus:
        dropped = rules.cuda_dropped(matrix, toolkit, cc)
        if dropped is not None:
            out.append(finding("CMP005", f"nvcc {stack.toolkit_cuda} builds nothing that runs on {label} (compute capability {cc})",
                               detail=dropped.reason, severity=ERROR,
                               text="Programs and extensions built with this toolkit fail there ('no kernel image is available "
                                    "for execution on the device'), and its libraries carry no code for it. Use a toolkit "
                                    "that still supports the GPU."))
            continue
        verdict = rules.toolkit_targets(matrix, toolkit, cc)
        if verdict.status == rules.FAIL:
            out.append(finding("CMP005", f"nvcc {stack.toolkit_cuda} cannot build code for {label} (compute capability {cc})",
                               detail=verdict.reason,
                               text="Extensions you compile here (flash-attn, custom ops) will lack code for this GPU. "
                                    "Use a toolkit that supports it."))
    return out


# --- what to install instead ----------------------------------------------------------------------

def _install_commands(matrix: Matrix, stack: Stack, build: Build) -> list[str]:
    """A build of the same framework that runs here: the same release's CUDA variant when one fits, else
    the newest release that fits (driver, every GPU's architecture, Python). PyTorch and JAX only."""
    py = stack.python_executable
    if stack.os == "macos":
        return []
    if build.framework == "torch":
        choice = fitting_torch(matrix, stack, prefer=(build.release or {}).get("version"))
        args = pip_args(*choice, stack.os) if choice else None
        if args:
            return [f"{py} -m pip install --force-reinstall {args}"]
    if build.framework == "jax" and build.release and not build.cpu_only and not _before_extras(build.release):
        have = rules.major_minor(stack.driver_cuda)
        majors = sorted((int(m) for m in build.release.get("cuda_majors") or [] if str(m).isdigit()), reverse=True)
        fits = [m for m in majors if have is not None and have.major >= m and str(m) != build.cuda]
        if fits:
            return [f"{py} -m pip install -U 'jax[cuda{fits[0]}]=={build.version.partition('+')[0]}'"]
    return []


def _before_extras(release: dict[str, Any]) -> bool:
    """A jaxlib older than 0.4.1 is versioned apart from jax, and its CUDA wheels came from JAX's own index,
    not from a jax[cudaNN] extra: no pip command names it."""
    first = rules.version(release.get("matrix_version"))
    return first is not None and first < rules.known_version("0.4.1")


def fitting_torch(matrix: Matrix, stack: Stack, prefer: Optional[str] = None) -> Optional[tuple[dict[str, Any], dict[str, Any]]]:
    """(release, variant) of the PyTorch build that runs on this stack: the ``prefer`` release first,
    then the newest; within a release the variant fully supported by the driver, else one it runs
    under minor-version compatibility; machine code for every GPU; a wheel for the Python."""
    releases = sorted(matrix.topic("pytorch")["entries"], key=lambda r: rules.version(r.get("version")) or rules.known_version("0"),
                      reverse=True)
    if prefer:
        releases.sort(key=lambda r: r.get("version") != prefer)
    for release in releases:
        if stack.python and rules.python_in(release.get("python"), stack.python) is False:
            continue
        ranked: dict[str, list[dict[str, Any]]] = {rules.OK: [], rules.LIMITED: []}
        for variant in release.get("variants", []):
            if not (variant.get("cuda") and str(variant.get("name", "")).startswith("cu")):
                continue
            if stack.driver or stack.driver_cuda:
                status = rules.driver_runs_cuda(matrix, variant["cuda"], stack.driver, stack.driver_cuda, stack.driver_os).status
            else:
                status = rules.OK
            if status not in ranked:
                continue
            if all(rules.build_runs_on(cc, _flags(variant.get("arch_list")), _flags(variant.get("ptx"))).status == rules.OK
                   for _, cc in stack.gpus):
                ranked[status].append(variant)
        for status in (rules.OK, rules.LIMITED):
            if ranked[status]:
                return release, max(ranked[status], key=lambda v: rules.known_version(v["cuda"]))
    return None
