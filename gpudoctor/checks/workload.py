"""Proof that each installed framework uses the GPUs: correctness against a CPU reference, a training
step that learns, and throughput against what the GPU model should reach. Apart from the smoke kernel
(checks/smoke.py) because these judge the framework workload child's results, which exist only when a
framework is installed, and which throughput compares with the matrix's performance references."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, cast

from gpudoctor.checks.base import XID_COMMAND, Check, Facts, NotApplicable, finding, nvml_index
from gpudoctor.findings import Finding, Subject
from gpudoctor.frameworks_table import NAMES
from gpudoctor.views.throughput import matmul, shared
from gpudoctor.views.topology import PCIE_GB_PER_LANE

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix
    from gpudoctor.facts_types import FrameworkFacts

STEPS = ("elementwise", "matmul", "conv")


def _workload(facts: Facts) -> dict[str, Any]:
    workload = facts.get("workload")
    if not isinstance(workload, dict):
        raise NotApplicable("no framework workload was run (--quick)")
    if not workload.get("runs"):
        raise NotApplicable("no framework is installed")
    return workload


def _label(run: dict[str, Any]) -> str:
    framework: Any = run.get("framework")
    where = "the CPU" if run.get("device") == "cpu" else f"cuda:{run.get('device')}" + (f" ({run['name']})" if run.get("name") else "")
    return f"{NAMES.get(framework, framework)} on {where}"


def _run_subject(facts: Facts, run: dict[str, Any]) -> Subject:
    devices = ((facts.get("smoke") or {}).get("count") or {}).get("devices") or []
    uuid = next((d.get("uuid") for d in devices if str(d.get("ordinal")) == str(run.get("device"))), None)
    return Subject("gpu", nvml_index(facts, uuid), uuid) if uuid else Subject()


def check_workload(facts: Facts) -> Iterator[Finding]:
    workload = _workload(facts)
    frameworks = {n: cast("FrameworkFacts", fw) for n, fw in (facts.get("frameworks") or {}).items() if isinstance(fw, dict)}
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
        for step in STEPS + ("training", "throughput"):
            result = run.get(step)
            if not isinstance(result, dict) or (step == "throughput" and ("error" not in result or shared(result))):
                continue  # a measured throughput, or one that failed beside another process, is check_throughput's
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


def check_throughput(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    workload = _workload(facts)
    from gpudoctor.compat import rules as compat

    timed = [r for r in workload["runs"] if isinstance(r.get("throughput"), dict) and r.get("name")
             and (r["throughput"].get("ok") or ("error" in r["throughput"] and shared(r["throughput"])))]
    if not timed:  # a pass here would say throughput is fine when none was measured (a gate reads that)
        raise NotApplicable("no throughput was measured on a GPU")
    limits = matrix.topic("performance").get("thresholds", {})
    for run in timed:
        figures = run["throughput"]
        subject, label = _run_subject(facts, run), _label(run)
        sharing = (figures.get("sharing") or {}) if isinstance(figures.get("sharing"), dict) else {}
        if sharing.get("shared"):  # slow, or failed (out of memory another process took): the GPU was not its own
            yield finding("RUN019", f"{label}: throughput not judged, another process used this GPU while it was measured "
                                    f"({_processes(sharing.get('others'))})", subject=subject,
                          detail=_figures(figures) or f"The measurement failed: {figures.get('error', '')}",
                          text="A shared GPU measures slower than an idle one. Run gpudoctor again when the GPU is idle "
                               "to judge its speed.",
                          commands=["nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"])
            continue
        gpu: dict[str, Any] = next((g for g in facts.get("gpus") or [] if g.get("index") == subject.gpu_index), {})
        slow = []
        entry = compat.performance_entry(matrix, run["name"])
        if entry is None:
            yield finding("RUN018", f"{label}: no expected throughput known for this GPU model; measured "
                                    f"{_matmul(figures)}, {figures['device_copy_gbs']:.0f} GB/s copy",
                          subject=subject, text="Update gpudoctor, or add the model to the matrix with --matrix FILE.")
        else:
            reference = entry.get("measured") or {}
            for key, got, ref_key, peak_key in (("bf16 matmul", figures.get("matmul_bf16_tflops"), "bf16_matmul_tflops", "bf16_dense_tflops"),
                                                ("device copy", figures["device_copy_gbs"], "device_copy_gbs", "memory_gbs")):
                if got is None:
                    continue  # a GPU without bf16 is not measured in it
                ref, share, kind = (reference[ref_key], limits.get("measured_reference_share", 0.8), "measured on this model") \
                    if ref_key in reference else (entry[peak_key], limits.get("datasheet_share", 0.5), "datasheet peak")
                if got < share * ref:
                    slow.append(f"{key} {got:.0f} vs {ref} expected ({kind}; below {share:.0%})")
        link = _pcie_rate(gpu)
        if link and figures.get("h2d_gbs") and figures["h2d_gbs"] < limits.get("pcie_theoretical_share", 0.6) * link:
            slow.append(f"host-to-device {figures['h2d_gbs']:.1f} GB/s vs {link:.1f} GB/s for the PCIe link")
        if slow:
            unsure = f" Whether another process used the GPU meanwhile is unknown: {sharing['why']}." \
                if sharing.get("shared") is None and sharing.get("why") else ""
            yield finding("RUN014", f"{label} is slower than this GPU should be: " + "; ".join(slow), subject=subject,
                          detail=_likely_causes(gpu) + unsure, text="Look at the likely causes above; run gpudoctor again on an idle GPU.",
                          commands=[f"nvidia-smi -q -d PERFORMANCE,POWER,PCIE -i {gpu.get('index', 0)}"])


def _matmul(figures: dict[str, Any]) -> str:
    figure = matmul(figures)
    return f"{figure[1]:.0f} TFLOP/s {figure[0]}" if figure else "no matmul figure"


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


CHECKS = (
    Check("acceleration.workload", "acceleration", "each framework computes correctly and trains on every GPU",
          ("RUN011", "RUN012", "RUN013", "RUN015", "RUN016", "RUN017"), check_workload, ("workload",)),
    Check("acceleration.throughput", "acceleration", "throughput is what this GPU model should reach",
          ("RUN014", "RUN018", "RUN019"), check_throughput, ("workload", "nvml"), reads_matrix=True),
)
