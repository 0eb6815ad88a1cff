"""Many nodes' saved reports side by side: what each node's checks say, what differs, what is slow.

``merge`` takes reports already loaded (and validated) by ``report.load`` and returns one plain
dict, which ``render/fleet.py`` prints as text or markdown and ``json.dumps`` writes as JSON:

- ``nodes``: each node's worst status per area, re-judged with this version's checks (as
  ``analyze`` does), and its errors and warnings;
- ``drift``: the facts that should match across a fleet (driver, CUDA driver, GPU models and count,
  framework versions, the CUDA toolkit) where they do not, each value with the nodes that have it;
- ``outliers``: a GPU, GPU pair or node whose measured figure is worse than ``WELL_BELOW`` times
  the median of its peers (every other sample with the same GPU model), for each metric in
  ``METRICS``. A metric is a dotted path into the facts, with ``[*]`` for "every element of this
  list", and whether higher or lower is better; a figure added to the facts later
  (``performance.*``) is compared by adding one line to ``METRICS``;
- ``counters``, only where a report carries error counters: the node whose count stands out from the
  other nodes' (fleet_counters.py).

Nothing here reads files or the machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from gpudoctor import __version__
from gpudoctor import report as rep
from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.findings import ERROR, WARNING
from gpudoctor.fleet_counters import counter_outliers
from gpudoctor.snapshot import get, gpus, is_unavailable, job_nodes, known
from gpudoctor.views.driver import cuda_version

if TYPE_CHECKING:
    from gpudoctor.facts_types import GpuFacts

MERGE_SCHEMA_VERSION = 1
#: "Well below its peers": worse than this fraction of the peers' median (for a time: above median / WELL_BELOW).
WELL_BELOW = 0.7
#: Fewer samples of one GPU model than this, and the metric is not compared for that model.
MIN_SAMPLES = 3
NOT_RECORDED = "not recorded"
_MISSING = object()


@dataclass(frozen=True)
class Metric:
    """A measured figure: where it is in the facts, and which direction is better."""

    path: str  # "workload.runs[*].throughput.h2d_gbs"; a figure under "ok": false is not a measurement
    better: str  # "higher" (a bandwidth, a link count) or "lower" (a time)
    unit: str = ""  # for display: "s", "GB/s"

    def worse(self, value: float, median: float) -> bool:
        if self.better == "higher":
            return value < WELL_BELOW * median
        return median > 0 and value > median / WELL_BELOW


#: The measured figures compared across nodes. Another figure the probes record (a link bandwidth,
#: say ``Metric("performance.pairs[*].p2p_gbs", "higher", "GB/s")``) is one more line here.
#: The smoke kernel's timing is deliberately absent: a few milliseconds timed once while every GPU
#: of the node starts at the same moment, it spread 1.5 to 10.9 ms on healthy H200s (2026-11-21).
METRICS: tuple[Metric, ...] = (
    Metric("topology.pairs[*].nvlink_count", "higher"),
    Metric("workload.runs[*].throughput.matmul_bf16_tflops", "higher", "TFLOP/s"),
    Metric("workload.runs[*].throughput.matmul_tf32_tflops", "higher", "TFLOP/s"),
    Metric("workload.runs[*].throughput.device_copy_gbs", "higher", "GB/s"),
    Metric("workload.runs[*].throughput.h2d_gbs", "higher", "GB/s"),
    Metric("workload.runs[*].throughput.d2h_gbs", "higher", "GB/s"),
    # check --deep: P2P copies between every ordered pair, and the node's NCCL all-reduce (compared only
    # between nodes with as many GPUs of the same model: bus bandwidth depends on the count)
    Metric("multigpu.p2p.pairs[*].gbs", "higher", "GB/s"),
    Metric("multigpu.allreduce.busbw_gbs", "higher", "GB/s"),
)

#: The facts a node's row, the drift and the outliers read besides its verdict: the rest of a report is
#: judged, never shown (``shown_facts``). Each metric's figures, and what names their GPU, come too.
SHOWN_PATHS = ("host.hostname", "nvml.driver_version", "nvml.cuda_driver_version", "smoke.count.devices",
               "multigpu.devices", "topology.pairs")


def shown_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """The part of ``facts`` that ``merge`` reads once the node is judged, in the same shape, so that a
    fleet's output can be redacted without redacting every node's whole report: GPUs by index, name and
    UUID, frameworks by version, nvcc, the paths of SHOWN_PATHS, and each metric's list (or the dict
    holding a single figure). A GPU's error counters come too: ``merge`` compares them across nodes, and
    they are numbers only, with nothing to redact."""
    out: dict[str, Any] = {}
    paths = list(SHOWN_PATHS) + [m.path.split("[*]")[0] if "[*]" in m.path else m.path.rpartition(".")[0]
                                 for m in METRICS]
    for path in paths:
        _copy_path(facts, out, path.split("."))
    if "gpus" in facts:
        out["gpus"] = [{k: g[k] for k in ("index", "name", "uuid", "counters") if k in g} if isinstance(g, dict) else g
                       for g in facts["gpus"]] if isinstance(facts["gpus"], list) else facts["gpus"]
    if "frameworks" in facts:
        out["frameworks"] = {name: _framework_shown(fw) for name, fw in facts["frameworks"].items()} \
            if isinstance(facts["frameworks"], dict) else facts["frameworks"]
    nvcc = get(facts, "toolkit.nvcc", _MISSING)
    if nvcc is not _MISSING:
        out.setdefault("toolkit", {})["nvcc"] = {k: nvcc[k] for k in ("found", "version") if k in nvcc} \
            if isinstance(nvcc, dict) else nvcc
    return out


def _framework_shown(fw: Any) -> Any:
    if not isinstance(fw, dict):
        return fw
    shown = {k: fw[k] for k in ("installed", "status") if k in fw}
    if "info" in fw:
        shown["info"] = {"version": fw["info"]["version"]} if isinstance(fw["info"], dict) and "version" in fw["info"] \
            else {} if isinstance(fw["info"], dict) else fw["info"]
    return shown


def _copy_path(source: dict[str, Any], target: dict[str, Any], parts: Sequence[str]) -> None:
    """``target`` given ``source``'s value at the dotted ``parts``, through dicts only (as ``get`` reads)."""
    node: Any = source
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = node


# Node names -------------------------------------------------------------------------------------

def hostname(report: dict[str, Any]) -> Optional[str]:
    """The node's own name, or None when it is absent, unreadable or a redaction pseudonym."""
    name = known(get(report.get("facts") or {}, "host.hostname"))
    if not isinstance(name, str) or not name.strip():
        return None
    name = name.strip()
    if report.get("redacted") is True or "redacted" in name.lower():  # redact.py's "host-redacted[-N]"
        return None
    if name.lower() in ("localhost", "localhost.localdomain"):
        return None
    return name


def node_names(sources: Sequence[str], hostnames: Sequence[Optional[str]]) -> list[str]:
    """One unique name per report: its host name, else its file name without ``.json``.

    Names that still collide (every recorded VM calling itself ``vm``, or ``*/report.json``) are
    replaced by more of their path (``h100x1/report``), and as a last resort numbered (``vm#2``).
    """
    parts = [tuple(p for p in PurePath(s).with_suffix("").parts if p not in (PurePath(s).anchor, ".", ""))
             for s in sources]
    depth = [0 if h else 1 for h in hostnames]
    labels = [h or "/".join(p[-1:]) or s for h, p, s in zip(hostnames, parts, sources)]
    while True:
        dup = {label for label in labels if labels.count(label) > 1}
        if not dup:
            return labels
        changed = False
        for i, label in enumerate(labels):
            if label in dup and depth[i] < len(parts[i]):
                depth[i] += 1
                labels[i] = "/".join(parts[i][-depth[i]:])
                changed = True
        if not changed:
            seen: dict[str, int] = {}
            for i, label in enumerate(labels):
                if label in dup:
                    seen[label] = seen.get(label, 0) + 1
                    labels[i] = f"{label}#{seen[label]}"
            return labels


# The nodes' own verdicts ------------------------------------------------------------------------

def judge_node(facts: dict[str, Any], created: Optional[str], matrix: Matrix = BUNDLED) -> dict[str, Any]:
    """One node's report re-judged with this version's checks, as ``analyze`` does, by the compatibility
    matrix ``matrix``."""
    from gpudoctor import pipeline

    return pipeline.judge(facts, created=created, matrix=matrix)


_judge = judge_node


def judged_view(report: dict[str, Any], identities: bool = True,
                matrix: Matrix = BUNDLED) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what ``merge`` shows of ``report``, its verdict), redacted as ``redact_report`` would redact them.

    The node is judged on its report as saved, as ``analyze`` judges one, and only then are the shown
    facts and the findings' titles redacted: a node's row is a few dozen strings, and redacting every
    node's whole report was most of a fleet's time. A torchrun job's report is redacted whole and then
    judged, since its other nodes' reports become rows of their own (``expand_jobs``)."""
    from gpudoctor.redact import part_redactor, redact_report

    if job_nodes(report.get("facts") or {}):
        redacted = redact_report(report, identities=identities)
        return redacted, judge_node(redacted["facts"], redacted.get("created"), matrix)
    judged = judge_node(report["facts"], report.get("created"), matrix)
    redact = part_redactor(report, identities=identities)
    summary = judged.get("summary") or {}
    verdict = {
        "summary": {k: summary[k] for k in ("verdict", "counts", "areas") if k in summary},
        "checks": [{"area": c.get("area"), "status": c.get("status")} for c in judged.get("checks") or []],
        "findings": [{"code": f.get("code"), "severity": f.get("severity"), "title": redact(f.get("title"), "title"),
                      "subject": {k: v for k, v in (f.get("subject") or {}).items() if k in ("kind", "gpu_index", "peer_index")}}
                     for f in judged.get("findings") or []],
    }
    shown = redact({"created": report.get("created"), "facts": shown_facts(report["facts"])})
    shown["redacted"] = bool(identities or report.get("redacted") is True)
    return shown, verdict

#: A node's verdict when no check could judge anything in its report (report.judged_anything).
NOTHING_JUDGED = "nothing judged"


def node_summary(name: str, source: str, report: dict[str, Any], fail_on: str,
                 judge: Callable[[dict[str, Any], Optional[str]], dict[str, Any]] = _judge) -> dict[str, Any]:
    judged = judge(report["facts"], report.get("created"))
    summary = judged.get("summary") or {}
    findings = [f for f in judged.get("findings") or [] if f.get("severity") in (ERROR, WARNING)]
    unjudged = not rep.judged_anything(judged)  # an empty report: not ok, whatever its (absent) findings say
    return {
        "name": name,
        "file": source,
        "hostname": known(get(report["facts"], "host.hostname")),
        "created": report.get("created"),
        "verdict": NOTHING_JUDGED if unjudged else summary.get("verdict"),
        "counts": summary.get("counts") or {},
        "areas": summary.get("areas") or {},
        "failing": unjudged or rep.exit_code(rep.findings_of(judged), fail_on) != rep.EXIT_OK,
        "findings": [{"severity": f.get("severity"), "code": f.get("code"), "where": _where(f.get("subject") or {}),
                      "title": f.get("title")} for f in findings],
    }


def _where(subject: dict[str, Any]) -> str:
    if subject.get("kind") == "gpu":
        return f"GPU {subject.get('gpu_index')}"
    if subject.get("kind") == "pair":
        return f"GPU {subject.get('gpu_index')} <-> GPU {subject.get('peer_index')}"
    return subject.get("kind") or "host"


# Drift ------------------------------------------------------------------------------------------

def _show(value: Any) -> str:
    if value is None:
        return NOT_RECORDED
    if is_unavailable(value):
        return f"unavailable ({value['unavailable']})"
    return str(value)


def _cuda(raw: Any) -> str:
    return (None if isinstance(raw, bool) else cuda_version(raw)) or _show(raw)


def _gpu_names(facts: dict[str, Any]) -> list[str]:
    return [str(known(g.get("name")) or "unreadable GPU") for g in gpus(facts)]


def compared_facts(facts: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, label, value as text) for every fact that should be the same across a fleet."""
    out = [
        ("driver_version", "driver", _show(get(facts, "nvml.driver_version"))),
        ("cuda_driver_version", "CUDA driver", _cuda(get(facts, "nvml.cuda_driver_version"))),
    ]
    if facts.get("gpus") is None:
        out += [("gpu_models", "GPU models", NOT_RECORDED), ("gpu_count", "GPU count", NOT_RECORDED)]
    else:
        names = _gpu_names(facts)
        out += [("gpu_models", "GPU models", ", ".join(dict.fromkeys(names)) or "none"),
                ("gpu_count", "GPU count", str(len(names)))]
    for fw_name, fw in (facts.get("frameworks") or {}).items():
        out.append((f"frameworks.{fw_name}", fw_name, _framework_version(fw)))
    nvcc = get(facts, "toolkit.nvcc")
    if isinstance(nvcc, dict) and not nvcc.get("found", True):
        toolkit = "not found"
    else:
        toolkit = _show(get(facts, "toolkit.nvcc.version"))
    out.append(("toolkit.nvcc", "CUDA toolkit (nvcc)", toolkit))
    return out


def _framework_version(fw: Any) -> str:
    if not isinstance(fw, dict):
        return NOT_RECORDED
    if not fw.get("installed"):
        return "not installed"
    version = (fw.get("info") or {}).get("version")
    if version:
        return str(version)
    return f"installed ({fw.get('status') or 'version unknown'})"


def drift(names: Sequence[str], facts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each compared fact that differs between nodes: its values, most common first, with their nodes."""
    table: dict[str, dict[str, Any]] = {}
    for name, node_facts in zip(names, facts):
        for key, label, value in compared_facts(node_facts):
            entry = table.setdefault(key, {"fact": key, "label": label, "values": {}})
            entry["values"].setdefault(value, []).append(name)
    # a framework missing from one node's list entirely was not recorded there
    for entry in table.values():
        seen = {n for ns in entry["values"].values() for n in ns}
        missing = [n for n in names if n not in seen]
        if missing:
            entry["values"].setdefault(NOT_RECORDED, []).extend(missing)
    out = []
    for entry in table.values():
        if len(entry["values"]) < 2:
            continue
        order = list(entry["values"])
        values = sorted(entry["values"].items(), key=lambda kv: (-len(kv[1]), order.index(kv[0])))
        out.append({"fact": entry["fact"], "label": entry["label"],
                    "values": [{"value": v, "nodes": ns} for v, ns in values]})
    return out


# Outliers ---------------------------------------------------------------------------------------

def _expand(node: Any, parts: Sequence[str], element: Optional[dict[str, Any]] = None, holder: Any = None):
    """Yield (innermost list element or None, the dict the value was read from, value) for a path whose
    parts may include ``[*]`` steps."""
    if not parts:
        yield element, holder, node
        return
    part, rest = parts[0], parts[1:]
    if part.endswith("[*]"):
        items = get(node, part[:-3]) if isinstance(node, dict) else None
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict):
                    yield from _expand(item, rest, item, None)
        return
    value = get(node, part, _MISSING) if isinstance(node, dict) else _MISSING
    if value is not _MISSING:
        head = part.rpartition(".")[0]
        yield from _expand(value, rest, element, get(node, head) if head else node)


def _split(path: str) -> list[str]:
    parts, current = [], []
    for piece in path.split("."):
        current.append(piece)
        if piece.endswith("[*]"):
            parts.append(".".join(current))
            current = []
    if current:
        parts.append(".".join(current))
    return parts


def _gpu_by(facts: dict[str, Any], element: dict[str, Any]) -> Optional[GpuFacts]:
    """The NVML GPU a list element measured: by its UUID, its NVML ``index``, or its CUDA ordinal
    (``ordinal``, or a workload run's ``device``) through the UUIDs the smoke probe enumerated."""
    uuid = element.get("uuid")
    if not isinstance(uuid, str):
        ordinal = element.get("ordinal", element.get("device"))
        devices = get(facts, "smoke.count.devices") or []
        uuid = next((d.get("uuid") for d in devices if isinstance(d, dict) and ordinal is not None
                     and str(d.get("ordinal")) == str(ordinal)), None)
    if isinstance(uuid, str):
        return next((g for g in gpus(facts) if g.get("uuid") == uuid), None)
    if isinstance(element.get("index"), int) and not isinstance(element.get("index"), bool):
        return next((g for g in gpus(facts) if g.get("index") == element["index"]), None)
    return None


def _gpu_by_ordinal(facts: dict[str, Any], ordinal: Any) -> Optional[GpuFacts]:
    """The NVML GPU behind the multi-GPU test's CUDA ordinal, through the UUIDs that test enumerated."""
    devices = get(facts, "multigpu.devices") or []
    uuid = next((d.get("uuid") for d in devices if isinstance(d, dict) and str(d.get("ordinal")) == str(ordinal)), None)
    return next((g for g in gpus(facts) if g.get("uuid") == uuid), None) if isinstance(uuid, str) else None


def _link(facts: dict[str, Any], ends: list[Optional[GpuFacts]]) -> str:
    """How two GPUs are joined, for grouping P2P figures: their NVLink count, or no NVLink."""
    if not all(ends):
        return "link unknown"
    pair = sorted(g["index"] for g in ends if g is not None)  # gpus() yields only GPUs with an index
    found = next((p for p in get(facts, "topology.pairs") or [] if isinstance(p, dict) and sorted(p.get("gpus") or []) == pair),
                 None)
    count = found.get("nvlink_count") if found else None
    return f"NV{count}" if isinstance(count, int) and count > 0 else "no NVLink" if found else "link unknown"


def _subject(facts: dict[str, Any], element: Optional[dict[str, Any]],
             holder: Optional[dict[str, Any]] = None) -> tuple[str, str]:
    """(what was measured, its GPU model) for one sample."""
    if element is None:
        models = " + ".join(dict.fromkeys(_gpu_names(facts))) or "no GPU"
        world = holder.get("world_size") if isinstance(holder, dict) else None
        if isinstance(world, int) and not isinstance(world, bool):  # a collective: its peers have as many GPUs
            return f"all-reduce over {world} GPUs", f"{world} x {models}"
        return "", models
    if "src" in element and "dst" in element:  # a P2P pair, by CUDA ordinals of the multi-GPU test
        ends = [_gpu_by_ordinal(facts, element[k]) for k in ("src", "dst")]
        labels = [f"GPU {g.get('index')}" if g else f"cuda:{element[k]}" for g, k in zip(ends, ("src", "dst"))]
        names = list(dict.fromkeys(str(known(g.get("name")) or "unreadable GPU") if g else "unknown GPU" for g in ends))
        # peers are pairs joined the same way: an NVLink pair is no peer of a PCIe pair
        return f"{labels[0]} -> {labels[1]}", f"{' + '.join(names)}, {_link(facts, ends)}"
    pair = element.get("gpus")
    if isinstance(pair, list) and len(pair) == 2:
        by_index = {g.get("index"): str(known(g.get("name")) or "unreadable GPU") for g in gpus(facts)}
        names = list(dict.fromkeys(by_index.get(i, "unknown GPU") for i in pair))
        return f"GPU {pair[0]} <-> GPU {pair[1]}", " + ".join(names)
    gpu = _gpu_by(facts, element)
    if gpu is not None:
        return f"GPU {gpu.get('index')}", str(known(gpu.get("name")) or element.get("name") or "unreadable GPU")
    ordinal = element.get("ordinal", element.get("device"))
    label = f"cuda:{ordinal}" if ordinal is not None else "GPU ?"
    return label, str(element.get("name") or "unknown GPU")


def samples(facts: dict[str, Any], metric: Metric) -> list[tuple[str, str, float]]:
    """(subject, GPU model, value) for every measurement of ``metric`` in one node's facts."""
    out = []
    for element, holder, value in _expand(facts, _split(metric.path)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        # a failed step: the list element (a smoke run) or the figures' own dict (a workload run's throughput)
        if any(isinstance(d, dict) and d.get("ok") is False for d in (element, holder)):
            continue
        if isinstance(element, dict) and (element.get("error") or element.get("wrong_elements")):
            continue  # a copy that failed or corrupted data: a finding of its node, not a figure
        subject, model = _subject(facts, element, holder)
        out.append((subject, model, float(value)))
    return out


def median_without(values: Sequence[float], k: int) -> float:
    """The median of sorted ``values`` less the one at position ``k``: each sample's peers' median in
    O(1), so that a fleet of 10,000 GPUs is not n medians of n values."""
    n = len(values) - 1
    at = lambda i: values[i] if i < k else values[i + 1]  # noqa: E731 - the i-th of the others
    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def outliers(names: Sequence[str], facts: Sequence[dict[str, Any]],
             metrics: Sequence[Metric] = METRICS) -> list[dict[str, Any]]:
    """For each metric and GPU model: how many samples, and which are worse than WELL_BELOW x their peers' median."""
    out = []
    for metric in metrics:
        groups: dict[str, list[tuple[str, str, float]]] = {}
        for name, node_facts in zip(names, facts):
            for subject, model, value in samples(node_facts, metric):
                groups.setdefault(model, []).append((name, subject, value))
        models = []
        for model, group in groups.items():
            entry: dict[str, Any] = {"model": model, "samples": len(group), "compared": len(group) >= MIN_SAMPLES,
                                     "outliers": []}
            if entry["compared"]:
                ranked = sorted(range(len(group)), key=lambda i: group[i][2])
                values = [group[i][2] for i in ranked]
                rank = {i: r for r, i in enumerate(ranked)}
                for i, (name, subject, value) in enumerate(group):
                    median = median_without(values, rank[i])
                    if metric.worse(value, median):
                        entry["outliers"].append({"node": name, "subject": subject, "value": value,
                                                  "peers_median": median,
                                                  "ratio": round(value / median, 2) if median else None})
            models.append(entry)
        out.append({"metric": metric.path, "better": metric.better, "unit": metric.unit, "models": models})
    return out


# Reports of a torchrun job ----------------------------------------------------------------------

def expand_jobs(items: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Each report, followed by the reports of the other nodes that a ``check --deep`` under torchrun
    carries inside it (``facts.cluster.nodes[*].report``), named ``<file>-node<N>.json``: a job's
    nodes are compared as if each had written its own report."""
    out = []
    for source, report in items:
        nodes = get(report.get("facts") or {}, "cluster.nodes")
        # a node whose own check failed has no facts to show as a row: the job's RUN032 stays its word
        inner = [(n, n["report"]) for n in job_nodes(report.get("facts") or {})
                 if n["report"]["facts"] and not n["report"].get("error")]
        path = PurePath(source)
        names = [str(path.with_name(f"{path.stem}-node{n.get('node_rank')}{path.suffix}")) for n, _ in inner]
        if inner:  # each other node is its own row: the job's report no longer counts their findings (RUN032)
            row_of = {id(n): name for (n, _), name in zip(inner, names)}
            marked = [{**n, "report": {"merged_as": row_of[id(n)]}} if id(n) in row_of else n for n in nodes]
            facts = {**report["facts"], "cluster": {**report["facts"]["cluster"], "nodes": marked}}
            out.append((source, {**report, "facts": facts}))
        else:
            out.append((source, report))
        out += [(name, node_report) for name, (_, node_report) in zip(names, inner)]
    return out


# The whole merge --------------------------------------------------------------------------------

def merge(items: Sequence[tuple[str, dict[str, Any]]], fail_on: str = "error",
          metrics: Sequence[Metric] = METRICS,
          judge: Callable[[dict[str, Any], Optional[str]], dict[str, Any]] = _judge,
          refused: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """``items``: (source file, loaded report) per node, in the order given (a torchrun job's report counts
    as its nodes, see ``expand_jobs``); ``refused``: (source file, why) of each file that is not a report
    that could be read: a row of its own, failing, after the nodes."""
    items = expand_jobs(items)
    sources = [s for s, _ in items]
    reports = [r for _, r in items]
    names = node_names(sources + [s for s, _ in refused], [hostname(r) for r in reports] + [None] * len(refused))
    facts = [r["facts"] for r in reports]
    nodes = [node_summary(n, s, r, fail_on, judge) for n, s, r in zip(names, sources, reports)]
    nodes += [refused_row(n, s, why) for n, (s, why) in zip(names[len(reports):], refused)]
    areas = list(dict.fromkeys(a for node in nodes for a in node["areas"]))
    merged = {
        "kind": "gpudoctor-merge",
        "schema_version": MERGE_SCHEMA_VERSION,
        "tool": {"name": "gpudoctor", "version": __version__},
        "fail_on": fail_on,
        "areas": areas,
        "nodes": nodes,
        "drift": drift(names[:len(reports)], facts),
        "outliers": {"well_below": WELL_BELOW, "min_samples": MIN_SAMPLES, "peers": "same GPU model",
                     "metrics": outliers(names[:len(reports)], facts, metrics)},
    }
    counters = counter_outliers(names[:len(reports)], facts, median_without)
    if counters is not None:  # only reports that carry error counters add the section
        merged["counters"] = counters
    return merged


#: A row's verdict when its file could not be read as a report.
REFUSED = "refused"


def refused_row(name: str, source: str, why: str) -> dict[str, Any]:
    """The row of a file that is not a readable report: failing, with the reason as its one finding (INT007),
    so the rest of the fleet is still merged and the file is not silently dropped."""
    return {"name": name, "file": source, "hostname": None, "created": None, "verdict": REFUSED, "counts": {},
            "areas": {}, "failing": True,
            "findings": [{"severity": ERROR, "code": "INT007", "where": "file", "title": why}]}


def exit_code(merged: dict[str, Any]) -> int:
    """2 when a file was refused (bad input, though the rest was merged), else 1 for a failing node, else 0."""
    if any(n.get("verdict") == REFUSED for n in merged["nodes"]):
        return rep.EXIT_USAGE
    return rep.EXIT_FINDINGS if any(n["failing"] for n in merged["nodes"]) else rep.EXIT_OK
