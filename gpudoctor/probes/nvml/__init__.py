"""The NVML probe: driver, every GPU and the links between them, read in a child process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from gpudoctor.snapshot import is_unavailable, unavailable

if TYPE_CHECKING:
    from gpudoctor.procs.scope import RunScope

WORKER = "gpudoctor.probes.nvml.worker"
#: What the NVML probe offers its facts as in the run's scope: the smoke probe takes the list of GPUs CUDA
#: will enumerate from them instead of starting CUDA in a process that sees every GPU (probes/smoke/listing.py).
FACTS_OFFER = "nvml facts"


def probe_nvml(timeout_s: float = 15.0, quick: bool = False, scope: Optional[RunScope] = None) -> dict[str, Any]:
    """Facts for the ``nvml``, ``gpus`` and ``topology`` sections of the snapshot, offered to the other probes
    of the run ``scope``; ``quick`` (``check --quick``) leaves unread what only slow per-link calls can read
    (the worker's ``--quick``)."""
    from gpudoctor.procs.child import run_module  # here: the worker's own start (this package) needs none of it

    future = scope.offer(FACTS_OFFER) if scope is not None else None
    try:
        child = run_module(WORKER, ("--quick",) if quick else (), timeout_s=timeout_s)
        facts = assemble(child.lines, child.timed_out, child.returncode, child.stderr_tail, child.start_error)
    except BaseException as exc:
        if future is not None:
            future.set_exception(exc)
        raise
    if future is not None:
        future.set_result(facts)
    return facts


def published_facts(scope: RunScope, wait_s: float) -> Optional[dict[str, Any]]:
    """The NVML facts of the run ``scope``, once its NVML probe has them (waiting ``wait_s`` at most); None
    when no NVML probe runs in it, or it failed or did not finish in time. Read only: the same dictionary
    becomes the snapshot's."""
    return scope.offered(FACTS_OFFER, wait_s)


def assemble(lines: list[dict[str, Any]], timed_out: bool, returncode: Any, stderr_tail: str,
             start_error: str = "") -> dict[str, Any]:
    nvml: dict[str, Any] = {"timed_out": timed_out}
    gpus: list[dict[str, Any]] = []
    pairs: list[dict[str, Any]] = []
    last_progress = ""
    finished = False
    for line in lines:
        section = line.get("section")
        data: Any = line.get("data")  # as the worker wrote it
        if section == "progress":
            last_progress = str(data)
        elif section in ("bindings", "init"):
            nvml[section] = data
        elif section == "system":
            nvml.update(data)
        elif section == "gpu":
            gpus.append(data)
        elif section == "topology":
            pairs = data
        elif section == "end":
            nvml["missing_functions"] = data.get("missing_functions", [])
            finished = True
    if not finished:
        nvml["incomplete"] = {
            "while": last_progress or "starting",
            "reason": "timeout" if timed_out else "not_started" if start_error and not lines else "crashed",
            "returncode": returncode,
            "stderr_tail": stderr_tail or start_error,
        }
    _mark_unread_gpus(nvml, gpus, timed_out)
    for gpu in gpus:
        _fill_architecture(gpu)
    for pair in pairs:
        pair["nvlink_count"] = nvlink_count(gpus, *pair["gpus"])
    return {"nvml": nvml, "gpus": gpus, "topology": {"pairs": pairs}}


def _fill_architecture(gpu: dict[str, Any]) -> None:
    """Older drivers lack nvmlDeviceGetArchitecture; the compute capability still names the architecture. The
    bundled matrix names it, never a --matrix file: a fact is what the machine has, the same whatever files
    the run is judged with."""
    from gpudoctor.compat.data import BUNDLED, architecture_for  # here: the worker, this package's child, needs none of it

    cc = gpu.get("compute_capability")
    if is_unavailable(gpu.get("architecture")) and isinstance(cc, str):
        arch = architecture_for(BUNDLED, cc)
        if arch:
            gpu["architecture"] = arch
            gpu["architecture_source"] = "compat_matrix"


def _mark_unread_gpus(nvml: dict[str, Any], gpus: list[dict[str, Any]], timed_out: bool) -> None:
    """GPUs NVML counted but the worker never reported get an explicit absence, so no GPU silently vanishes."""
    count = nvml.get("device_count")
    if not isinstance(count, int):
        return
    seen = {g.get("index") for g in gpus}
    for index in range(count):
        if index not in seen:
            gpus.append({"index": index, "handle": unavailable("timeout" if timed_out else "unknown")})
    gpus.sort(key=lambda g: g.get("index", 0))


def nvlink_count(gpus: list[dict[str, Any]], a: int, b: int) -> int:
    """Active NVLinks joining GPUs a and b, as ``nvidia-smi topo -m`` counts them (NV#).

    Links to an NVSwitch join every GPU on the fabric, so a pair behind switches counts the
    smaller of the two GPUs' switch links; direct links count where the far end is the peer.
    """
    by_index = {g.get("index"): g for g in gpus}
    ga, gb = by_index.get(a, {}), by_index.get(b, {})
    la, lb = _active_links(ga), _active_links(gb)
    bus_b = _bus(gb)
    direct = sum(1 for link in la if link.get("remote_type") == "gpu" and _same_bus(link.get("remote_bus_id"), bus_b))
    switch_a = sum(1 for link in la if link.get("remote_type") == "switch")
    switch_b = sum(1 for link in lb if link.get("remote_type") == "switch")
    return direct + (min(switch_a, switch_b) if switch_a and switch_b else 0)


def _active_links(gpu: dict[str, Any]) -> list[dict[str, Any]]:
    nvlink = gpu.get("nvlink")
    if not isinstance(nvlink, dict) or is_unavailable(nvlink):
        return []
    return [link for link in nvlink.get("links", []) if link.get("active")]


def _bus(gpu: dict[str, Any]) -> str:
    pci = gpu.get("pci") or {}
    bus = pci.get("bus_id")
    return bus if isinstance(bus, str) else ""


def _same_bus(x: Any, y: str) -> bool:
    """Compare PCI addresses whatever their domain width ("00000000:19:00.0" vs "0000:19:00.0")."""
    return isinstance(x, str) and bool(y) and x[-12:].lower() == y[-12:].lower()
