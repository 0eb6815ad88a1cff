"""The snapshot: every fact the probes gathered, as plain JSON-ready data.

Facts are kept as plain dicts and lists (not classes) so that a report saved on one machine
loads unchanged on another, old reports stay readable, and tests can derive a fault from a
real recording by changing one value. The layout is documented in docs/report-format.md.

A fact that could not be read is never None, "N/A" or NaN: it is ``{"unavailable": REASON}``,
REASON one of ``REASONS``, so that a check can tell "the GPU does not support this" from "we were
not allowed to ask". It may carry the error message that explains it (``"error"``), which findings
quote and nothing parses. The same words say why a probe was stopped (``stopped_by``): data, never
a sentence to search; the sentence older reports carried instead is read in that one place.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional, cast

from gpudoctor.status import PROBE_TIMEOUT, STOPPED_DEADLINE, STOPPED_TIMEOUT

if TYPE_CHECKING:
    from typing_extensions import TypeGuard  # typing has it from Python 3.10

    from gpudoctor.facts_types import Absent, GpuFacts

SCHEMA_VERSION = 1

#: Reasons an absent fact may carry. NVML's own error names map onto the first group.
REASONS = (
    "not_supported",
    "no_permission",
    "function_not_found",
    "gpu_lost",
    "driver_not_loaded",
    "library_not_found",
    "timeout",
    "not_applicable",
    "not_found",
    "unknown",
    STOPPED_DEADLINE,  # the run's --timeout deadline passed first (a probe record's reason)
)


def unavailable(reason: str, error: Optional[str] = None) -> dict[str, str]:
    """The one representation of an absent fact, with the error message that explains it if there is one."""
    return {"unavailable": reason} if error is None else {"unavailable": reason, "error": error}


def is_unavailable(value: Any) -> TypeGuard[Absent]:
    return isinstance(value, dict) and "unavailable" in value and set(value) <= {"unavailable", "error"}


#: The ``error`` runner.py gives a probe stopped at the --timeout deadline. Reports saved before probe
#: records carried ``reason`` say it only with this sentence; stopped_by reads it for them, nothing else does.
DEADLINE_SENTENCE = "unfinished when the --timeout deadline passed"


def stopped_by(record: Any) -> Optional[str]:
    """Why a probe record (``facts.probes.<name>``) says the probe was stopped: "deadline" (the run's
    --timeout deadline passed), "timeout" (it overran its own limit), or None (it was not stopped).
    A record of an older report has no ``reason``: there, the deadline's sentence says "deadline"."""
    if not isinstance(record, Mapping) or record.get("status") != PROBE_TIMEOUT:
        return None
    reason = record.get("reason")
    if reason in (STOPPED_DEADLINE, STOPPED_TIMEOUT):
        return reason
    return STOPPED_DEADLINE if record.get("error") == DEADLINE_SENTENCE else STOPPED_TIMEOUT


def known(value: Any) -> Any:
    """The value itself, or None when it is absent for any reason (for checks that only care whether it is known)."""
    return None if is_unavailable(value) else value


def as_object(value: Any) -> dict[str, Any]:
    """The value if it is an object, else an empty one: for a reader of a report that may hold anything there."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """The value if it is an array, else an empty one: for a reader of a report that may hold anything there."""
    return value if isinstance(value, list) else []


def get(facts: Mapping[str, Any], path: str, default: Any = None) -> Any:
    """Read ``facts`` at a dotted path ("nvml.driver_version", "gpus.0.name"); absent parts give ``default``."""
    node: Any = facts
    for part in path.split("."):
        if (type(node) is dict or isinstance(node, Mapping)) and part in node:  # a dict first: the ABC test is slow
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return default
    return node



def gpus(facts: Mapping[str, Any]) -> Iterator[GpuFacts]:
    """The GPUs NVML listed, skipping entries that could not be read at all."""
    for gpu in facts.get("gpus") or []:
        if isinstance(gpu, dict) and "index" in gpu:
            yield cast("GpuFacts", gpu)


def job_nodes(facts: Any) -> list[dict[str, Any]]:
    """The other nodes of a torchrun job whose own reports ``facts.cluster.nodes`` carries (each with a
    ``report`` holding ``facts``)."""
    nodes = get(facts, "cluster.nodes") if isinstance(facts, Mapping) else None
    return [n for n in nodes if isinstance(n, dict) and isinstance(n.get("report"), dict)
            and isinstance(n["report"].get("facts"), dict)] if isinstance(nodes, list) else []


# --- the shape of a saved report ------------------------------------------------------------------
#
# ``report.load`` refuses a report whose values have types the checks and renderers cannot work with
# (``"gpus": [{"index": "x"}]``), with one line naming the field, instead of letting a check or
# renderer raise on it. Only the paths below are checked; any other key is ignored, as
# docs/report-format.md promises for keys a reader does not know. Under ``facts`` every value may also
# be an absent fact (``{"unavailable": REASON}``), and a whole section (``facts.gpus``) may be null.
# Types: obj, list, str, int (not a boolean), num (an int or a finite float), bool, null; alternatives
# joined by "|". A path's ``[]`` is every item of a list, ``*`` every value of an object.

#: The deepest nesting a report may have: a real one is at most 14 deep (a torchrun job's report holds
#: each node's report); 500 nested arrays made redaction and rendering recurse past Python's limit.
MAX_DEPTH = 64

_NUM, _INT, _STR, _BOOL, _OBJ, _LIST = "num", "int", "str", "bool", "obj", "list"

SHAPE: dict[str, str] = {
    "tool": _OBJ, "tool.name": _STR, "tool.version": _STR, "created": "str|null", "redacted": _BOOL,
    "checks": _LIST, "checks[]": _OBJ, "findings": _LIST, "findings[]": _OBJ,
    "findings[].code": _STR, "findings[].title": _STR, "findings[].severity": _STR, "findings[].subject": _OBJ,
    "summary": _OBJ,
    "facts.probes": "obj|null", "facts.probes.*": _OBJ, "facts.probes.*.status": _STR,
    "facts.options": "obj|null", "facts.options.only": _LIST, "facts.options.only[]": _STR,
    "facts.options.skip": _LIST, "facts.options.skip[]": _STR, "facts.options.require_gpus": _INT,
    # host
    "facts.host": "obj|null", "facts.host.hostname": _STR, "facts.host.kernel": _STR, "facts.host.os": _STR,
    "facts.host.distro": _STR, "facts.host.machine": _STR, "facts.host.wsl": _BOOL,
    "facts.host.env": _OBJ, "facts.host.env.*": "str|null", "facts.host.framework_env": _OBJ,
    "facts.host.framework_env.*": "str|null", "facts.host.python": _OBJ, "facts.host.python.version": _STR,
    "facts.host.python.executable": _STR, "facts.host.container": _OBJ, "facts.host.container.detected": _BOOL,
    "facts.host.container.markers": _LIST, "facts.host.container.markers[]": _STR,
    "facts.host.container.dev_shm_bytes": _INT, "facts.host.limits": _OBJ, "facts.host.limits.*": "int|null",
    # driver
    "facts.driver": "obj|null", "facts.driver.kernel_module": _OBJ, "facts.driver.kernel_module.loaded": _BOOL,
    "facts.driver.kernel_module.version": _STR, "facts.driver.kernel_module.flavour": _STR,
    "facts.driver.kernel_module.text": _STR, "facts.driver.nouveau_loaded": _BOOL,
    "facts.driver.device_nodes": _OBJ, "facts.driver.device_nodes.*": _OBJ,
    "facts.driver.device_nodes.*.exists": _BOOL, "facts.driver.device_nodes.*.accessible": _BOOL,
    "facts.driver.nvml_library_files": _LIST, "facts.driver.nvml_library_files[]": _STR,
    "facts.driver.pci_devices": _LIST, "facts.driver.pci_devices[]": _OBJ,
    "facts.driver.pci_devices[].bus_id": _STR, "facts.driver.pci_devices[].driver": "str|null",
    "facts.driver.pci_devices[].device_id": _STR, "facts.driver.pci_devices[].class": _STR,
    "facts.driver.legacy_notices": _OBJ, "facts.driver.legacy_notices.read": _BOOL, "facts.driver.legacy_notices.reason": _STR,
    "facts.driver.legacy_notices.notices": _LIST, "facts.driver.legacy_notices.notices[]": _OBJ,
    "facts.driver.legacy_notices.notices[].name": _STR, "facts.driver.legacy_notices.notices[].branch": _STR,
    "facts.driver.legacy_notices.notices[].driver": "str|null",
    # the kernel log's Xid and driver errors (probes/driver_events.py)
    "facts.kernel_log": "obj|null", "facts.kernel_log.read": _BOOL, "facts.kernel_log.source": _STR,
    "facts.kernel_log.reason": _STR, "facts.kernel_log.uptime_s": "num|null", "facts.kernel_log.boot_time": "num|null",
    "facts.kernel_log.complete": _BOOL, "facts.kernel_log.tried": _LIST, "facts.kernel_log.tried[]": _OBJ,
    "facts.kernel_log.events": _LIST, "facts.kernel_log.events[]": _OBJ, "facts.kernel_log.events[].xid": _INT,
    "facts.kernel_log.events[].time_s": _NUM, "facts.kernel_log.events[].bus_id": _STR,
    "facts.kernel_log.events[].text": _STR, "facts.kernel_log.errors": _LIST, "facts.kernel_log.errors[]": _OBJ,
    "facts.kernel_log.errors[].time_s": _NUM, "facts.kernel_log.errors[].text": _STR,
    "facts.kernel_log.module_loaded_s": "num|null",
    # nvml
    "facts.nvml": "obj|null", "facts.nvml.init": _OBJ, "facts.nvml.init.ok": _BOOL, "facts.nvml.init.reason": _STR,
    "facts.nvml.driver_version": _STR, "facts.nvml.nvml_version": _STR, "facts.nvml.cuda_driver_version": _INT,
    "facts.nvml.device_count": _INT, "facts.nvml.timed_out": _BOOL, "facts.nvml.missing_functions": _LIST,
    "facts.nvml.missing_functions[]": _STR, "facts.nvml.bindings": _OBJ,
    # gpus
    "facts.gpus": "list|null", "facts.gpus[]": _OBJ, "facts.gpus[].index": _INT, "facts.gpus[].name": _STR,
    "facts.gpus[].uuid": _STR, "facts.gpus[].serial": _STR, "facts.gpus[].architecture": _STR,
    "facts.gpus[].compute_capability": _STR, "facts.gpus[].compute_mode": _STR,
    "facts.gpus[].persistence_mode": _STR, "facts.gpus[].vbios_version": _STR, "facts.gpus[].minor_number": _INT,
    "facts.gpus[].cpu_affinity": _STR, "facts.gpus[].numa_affinity": _STR,
    "facts.gpus[].pci": _OBJ, "facts.gpus[].pci.bus_id": _STR, "facts.gpus[].pci.device_id": _STR,
    "facts.gpus[].pcie": _OBJ, "facts.gpus[].pcie.gen_current": _INT, "facts.gpus[].pcie.gen_max": _INT,
    "facts.gpus[].pcie.gen_gpu_max": _INT, "facts.gpus[].pcie.width_current": _INT, "facts.gpus[].pcie.width_max": _INT,
    "facts.gpus[].memory": _OBJ, "facts.gpus[].memory.total_bytes": _INT, "facts.gpus[].memory.used_bytes": _INT,
    "facts.gpus[].memory.free_bytes": _INT, "facts.gpus[].memory.reserved_bytes": _INT,
    "facts.gpus[].temperature": _OBJ, "facts.gpus[].temperature.current_c": _NUM,
    "facts.gpus[].temperature.slowdown_c": _NUM, "facts.gpus[].temperature.shutdown_c": _NUM,
    "facts.gpus[].power": _OBJ, "facts.gpus[].power.draw_mw": _NUM, "facts.gpus[].power.limit_mw": _NUM,
    "facts.gpus[].utilization": _OBJ, "facts.gpus[].utilization.gpu_percent": _NUM,
    "facts.gpus[].utilization.memory_percent": _NUM,
    "facts.gpus[].ecc": _OBJ, "facts.gpus[].ecc.current": _STR, "facts.gpus[].ecc.pending": _STR,
    "facts.gpus[].ecc.uncorrected_volatile": _INT, "facts.gpus[].ecc.uncorrected_aggregate": _INT,
    "facts.gpus[].remapped_rows": _OBJ, "facts.gpus[].remapped_rows.corrected": _INT,
    "facts.gpus[].remapped_rows.uncorrected": _INT, "facts.gpus[].remapped_rows.pending": _BOOL,
    "facts.gpus[].remapped_rows.failure": _BOOL, "facts.gpus[].retired_pages": _OBJ,
    "facts.gpus[].clock_event_reasons": _OBJ, "facts.gpus[].clock_event_reasons.mask": _INT,
    "facts.gpus[].clock_event_reasons.active": _LIST, "facts.gpus[].clock_event_reasons.active[]": _STR,
    "facts.gpus[].mig": _OBJ, "facts.gpus[].mig.current": _STR, "facts.gpus[].mig.pending": _STR,
    "facts.gpus[].mig.devices": _LIST, "facts.gpus[].mig.devices[]": _OBJ,
    "facts.gpus[].nvlink": _OBJ, "facts.gpus[].nvlink.count": _INT, "facts.gpus[].nvlink.active_count": _INT,
    "facts.gpus[].nvlink.links": _LIST, "facts.gpus[].nvlink.links[]": _OBJ,
    "facts.gpus[].nvlink.links[].link": _INT, "facts.gpus[].nvlink.links[].active": _BOOL,
    "facts.gpus[].nvlink.links[].remote_bus_id": _STR, "facts.gpus[].nvlink.links[].remote_type": _STR,
    "facts.gpus[].counters": _OBJ, "facts.gpus[].counters.uptime_s": _NUM, "facts.gpus[].counters.pcie_replay": _INT,
    "facts.gpus[].counters.nvlink_errors": "list|obj", "facts.gpus[].counters.nvlink_errors_unread": _STR, "facts.gpus[].counters.nvlink_errors[]": _OBJ,
    "facts.gpus[].counters.nvlink_errors.replay": _INT, "facts.gpus[].counters.nvlink_errors.recovery": _INT,
    "facts.gpus[].counters.nvlink_errors.crc_flit": _INT, "facts.gpus[].counters.nvlink_errors.crc_data": _INT,
    "facts.gpus[].counters.nvlink_errors[].link": _INT, "facts.gpus[].counters.nvlink_errors[].replay": _INT,
    "facts.gpus[].counters.nvlink_errors[].recovery": _INT, "facts.gpus[].counters.nvlink_errors[].crc_flit": _INT,
    "facts.gpus[].counters.nvlink_errors[].crc_data": _INT, "facts.gpus[].counters.violation_ns": _OBJ,
    "facts.gpus[].counters.violation_ns.*": _INT, "facts.gpus[].fabric": _OBJ, "facts.gpus[].fabric.state": _STR,
    "facts.gpus[].fabric.status": _STR, "facts.gpus[].fabric.health_summary": _STR,
    "facts.gpus[].processes": _LIST, "facts.gpus[].processes[]": _OBJ, "facts.gpus[].processes[].pid": _INT,
    "facts.gpus[].processes[].name": _STR, "facts.gpus[].processes[].type": _STR,
    "facts.gpus[].processes[].used_memory_bytes": _INT,
    # topology
    "facts.topology": "obj|null", "facts.topology.pairs": _LIST, "facts.topology.pairs[]": _OBJ,
    "facts.topology.pairs[].gpus": _LIST, "facts.topology.pairs[].gpus[]": _INT,
    "facts.topology.pairs[].common_ancestor": _STR, "facts.topology.pairs[].nvlink_count": _INT,
    "facts.topology.pairs[].p2p": _OBJ,
    # libraries, toolkit, python
    "facts.libraries": "obj|null", "facts.libraries.ld_library_path": _LIST, "facts.libraries.ld_library_path[]": _STR,
    "facts.libraries.copies": _LIST, "facts.libraries.copies[]": _OBJ, "facts.libraries.copies[].family": _STR,
    "facts.libraries.copies[].path": _STR, "facts.libraries.copies[].real_path": _STR,
    "facts.libraries.copies[].stub": _BOOL, "facts.libraries.copies[].version": "str|obj",
    "facts.libraries.copies[].version_from_name": "str|null", "facts.libraries.copies[].origins": _LIST,
    "facts.libraries.copies[].origins[]": _STR, "facts.libraries.copies[].distribution": _OBJ,
    "facts.libraries.copies[].distribution.name": _STR, "facts.libraries.copies[].distribution.version": _STR,
    "facts.toolkit": "obj|null", "facts.toolkit.env": _OBJ, "facts.toolkit.installs": _LIST,
    "facts.toolkit.installs[]": _OBJ, "facts.toolkit.installs[].path": _STR,
    "facts.toolkit.installs[].real_path": _STR, "facts.toolkit.installs[].version": _STR,
    "facts.toolkit.installs[].version_source": _STR, "facts.toolkit.installs[].has_nvcc": _BOOL,
    "facts.toolkit.nvcc": _OBJ, "facts.toolkit.nvcc.found": _BOOL, "facts.toolkit.nvcc.path": _STR,
    "facts.toolkit.nvcc.version": _STR, "facts.toolkit.nvcc.release": _STR,
    "facts.python": "obj|null", "facts.python.version": _STR, "facts.python.executable": _STR,
    "facts.python.prefix": _STR, "facts.python.virtualenv": _BOOL, "facts.python.conda_prefix": "str|null",
    "facts.python.diagnosed": _OBJ, "facts.python.distributions": _LIST, "facts.python.distributions[]": _OBJ,
    "facts.python.distributions[].name": _STR, "facts.python.distributions[].version": _STR,
    "facts.python.environments": _LIST, "facts.python.environments[]": _OBJ,
    "facts.python.environments[].frameworks": _LIST, "facts.python.environments[].frameworks[]": _STR,
    # frameworks and the work on the GPUs
    "facts.frameworks": "obj|null", "facts.frameworks.*": _OBJ, "facts.frameworks.*.installed": _BOOL,
    "facts.frameworks.*.status": _STR, "facts.frameworks.*.info": _OBJ,
    "facts.frameworks.*.info.version": _STR, "facts.frameworks.*.info.devices": _LIST,
    "facts.frameworks.*.info.devices[]": _OBJ, "facts.frameworks.*.info.devices[].index": _INT,
    "facts.frameworks.*.info.devices[].name": _STR, "facts.frameworks.*.info.loaded_libraries": _LIST,
    "facts.frameworks.*.info.loaded_libraries[]": _OBJ, "facts.frameworks.*.info.evidence": _LIST,
    "facts.frameworks.*.info.arch_list": _LIST, "facts.frameworks.*.info.arch_list[]": _STR,
    "facts.smoke": "obj|null", "facts.smoke.count": _OBJ, "facts.smoke.count.devices": _LIST,
    "facts.smoke.count.devices[]": _OBJ, "facts.smoke.count.devices[].ordinal": _INT, "facts.smoke.count.source": _STR,
    "facts.smoke.runs": _LIST, "facts.smoke.runs[]": _OBJ, "facts.smoke.runs[].ordinal": _INT,
    "facts.smoke.runs[].ok": _BOOL, "facts.smoke.runs[].wrong_elements": _INT, "facts.smoke.runs[].process": _STR,
    "facts.workload": "obj|null", "facts.workload.devices": _LIST, "facts.workload.runs": _LIST,
    "facts.workload.placement": _OBJ, "facts.workload.placement.*": _OBJ, "facts.workload.placement.*.devices": _LIST,
    "facts.workload.placement.*.why": _STR, "facts.frameworks.*.info.pinned": _OBJ,
    "facts.workload.runs[]": _OBJ, "facts.workload.runs[].framework": _STR, "facts.workload.runs[].device": _STR,
    "facts.workload.runs[].checks_on": _STR,
    "facts.workload.runs[].throughput": _OBJ, "facts.workload.runs[].throughput.h2d_gbs": _NUM,
    "facts.workload.runs[].throughput.d2h_gbs": _NUM, "facts.workload.runs[].throughput.device_copy_gbs": _NUM,
    "facts.workload.runs[].throughput.matmul_bf16_tflops": _NUM, "facts.workload.runs[].throughput.matmul_tf32_tflops": _NUM,
    "facts.workload.runs[].matmul": _OBJ, "facts.workload.runs[].matmul.checks": _LIST,
    "facts.workload.runs[].matmul.checks[]": _OBJ, "facts.workload.runs[].conv": _OBJ,
    "facts.workload.runs[].conv.checks": _LIST, "facts.workload.runs[].conv.checks[]": _OBJ,
    "facts.workload.runs[].elementwise": _OBJ,
    "facts.multigpu": "obj|null", "facts.multigpu.devices": _LIST, "facts.multigpu.devices[]": _OBJ,
    "facts.multigpu.p2p": _OBJ, "facts.multigpu.p2p.pairs": _LIST, "facts.multigpu.p2p.pairs[]": _OBJ,
    "facts.multigpu.p2p.pairs[].src": _INT, "facts.multigpu.p2p.pairs[].dst": _INT,
    "facts.multigpu.p2p.pairs[].gbs": _NUM, "facts.multigpu.p2p.pairs[].access": _BOOL,
    "facts.multigpu.allreduce": _OBJ, "facts.multigpu.allreduce.ranks": _LIST,
    "facts.multigpu.allreduce.ranks[]": _OBJ, "facts.multigpu.allreduce.busbw_gbs": _NUM,
    "facts.multigpu.allreduce.algbw_gbs": _NUM, "facts.multigpu.allreduce.world_size": _INT,
    "facts.cluster": "obj|null", "facts.cluster.world_size": _INT, "facts.cluster.local_world_size": _INT,
    "facts.cluster.ranks": _LIST, "facts.cluster.ranks[]": _OBJ, "facts.cluster.ranks[].rank": _INT,
    "facts.cluster.ranks[].node_rank": _INT, "facts.cluster.ranks[].local_rank": _INT,
    "facts.cluster.nodes": _LIST, "facts.cluster.nodes[]": _OBJ, "facts.cluster.nodes[].node_rank": _INT,
    "facts.cluster.nodes[].ranks": _LIST, "facts.cluster.nodes[].ranks[]": _INT,
    "facts.cluster.nodes[].report": "obj|null", "facts.cluster.nodes[].report.facts": _OBJ,
    "facts.cluster.allreduce": _OBJ,
}

_TYPE_NAMES = {_OBJ: "an object", _LIST: "an array", _STR: "a string", _INT: "an integer", _NUM: "a number",
               _BOOL: "true or false", "null": "null"}


def _is(value: Any, kind: str) -> bool:
    if kind == _OBJ:
        return isinstance(value, dict)
    if kind == _LIST:
        return isinstance(value, list)
    if kind == _STR:
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if kind == _INT:
        return isinstance(value, int)
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _steps(pattern: str) -> list[str]:
    """"facts.gpus[].index" -> ["facts", "gpus", "[]", "index"]."""
    out: list[str] = []
    for part in pattern.split("."):
        name, brackets = part.split("[", 1) if "[" in part else (part, "")
        out.append(name)
        out += ["[]"] * brackets.count("]")
    return out


def _matches(data: Any, steps: list[str]) -> Iterator[tuple[str, Any]]:
    """(the concrete path, the value) of every value at ``steps``; iterative."""
    nodes: list[tuple[str, Any]] = [("", data)]
    for step in steps:
        following: list[tuple[str, Any]] = []
        for where, node in nodes:
            if step == "[]":
                if isinstance(node, list):
                    following += [(f"{where}[{i}]", v) for i, v in enumerate(node)]
            elif isinstance(node, dict) and not is_unavailable(node):
                items = node.items() if step == "*" else ([(step, node[step])] if step in node else [])
                following += [(f"{where}.{k}" if where else str(k), v) for k, v in items]
        nodes = following
    return iter(nodes)


_COMPILED = [(p, _steps(p), kinds.split("|")) for p, kinds in SHAPE.items()]


def shape_error(data: Mapping[str, Any]) -> Optional[str]:
    """Why a loaded report cannot be judged, naming the first field at fault ("facts.gpus[0].index must
    be an integer"), or None. Also refuses nesting deeper than ``MAX_DEPTH`` and numbers that are not
    finite; walks without recursion. A first walk only says whether something is wrong (a fleet of a
    thousand reports is loaded through here); the path is spelled out only for a report at fault."""
    if _depth_and_numbers_ok(data) and _shapes_ok(data):
        return None
    stack: list[tuple[Any, int, str]] = [(data, 1, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            shown = where if len(where) <= 80 else where[:77] + "..."
            return f"{shown or 'the report'} is nested more than {MAX_DEPTH} levels deep"
        if isinstance(node, dict):
            stack += [(v, depth + 1, f"{where}.{k}" if where else str(k)) for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(v, depth + 1, f"{where}[{i}]") for i, v in enumerate(node)]
        elif isinstance(node, float) and not math.isfinite(node):
            return f"{where} must be a finite number, not {node!r}"
    for pattern, steps, kinds in _COMPILED:
        for where, value in _matches(data, steps):
            if not _value_ok(where.startswith("facts."), value, kinds):
                return f"{where} must be {' or '.join(_TYPE_NAMES[k] for k in kinds)}"
    return None


def _depth_and_numbers_ok(data: Any) -> bool:
    stack: list[tuple[Any, int]] = [(data, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > MAX_DEPTH:
            return False
        if isinstance(node, dict):
            for v in node.values():
                push((v, depth + 1))
        elif isinstance(node, list):
            for v in node:
                push((v, depth + 1))
        elif isinstance(node, float) and not math.isfinite(node):
            return False
    return True


def _trie() -> dict[str, Any]:
    """SHAPE as a tree of steps, so that patterns sharing a prefix ("facts.gpus[]...") walk it once."""
    root: dict[str, Any] = {"kinds": None, "next": {}}
    for _, steps, kinds in _COMPILED:
        node = root
        for step in steps:
            node = node["next"].setdefault(step, {"kinds": None, "next": {}})
        node["kinds"] = kinds
        node["types"] = frozenset(_EXACT_TYPES[k] for k in kinds if k in _EXACT_TYPES) | \
            (frozenset({int, float}) if any(k not in _EXACT_TYPES for k in kinds) else frozenset())
    return root


def _shapes_ok(data: Any) -> bool:
    stack: list[tuple[dict[str, Any], Any, bool]] = [(_TRIE, data, False)]
    while stack:
        trie, node, in_facts = stack.pop()
        for step, sub in trie["next"].items():
            if step == "[]":
                values = [(in_facts, v) for v in node] if isinstance(node, list) else []
            elif isinstance(node, dict) and not is_unavailable(node):
                top = trie is _TRIE
                if step == "*":
                    values = [(in_facts or (top and k == "facts"), v) for k, v in node.items()]
                else:
                    values = [(in_facts or (top and step == "facts"), node[step])] if step in node else []
            else:
                values = []
            for inside, value in values:
                # exact types: JSON gives exactly these, and a bool is not an int here (NaN was refused before)
                if sub["kinds"] is not None and type(value) not in sub["types"] and \
                        not _value_ok(inside, value, sub["kinds"]):
                    return False
                if sub["next"]:
                    stack.append((sub, value, inside))
    return True


def _value_ok(in_facts: bool, value: Any, kinds: list[str]) -> bool:
    if any(_is(value, k) for k in kinds):
        return True
    return in_facts and is_unavailable(value) and isinstance(value.get("unavailable"), str)


_EXACT_TYPES = {_OBJ: dict, _LIST: list, _STR: str, _BOOL: bool, "null": type(None), _INT: int}
_TRIE = _trie()
