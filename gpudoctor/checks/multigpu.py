"""Proof that the GPUs work together (check --deep): P2P copies between every pair, correct and at the
speed of their link, and an NCCL all-reduce across all of them, correct and as fast as the reference for
this many GPUs of this model. Apart from the single-GPU proofs (checks/smoke.py, checks/workload.py)
because they judge the multi-GPU child's results and the topology the NVML probe reported, and name GPU
pairs rather than GPUs."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, Iterator

from gpudoctor.checks.base import XID_COMMAND, Check, Facts, NotApplicable, finding
from gpudoctor.findings import Finding, Subject
from gpudoctor.snapshot import known
from gpudoctor.views.topology import allreduce_setting, cuda_to_nvml, link_label, links_by_pair, pair_subject, slowest_pair

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix


def _multigpu(facts: Facts) -> dict[str, Any]:
    multigpu = facts.get("multigpu")
    if not isinstance(multigpu, dict):
        raise NotApplicable("the multi-GPU tests were not run: they run with `check --deep` (not with --quick)")
    if multigpu.get("skipped"):
        raise NotApplicable(f"the multi-GPU tests were skipped: {multigpu['skipped']}")
    return multigpu


def _arrow(pair: dict[str, Any]) -> str:
    return f"cuda:{pair.get('src')} -> cuda:{pair.get('dst')}"


def _subject_of(facts: Facts, index: dict[Any, int], pairs: list[dict[str, Any]]) -> Subject:
    """The GPU pair when every one of ``pairs`` joins the same two GPUs, else the host."""
    ends = {frozenset((index.get(p.get("src")), index.get(p.get("dst")))) for p in pairs}
    if len(ends) == 1:
        a, b = sorted(next(iter(ends)), key=lambda i: (i is None, i))
        if a is not None and b is not None:
            return pair_subject(facts, a, b)
    return Subject()


def check_p2p(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    multigpu = _multigpu(facts)
    p2p = multigpu.get("p2p")
    if not isinstance(p2p, dict):
        raise NotApplicable("the P2P test was not run")
    if p2p.get("error"):
        yield finding("RUN023", f"the P2P test between the GPUs did not complete: {p2p['error']}",
                      detail=(p2p.get("stderr_tail") or p2p.get("traceback_tail") or "")[-800:],
                      text="The error names the cause; a crash or hang copying between GPUs points at the driver, "
                           "the NVLink fabric or a GPU: read the kernel log.", commands=[XID_COMMAND])
        return
    index, links = cuda_to_nvml(facts, multigpu), links_by_pair(facts)
    pairs = [p for p in p2p.get("pairs") or [] if isinstance(p, dict)]

    def link(pair: dict[str, Any]) -> dict[str, Any]:
        a, b = index.get(pair.get("src")), index.get(pair.get("dst"))
        return links.get(frozenset((a, b)), {}) if a is not None and b is not None and a != b else {}

    failed = [p for p in pairs if p.get("error") or p.get("wrong_elements")]
    if failed:
        what = [f"{_arrow(p)}: " + (p["error"] if p.get("error") else f"{p['wrong_elements']} wrong elements of the copy")
                for p in failed]
        yield finding("RUN023", f"copying between GPUs failed on {len(failed)} of {len(pairs)} ordered pair(s): {what[0]}",
                      subject=_subject_of(facts, index, failed),
                      detail=("All: " + "; ".join(what))[:1500] + "." if len(what) > 1 else
                      "256 MiB copied; the destination is compared element by element with the source's pattern.",
                      text="Data moved between these GPUs is lost or corrupted. Check the kernel log for Xid errors and "
                           "the NVLink error counters; reset the GPUs or reboot, and drain the node if it recurs.",
                      commands=[XID_COMMAND, "nvidia-smi nvlink --errorcounters"])
    refused = [p for p in pairs if p.get("access") is False and known((link(p).get("p2p") or {}).get("read")) == "ok"]
    if refused:
        yield finding("RUN021", f"CUDA refuses peer access on {len(refused)} ordered GPU pair(s) that NVML reports "
                                f"P2P-capable: {', '.join(_arrow(p) for p in refused)}",
                      subject=_subject_of(facts, index, refused),
                      detail="torch.cuda.can_device_access_peer returned false; NVML's P2P read status for the pair is ok.",
                      text="Copies and NCCL traffic between them are staged through host memory. Look for what hides the "
                           "peer from CUDA programs here: a VM or container setting, IOMMU/ACS, or the GPUs split "
                           "between processes by CUDA_VISIBLE_DEVICES.",
                      commands=["nvidia-smi topo -p2p r", "nvidia-smi topo -m"])
    yield from _slow_links(facts, matrix, index, [(p, link(p)) for p in pairs if not p.get("error")])


def _slow_links(facts: Facts, matrix: Matrix, index: dict[Any, int],
                pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> Iterator[Finding]:
    """An NVLink pair whose copies run at less than half the median of the other pairs with as many NVLinks
    (the same pair's other direction left out). Fewer than two such pairs: nothing to compare with."""
    share = matrix.topic("performance").get("thresholds", {}).get("p2p_peer_median_share", 0.5)
    nvlinked = [(p, lk) for p, lk in pairs if lk.get("nvlink_count") and isinstance(p.get("gbs"), (int, float))]
    by_link: dict[frozenset, list[dict[str, Any]]] = {}
    for pair, link in nvlinked:
        by_link.setdefault(frozenset(link["gpus"]), []).append(pair)
    for ends, directions in by_link.items():
        link = next(lk for p, lk in nvlinked if frozenset(lk["gpus"]) == ends)
        peers = [p["gbs"] for p, lk in nvlinked if frozenset(lk["gpus"]) != ends and lk["nvlink_count"] == link["nvlink_count"]]
        if len(peers) < 2:
            continue
        median = statistics.median(peers)
        slow = sorted((p for p in directions if p["gbs"] < share * median), key=lambda p: p["gbs"])
        if not slow:
            continue
        a, b = sorted(ends)
        label = link_label(link)
        figures = " and ".join(f"{p['gbs']:.0f} GB/s ({_arrow(p)})" for p in slow)
        yield finding("RUN022", f"copies between GPU {a} and GPU {b} ({label}) run at {figures}, "
                                f"{slow[0]['gbs'] / median:.2f} x the median of the other {label} pairs ({median:.0f} GB/s)",
                      subject=pair_subject(facts, a, b),
                      detail=f"256 MiB copies, median of repeats; below {share:g} x the median of {len(peers)} other "
                             f"ordered {label} pair(s). The slowest link bounds every collective that crosses it.",
                      text="Check this pair's NVLinks: links down or at a lower speed, rising error counters, Xid errors "
                           "in the kernel log. Drain the node if a link is degraded.",
                      commands=[f"nvidia-smi nvlink --status -i {a}", f"nvidia-smi nvlink --status -i {b}",
                                "nvidia-smi nvlink --errorcounters", XID_COMMAND])


def check_allreduce(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    multigpu = _multigpu(facts)
    result = multigpu.get("allreduce")
    if not isinstance(result, dict):
        raise NotApplicable("the all-reduce was not run")
    world = result.get("world_size")
    what = f"the NCCL all-reduce across {world} GPUs" if world else "the NCCL all-reduce"
    if result.get("error"):
        yield finding("RUN024", f"{what} failed: {result['error']}",
                      detail=(result.get("stderr_tail") or "")[-800:],
                      text="Multi-GPU training cannot run here until this works. Run again with NCCL_DEBUG=INFO for "
                           "NCCL's own account; check the P2P findings, the size of /dev/shm in a container, and the "
                           "kernel log.", commands=["df -h /dev/shm", XID_COMMAND])
        return
    if result.get("correct") is False:
        bad = [r for r in result.get("ranks") or [] if r.get("correct") is False]
        first: dict[str, Any] = next((c for r in bad for c in r.get("checks") or [] if c.get("wrong_elements")), {})
        yield finding("RUN024", f"{what} gave wrong sums: {result.get('wrong_elements')} wrong element(s) on "
                                f"rank(s) {', '.join(str(r.get('rank')) for r in bad)} (expected {result.get('expected')} everywhere)",
                      detail=f"First wrong value: {first.get('first_wrong_value')} at element {first.get('first_wrong_index')}."
                      if first else "",
                      text="A collective that returns wrong values corrupts gradients silently. Check the P2P findings "
                           "(a copy returning wrong data), ECC errors and the kernel log; drain the node.",
                      commands=["nvidia-smi -q -d ECC", XID_COMMAND])
        return
    busbw = result.get("busbw_gbs")
    if not isinstance(busbw, (int, float)):
        return
    measured = f"bus bandwidth {busbw:.0f} GB/s (algorithm bandwidth {result.get('algbw_gbs', 0):.0f} GB/s, " \
               f"{result.get('bytes', 0) / 2**20:.0f} MiB {result.get('dtype', '')})"
    from gpudoctor.compat.rules import allreduce_row

    model, label = allreduce_setting(facts, multigpu, world)
    reference = allreduce_row(matrix, model, world, label)
    where = f"{world} x {model or 'mixed GPUs'} ({label})"
    if reference is None:
        yield finding("RUN026", f"no reference all-reduce bandwidth for {where}; measured {measured}",
                      text="Update gpudoctor, or add the figure to the matrix with --matrix FILE.")
        return
    share = matrix.topic("performance").get("thresholds", {}).get("allreduce_reference_share", 0.7)
    if busbw < share * reference["busbw_gbs"]:
        yield finding("RUN025", f"{what} is slow: {measured}, {busbw / reference['busbw_gbs']:.2f} x the "
                                f"{reference['busbw_gbs']} GB/s measured on {where}",
                      detail=f"Below {share:g} x the measured reference. " + _slowest_link(multigpu),
                      text="Look at the slowest link named above, the P2P findings and other processes on the GPUs; "
                           "run gpudoctor again on idle GPUs.",
                      commands=["nvidia-smi topo -m", "nvidia-smi nvlink --status"])


def _slowest_link(multigpu: dict[str, Any]) -> str:
    found = slowest_pair(multigpu.get("p2p"))
    if not found:
        return "No P2P copy figures to compare the links with."
    slow, median, count = found
    return (f"Slowest P2P pair: {_arrow(slow)} at {slow['gbs']:.0f} GB/s, {slow['gbs'] / median:.2f} x the median of "
            f"all {count} ordered pairs ({median:.0f} GB/s).")


CHECKS = (
    Check("acceleration.p2p", "acceleration", "every pair of GPUs copies to each other, at the speed of its link (--deep)",
          ("RUN021", "RUN022", "RUN023"), check_p2p, ("multigpu", "nvml"), reads_matrix=True),
    Check("acceleration.allreduce", "acceleration", "an NCCL all-reduce across all GPUs is correct and fast (--deep)",
          ("RUN024", "RUN025", "RUN026"), check_allreduce, ("multigpu", "nvml"), reads_matrix=True),
)
