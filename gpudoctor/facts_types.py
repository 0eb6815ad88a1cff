"""Typed views of the snapshot's ``nvml``, ``gpus`` and ``frameworks`` sections, for mypy.

The snapshot stays plain JSON data (snapshot.py says why); these TypedDicts only name its keys, so that
a reader annotated with them (``gpu: GpuFacts``) gets a mypy error for a mistyped key instead of a
silent None at run time. They describe docs/report-format.md, and tests/test_facts_types.py holds them
equal to ``snapshot.SHAPE`` (the types ``report.load`` enforces) for these sections.

Every key is optional (``total=False``): a section holds what its probe got to, and a paste's facts
hold less. Any fact may instead be absent, ``{"unavailable": REASON}``: a value typed ``Fact[...]``
is the value or an ``Absent``, and an object-valued fact carries the ``unavailable`` and ``error`` keys
of its absent form, so that reading it needs no cast. This module imports only ``typing``: every
floor of the package may use it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict, TypeVar, Union


class _AbsentReason(TypedDict):
    unavailable: str


class Absent(_AbsentReason, total=False):
    """An absent fact (snapshot.unavailable): why it is absent, and the error that says so."""

    error: str


T = TypeVar("T")

#: A fact that is either its value or an absent fact.
Fact = Union[T, Absent]


class NvmlInit(TypedDict, total=False):
    ok: bool
    reason: str
    code: Optional[int]
    message: str
    library_version: str  # a paste's "NVML library version: X" under a driver/library mismatch


class NvmlFacts(TypedDict, total=False):
    """``facts.nvml``: the driver as NVML reports it (probes/nvml/)."""

    timed_out: bool
    bindings: Dict[str, Any]
    init: NvmlInit
    driver_version: Fact[str]
    nvml_version: Fact[str]
    cuda_driver_version: Fact[int]
    device_count: Fact[int]
    missing_functions: List[str]
    incomplete: Dict[str, Any]
    source: str  # only in analyze's report of a paste


class GpuPci(TypedDict, total=False):
    bus_id: Fact[str]
    device_id: Fact[str]
    subsystem_id: Fact[str]
    unavailable: str
    error: str


class GpuPcie(TypedDict, total=False):
    gen_current: Fact[int]
    gen_max: Fact[int]
    gen_gpu_max: Fact[int]
    width_current: Fact[int]
    width_max: Fact[int]
    unavailable: str
    error: str


class GpuMemory(TypedDict, total=False):
    total_bytes: Fact[int]
    used_bytes: Fact[int]
    free_bytes: Fact[int]
    reserved_bytes: Fact[int]
    unavailable: str
    error: str


class GpuTemperature(TypedDict, total=False):
    current_c: Fact[float]
    slowdown_c: Fact[float]
    shutdown_c: Fact[float]
    unavailable: str
    error: str


class GpuPower(TypedDict, total=False):
    draw_mw: Fact[float]
    limit_mw: Fact[float]
    unavailable: str
    error: str


class GpuUtilization(TypedDict, total=False):
    gpu_percent: Fact[float]
    memory_percent: Fact[float]
    unavailable: str
    error: str


class GpuEcc(TypedDict, total=False):
    current: Fact[str]
    pending: Fact[str]
    uncorrected_volatile: Fact[int]
    uncorrected_aggregate: Fact[int]
    unavailable: str
    error: str


class GpuRemappedRows(TypedDict, total=False):
    corrected: Fact[int]
    uncorrected: Fact[int]
    pending: Fact[bool]
    failure: Fact[bool]
    unavailable: str
    error: str


class GpuClockEventReasons(TypedDict, total=False):
    mask: Fact[int]
    active: List[str]
    unavailable: str
    error: str


class GpuMig(TypedDict, total=False):
    current: Fact[str]
    pending: Fact[str]
    devices: List[Dict[str, Any]]
    unavailable: str
    error: str


class NvLink(TypedDict, total=False):
    link: int
    active: Fact[bool]
    remote_bus_id: Fact[str]
    remote_type: Fact[str]


class GpuNvlink(TypedDict, total=False):
    count: Fact[int]
    active_count: Fact[int]
    links: List[NvLink]
    unavailable: str
    error: str


class NvlinkErrors(TypedDict, total=False):
    link: int
    replay: Fact[int]
    recovery: Fact[int]
    crc_flit: Fact[int]
    crc_data: Fact[int]


class NvlinkErrorTotals(TypedDict, total=False):
    """A GPU's NVLink error counts summed over its links."""

    replay: int
    recovery: int
    crc_flit: int
    crc_data: int
    unavailable: str
    error: str


class GpuCounters(TypedDict, total=False):
    uptime_s: Fact[float]
    pcie_replay: Fact[int]
    nvlink_errors: Union[List[NvlinkErrors], NvlinkErrorTotals]  # per link: no totals kept, or an older report
    nvlink_errors_unread: str  # "quick": per-link counts left to the full check
    violation_ns: Dict[str, int]
    unavailable: str
    error: str


class GpuFabric(TypedDict, total=False):
    state: Fact[str]
    status: Fact[str]
    health_summary: Fact[str]
    api: str
    unavailable: str
    error: str


class GpuProcess(TypedDict, total=False):
    pid: int
    name: Fact[str]
    type: str
    used_memory_bytes: Fact[int]


class GpuFacts(TypedDict, total=False):
    """One entry of ``facts.gpus``: a GPU as ``nvidia-smi -q -i N`` shows it, or, for a GPU NVML counted
    but could not open, only ``index`` and ``handle``."""

    index: int
    handle: Absent
    name: Fact[str]
    uuid: Fact[str]
    serial: Fact[str]
    architecture: Fact[str]
    architecture_source: str
    compute_capability: Fact[str]
    compute_capability_source: str
    compute_mode: Fact[str]
    persistence_mode: Fact[str]
    vbios_version: Fact[str]
    minor_number: Fact[int]
    cpu_affinity: Fact[str]
    numa_affinity: Fact[str]
    pci: GpuPci
    pcie: GpuPcie
    memory: GpuMemory
    temperature: GpuTemperature
    power: GpuPower
    utilization: GpuUtilization
    ecc: GpuEcc
    remapped_rows: GpuRemappedRows
    retired_pages: Dict[str, Any]
    clock_event_reasons: GpuClockEventReasons
    mig: GpuMig
    nvlink: GpuNvlink
    counters: GpuCounters
    fabric: GpuFabric
    processes: Fact[List[GpuProcess]]
    source: str  # only in analyze's report of a paste
    stated: bool  # only from a paste: the GPU was named in words, not listed by a tool


class FrameworkDevice(TypedDict, total=False):
    index: int
    name: str
    compute_capability: str
    uuid: str


class FrameworkInfo(TypedDict, total=False):
    """What a framework's child process answered (probes/frameworks/worker.py), or, with ``check --quick``
    and pastes, what its package or the paste says (probes/frameworks/metadata.py, pastes/to_facts.py)."""

    version: str
    version_unknown: str  # why no version could be read (check --quick)
    cpu_only_build: Optional[bool]
    cuda_build: Optional[bool]
    backend: Optional[str]
    built_cuda: Optional[str]
    built_hip: Optional[str]
    built_cudnn: Optional[str]
    cuda_major: Optional[str]
    arch_list: List[str]
    arch_list_source: str
    cuda_available: bool
    devices: List[FrameworkDevice]
    init_error: str
    warnings: List[str]
    runtime_cudnn: Fact[str]
    runtime_nccl: Fact[str]
    runtime_cuda: Fact[str]
    driver_cuda: Fact[Union[int, str]]
    smoke: Fact[float]
    jaxlib_version: str
    default_backend: str
    plugins: List[Any]
    import_and_probe_s: float
    import_error: str
    traceback_tail: str
    module_file: Optional[str]
    pythonpath_entry: str
    loaded_libraries: List[Dict[str, Any]]
    pinned: Dict[str, Any]
    distribution: Optional[str]
    cuda_packages_installed: Optional[bool]
    evidence: List[Any]
    source: str


class FrameworkFacts(TypedDict, total=False):
    """One value of ``facts.frameworks``, keyed by the framework's key (``torch``, ``tensorflow``, ...)."""

    installed: bool
    status: str
    error: str
    stage: Optional[str]
    signal: Optional[str]
    last_error: str
    started: bool
    duration_s: float
    stderr_tail: str
    info: FrameworkInfo
    source: str  # only in analyze's report of a paste


#: ``facts.frameworks``: one entry per framework key.
FrameworksFacts = Dict[str, FrameworkFacts]
