"""A stack and its one judge: will each part of it run on this driver, these GPUs, this OS?

A snapshot (stack_from_facts, for `check` and `analyze`) or the options of `gpudoctor matrix check`
(compat/queries.py stack_from_args) are reduced to a Stack: the driver, the GPUs' compute capabilities,
the OS, a system cuDNN, and each consumer of CUDA (a framework build, the toolkit) with the CUDA it was
built for and the architectures it carries. judge_stack() is the one judge for every entry point:
judge_versions() applies the rules of compat/rules.py, judge_known_bad() the sourced combinations in
compat_matrix/known_bad.json. Anything the matrix does not know gives CMP008 (unknown), never an error
and never a silent ok. The checks compat.stack and compat.known_bad (checks/compat.py) run these two.

A build's facts come from the build itself when it was imported (torch.cuda.get_arch_list(),
TensorFlow's build info), else from the matrix (build_from_matrix), so `check --quick` and
`matrix check` judge the same build the same way.

This package sits below checks/ (it never imports checks or render): stack_from_facts reads the visible
GPUs through gpudoctor/views/visibility.py, and findings are made here from the code catalogue, as
checks/base.py's finding() makes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence


from gpudoctor.codes import lookup
from gpudoctor.compat import rules
from gpudoctor.compat.data import MatrixError, load_topic
from gpudoctor.findings import ERROR, WARNING, Finding, Remediation, Subject
from gpudoctor.snapshot import get, known

Facts = dict[str, Any]


def finding(code: str, title: str, detail: str = "", text: str = "", commands: Sequence[str] = (),
            links: Sequence[str] = (), severity: Optional[str] = None) -> Finding:
    """A host finding of ``code`` at the catalogue's severity unless one is given (checks/base.py's
    constructor, which this layer may not import)."""
    return Finding(code=code, severity=severity or lookup(code).severity, title=title, detail=detail, subject=Subject(),
                   remediation=Remediation(text=text, commands=tuple(commands), links=tuple(links)))


COMPAT_DOCS = "https://docs.nvidia.com/deploy/cuda-compatibility/"
TORCH_INDEX = "https://download.pytorch.org/whl"
NAMES = {"torch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX", "cupy": "CuPy"}
OS_NAMES = ("linux", "windows", "wsl", "macos")


@dataclass
class Build:
    label: str  # "PyTorch 2.11.0+cu130"
    framework: str  # torch | tensorflow | jax | cupy
    cuda: Optional[str]  # the CUDA it was built for; major-only builds give "13"
    arch_list: list[str] = field(default_factory=list)  # a mixed list as the build reports it (sm_XY and compute_XY)
    python_spec: Optional[str] = None
    version: str = ""  # the framework version as given ("2.11.0+cu130")
    sass: Optional[list[str]] = None  # machine code; None: not known
    ptx: Optional[list[str]] = None  # PTX; None: not known
    min_cc: Optional[str] = None  # a stated minimum compute capability instead of a list (JAX wheels)
    min_cc_source: str = "JAX's installation guide"  # where that minimum is stated
    arch_by_toolkit: bool = False  # kernels compiled at run time by NVRTC of its CUDA major (CuPy)
    cudnn_built: Optional[str] = None  # the cuDNN it was built with (TensorFlow): runtime needs same major, >= minor
    cudnn_min: Optional[str] = None  # the oldest cuDNN it accepts (JAX)
    cpu_only: bool = False
    installed: bool = False  # read from this machine (a wheel exists), not a hypothetical install
    arch_measured: bool = False  # sass/ptx are what the build itself said (not the matrix's list for its wheel)
    ran: bool = False  # installed, imported and it reached the GPU: an unknown architecture list is moot
    release: Optional[dict[str, Any]] = None  # its matrix entry, when known

    def __post_init__(self) -> None:
        if self.arch_list and self.sass is None:
            flags = [a for a in self.arch_list if isinstance(a, str)]
            self.sass = [a for a in flags if a.lower().startswith("sm_")]
            self.ptx = [a for a in flags if a.lower().startswith("compute_")]
            if self.framework == "tensorflow":  # TensorFlow's compute_XY is SASS and PTX, as it counts it itself
                self.sass += [a.lower().replace("compute_", "sm_", 1) for a in self.ptx]  # (tensorflow.json TF-NOTATION)


@dataclass
class Stack:
    driver: Optional[str] = None
    driver_cuda: Optional[str] = None
    gpus: list[tuple[str, str]] = field(default_factory=list)  # (label, compute capability)
    builds: list[Build] = field(default_factory=list)
    toolkit_cuda: Optional[str] = None
    cudnn: Optional[str] = None  # a cuDNN the user says is in use (matrix check --cudnn)
    python: Optional[str] = None
    python_executable: str = "python3"
    os: Optional[str] = None  # linux | windows | wsl | macos; None: not known (judged as Linux where it matters)
    unknown: list[str] = field(default_factory=list)  # inputs the matrix does not know

    @property
    def driver_os(self) -> str:
        """Which Table 3 column applies: WSL runs the Windows driver."""
        return "windows" if self.os in ("windows", "wsl") else "linux"


def judge_stack(stack: Stack) -> list[Finding]:
    """Every verdict on a stack: versions, architectures, Python, cuDNN, and the known-bad combinations.
    A known-bad error for a build on a GPU replaces the "unknown" or "PTX JIT" the architecture rule
    would give there (TensorFlow's compute_90 PTX does not JIT on 12.x)."""
    return judge_versions(stack, settled_by_known_bad(stack)) + judge_known_bad(stack)


def settled_by_known_bad(stack: Stack) -> set[tuple[str, str]]:
    """(build label, GPU label) pairs a known-bad error already decides."""
    return {(b.label, label) for entry, b, label, _ in _known_bad_matches(stack) if entry.get("severity", ERROR) == ERROR and label}


def judge_versions(stack: Stack, settled: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset()) -> list[Finding]:
    out: list[Finding] = [finding("CMP008", f"{what} is beyond gpudoctor's compatibility matrix",
                                  text="The verdicts that need it are unknown. Update gpudoctor, or pass --matrix FILE "
                                       "with the missing entries.") for what in stack.unknown]
    for build in stack.builds:
        if build.cpu_only:
            out += _cpu_only_findings(stack, build)
            continue
        if build.installed and not build.cuda:
            continue  # the build did not say which CUDA it uses: nothing to judge but its known-bad combinations
        out += _driver_findings(stack, build)
        for label, cc in stack.gpus:
            found = _arch_findings(stack, build, label, cc)
            # a known-bad error on this GPU overrides "unknown" and "runs through PTX JIT" (which it disproves)
            out += [f for f in found if not (f.code in ("CMP004", "CMP008") and (build.label, label) in settled)]
        out += _python_findings(stack, build)
        out += _cudnn_findings(stack, build)
    if stack.toolkit_cuda:
        out += _toolkit_findings(stack)
    return out


# --- builds from the matrix -----------------------------------------------------------------------

def build_from_matrix(framework: str, text: str, stack: Stack, installed: bool = False) -> Optional[Build]:
    """The Build the matrix describes for ``framework`` at version ``text`` ("2.5.0+cu121", "2.15.0",
    "0.11.2+cuda12", "14.2.0+cuda13x"); what it does not know goes to stack.unknown. None when the
    release itself is unknown."""
    maker = {"torch": _torch, "tensorflow": _tensorflow, "jax": _jax, "cupy": _cupy}[framework]
    return maker(text, stack, installed)


def _torch(text: str, stack: Stack, installed: bool) -> Optional[Build]:
    release, variant, name = rules.torch_build(text)
    if release is None:
        stack.unknown.append(f"PyTorch {text}")
        return None
    python = release.get("python")
    if name == "cpu" or ("+" not in text and stack.os in ("windows", "macos")):
        label = f"PyTorch {text}" + ("" if "+" in text else f" (the plain PyPI wheel on {_os_label(stack.os)} is CPU-only)")
        return Build(label, "torch", None, python_spec=python, version=text, cpu_only=True, installed=installed, release=release)
    label = f"PyTorch {text}" + ("" if "+" in text else f" (plain PyPI wheel: {name})")
    if variant is None:
        stack.unknown.append(f"PyTorch {text} variant {name!r}")
        return Build(label, "torch", None, python_spec=python, version=text, installed=installed, release=release)
    return Build(label, "torch", variant.get("cuda"), python_spec=python, version=text,
                 sass=_flags(variant.get("arch_list")), ptx=_flags(variant.get("ptx")), installed=installed, release=release)


def _tensorflow(text: str, stack: Stack, installed: bool) -> Optional[Build]:
    release = rules.tensorflow_release(text)
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


def _jax(text: str, stack: Stack, installed: bool) -> Optional[Build]:
    base, _, extra = text.partition("+")
    release = rules.jax_release(base)
    if release is None:
        stack.unknown.append(f"JAX {text}")
        return None
    majors = [int(m) for m in release.get("cuda_majors") or [] if str(m).isdigit()]
    want = re.match(r"^cuda(\d+)(?:[-_.]?(local|pip))?$", extra.lower()) if extra else None  # cuda12_pip: before 0.6
    if extra and not want:
        stack.unknown.append(f"JAX {text} (extra {extra!r}: expected cuda12, cuda13, cuda12-local or cuda13-local)")
        return None
    major = int(want.group(1)) if want else (max(majors) if majors else None)
    local = bool(want) and want.group(2) == "local"
    extra_name = f"jax[cuda{major}{'-local' if local else ''}]" if major else None
    extra_row = next((e for e in release.get("extras") or [] if isinstance(e, dict) and e.get("name") == extra_name), {})
    if major is not None and majors and major not in majors:
        stack.unknown.append(f"JAX {base} with CUDA {major} (the matrix lists CUDA {', '.join(map(str, majors))} for it)")
    label = f"JAX {text}" + ("" if extra or not extra_name else f" ({extra_name})")
    return Build(label, "jax", str(major) if major else None, python_spec=release.get("python"), version=text,
                 min_cc=extra_row.get("min_compute_capability"), cudnn_min=release.get("min_cudnn"),
                 min_cc_source=_cited(release, extra_row.get("min_cc_source")),
                 installed=installed, release=release)


def _cupy(text: str, stack: Stack, installed: bool) -> Optional[Build]:
    base, _, extra = text.partition("+")
    want = rules.major_minor(base)
    packages = []
    for row in load_topic("cupy")["entries"]:
        releases = [r for r in row.get("cupy_releases") or [] if isinstance(r, dict)]
        if any(rules.major_minor(r.get("cupy")) == want for r in releases):
            packages.append(row)
    m = re.match(r"^cuda(\d+)x?$", extra.lower()) if extra else None
    if extra and not m:
        stack.unknown.append(f"CuPy {text} (package {extra!r}: expected cuda12x or cuda13x)")
        return None
    if m:
        packages = [p for p in packages if str(p.get("cuda_major")) == m.group(1)]
    if not packages:
        stack.unknown.append(f"CuPy {text}")
        return None
    package = max(packages, key=lambda p: int(p.get("cuda_major") or 0))
    label = f"CuPy {text}" + ("" if extra else f" ({package.get('package')})")
    return Build(label, "cupy", str(package.get("cuda_major")), version=text, arch_by_toolkit=True, installed=installed,
                 release=package)


def _flags(value: Any) -> Optional[list[str]]:
    return [a for a in value if isinstance(a, str)] if isinstance(value, list) else None


def _os_label(os_name: Optional[str]) -> str:
    return {"windows": "Windows", "macos": "macOS", "wsl": "WSL", "linux": "Linux"}.get(os_name or "", "this OS")


# --- the rules ------------------------------------------------------------------------------------

def _driver_findings(stack: Stack, build: Build) -> list[Finding]:
    if not build.cuda or not (stack.driver or stack.driver_cuda):
        return []
    if "." not in build.cuda:  # major-only (a jax-cuda13 plugin, a cupy-cuda13x wheel): judge the major
        have = rules.major_minor(stack.driver_cuda)
        if have is not None and have.major >= int(build.cuda):
            return []
        verdict = rules.driver_runs_cuda(f"{build.cuda}.0", stack.driver, stack.driver_cuda, stack.driver_os)
    else:
        verdict = rules.driver_runs_cuda(build.cuda, stack.driver, stack.driver_cuda, stack.driver_os)
    drv = f"driver {stack.driver}" if stack.driver else f"a driver supporting CUDA {stack.driver_cuda}"
    if verdict.status == rules.FAIL:
        commands = _install_commands(stack, build)
        return [finding("CMP001", f"{build.label} needs a newer driver than {drv}", detail=verdict.reason,
                        text=_driver_fix(verdict, build, commands), commands=commands, links=[COMPAT_DOCS])]
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


def _is_jetson(label: str) -> bool:
    entry = rules.gpu_entry(label)
    return bool(entry) and entry.get("segment") == "jetson"


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


def _driver_fix(verdict: rules.Verdict, build: Build, commands: list[str]) -> str:
    parts = [f"Install NVIDIA driver {verdict.needs} or newer" if verdict.needs else "Install a newer NVIDIA driver"]
    if commands:
        parts.append(f"or a {NAMES.get(build.framework, build.framework)} build for a CUDA this driver supports (the command below)")
    return ", ".join(parts) + "."


def _arch_findings(stack: Stack, build: Build, label: str, cc: str) -> list[Finding]:
    if build.min_cc is not None:
        verdict = _min_cc_verdict(build, cc)
    elif build.arch_by_toolkit:
        verdict = _toolkit_major_verdict(build, cc)
    else:
        verdict = rules.build_runs_on(cc, build.sass, build.ptx)
        if verdict.status == rules.UNKNOWN and build.sass is None and build.framework == "jax":
            verdict = rules.Verdict(rules.UNKNOWN, "the oldest compute capability this JAX release's CUDA wheels support "
                                                     "is not known to gpudoctor's matrix")
    if _is_jetson(label) and verdict.status != rules.UNKNOWN:
        verdict = _on_tegra(build, cc, verdict)
    if verdict.status == rules.FAIL:
        commands = _install_commands(stack, build)
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


def _arch_unknown_fix(build: Build) -> str:
    if build.framework == "jax":
        return ("Update gpudoctor, or pass --matrix FILE with the release's extras and their min_compute_capability "
                "(JAX's installation guide states it per CUDA major).")
    how = {"torch": "torch.cuda.get_arch_list()", "tensorflow": "tf.sysconfig.get_build_info()['cuda_compute_capabilities']"}
    return ("Update gpudoctor, or pass --matrix FILE with the build's architecture lists (arch_list for machine code, "
            "ptx for PTX)" + (f"; on a machine with the build, {how[build.framework]} gives them." if build.framework in how else "."))


def _cited(release: dict, key: Optional[str]) -> str:
    """A source key of jax.json, as the words a finding quotes (the bundled file names them in "sources")."""
    if not key:
        return "JAX's installation guide"
    text = str((load_topic("jax").get("sources") or {}).get(key) or "")
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


def _toolkit_major_verdict(build: Build, cc: str) -> rules.Verdict:
    """CuPy compiles its kernels at run time with NVRTC of its CUDA major: the GPU must be one that major targets."""
    gpu = rules.version(cc)
    row = next((r for r in load_topic("cuda_targets")["entries"] if rules.version(r.get("compute_capability")) == gpu), None)
    if gpu is None or row is None or not build.cuda:
        return rules.Verdict(rules.UNKNOWN, f"the matrix does not know which CUDA releases target compute capability {cc}")
    major = int(build.cuda)
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
    return [finding("CMP007", f"no {build.label} wheel exists for Python {stack.python} (it supports {build.python_spec})",
                    detail="pip finds no matching distribution for this Python ('No matching distribution found').",
                    text="Use a Python version inside that range, or a release of the framework that supports this Python.",
                    severity=ERROR)]


def _cudnn_findings(stack: Stack, build: Build) -> list[Finding]:
    """A cuDNN the user says is in use (matrix check --cudnn) against what the build needs. TensorFlow
    and JAX check the cuDNN they load at start-up and refuse another major or an older minor than they
    were built with (JAX: "Outdated cuDNN installation found ... Minimum supported: 9100"); with the
    pip extras the right one comes along, so a --cudnn given means a different one is loaded. PyTorch
    wheels and CuPy bring or pin their own cuDNN, so a system cuDNN is not judged against them."""
    need = build.cudnn_built or build.cudnn_min
    if not stack.cudnn or not need or build.framework not in ("tensorflow", "jax"):
        return []
    ok = rules.cudnn_satisfies(stack.cudnn, need)
    if ok is not False:
        return []
    have, want = rules.version(stack.cudnn), rules.version(need)
    code = "FWK006" if have.major != want.major else "FWK007"
    return [finding(code, f"{build.label} refuses cuDNN {stack.cudnn}: it was built with cuDNN {need}",
                    detail=f"It checks at start-up: 'Loaded runtime CuDNN library: {stack.cudnn} but source was compiled with: "
                           f"{need}. CuDNN library needs to have matching major version and equal or higher minor version.'",
                    text=f"Use cuDNN {want.major}.x at {need} or newer"
                         + (" (pip install 'tensorflow[and-cuda]' brings the matching one)" if build.framework == "tensorflow" else
                            " (the non-local jax[cudaNN] extra brings the matching one)"),
                    severity=ERROR)]


def _cpu_only_findings(stack: Stack, build: Build) -> list[Finding]:
    """A CPU-only build where there is a GPU. An installed one is FWK001's (checks/frameworks.py, from
    the build's own facts); a hypothetical one (matrix check --torch X+cpu) is judged here."""
    if build.installed or not stack.gpus:
        return []
    commands = _install_commands(stack, build)
    return [finding("FWK001", f"{build.label} is a CPU-only build: it will not use the GPU",
                    text="Install the CUDA build for this driver and GPU" + (" (the command below)." if commands else
                                                                             ": none in the matrix fits; see `gpudoctor matrix suggest`."),
                    commands=commands)]


def _toolkit_findings(stack: Stack) -> list[Finding]:
    out = []
    if stack.driver or stack.driver_cuda:
        verdict = rules.driver_runs_cuda(stack.toolkit_cuda, stack.driver, stack.driver_cuda, stack.driver_os)
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
        verdict = rules.toolkit_targets(stack.toolkit_cuda, cc)
        if verdict.status == rules.FAIL:
            out.append(finding("CMP005", f"nvcc {stack.toolkit_cuda} cannot build code for {label} (compute capability {cc})",
                               detail=verdict.reason,
                               text="Extensions you compile here (flash-attn, custom ops) will lack code for this GPU. "
                                    "Use a toolkit that supports it."))
    return out


# --- what to install instead ----------------------------------------------------------------------

def _install_commands(stack: Stack, build: Build) -> list[str]:
    """A build of the same framework that runs here: the same release's CUDA variant when one fits, else
    the newest release that fits (driver, every GPU's architecture, Python). PyTorch and JAX only."""
    py = stack.python_executable
    if stack.os == "macos":
        return []
    if build.framework == "torch":
        choice = fitting_torch(stack, prefer=(build.release or {}).get("version"))
        if choice:
            release, variant = choice
            return [f"{py} -m pip install --force-reinstall 'torch=={release['version']}.*' --index-url {TORCH_INDEX}/{variant['name']}"]
    if build.framework == "jax" and build.release and not build.cpu_only:
        have = rules.major_minor(stack.driver_cuda)
        majors = sorted((int(m) for m in build.release.get("cuda_majors") or [] if str(m).isdigit()), reverse=True)
        fits = [m for m in majors if have is not None and have.major >= m and str(m) != build.cuda]
        if fits:
            return [f"{py} -m pip install -U 'jax[cuda{fits[0]}]=={build.version.partition('+')[0]}'"]
    return []


def fitting_torch(stack: Stack, prefer: Optional[str] = None) -> Optional[tuple[dict[str, Any], dict[str, Any]]]:
    """(release, variant) of the PyTorch build that runs on this stack: the ``prefer`` release first,
    then the newest; within a release the variant fully supported by the driver, else one it runs
    under minor-version compatibility; machine code for every GPU; a wheel for the Python."""
    releases = sorted(load_topic("pytorch")["entries"], key=lambda r: rules.version(r.get("version")) or rules.version("0"),
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
                status = rules.driver_runs_cuda(variant["cuda"], stack.driver, stack.driver_cuda, stack.driver_os).status
            else:
                status = rules.OK
            if status not in ranked:
                continue
            if all(rules.build_runs_on(cc, _flags(variant.get("arch_list")), _flags(variant.get("ptx"))).status == rules.OK
                   for _, cc in stack.gpus):
                ranked[status].append(variant)
        for status in (rules.OK, rules.LIMITED):
            if ranked[status]:
                return release, max(ranked[status], key=lambda v: rules.version(v["cuda"]))
    return None


# --- known-bad combinations (compat_matrix/known_bad.json) ---------------------------------------

def judge_known_bad(stack: Stack) -> list[Finding]:
    """Combinations recorded as broken whatever the version rules say, each with its source: CMP009 at
    the entry's severity. An entry's "when" may name: framework (torch, tensorflow, jax, cupy, or "cuda"
    for any CUDA build), version_range (a specifier on the release, major.minor), cc_range (a specifier
    on the GPU's compute capability), os (a list). A condition the stack does not state never matches."""
    try:
        sources = load_topic("known_bad").get("sources", {})
    except MatrixError:
        return []
    return [_known_bad_finding(entry, build, label, cc, stack, sources) for entry, build, label, cc in _known_bad_matches(stack)]


def _known_bad_matches(stack: Stack) -> list[tuple[dict[str, Any], Build, str, str]]:
    try:
        entries = load_topic("known_bad")["entries"]
    except MatrixError:
        return []
    out = []
    for entry in entries:
        when = entry.get("when") or {}
        for build in stack.builds:
            for gpu_label, cc in (stack.gpus if "cc_range" in when else [("", "")]):
                if _matches(when, build, cc, stack):
                    out.append((entry, build, gpu_label, cc))
    return out


def _matches(when: dict[str, Any], build: Build, cc: str, stack: Stack) -> bool:
    fw = when.get("framework")
    if build.installed and not stack.gpus:
        return False  # a machine with no NVIDIA GPU in view: no GPU use is expected of what it has installed
    if fw == "cuda":
        if build.cpu_only:
            return False  # a CPU build (macOS's own torch) never asks for CUDA
    elif fw and fw != build.framework:
        return False
    if "cc_range" in when and build.cpu_only:
        return False  # a CPU-only build does not touch the GPU (FWK001 speaks for it)
    if "os" in when and stack.os not in (when["os"] or []):
        return False
    if "version_range" in when and not _in_spec(build.version.partition("+")[0], when["version_range"]):
        return False
    if "cc_range" in when and not _in_spec(cc, when["cc_range"]):
        return False
    return True


def _in_spec(value: str, spec: Any) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # 50 ms to import: only when judged

    v = rules.major_minor(value)
    try:
        return v is not None and isinstance(spec, str) and v in SpecifierSet(spec)
    except InvalidSpecifier:
        return False


def _known_bad_finding(entry: dict[str, Any], build: Build, gpu_label: str, cc: str, stack: Stack,
                       sources: dict[str, str]) -> Finding:
    fields = {"build": build.label, "gpu": gpu_label, "cc": cc, "os": _os_label(stack.os)}
    try:
        title = str(entry.get("message", "")).format(**fields)
        fix = str(entry.get("fix", "")).format(**fields)
    except (KeyError, IndexError, ValueError):
        title, fix = str(entry.get("message", "")), str(entry.get("fix", ""))
    links = [u for u in (re.search(r"https?://\S+", sources.get(k, "")) for k in [entry.get("source")] + list(entry.get("see_also") or []))
             if u]
    severity = entry.get("severity") if entry.get("severity") in (ERROR, WARNING) else ERROR
    detail = str(entry.get("detail", "")) + (f" (known-bad entry {entry.get('id')}, as of {entry.get('as_of')})")
    return finding("CMP009", title, detail=detail.strip(), text=fix, commands=[c.replace("python3", stack.python_executable, 1)
                   if c.startswith("python3 ") else c for c in entry.get("fix_commands") or []],
                   links=[m.group(0).rstrip(").,;") for m in links], severity=severity)


# --- from a snapshot ------------------------------------------------------------------------------

def stack_from_facts(facts: Facts) -> Stack:
    """The stack a snapshot describes. Only the compute capabilities of the GPUs a CUDA program sees
    there (views/visibility.py resolve) are judged."""
    from gpudoctor.views.visibility import resolve

    raw = known(get(facts, "nvml.cuda_driver_version"))
    host_os = str(get(facts, "host.os") or "")
    os_name = {"Linux": "linux", "Windows": "windows", "Darwin": "macos"}.get(host_os)
    if os_name == "linux" and get(facts, "host.wsl") is True:
        os_name = "wsl"
    stack = Stack(
        driver=known(get(facts, "nvml.driver_version")),
        driver_cuda=rules.parse_driver_cuda(raw) if isinstance(raw, int) and raw > 0 else None,
        python=get(facts, "python.version"),
        python_executable=str(get(facts, "python.executable") or "python3"),
        os=os_name,
    )
    by_index = {g.get("index"): g for g in facts.get("gpus") or []}
    for dev in resolve(facts).devices:
        cc = known((by_index.get(dev.gpu_index) or {}).get("compute_capability"))
        if isinstance(cc, str):
            stack.gpus.append((f"GPU {dev.gpu_index} ({dev.name})", cc))
    for name, fw in (facts.get("frameworks") or {}).items():
        build = _build_from_probe(name, fw or {}, facts, stack)
        if build:
            stack.builds.append(build)
    nvcc = get(facts, "toolkit.nvcc") or {}
    if nvcc.get("found") and isinstance(known(nvcc.get("release")), str):
        stack.toolkit_cuda = nvcc["release"]
    return stack


def _build_from_probe(name: str, fw: dict[str, Any], facts: Facts, stack: Stack) -> Optional[Build]:
    """The installed build: what it said about itself, completed from the matrix (architectures when
    it was only read from package metadata). Unknown to the matrix is not an error here: the build
    exists, so only its own facts are judged."""
    info = fw.get("info") or {}
    if fw.get("status") not in ("ok", "metadata") or name not in NAMES:
        return None
    version = str(info.get("version") or "")
    label = f"{NAMES[name]} {version}"
    if info.get("cpu_only_build") is True:
        return Build(label, name, None, version=version, cpu_only=True, installed=True)
    # package metadata may name only the CUDA major it targets (a cu13 requirement): judged as a major
    cuda = info.get("built_cuda") or (info.get("cuda_major") if info.get("cuda_build") is True else None)
    if name in ("jax", "cupy"):
        cuda = cuda or _package_cuda_major(name, facts)
    scratch = Stack(os=stack.os)  # what the matrix does not know is not reported for an installed build
    try:
        from_matrix = build_from_matrix(name, _matrix_version(name, version, cuda, facts), scratch, installed=True) if version else None
    except MatrixError:
        from_matrix = None
    arch = info.get("arch_list")
    real_arch = [a for a in arch if isinstance(a, str)] if isinstance(arch, list) and arch else None
    build = Build(label, name, cuda, arch_list=real_arch or [], version=version, installed=True,
                  ran=fw.get("status") == "ok" and info.get("cuda_available") is True, arch_measured=real_arch is not None)
    # PyPI's lists in the matrix are the x86_64 wheels'; an Arm machine's wheels are built for other archs
    x86 = str(get(facts, "host.machine") or "x86_64").lower() in ("x86_64", "amd64")
    if from_matrix is not None and not from_matrix.cpu_only:
        build.release, build.python_spec = from_matrix.release, from_matrix.python_spec
        build.min_cc, build.arch_by_toolkit = from_matrix.min_cc, from_matrix.arch_by_toolkit
        if real_arch is None and x86 and _same_cuda(from_matrix.cuda, cuda):
            build.sass, build.ptx = from_matrix.sass, from_matrix.ptx
    return build  # without a CUDA version only the known-bad combinations can judge it


def _matrix_version(name: str, version: str, cuda: Optional[str], facts: Facts) -> str:
    if name == "cupy":
        dist = next((d.get("name") for d in get(facts, "python.distributions") or [] if str(d.get("name", "")).startswith("cupy-cuda")), None)
        m = re.match(r"^cupy-(cuda\d+x)$", str(dist or ""))
        return f"{version}+{m.group(1)}" if m else (f"{version}+cuda{cuda}x" if cuda and "." not in cuda else version)
    if name == "jax" and cuda:
        return f"{version}+cuda{str(cuda).split('.')[0]}"
    return version


def _same_cuda(a: Optional[str], b: Optional[str]) -> bool:
    va, vb = rules.major_minor(a), rules.major_minor(b)
    return va is not None and va == vb


def _package_cuda_major(name: str, facts: Facts) -> Optional[str]:
    """jax-cuda13-plugin, cupy-cuda13x: the CUDA major is in the package name."""
    for dist in get(facts, "python.distributions") or []:
        m = re.match(r"^(?:jax-cuda(\d+)-plugin|cupy-cuda(\d+)x)$", dist.get("name", ""))
        if m and dist["name"].startswith("jax" if name == "jax" else "cupy"):
            return m.group(1) or m.group(2)
    return None
