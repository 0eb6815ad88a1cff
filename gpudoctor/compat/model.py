"""The model every compatibility judgement shares: a Stack (driver, GPUs, OS, Python, each consumer of
CUDA as a Build), and the host finding this layer makes from the code catalogue (checks/base.py's
constructor, which this package may not import). compat/stack.py judges a Stack by the rules,
compat/known_bad.py by the sourced known-bad combinations; compat/from_facts.py builds one from a
snapshot, compat/queries.py from `matrix check`'s options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from gpudoctor.codes import lookup
from gpudoctor.findings import Finding, Remediation, Subject

Facts = dict[str, Any]


def finding(code: str, title: str, detail: str = "", text: str = "", commands: Sequence[str] = (),
            links: Sequence[str] = (), severity: Optional[str] = None) -> Finding:
    """A host finding of ``code`` at the catalogue's severity unless one is given (checks/base.py's
    constructor, which this layer may not import)."""
    return Finding(code=code, severity=severity or lookup(code).severity, title=title, detail=detail, subject=Subject(),
                   remediation=Remediation(text=text, commands=tuple(commands), links=tuple(links)))


COMPAT_DOCS = "https://docs.nvidia.com/deploy/cuda-compatibility/"
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
    ptx_floor: Optional[str] = None  # PTX not known, but none of it older than this ("compute_120")
    ptx_floor_why: str = ""  # what bounds it, as a finding quotes it
    min_cc: Optional[str] = None  # a stated minimum compute capability instead of a list (JAX wheels)
    min_cc_source: str = "JAX's installation guide"  # where that minimum is stated
    arch_by_toolkit: bool = False  # kernels compiled at run time by NVRTC of its CUDA major (CuPy)
    cudnn_built: Optional[str] = None  # the cuDNN it was built with (TensorFlow): runtime needs same major, >= minor
    cudnn_min: Optional[str] = None  # the oldest cuDNN it accepts (JAX)
    cudnn_floors: list[str] = field(default_factory=list)  # JAX: the floors of the wheels the version may be
    cudnn_loaded: Optional[str] = None  # the cuDNN its own process loaded (an installed build)
    cpu_only: bool = False
    installed: bool = False  # read from this machine (a wheel exists), not a hypothetical install
    arch_measured: bool = False  # sass/ptx are what the build itself said (not the matrix's list for its wheel)
    ran: bool = False  # installed, imported and it reached the GPU: an unknown architecture list is moot
    cuda_started: bool = False  # a paste shows CUDA started under it (is_available() True): the driver runs it
    release: Optional[dict[str, Any]] = None  # its matrix entry, when known
    package: str = "wheel"  # what a Python version is judged for: a pip "wheel" or a "conda package"

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
    gpus_named: bool = False  # a GPU is there, even if its compute capability is not known (a ticket names it)
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


def _os_label(os_name: Optional[str]) -> str:
    return {"windows": "Windows", "macos": "macOS", "wsl": "WSL", "linux": "Linux"}.get(os_name or "", "this OS")

