"""``--format prometheus``: the report as node_exporter's textfile collector reads it (``-o FILE.prom`` in the
collector's folder), so a fleet's monitoring graphs and alerts on what gpudoctor found.

The Prometheus text exposition format (https://prometheus.io/docs/instrumenting/exposition_formats/):
each family once, with its HELP and TYPE lines, then its samples. Names follow the naming conventions
(https://prometheus.io/docs/practices/naming/): the ``gpudoctor_`` prefix, base units in the name
(``_seconds``, ``_bytes_per_second``, FLOP/s as ``_flops_per_second``), ``_total`` only for counters (the
driver's error counters, which only grow until the driver reloads). A status is a state set: one sample
per possible value, 1 for the one that holds, so an alert compares a number, never a label that vanished.

Label values are the report's strings, untrusted (``analyze`` reads reports from anywhere): cleaned to one
visible line first (render/safe.py), then escaped as the format requires (backslash, double quote,
newline). A figure the report does not hold, or holds as a string, is left out, never written as 0.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Optional

from gpudoctor import report as rep
from gpudoctor.nvlink_totals import nvlink_totals
from gpudoctor.nvrm import bus_key
from gpudoctor.render import proof
from gpudoctor.render.safe import printable
from gpudoctor.snapshot import as_object, known
from gpudoctor.views import throughput
from gpudoctor.status import SEVERITIES, STATUSES, VERDICT_ERROR, VERDICT_OK, VERDICT_WARNING

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix

PREFIX = "gpudoctor_"
VERDICTS = (VERDICT_OK, VERDICT_WARNING, VERDICT_ERROR)
#: The throughput figures of a framework workload: (report key, metric, factor to base units, extra labels).
THROUGHPUT: tuple[tuple[str, str, float, dict[str, str]], ...] = (
    ("matmul_bf16_tflops", "gpu_matmul_flops_per_second", 1e12, {"precision": "bf16"}),
    ("matmul_tf32_tflops", "gpu_matmul_flops_per_second", 1e12, {"precision": "tf32"}),
    ("device_copy_gbs", "gpu_memory_copy_bytes_per_second", 1e9, {}),
    ("h2d_gbs", "gpu_host_copy_bytes_per_second", 1e9, {"direction": "host_to_device"}),
    ("d2h_gbs", "gpu_host_copy_bytes_per_second", 1e9, {"direction": "device_to_host"}),
)
#: The expected figures of compat_matrix/performance.json, as render/proof.py judges by them:
#: (metric, measured key, datasheet key, factor, extra labels).
EXPECTED: tuple[tuple[str, str, str, float, dict[str, str]], ...] = (
    ("gpu_matmul_expected_flops_per_second", "bf16_matmul_tflops", "bf16_dense_tflops", 1e12, {"precision": "bf16"}),
    ("gpu_memory_copy_expected_bytes_per_second", "device_copy_gbs", "memory_gbs", 1e9, {}),
)
HELP = {
    "info": "gpudoctor's version that judged this report; always 1.",
    "report_timestamp_seconds": "When the report was made (its created time), in seconds since the epoch.",
    "run_duration_seconds": "How long the check took, from the command's start to its report.",
    "exit_code": "The exit code of the run: 0 nothing at or above --fail-on, 1 findings at or above it.",
    "verdict": "The report's verdict: 1 for the one that holds.",
    "area_status": "Each area's status (pass, warn, fail, skip, timeout): 1 for the one that holds.",
    "checks": "How many checks ended with each status.",
    "findings": "How many findings the report holds, by severity.",
    "findings_by_code": "How many findings the report holds, by code.",
    "gpu_smoke_kernel_ok": "Whether the framework-free smoke kernel computed correctly on the GPU (1) or not (0).",
    "gpu_matmul_flops_per_second": "Matrix multiply throughput a framework measured on the GPU.",
    "gpu_matmul_expected_flops_per_second": "Matrix multiply throughput expected of the GPU's model (basis: measured "
                                            "on that model, else the datasheet peak).",
    "gpu_memory_copy_bytes_per_second": "Device memory copy bandwidth (bytes read plus written) a framework measured.",
    "gpu_memory_copy_expected_bytes_per_second": "Device memory copy bandwidth expected of the GPU's model (basis: "
                                                 "measured on that model, else the datasheet peak).",
    "gpu_host_copy_bytes_per_second": "Pinned host memory copy bandwidth a framework measured, per direction.",
    "gpu_host_link_bytes_per_second": "The PCIe link's rate one way at its maximum generation and width.",
    "gpu_p2p_copy_bytes_per_second": "Peer-to-peer copy bandwidth between two GPUs (check --deep).",
    "gpu_pcie_replays_total": "PCIe replays since the driver loaded (NVML replay counter).",
    "gpu_nvlink_errors_total": "NVLink errors since the driver loaded, summed over the GPU's links, per kind (NVML error counters).",
    "gpu_clock_held_down_seconds_total": "Time the GPU's clocks were held down since the driver loaded, per cause.",
    "gpu_fabric_info": "The GPU's NVSwitch fabric registration (state, status, health); always 1.",
    "kernel_log_read": "Whether the kernel log could be read (1); 0: Xid events are not checked, not absent.",
    "gpu_xid_events": "Xid events of the GPU in the kernel log since boot (among the newest kept), by Xid number.",
    "merge_exit_code": "The exit code of merge: 0 no failing node, 1 a failing node, 2 a file refused.",
    "node_verdict": "Each node's verdict (ok, warning, error, nothing judged, refused): 1 for the one that holds.",
    "node_area_status": "Each node's status of each area: 1 for the one that holds.",
    "node_findings": "How many findings each node's report holds, by severity.",
    "node_report_timestamp_seconds": "When each node's report was made, in seconds since the epoch.",
    "node_outlier_ratio": "A measured figure well below its peers (same GPU model): the figure over the peers' median.",
}
TYPES = {"gpu_pcie_replays_total": "counter", "gpu_nvlink_errors_total": "counter",
         "gpu_clock_held_down_seconds_total": "counter"}


@dataclass
class Family:
    """One metric family: its samples as (labels, value) in the order they were added."""

    name: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: Any, **labels: Any) -> None:
        """Add a sample; one that is no finite number, or whose labels an earlier sample has (a report that
        names a GPU twice), is left out: node_exporter refuses a whole file for a duplicated series."""
        number = _number(value)
        labels = {k: str(v) for k, v in labels.items()}
        if number is not None and all(seen != labels for seen, _ in self.samples):
            self.samples.append((labels, number))


def render_report(report: dict[str, Any], options: Any) -> str:
    """The report as a textfile-collector file: every family with samples, in a fixed order."""
    report = printable(report, newlines=False)
    families: dict[str, Family] = {name: Family(name) for name in HELP}
    for name, value, labels in _samples(report, options):
        families[name].add(value, **labels)
    return "".join(_family_text(f) for f in families.values() if f.samples)


def render_fleet(merged: dict[str, Any]) -> str:
    """``merge --format prometheus``: each node's verdict, areas and findings, labelled by node, and the
    outliers across nodes; scraped from the host that merges, so each series names its node."""
    merged = printable(merged, newlines=False)
    families: dict[str, Family] = {name: Family(name) for name in HELP}
    for name, value, labels in _fleet_samples(merged):
        families[name].add(value, **labels)
    return "".join(_family_text(f) for f in families.values() if f.samples)


def _fleet_samples(merged: dict[str, Any]) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    from gpudoctor.fleet import NOTHING_JUDGED, REFUSED, exit_code

    tool = as_object(merged.get("tool"))
    yield "info", 1, {"version": tool.get("version", "")}
    yield "merge_exit_code", exit_code(merged), {}
    for node in merged.get("nodes") or []:
        name = {"node": node.get("name", "")}
        for word in (*VERDICTS, NOTHING_JUDGED, REFUSED):
            yield "node_verdict", int(node.get("verdict") == word), {**name, "verdict": word}
        areas = as_object(node.get("areas"))
        for area, status in areas.items():
            for word in STATUSES:
                yield "node_area_status", int(word == status), {**name, "area": area, "status": word}
        counts = as_object(node.get("counts"))
        for severity in SEVERITIES:
            yield "node_findings", counts.get(severity), {**name, "severity": severity}
        yield "node_report_timestamp_seconds", _epoch(node.get("created")), name
    found = as_object(merged.get("outliers"))
    for metric in found.get("metrics") or []:
        for model in metric.get("models") or []:
            for o in model.get("outliers") or []:
                labels = {"node": o.get("node", ""), "metric": metric.get("metric", ""),
                          "model": model.get("model", ""), "subject": o.get("subject", "")}
                yield "node_outlier_ratio", o.get("ratio"), labels


def _samples(report: dict[str, Any], options: Any) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    yield from _run(report, options)
    yield from _judgement(report)
    facts = as_object(report.get("facts"))
    yield from _figures(facts, options.matrix)
    yield from _counters(facts)


def _run(report: dict[str, Any], options: Any) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    tool = as_object(report.get("tool"))
    yield "info", 1, {"version": tool.get("version", "")}
    yield "report_timestamp_seconds", _epoch(report.get("created")), {}
    yield "run_duration_seconds", options.duration_s, {}
    yield "exit_code", rep.exit_code(rep.findings_of(report), options.fail_on), {}


def _judgement(report: dict[str, Any]) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    summary = as_object(report.get("summary"))
    verdict = summary.get("verdict")
    for word in VERDICTS:
        yield "verdict", int(word == verdict), {"verdict": word}
    areas = as_object(summary.get("areas"))
    for area, status in areas.items():
        for word in STATUSES:
            yield "area_status", int(word == status), {"area": area, "status": word}
    checks = as_object(summary.get("checks"))
    for word in STATUSES:
        yield "checks", checks.get(word), {"status": word}
    findings = [f for f in report.get("findings") or [] if isinstance(f, dict)]
    for severity in SEVERITIES:
        yield "findings", sum(1 for f in findings if f.get("severity") == severity), {"severity": severity}
    counts: dict[tuple[str, str], int] = {}
    for f in findings:
        key = (str(f.get("code", "")), str(f.get("severity", "")))
        counts[key] = counts.get(key, 0) + 1
    for (code, severity), n in sorted(counts.items()):
        yield "findings_by_code", n, {"code": code, "severity": severity}


def _figures(facts: dict[str, Any], matrix: Matrix) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """What the smoke kernel and the framework workloads measured on each GPU, and what its model should reach
    by ``matrix``."""
    gpus = _gpus_by_cuda(facts)
    smoke = as_object(facts.get("smoke"))
    for run in smoke.get("runs") or []:
        if isinstance(run, dict) and isinstance(run.get("ok"), bool):
            yield "gpu_smoke_kernel_ok", int(run["ok"]), _gpu_labels(gpus, run.get("ordinal"), run.get("name"))
    workload = as_object(facts.get("workload"))
    measured: dict[tuple[str, ...], tuple[dict[str, str], dict[str, Any]]] = {}
    for run in workload.get("runs") or []:
        t = run.get("throughput") if isinstance(run, dict) else None
        if not isinstance(t, dict) or t.get("ok") is not True:
            continue
        labels = _gpu_labels(gpus, run.get("device"), run.get("name"))
        for key, metric, factor, extra in THROUGHPUT:
            if extra.get("precision") == "tf32" and throughput.without_bf16(t):
                extra = {**extra, "precision": "float32"}
            yield metric, _scaled(t.get(key), factor), {**labels, "framework": run.get("framework", ""), **extra}
        measured.setdefault(tuple(labels.values()), (labels, run))
    for labels, run in measured.values():  # once per GPU, however many frameworks measured it
        link = proof.host_link(facts, run)
        if link:
            yield "gpu_host_link_bytes_per_second", link[0] * 1e9, {**labels, "link": link[1]}
        entry = proof.reference(matrix, labels["model"])
        for metric, measured_key, peak_key, factor, extra in EXPECTED:
            ref = proof.expected(entry, measured_key, peak_key)
            if ref:
                yield metric, ref[0] * factor, {**labels, **extra, "basis": ref[1]}
    yield from _p2p(facts, gpus)


def _p2p(facts: dict[str, Any], gpus: dict[str, tuple[str, str]]) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    multigpu = as_object(facts.get("multigpu"))
    p2p = as_object(multigpu.get("p2p"))
    for pair in p2p.get("pairs") or []:
        if isinstance(pair, dict):
            src, dst = gpus.get(str(pair.get("src"))), gpus.get(str(pair.get("dst")))
            yield "gpu_p2p_copy_bytes_per_second", _scaled(pair.get("gbs"), 1e9), {
                "src_gpu": src[0] if src else "", "dst_gpu": dst[0] if dst else ""}


def _counters(facts: dict[str, Any]) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """The driver's error counters and fabric state of each GPU, and its Xid events, where the report has them."""
    for gpu in facts.get("gpus") or []:
        if not isinstance(gpu, dict):
            continue
        labels = {"gpu": _index(gpu.get("index")), "model": str(known(gpu.get("name")) or "")}
        counters = as_object(gpu.get("counters"))
        yield "gpu_pcie_replays_total", counters.get("pcie_replay"), labels
        totals = nvlink_totals(counters.get("nvlink_errors"))
        for kind, value in (totals or {}).items():
            yield "gpu_nvlink_errors_total", value, {**labels, "kind": kind}
        held = as_object(counters.get("violation_ns"))
        for cause, ns in held.items():
            yield "gpu_clock_held_down_seconds_total", _scaled(ns, 1e-9), {**labels, "cause": cause}
        fabric = gpu.get("fabric")
        if isinstance(fabric, dict) and "state" in fabric:
            yield "gpu_fabric_info", 1, {**labels, **{k: str(fabric.get(k, "")) for k in
                                                      ("state", "status", "health_summary")}}
    yield from _xids(facts)


def _xids(facts: dict[str, Any]) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """Xid events by GPU and number, from the kernel-log facts where the report holds them. Whether the log
    was read comes first: an unreadable log has no Xid series, and that must read as not checked."""
    log = facts.get("kernel_log")
    if not isinstance(log, dict) or not isinstance(log.get("read"), bool):
        return
    yield "kernel_log_read", int(log["read"]), {}
    if not log["read"]:
        return
    by_bus: dict[Any, str] = {}
    for gpu in facts.get("gpus") or []:
        pci = as_object(gpu.get("pci")) if isinstance(gpu, dict) else {}
        if bus_key(pci.get("bus_id")) is not None:
            by_bus[bus_key(pci.get("bus_id"))] = _index(gpu.get("index"))
    counts: dict[tuple[str, str, str], int] = {}
    for event in log.get("events") or []:
        if isinstance(event, dict) and _index(event.get("xid")):
            bus = str(event.get("bus_id") or "")
            key = (by_bus.get(bus_key(bus), ""), bus, _index(event.get("xid")))
            counts[key] = counts.get(key, 0) + 1
    for (gpu, bus, xid), n in sorted(counts.items()):
        yield "gpu_xid_events", n, {"gpu": gpu, "bus_id": bus, "xid": xid}


def _gpus_by_cuda(facts: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """(NVML index, model) of each CUDA device number in the diagnosed environment, where it is known."""
    from gpudoctor.views.visibility import resolve

    try:
        return {str(d.cuda_index): (str(d.gpu_index), d.name) for d in resolve(facts).devices}
    except (AttributeError, TypeError, ValueError, KeyError):
        return {}


def _gpu_labels(gpus: dict[str, tuple[str, str]], cuda: Any, name: Any) -> dict[str, str]:
    """``gpu``: NVML's index (as nvidia-smi and DCGM number it), ``cuda_device``: the number the program used."""
    index, model = gpus.get(str(cuda), ("", ""))
    return {"gpu": index, "cuda_device": "" if cuda is None else str(cuda), "model": str(name or model)}


def _index(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else ""


def _number(value: Any) -> Optional[float]:
    """A finite number, else None: a string, a boolean, an absence or NaN is no sample."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _scaled(value: Any, factor: float) -> Optional[float]:
    number = _number(value)
    return None if number is None else number * factor


def _epoch(created: Any) -> Optional[float]:
    try:
        return _dt.datetime.strptime(str(created), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc).timestamp()
    except ValueError:
        return None


def _family_text(family: Family) -> str:
    name = PREFIX + family.name
    lines = [f"# HELP {name} {_escape_help(HELP[family.name])}", f"# TYPE {name} {TYPES.get(family.name, 'gauge')}"]
    for labels, value in family.samples:
        inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
        lines.append(f"{name}{{{inner}}} {_value(value)}" if inner else f"{name} {_value(value)}")
    return "\n".join(lines) + "\n"


def _value(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def escape_label(text: str) -> str:
    """A label value as the exposition format writes it: backslash, double quote and newline escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")
