"""The torchrun job as a whole (``check --deep`` under torchrun, see gpudoctor/distributed.py): did
the NCCL all-reduce across every rank of every node work, does any node's own check report a
problem, do the nodes run different versions of what must match, and did NCCL fall back to TCP
sockets between nodes that have InfiniBand or RoCE devices.

The cross-node bandwidth is reported, not judged: it depends on the network between the nodes,
which gpudoctor cannot know (no sourced reference exists for it).
"""

from __future__ import annotations

from typing import Any, Iterator

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding
from gpudoctor.findings import ERROR, WARNING, Finding
from gpudoctor.snapshot import get, known

NCCL_DEBUG_RUN = ("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun --nnodes N --nproc-per-node gpu "
                  "--rdzv-backend c10d --rdzv-endpoint HOST:PORT -m gpudoctor check --deep")
#: Another node's worst finding at or above this is one finding here (its infos stay in its own report).
REPORTED = (ERROR, WARNING)


def _cluster(facts: Facts) -> dict[str, Any]:
    cluster = facts.get("cluster")
    if not isinstance(cluster, dict):
        raise NotApplicable("not run as a torchrun job with --deep")
    return cluster


def _nodes_label(cluster: dict[str, Any]) -> str:
    nodes = cluster.get("nodes") or []
    return f"{cluster.get('world_size')} ranks on {len(nodes)} node(s)" if nodes else f"{cluster.get('world_size')} ranks"


def check_collective(facts: Facts) -> Iterator[Finding]:
    cluster = _cluster(facts)
    result = cluster.get("allreduce") or {}
    what = f"the NCCL all-reduce across the torchrun job ({_nodes_label(cluster)})"
    if result.get("skipped"):
        yield finding("RUN035", f"{what} was not measured: {result['skipped']}",
                      text="Start one rank per GPU (torchrun --nproc-per-node gpu) on nodes whose GPUs work; the "
                           "nodes' own findings say why a GPU is missing.")
        return
    if result.get("error"):
        warned = [w for r in cluster.get("ranks") or [] if r.get("error") for w in r.get("nccl_warnings") or []]
        said = "".join(f"NCCL WARN {w}\n" for w in list(dict.fromkeys(warned))[:8])
        yield finding("RUN031", f"{what} failed: {result['error']}",
                      detail=(said + (result.get("stderr_tail") or "")[-800:]).strip(),
                      text="Distributed training across these nodes will fail the same way. Check that every node "
                           "reaches the rendezvous endpoint and every other node (firewalls, security groups), that "
                           "NCCL picks the right interface (NCCL_SOCKET_IFNAME) and, with InfiniBand, that the "
                           "containers see /dev/infiniband; run again with NCCL's log for its own account.",
                      commands=[NCCL_DEBUG_RUN])
        return
    if result.get("correct") is False:
        yield finding("RUN031", f"{what} gave wrong sums: {result.get('wrong_elements')} wrong element(s)",
                      text="A collective that returns wrong values corrupts gradients silently. Check every node's "
                           "own findings (ECC, P2P copies) and the network; drain the nodes involved.",
                      commands=["nvidia-smi -q -d ECC", NCCL_DEBUG_RUN])


def check_nodes(facts: Facts) -> Iterator[Finding]:
    """Each other node's own verdict, as judged on that node: rank 0's exit code covers the whole job."""
    cluster = _cluster(facts)
    for node in cluster.get("nodes") or []:
        if node.get("self"):
            continue
        name = f"node {node.get('hostname')} (node rank {node.get('node_rank')})"
        report = node.get("report")
        if isinstance(report, dict) and report.get("merged_as"):
            continue  # `merge` shows that node as a row of its own
        if isinstance(report, dict) and report.get("error") and not report.get("findings"):
            yield finding("RUN032", f"{name}: {report['error']}",
                          text="Run `gpudoctor check` on that node.", commands=["gpudoctor check"], severity=WARNING)
            continue
        if not isinstance(report, dict):
            yield finding("RUN032", f"{name} sent no report of its own check",
                          text="Its local rank 0 did not finish its check; run `gpudoctor check` on that node.",
                          commands=["gpudoctor check"], severity=WARNING)
            continue
        problems = [f for f in report.get("findings") or [] if isinstance(f, dict) and f.get("severity") in REPORTED]
        if not problems:
            continue
        worst = ERROR if any(f.get("severity") == ERROR for f in problems) else WARNING
        codes = ", ".join(dict.fromkeys(str(f.get("code")) for f in problems))
        yield finding("RUN032", f"{name} reports {len(problems)} problem(s) of its own: {codes}",
                      detail="\n".join(f"{f.get('severity')} {f.get('code')}: {f.get('title')}" for f in problems[:20]),
                      text="Fix them on that node (its report is inside this one, under facts.cluster.nodes); "
                           "`gpudoctor check` there shows each with its fix.",
                      commands=["gpudoctor check"], severity=worst)


def _node_values(facts: Facts, cluster: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """(node name, {what: version}) for every node: the driver from its own facts, PyTorch and NCCL
    from what its ranks loaded."""
    out = []
    for node in cluster.get("nodes") or []:
        node_facts = facts if node.get("self") else (node.get("report") or {}).get("facts")
        values: dict[str, str] = {}
        if isinstance(node_facts, dict):
            driver = known(get(node_facts, "nvml.driver_version"))
            if driver:  # a branch (580): patch releases of one branch mix fine, and the CUDA version follows it
                values["driver branch"] = str(driver).split(".")[0]
        ranks = [r for r in cluster.get("ranks") or [] if r.get("node_rank") == node.get("node_rank")]
        for label, key in (("PyTorch", "torch"), ("NCCL", "nccl_version")):
            seen = sorted({str(r[key]) for r in ranks if r.get(key)})
            if seen:
                values[label] = " / ".join(seen)
        out.append((f"{node.get('hostname')} (node rank {node.get('node_rank')})", values))
    return out


def check_drift(facts: Facts) -> Iterator[Finding]:
    cluster = _cluster(facts)
    nodes = _node_values(facts, cluster)
    if len(nodes) < 2:
        raise NotApplicable("one node")
    differing = []
    for label in ("driver branch", "PyTorch", "NCCL"):
        values: dict[str, list[str]] = {}
        for name, found in nodes:
            if label in found:
                values.setdefault(found[label], []).append(name)
        if len(values) > 1:
            differing.append(f"{label}: " + "; ".join(f"{v} ({', '.join(ns)})" for v, ns in values.items()))
    if differing:
        yield finding("RUN033", f"the nodes of this job run different versions: {', '.join(d.split(':')[0] for d in differing)}",
                      detail="\n".join(differing),
                      text="Ranks with different NCCL or PyTorch versions can fail or hang in collectives, and "
                           "different drivers behave differently; install the same versions on every node (one "
                           "container image, one driver).")


def check_network(facts: Facts) -> Iterator[Finding]:
    cluster = _cluster(facts)
    result = cluster.get("allreduce") or {}
    nodes = cluster.get("nodes") or []
    hosts = {r.get("hostname") for r in cluster.get("ranks") or []}
    if len(nodes) < 2 or len(hosts) < 2:
        raise NotApplicable("every rank ran on one host: no traffic between nodes")
    if "Socket" not in (result.get("networks") or []):
        return
    settings = [r.get("nccl_settings") or {} for r in cluster.get("ranks") or []]
    if any(s.get("NCCL_IB_DISABLE") == "1" or s.get("NCCL_NET", "").lower() == "socket" for s in settings):
        return  # sockets were asked for
    # InfiniBand/RoCE with an active port; EFA (AWS) is not reached through NCCL's IB transport at all
    with_rdma = [f"{n.get('hostname')} ({', '.join(d for d in n['infiniband'] if not _efa(d))})" for n in nodes
                 if isinstance(n.get("infiniband"), list) and any(not _efa(d) for d in n["infiniband"])]
    if with_rdma:
        yield finding("RUN034", "NCCL sent the all-reduce between nodes over TCP sockets although "
                                f"{len(with_rdma)} node(s) have InfiniBand/RoCE devices: {'; '.join(with_rdma)}",
                      detail=f"NCCL chose the network: {', '.join(result.get('networks') or [])}; "
                             f"bus bandwidth {result.get('busbw_gbs', 0):.1f} GB/s.",
                      text="Sockets are many times slower than RDMA. Check that NCCL_IB_DISABLE is not set, that the "
                           "container sees /dev/infiniband and may lock memory (IPC_LOCK, memlock unlimited), that "
                           "libibverbs (rdma-core) is installed, and NCCL_IB_HCA if set.",
                      commands=["ibv_devinfo", "env | grep ^NCCL_", NCCL_DEBUG_RUN])


def _efa(device: str) -> bool:
    return device.startswith(("efa", "rdmap"))


CHECKS = (
    Check("acceleration.cluster", "acceleration", "an NCCL all-reduce across every rank of the torchrun job works "
          "(--deep under torchrun)", ("RUN031", "RUN035"), check_collective, ()),
    Check("acceleration.cluster_nodes", "acceleration", "every node of the torchrun job passes its own check",
          ("RUN032",), check_nodes, ()),
    Check("acceleration.cluster_drift", "acceleration", "the nodes of the torchrun job run the same driver branch, "
          "PyTorch and NCCL", ("RUN033",), check_drift, ()),
    Check("acceleration.cluster_network", "acceleration", "NCCL uses RDMA between nodes that have it",
          ("RUN034",), check_network, ()),
)
