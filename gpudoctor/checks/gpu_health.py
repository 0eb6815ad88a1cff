"""Each GPU's health and state: lost GPUs, memory errors, throttling, link width, modes, memory use.

Every check here stays quiet on a healthy machine: an idle GPU lowering its PCIe generation,
a GeForce card without ECC, a MIG GPU without utilisation counters are all normal.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterator

from gpudoctor.checks.base import DRIVER_LOG_COMMAND, XID_COMMAND, Check, Facts, NotApplicable, finding, nvml_ready, require_gpus
from gpudoctor.findings import Finding, gpu_subject
from gpudoctor.snapshot import get, gpus, is_unavailable, known

if TYPE_CHECKING:
    from gpudoctor.facts_types import GpuFacts

GIB = 1024**3
NEAR_SLOWDOWN_C = 5
MEMORY_HELD_SHARE = 0.5
HW_SLOWDOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def _label(gpu: GpuFacts) -> str:
    return f"GPU {gpu.get('index')} ({known(gpu.get('name')) or 'unknown model'})"


def check_lost(facts: Facts) -> Iterator[Finding]:
    if not nvml_ready(facts):
        raise NotApplicable("NVML is not available")
    for gpu in gpus(facts):
        handle = gpu.get("handle")
        if is_unavailable(handle) and handle["unavailable"] == "timeout":
            yield finding("GPU102", f"GPU {gpu['index']}: NVML did not finish reading it in time",
                          subject=gpu_subject(gpu),
                          text="A GPU whose queries hang will hang CUDA programs too. Check the kernel log for Xid "
                               "errors; the GPU probably needs a reset or the machine a reboot.",
                          commands=[XID_COMMAND])
        elif _lost(gpu):
            yield finding("GPU101", f"GPU {gpu['index']} has fallen off the bus",
                          subject=gpu_subject(gpu),
                          text="Reboot (or reset the GPU when nothing uses it); if it recurs, check power, cooling "
                               "and seating and report the Xid to the vendor.",
                          commands=[XID_COMMAND])
        elif is_unavailable(handle):
            yield finding("GPU103", f"GPU {gpu['index']}: NVML could not open it ({handle['unavailable'].replace('_', ' ')})",
                          subject=gpu_subject(gpu),
                          text="NVML counts this GPU but cannot read it; CUDA programs will likely fail on it too. "
                               "Check the kernel log for Xid errors on this GPU.",
                          commands=[f"nvidia-smi -q -i {gpu['index']}", DRIVER_LOG_COMMAND])


def _lost(node: Any) -> bool:
    if is_unavailable(node):
        return node["unavailable"] == "gpu_lost"
    if isinstance(node, dict):
        return any(_lost(v) for v in node.values())
    return False


def check_memory_errors(facts: Facts) -> Iterator[Finding]:
    for gpu in require_gpus(facts):
        subject = gpu_subject(gpu)
        unc = known(get(gpu, "ecc.uncorrected_volatile"))
        if isinstance(unc, int) and unc > 0:
            yield finding("GPU111", f"{_label(gpu)}: {unc} uncorrectable ECC error(s) since the driver loaded",
                          subject=subject,
                          detail=f"Lifetime uncorrectable errors: {known(get(gpu, 'ecc.uncorrected_aggregate'))}.",
                          text="Drain the GPU and reboot (or reset it) so the faulty memory is retired or remapped; "
                               "request an RMA if errors recur.",
                          commands=[f"nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i {gpu['index']}"])
        if known(get(gpu, "retired_pages.pending")) is True:
            yield finding("GPU112", f"{_label(gpu)}: memory pages are waiting to be retired", subject=subject,
                          text="Retirement takes effect after a reboot or GPU reset; do it at the next opportunity.",
                          commands=[f"nvidia-smi -q -d PAGE_RETIREMENT -i {gpu['index']}"])
        rows = known(gpu.get("remapped_rows"))
        if isinstance(rows, dict) and rows.get("failure"):
            yield finding("GPU114", f"{_label(gpu)}: a memory row remap failed (no spare rows left)", subject=subject,
                          text="The GPU can no longer repair memory faults: drain it and request an RMA.",
                          commands=[f"nvidia-smi -q -d ROW_REMAPPER -i {gpu['index']}"])
        elif isinstance(rows, dict) and rows.get("pending"):
            yield finding("GPU113", f"{_label(gpu)}: a memory row remap is pending", subject=subject,
                          text="The remap takes effect after a GPU reset or reboot; do it at the next opportunity.",
                          commands=[f"nvidia-smi -q -d ROW_REMAPPER -i {gpu['index']}"])


def check_throttling(facts: Facts) -> Iterator[Finding]:
    for gpu in require_gpus(facts):
        subject = gpu_subject(gpu)
        active = get(gpu, "clock_event_reasons.active") or []
        temp = known(get(gpu, "temperature.current_c"))
        slowdown = known(get(gpu, "temperature.slowdown_c"))
        power = _power_text(gpu)
        hw = [r for r in active if r in HW_SLOWDOWN_REASONS]
        if hw:
            yield finding("GPU121", f"{_label(gpu)}: hardware is cutting clocks ({', '.join(hw)})", subject=subject,
                          detail=f"Temperature {temp} C (slowdown at {slowdown} C); power {power}.",
                          text="Check cooling, airflow and the power supply; an external power brake is asserted by "
                               "the system board, so ask the system vendor if no thermal cause is found.",
                          commands=[f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {gpu['index']}"])
        if "sw_thermal_slowdown" in active:
            yield finding("GPU122", f"{_label(gpu)}: the driver is slowing clocks because the GPU is too hot",
                          subject=subject, detail=f"Temperature {temp} C (slowdown at {slowdown} C).",
                          text="Check fans, airflow and inlet temperature.",
                          commands=[f"nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {gpu['index']}"])
        elif isinstance(temp, int) and isinstance(slowdown, int) and slowdown > 0 and temp >= slowdown - NEAR_SLOWDOWN_C:
            yield finding("GPU123", f"{_label(gpu)}: {temp} C, within {NEAR_SLOWDOWN_C} C of its slowdown threshold ({slowdown} C)",
                          subject=subject, text="Check cooling and airflow before running long jobs.",
                          commands=[f"nvidia-smi -q -d TEMPERATURE -i {gpu['index']}"])


def _power_text(gpu: GpuFacts) -> str:
    draw, limit = known(get(gpu, "power.draw_mw")), known(get(gpu, "power.limit_mw"))
    if isinstance(draw, int) and isinstance(limit, int):
        return f"{draw / 1000:.0f} W of {limit / 1000:.0f} W"
    return "n/a"


def check_pcie_width(facts: Facts) -> Iterator[Finding]:
    """Only the width: idle GPUs lower their link generation to save power, which is normal."""
    for gpu in require_gpus(facts):
        cur, top = known(get(gpu, "pcie.width_current")), known(get(gpu, "pcie.width_max"))
        if isinstance(cur, int) and isinstance(top, int) and 0 < cur < top:
            yield finding("GPU131", f"{_label(gpu)}: PCIe link runs at x{cur}, the GPU and slot allow x{top}",
                          subject=gpu_subject(gpu),
                          detail=f"Link generation now {known(get(gpu, 'pcie.gen_current'))}, "
                                 f"max {known(get(gpu, 'pcie.gen_max'))}.",
                          text="Host-device copies run at a fraction of their speed. Reseat the GPU; check the slot, "
                               "riser cables and the BIOS bifurcation settings.",
                          commands=[f"nvidia-smi -q -d PCIE -i {gpu['index']}",
                                    f"sudo lspci -vv -s {str(known(get(gpu, 'pci.bus_id')) or '')[-12:]} | grep -E 'LnkCap|LnkSta'"])


def check_modes(facts: Facts) -> Iterator[Finding]:
    found = require_gpus(facts)
    off = [g for g in found if known(g.get("persistence_mode")) == "disabled"]
    if off and get(facts, "host.os") == "Linux":
        yield finding("GPU141", f"persistence mode is off on {len(off)} of {len(found)} GPU(s)",
                      detail="GPUs: " + ", ".join(str(g["index"]) for g in off) + ".",
                      text="Without persistence the driver reinitialises the GPUs each time a first program starts. "
                           "Enable the persistence daemon that ships with the driver.",
                      commands=["sudo systemctl enable --now nvidia-persistenced"])
    for gpu in found:
        mode = known(gpu.get("compute_mode"))
        if mode == "prohibited":
            yield finding("GPU142", f"{_label(gpu)}: compute mode is Prohibited; no CUDA program can use it",
                          subject=gpu_subject(gpu),
                          text="An administrator set this (nvidia-smi -c). Ask them, or use another GPU.",
                          commands=[f"nvidia-smi -q -d COMPUTE -i {gpu['index']}"])
        elif mode in ("exclusive_process", "exclusive_thread"):
            yield finding("GPU143", f"{_label(gpu)}: compute mode is {mode.replace('_', ' ')}; one process at a time",
                          subject=gpu_subject(gpu),
                          text="A second process using this GPU will fail with 'busy or unavailable'.")


def check_memory_held(facts: Facts) -> Iterator[Finding]:
    for gpu in require_gpus(facts):
        total, used = known(get(gpu, "memory.total_bytes")), known(get(gpu, "memory.used_bytes"))
        if not (isinstance(total, int) and isinstance(used, int) and total > 0):
            continue
        if used / total > MEMORY_HELD_SHARE:
            procs = known(gpu.get("processes")) or []
            names = ", ".join(f"{known(p.get('name')) or '?'} (pid {p.get('pid')})" for p in procs[:5])
            yield finding("GPU151", f"{_label(gpu)}: {used / GIB:.1f} of {total / GIB:.1f} GiB already in use",
                          subject=gpu_subject(gpu),
                          detail=f"Processes: {names}." if names else
                                 "No process is listed (another container's processes are hidden by the PID namespace).",
                          text="A new job may run out of memory. Stop stale processes, or pick another GPU.",
                          commands=[f"nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv -i {gpu['index']}"])


def check_mig(facts: Facts) -> Iterator[Finding]:
    for gpu in require_gpus(facts):
        mig = known(gpu.get("mig"))
        if not isinstance(mig, dict):
            continue
        if mig.get("current") == "enabled":
            devices = mig.get("devices") or []
            uuids = ", ".join(str(known(d.get("uuid"))) for d in devices) or "none created"
            yield finding("GPU161", f"{_label(gpu)}: MIG is enabled with {len(devices)} MIG device(s)",
                          subject=gpu_subject(gpu), detail=f"MIG devices: {uuids}.",
                          text="CUDA programs see MIG devices, not the whole GPU; select one with "
                               "CUDA_VISIBLE_DEVICES=MIG-<uuid>.",
                          commands=["nvidia-smi -L"])
        if mig.get("pending") != mig.get("current"):
            yield finding("GPU162", f"{_label(gpu)}: MIG mode change to {mig.get('pending')} is pending",
                          subject=gpu_subject(gpu),
                          text="It takes effect after a GPU reset or reboot.")


def check_mixed_models(facts: Facts) -> Iterator[Finding]:
    # a GPU whose name NVML could not read (no permission, unknown error) is no other model
    names = sorted({n for n in (known(g.get("name")) for g in require_gpus(facts)) if isinstance(n, str)})
    if len(names) > 1:
        yield finding("GPU171", f"this machine mixes GPU models: {', '.join(names)}",
                      text="Data-parallel jobs run at the pace of the slowest GPU. Set CUDA_DEVICE_ORDER=PCI_BUS_ID so "
                           "CUDA numbers GPUs as nvidia-smi does.",
                      commands=["export CUDA_DEVICE_ORDER=PCI_BUS_ID"])


def check_nvlinks(facts: Facts) -> Iterator[Finding]:
    by_model: dict[str, list[tuple[GpuFacts, int]]] = defaultdict(list)
    for gpu in require_gpus(facts):
        nvlink = known(gpu.get("nvlink"))
        if isinstance(nvlink, dict):
            by_model[str(known(gpu.get("name")))].append((gpu, int(nvlink.get("active_count", 0))))
    for peers in by_model.values():
        best = max((n for _, n in peers), default=0)
        for gpu, active in peers:
            if active < best:
                yield finding("GPU181", f"{_label(gpu)}: {active} NVLinks active, its peers have {best}",
                              subject=gpu_subject(gpu),
                              text="Traffic to other GPUs uses fewer links or falls back to PCIe. A reboot may retrain "
                                   "the links; a link that stays down is a hardware fault.",
                              commands=[f"nvidia-smi nvlink -s -i {gpu['index']}"])


CHECKS = (
    Check("gpus.lost", "gpus", "every GPU answers", ("GPU101", "GPU102", "GPU103"), check_lost, ("nvml",)),
    Check("gpus.memory_errors", "gpus", "no uncorrectable memory errors or pending repairs",
          ("GPU111", "GPU112", "GPU113", "GPU114"), check_memory_errors, ("nvml",)),
    Check("gpus.throttling", "gpus", "no hardware or thermal slowdown", ("GPU121", "GPU122", "GPU123"),
          check_throttling, ("nvml",)),
    Check("gpus.pcie_width", "gpus", "PCIe links run at full width", ("GPU131",), check_pcie_width, ("nvml",)),
    Check("gpus.modes", "gpus", "persistence and compute modes", ("GPU141", "GPU142", "GPU143"), check_modes, ("nvml",)),
    Check("gpus.memory_held", "gpus", "GPU memory is free for new work", ("GPU151",), check_memory_held, ("nvml",)),
    Check("gpus.mig", "gpus", "MIG state", ("GPU161", "GPU162"), check_mig, ("nvml",)),
    Check("gpus.models", "gpus", "one GPU model", ("GPU171",), check_mixed_models, ("nvml",)),
    Check("gpus.nvlinks", "gpus", "every NVLink is up", ("GPU181",), check_nvlinks, ("nvml",)),
)
