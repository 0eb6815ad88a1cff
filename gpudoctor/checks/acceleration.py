"""Proof of acceleration: did the framework-free smoke kernel run, and compute the right numbers,
on every GPU CUDA enumerates? Each CUDA error is mapped to its meaning and fix (CUDA driver API
reference, "Error Handling"; cuInit's documented returns include 802-804)."""

from __future__ import annotations

import statistics
from typing import Any, Iterator

from gpudoctor.checks.base import XID_COMMAND, Check, Facts, NotApplicable, finding, nvml_ready
from gpudoctor.findings import Finding, Subject
from gpudoctor.snapshot import known
from gpudoctor.views.frameworks import NAMES
from gpudoctor.views.topology import (PCIE_GB_PER_LANE, allreduce_reference, cuda_to_nvml, link_label, links_by_pair,
                                      pair_subject, slowest_pair)
from gpudoctor.views.visibility import resolve

#: CUresult -> (what it means here, how to fix it, commands)
CUDA_ERRORS: dict[int, tuple[str, str, tuple[str, ...]]] = {
    2: ("out of GPU memory", "Another process holds the GPU's memory; free it or pick another GPU.",
        ("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",)),
    3: ("CUDA could not initialise", "Check the driver (nvidia-smi) and the kernel log.", ("nvidia-smi",)),
    34: ("the libcuda.so.1 loaded is the toolkit's stub, not the driver's",
         "Remove the toolkit's stubs directory from LD_LIBRARY_PATH and the loader cache.", ("echo $LD_LIBRARY_PATH",)),
    46: ("the GPU is busy or unavailable (exclusive or prohibited compute mode, or in use)",
         "Check the compute mode and the processes on the GPU.", ("nvidia-smi -q -d COMPUTE",)),
    100: ("CUDA enumerates no device", "Check CUDA_VISIBLE_DEVICES and, in a container, that the GPUs were passed in.",
          ("echo $CUDA_VISIBLE_DEVICES", "ls -l /dev/nvidia*")),
    101: ("CUDA_VISIBLE_DEVICES or the device number is invalid", "Fix CUDA_VISIBLE_DEVICES.", ("echo $CUDA_VISIBLE_DEVICES",)),
    209: ("there is no kernel image for this GPU", "The code carries no machine code or PTX for this GPU.", ()),
    214: ("an uncorrectable ECC error occurred", "Drain the GPU; reboot or reset it; replace it if it recurs.",
          ("nvidia-smi -q -d ECC",)),
    218: ("the driver's PTX JIT compiler rejected the PTX", "Reinstall the driver (its JIT compiler library is broken).", ()),
    221: ("the driver's PTX JIT compiler library is missing", "Reinstall the driver; in a container, mount its compute libraries "
          "(NVIDIA_DRIVER_CAPABILITIES must include compute).", ()),
    222: ("the PTX is newer than this driver can compile", "Upgrade the driver.", ()),
    700: ("the kernel accessed an illegal address", "The GPU or driver misbehaved on a known-good kernel: reset the GPU or reboot, "
          "and check the kernel log for Xid errors.", (XID_COMMAND,)),
    719: ("the kernel launch failed", "The GPU or driver misbehaved on a known-good kernel: check the kernel log for Xid errors.",
          (XID_COMMAND,)),
    802: ("the system is not ready: on NVSwitch systems the Fabric Manager is not running",
          "Start the NVIDIA Fabric Manager service matching the driver version.",
          ("systemctl status nvidia-fabricmanager", "sudo systemctl enable --now nvidia-fabricmanager")),
    803: ("the user-space driver (libcuda) and the kernel module do not match",
          "Often a forward-compatibility (cuda-compat) libcuda or a stale libcuda on the search path; or a driver upgrade "
          "without a reboot. Remove the stray libcuda, or reboot.", ("ldconfig -p | grep libcuda.so", "cat /proc/driver/nvidia/version")),
    804: ("the forward-compatibility package (cuda-compat) is in use on a GPU that does not support it",
          "Forward compatibility works only on datacenter GPUs; remove cuda-compat from the loader path.",
          ("ldconfig -p | grep libcuda.so",)),
    999: ("an unknown CUDA error, most often /dev/nvidia-uvm missing or a driver fault",
          "Check that /dev/nvidia-uvm exists (nvidia-modprobe -u) and read the kernel log.",
          ("ls -l /dev/nvidia-uvm", "sudo dmesg | grep -i -E 'nvrm|xid' | tail -n 20")),
}


def _smoke(facts: Facts) -> dict[str, Any]:
    smoke = facts.get("smoke")
    if not isinstance(smoke, dict):
        raise NotApplicable("the smoke kernel was not run (--quick)")
    if not nvml_ready(facts) or not resolve(facts).devices:
        raise NotApplicable("no GPU is visible to CUDA programs here")
    return smoke


def check_smoke(facts: Facts) -> Iterator[Finding]:
    smoke = _smoke(facts)
    count = smoke.get("count") or {}
    if "devices" not in count:
        yield _cuda_failure(count, Subject(), "before any GPU could be tested")
        return
    expected = len(resolve(facts).devices)
    if len(count["devices"]) < expected:
        yield finding("RUN003", f"CUDA enumerates {len(count['devices'])} GPU(s) but {expected} should be visible",
                      text="A GPU NVML lists is missing from CUDA's enumeration; check its state and the kernel log.",
                      commands=["nvidia-smi -L", XID_COMMAND])
    for run in smoke.get("runs") or []:
        subject = Subject("gpu", _nvml_index(facts, run.get("uuid")), run.get("uuid"))
        where = f"cuda:{run.get('ordinal')} ({run.get('name')})"
        if "error" in run:
            yield _cuda_failure(run["error"], subject, f"on {where}")
        elif not run.get("ok"):
            yield finding("RUN002", f"the smoke kernel computed wrong results on {where}: "
                                    f"{run.get('wrong_elements')} of {run.get('elements')} elements",
                          subject=subject, detail=f"First wrong elements [index, got, expected]: {run.get('first_wrong')}.",
                          text="A GPU that computes a known-good kernel wrongly is faulty or unstable: drain it, check "
                               "ECC errors and the kernel log, and run the vendor's diagnostics (dcgmi diag -r 3).",
                          commands=["nvidia-smi -q -d ECC", XID_COMMAND])


def _nvml_index(facts: Facts, uuid: Any) -> Any:
    for gpu in facts.get("gpus") or []:
        if gpu.get("uuid") == uuid:
            return gpu.get("index")
    return None


def _cuda_failure(error: dict[str, Any], subject: Subject, where: str) -> Finding:
    code = error.get("code")
    meaning, fix, commands = CUDA_ERRORS.get(code, ("", "Read the error name; check the driver and the kernel log.",
                                                    ("nvidia-smi",)))
    name = error.get("name")
    message = error.get("message", "")
    if name == "library_not_found":
        meaning, fix = "libcuda.so.1 (the driver's CUDA library) cannot be loaded", \
                       "Install the driver's CUDA library; in a container, NVIDIA_DRIVER_CAPABILITIES must include compute."
    title = f"the smoke kernel failed {where}: {error.get('step')} returned {name}" + (f" ({code})" if code is not None else "")
    return finding("RUN001", title, subject=subject, detail=(meaning + ". " if meaning else "") + message,
                   text=fix, commands=list(commands))


CHECKS = (
    Check("acceleration.smoke", "acceleration", "a kernel runs and computes correctly on every GPU",
          ("RUN001", "RUN002", "RUN003"), check_smoke, ("smoke", "nvml")),
)


# --- framework workloads: correctness, a training step, throughput --------------------------------

STEPS = ("elementwise", "matmul", "conv")


def _workload(facts: Facts) -> dict[str, Any]:
    workload = facts.get("workload")
    if not isinstance(workload, dict):
        raise NotApplicable("no framework workload was run (--quick)")
    if not workload.get("runs"):
        raise NotApplicable("no framework is installed")
    return workload


def _label(run: dict[str, Any]) -> str:
    where = "the CPU" if run.get("device") == "cpu" else f"cuda:{run.get('device')}" + (f" ({run['name']})" if run.get("name") else "")
    return f"{NAMES.get(run.get('framework'), run.get('framework'))} on {where}"


def _run_subject(facts: Facts, run: dict[str, Any]) -> Subject:
    devices = ((facts.get("smoke") or {}).get("count") or {}).get("devices") or []
    uuid = next((d.get("uuid") for d in devices if str(d.get("ordinal")) == str(run.get("device"))), None)
    return Subject("gpu", _nvml_index(facts, uuid), uuid) if uuid else Subject()


def check_workload(facts: Facts) -> Iterator[Finding]:
    workload = _workload(facts)
    frameworks = {n: fw for n, fw in (facts.get("frameworks") or {}).items() if isinstance(fw, dict)}
    imported = {n: fw.get("status") for n, fw in frameworks.items()}
    blind = {n for n, fw in frameworks.items() if fw.get("status") == "ok"
             and isinstance(fw.get("info"), dict) and fw["info"].get("devices") == []}
    for run in workload["runs"]:
        if imported.get(run.get("framework")) not in (None, "ok"):
            continue  # its import failure is FWK004/FWK005 already
        if run.get("framework") in blind and run.get("device") != "cpu" and run.get("error"):
            continue  # it sees no GPU: FWK002 names why, once, not once more per GPU
        subject, label = _run_subject(facts, run), _label(run)
        if run.get("error"):
            yield finding("RUN016", f"the {label} workload did not complete: {run['error']}", subject=subject,
                          detail=(run.get("stderr_tail") or run.get("traceback_tail") or "")[-800:],
                          text="The framework cannot run work here; the error names the cause.")
            continue
        if run.get("skipped") and run.get("device") != "cpu":
            yield finding("RUN015", f"{label}: GPU work skipped: {run['skipped']}", subject=subject,
                          text="gpudoctor does not load a GPU that someone else is using. Run it again when the GPU is free.")
        for step in STEPS + ("training",):
            result = run.get(step)
            if not isinstance(result, dict):
                continue
            if "error" in result:
                yield finding("RUN012", f"{label}: the {step} step failed: {result['error']}", subject=subject,
                              detail=result.get("traceback_tail", "")[-600:],
                              text="The framework sees the GPU but cannot run this work on it; the error names why "
                                   "(a cuDNN or cuBLAS failure, a missing kernel image, out of memory).")
            elif step == "training" and not result.get("ok"):
                yield finding("RUN013", f"{label}: the training step did not learn", subject=subject,
                              detail=f"loss {result.get('loss_first')} -> {result.get('loss_last')} in {result.get('steps')} "
                                     f"steps; parameters updated: {result.get('params_updated')}; finite: {result.get('finite')}.",
                              text="A framework that runs but does not learn computes wrong gradients or NaNs: check the "
                                   "other steps' results and the GPU's health.")
            elif not result.get("ok"):
                bad = [c for c in result.get("checks", [result]) if not c.get("ok")]
                what = "; ".join(f"{c.get('what')}: error {c.get('rel_error'):.2g} > {c.get('tolerance'):.0e}" for c in bad)
                yield finding("RUN011", f"{label}: wrong results ({what})", subject=subject,
                              text="The GPU returns results far from the CPU reference: a faulty GPU, or a broken "
                                   "library. Check ECC errors and the kernel log.",
                              commands=["nvidia-smi -q -d ECC", XID_COMMAND])
        training = run.get("training") or {}
        if run.get("device") == "cpu" and training.get("ok"):
            yield finding("RUN017", f"{label}: no GPU here, so the training step ran on the CPU only "
                                    f"(loss {training.get('loss_first'):.3f} -> {training.get('loss_last'):.3f})",
                          text="The framework's training code path works; acceleration cannot be shown without a GPU.")


def check_throughput(facts: Facts) -> Iterator[Finding]:
    workload = _workload(facts)
    from gpudoctor.compat import data as matrix, rules as compat

    measured = [r for r in workload["runs"] if isinstance(r.get("throughput"), dict) and r["throughput"].get("ok") and r.get("name")]
    if not measured:  # a pass here would say throughput is fine when none was measured (a gate reads that)
        raise NotApplicable("no throughput was measured on a GPU")
    limits = matrix.load_topic("performance").get("thresholds", {})
    for run in measured:
        figures = run["throughput"]
        subject, label = _run_subject(facts, run), _label(run)
        shared = (figures.get("sharing") or {}) if isinstance(figures.get("sharing"), dict) else {}
        if shared.get("shared"):
            yield finding("RUN019", f"{label}: throughput not judged, another process used this GPU while it was measured "
                                    f"({_processes(shared.get('others'))})", subject=subject,
                          detail=_figures(figures),
                          text="A shared GPU measures slower than an idle one. Run gpudoctor again when the GPU is idle "
                               "to judge its speed.",
                          commands=["nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"])
            continue
        gpu = next((g for g in facts.get("gpus") or [] if g.get("index") == subject.gpu_index), {})
        slow = []
        entry = compat.performance_entry(run["name"])
        if entry is None:
            yield finding("RUN018", f"{label}: no expected throughput known for this GPU model; measured "
                                    f"{figures['matmul_bf16_tflops']:.0f} TFLOP/s bf16, {figures['device_copy_gbs']:.0f} GB/s copy",
                          subject=subject, text="Update gpudoctor, or add the model to the matrix with --matrix FILE.")
        else:
            measured = entry.get("measured") or {}
            for key, got, ref_key, peak_key in (("bf16 matmul", figures["matmul_bf16_tflops"], "bf16_matmul_tflops", "bf16_dense_tflops"),
                                                ("device copy", figures["device_copy_gbs"], "device_copy_gbs", "memory_gbs")):
                ref, share, kind = (measured[ref_key], limits.get("measured_reference_share", 0.8), "measured on this model") \
                    if ref_key in measured else (entry[peak_key], limits.get("datasheet_share", 0.5), "datasheet peak")
                if got < share * ref:
                    slow.append(f"{key} {got:.0f} vs {ref} expected ({kind}; below {share:.0%})")
        link = _pcie_rate(gpu)
        if link and figures.get("h2d_gbs") and figures["h2d_gbs"] < limits.get("pcie_theoretical_share", 0.6) * link:
            slow.append(f"host-to-device {figures['h2d_gbs']:.1f} GB/s vs {link:.1f} GB/s for the PCIe link")
        if slow:
            unsure = f" Whether another process used the GPU meanwhile is unknown: {shared['why']}." \
                if shared.get("shared") is None and shared.get("why") else ""
            yield finding("RUN014", f"{label} is slower than this GPU should be: " + "; ".join(slow), subject=subject,
                          detail=_likely_causes(gpu) + unsure, text="Look at the likely causes above; run gpudoctor again on an idle GPU.",
                          commands=[f"nvidia-smi -q -d PERFORMANCE,POWER,PCIE -i {gpu.get('index', 0)}"])


def _processes(others: Any) -> str:
    """'pid 4218 (python3, 1002 MiB)' for each other process NVML listed on the GPU."""
    parts = []
    for o in others if isinstance(others, list) else []:
        if isinstance(o, dict):
            extra = ", ".join(x for x in (str(o.get("name") or ""), _mib(o.get("used_memory_bytes"))) if x)
            parts.append(f"pid {o.get('pid')}" + (f" ({extra})" if extra else ""))
    return "; ".join(parts) or "a process NVML listed"


def _mib(value: Any) -> str:
    return f"{value / 2**20:.0f} MiB" if isinstance(value, (int, float)) and value > 0 else ""


def _figures(figures: dict[str, Any]) -> str:
    got = [f"{label} {figures[key]:.0f} {unit}" for key, label, unit in (
        ("matmul_bf16_tflops", "bf16 matmul", "TFLOP/s"), ("device_copy_gbs", "device copy", "GB/s"),
        ("h2d_gbs", "host-to-device", "GB/s")) if isinstance(figures.get(key), (int, float))]
    return "Measured on the shared GPU: " + ", ".join(got) + "." if got else ""


def _pcie_rate(gpu: dict[str, Any]) -> float:
    pcie = gpu.get("pcie") or {}
    gen, width = pcie.get("gen_max"), pcie.get("width_max")
    if isinstance(gen, int) and isinstance(width, int):
        return PCIE_GB_PER_LANE.get(gen, 0.0) * width
    return 0.0


def _likely_causes(gpu: dict[str, Any]) -> str:
    causes = []
    reasons = [r for r in ((gpu.get("clock_event_reasons") or {}).get("active") or []) if r != "gpu_idle"]
    if reasons:
        causes.append(f"clocks limited now by {', '.join(reasons)}")
    pcie = gpu.get("pcie") or {}
    if isinstance(pcie.get("width_current"), int) and isinstance(pcie.get("width_max"), int) and pcie["width_current"] < pcie["width_max"]:
        causes.append(f"PCIe link at x{pcie['width_current']} of x{pcie['width_max']}")
    if gpu.get("processes"):
        causes.append(f"{len(gpu['processes'])} other process(es) on the GPU")
    power = gpu.get("power") or {}
    if isinstance(power.get("limit_mw"), int):
        causes.append(f"power limit {power['limit_mw'] / 1000:.0f} W")
    return "Likely causes: " + ("; ".join(causes) if causes else "none visible in NVML (check cooling and other load)") + "."


CHECKS = CHECKS + (
    Check("acceleration.workload", "acceleration", "each framework computes correctly and trains on every GPU",
          ("RUN011", "RUN012", "RUN013", "RUN015", "RUN016", "RUN017"), check_workload, ("workload",)),
    Check("acceleration.throughput", "acceleration", "throughput is what this GPU model should reach",
          ("RUN014", "RUN018", "RUN019"), check_throughput, ("workload", "nvml")),
)


# --- multi-GPU (check --deep): P2P between every pair, an NCCL all-reduce across all ------------------



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


def check_p2p(facts: Facts) -> Iterator[Finding]:
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
    yield from _slow_links(facts, index, [(p, link(p)) for p in pairs if not p.get("error")])


def _slow_links(facts: Facts, index: dict[Any, int], pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> Iterator[Finding]:
    """An NVLink pair whose copies run at less than half the median of the other pairs with as many NVLinks
    (the same pair's other direction left out). Fewer than two such pairs: nothing to compare with."""
    from gpudoctor.compat import data as matrix

    share = matrix.load_topic("performance").get("thresholds", {}).get("p2p_peer_median_share", 0.5)
    nvlinked = [(p, l) for p, l in pairs if l.get("nvlink_count") and isinstance(p.get("gbs"), (int, float))]
    by_link: dict[frozenset, list[dict[str, Any]]] = {}
    for pair, link in nvlinked:
        by_link.setdefault(frozenset(link["gpus"]), []).append(pair)
    for ends, directions in by_link.items():
        link = next(l for p, l in nvlinked if frozenset(l["gpus"]) == ends)
        peers = [p["gbs"] for p, l in nvlinked if frozenset(l["gpus"]) != ends and l["nvlink_count"] == link["nvlink_count"]]
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


def check_allreduce(facts: Facts) -> Iterator[Finding]:
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
        first = next((c for r in bad for c in r.get("checks") or [] if c.get("wrong_elements")), {})
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
    model, label, reference = allreduce_reference(facts, multigpu, world)
    where = f"{world} x {model or 'mixed GPUs'} ({label})"
    if reference is None:
        yield finding("RUN026", f"no reference all-reduce bandwidth for {where}; measured {measured}",
                      text="Update gpudoctor, or add the figure to the matrix with --matrix FILE.")
        return
    from gpudoctor.compat import data as matrix

    share = matrix.load_topic("performance").get("thresholds", {}).get("allreduce_reference_share", 0.7)
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


CHECKS = CHECKS + (
    Check("acceleration.p2p", "acceleration", "every pair of GPUs copies to each other, at the speed of its link (--deep)",
          ("RUN021", "RUN022", "RUN023"), check_p2p, ("multigpu", "nvml")),
    Check("acceleration.allreduce", "acceleration", "an NCCL all-reduce across all GPUs is correct and fast (--deep)",
          ("RUN024", "RUN025", "RUN026"), check_allreduce, ("multigpu", "nvml")),
)
