"""Error counters the driver keeps since it loaded, and each GPU's registration with an NVSwitch fabric.

The limits are data (compat_matrix/error_counters.json), each from the fleet tool that uses it: DCGM's
health watch and diag. One reading since the driver loaded is not DCGM's watch over a minute, so a
limit is applied only where the reading proves it was crossed: a count above a per-run limit, or an
average over the host's uptime above a per-minute or per-second one (an average above a limit means
some minute or second was above it). Counts that healthy links make when the driver trains them at load
(NVLink recovery errors on H100, CRC-data errors on H200), NVLink replays, whose DCGM limit is any rise
within its window, and the time with clocks held down, which a busy GPU spends at its power limit by
design, are shown and compared across nodes by ``merge``, never judged here. A counter that was not read
leaves its check "not checked" with the reason, never passed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator, Optional

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, require_gpus
from gpudoctor.findings import INFO, WARNING, Finding, gpu_subject
from gpudoctor.nvlink_totals import UNREAD_IN_QUICK, nvlink_totals, read_count
from gpudoctor.snapshot import get, is_unavailable, known

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix
    from gpudoctor.facts_types import GpuFacts

DIAG_COMMAND = "dcgmi diag -r 2"
FABRIC_COMMANDS = ("systemctl status nvidia-fabricmanager", "sudo systemctl enable --now nvidia-fabricmanager")


def limits(matrix: Matrix) -> dict[str, dict[str, Any]]:
    """The entries of ``matrix``'s error_counters table by id (a --matrix overlay's first)."""
    out: dict[str, dict[str, Any]] = {}
    for entry in matrix.topic("error_counters")["entries"]:
        out.setdefault(entry["id"], entry)
    return out


def _label(gpu: GpuFacts) -> str:
    return f"GPU {gpu.get('index')} ({known(gpu.get('name')) or 'unknown model'})"


def _uptime_s(gpu: GpuFacts) -> Optional[float]:
    value = known(get(gpu, "counters.uptime_s"))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "an unknown time"
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / 3600:.1f} hours" if seconds >= 3600 else f"{seconds / 60:.0f} minutes"


def readings(found: list[GpuFacts], path: str, what: str) -> list[tuple[GpuFacts, Any]]:
    """(GPU, value) for each GPU whose ``path`` was read; raises NotApplicable saying why none was."""
    read = [(g, get(g, path)) for g in found if get(g, path) is not None and not is_unavailable(get(g, path))]
    if read:
        return read
    reasons = sorted({get(g, path)["unavailable"].replace("_", " ") for g in found if is_unavailable(get(g, path))})
    if reasons:
        raise NotApplicable(f"{what} not read: {', '.join(reasons)}")
    raise NotApplicable(f"{what} not in the facts (a report from an older gpudoctor)")


# --- NVLink ----------------------------------------------------------------------------------------

#: Why a --quick run leaves the NVLink check unjudged on a driver that keeps no NVLink totals.
QUICK_PER_LINK = ("not checked in --quick: this driver gives NVLink error counts per link only; "
                  "the full check reads them")


def check_nvlink_errors(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    found = require_gpus(facts)
    if all(is_unavailable(g.get("nvlink")) and g["nvlink"]["unavailable"] == "not_supported" for g in found):
        raise NotApplicable("no GPU has NVLink")
    entry = limits(matrix)["nvlink-crc-rate"]
    unread = [g for g in found if get(g, "counters.nvlink_errors_unread") == UNREAD_IN_QUICK]
    judged = [g for g in found if not any(g is u for u in unread)]
    fast: list[Finding] = []
    try:
        for gpu, value in readings(judged, "counters.nvlink_errors", "NVLink error counters"):
            totals = nvlink_totals(value)
            if totals is not None:
                fast.extend(_crc_rate(gpu, totals, entry))
    except NotApplicable:
        if not unread:
            raise
    if unread and not fast:
        raise NotApplicable(QUICK_PER_LINK)  # a GPU left unread has not passed
    yield from fast


def _crc_rate(gpu: GpuFacts, totals: dict[str, Any], entry: dict[str, Any]) -> Iterator[Finding]:
    """DCGM's rule on the same totals: CRC-flit or CRC-data errors at 100 or more a second. An average over
    the uptime at that rate means some second reached it; a lower average proves nothing either way."""
    per_s, uptime = entry["rate_per_s_at_least"], _uptime_s(gpu)
    if uptime is None:
        return
    fast = [(words, n) for kind, words in (("crc_flit", "CRC-flit"), ("crc_data", "CRC-data"))
            if (n := read_count(totals.get(kind))) is not None and n / uptime >= per_s]
    if fast:
        yield finding("GPU182", f"{_label(gpu)}: NVLink CRC errors at {max(n for _, n in fast) / uptime:,.0f} a second "
                                "on average since the driver loaded",
                      subject=gpu_subject(gpu),
                      detail=f"Summed over the GPU's links, over {_duration(uptime)} of uptime at most: "
                             + "; ".join(f"{n:,} {words} errors ({n / uptime:,.0f} a second)" for words, n in fast)
                             + f". DCGM's health watch fails a GPU at {per_s:g} CRC errors a second on these totals; "
                               "an average that high means some second reached it.",
                      text="A link whose count keeps rising corrupts traffic that NVLink then resends, and slows "
                           "collectives. Read the counters per link, run DCGM's diagnostic and, if the errors keep "
                           "rising, have the GPU, its baseboard or NVSwitch tray inspected.",
                      commands=[f"nvidia-smi nvlink -e -i {gpu.get('index')}", DIAG_COMMAND])


# --- PCIe ------------------------------------------------------------------------------------------

def check_pcie_replays(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    entry = limits(matrix)["pcie-replay"]
    for gpu, count in readings(require_gpus(facts), "counters.pcie_replay", "PCIe replay counters"):
        uptime = _uptime_s(gpu)
        if not isinstance(count, int) or count <= entry["above"] or uptime is None:
            continue
        per_minute, gen, width = _replay_limit(gpu, entry)
        average = count / (uptime / 60)
        if average <= per_minute:
            continue
        yield finding("GPU132", f"{_label(gpu)}: {count} PCIe replays since the driver loaded, "
                                f"{average:.0f} a minute on average",
                      subject=gpu_subject(gpu),
                      detail=f"DCGM's diag allows {entry['above']} replays during a whole run, and its health watch warns "
                             f"above {per_minute} a minute on a Gen{gen} x{width} link; this average over "
                             f"{_duration(uptime)} of uptime means some minutes were above that.",
                      text="Replays are PCIe packets the link had to resend: host-device copies slow down, and a link "
                           "that gets worse ends in Xid 79 (fallen off the bus). Reseat the GPU, check the riser "
                           "and the slot, and run DCGM's diagnostic.",
                      commands=[f"nvidia-smi -q -d PCIE -i {gpu.get('index')}", DIAG_COMMAND])


def _replay_limit(gpu: GpuFacts, entry: dict[str, Any]) -> tuple[int, int, int]:
    """DCGM's per-minute limit for the link at its top generation and full width; where either is unknown,
    the highest limit in the table, so that an unknown link is never judged by a stricter one."""
    rates = {int(k): float(v) for k, v in entry["replays_per_minute_per_lane"].items()}
    gen = read_count(known(get(gpu, "pcie.gen_max"))) or read_count(known(get(gpu, "pcie.gen_current")))
    width = read_count(known(get(gpu, "pcie.width_max"))) or read_count(known(get(gpu, "pcie.width_current")))
    gen = min(gen, max(rates)) if gen and gen > 0 else max(rates)
    width = width if width and width > 0 else 16
    return math.ceil(rates.get(gen, rates[max(rates)]) * width), gen, width


# --- NVSwitch fabric -------------------------------------------------------------------------------

def check_fabric(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    found = require_gpus(facts)
    read = [(g, f) for g, f in _fabric_readings(found) if isinstance(f, dict)]
    # CUDA refuses an unregistered GPU (error 802): one that ran the smoke kernel correctly in this run was
    # registered by then, and a state read a moment earlier is no longer so
    ran = {r.get("uuid") for r in (facts.get("smoke") or {}).get("runs") or [] if isinstance(r, dict) and r.get("ok")}
    for state, severity in (("not_started", None), ("in_progress", WARNING)):
        waiting = [g for g, f in read if f.get("state") == state and not (g.get("uuid") and g.get("uuid") in ran)]
        if waiting:
            booting = state == "in_progress" and _booting(waiting, matrix)
            yield _not_registered(waiting, len(found), state, INFO if booting else severity, booting)
    for gpu, fabric in read:
        if fabric.get("state") == "completed" and fabric.get("status") not in (None, "success"):
            yield finding("GPU192", f"{_label(gpu)}: registration with the NVSwitch fabric failed ({fabric['status'].replace('_', ' ')})",
                          subject=gpu_subject(gpu),
                          detail="The GPU loses its NVLink peer-to-peer access: traffic to other GPUs goes over PCIe, "
                                 "and jobs that need NVLink peers fail.",
                          text="Read Fabric Manager's log for the GPU, check that its version matches the driver's, "
                               "and restart it; a GPU that fails again needs its NVLinks inspected.",
                          commands=["journalctl -u nvidia-fabricmanager --no-pager | tail -50", FABRIC_COMMANDS[0]])
        elif fabric.get("health_summary") in ("unhealthy", "limited_capacity"):
            yield finding("GPU193", f"{_label(gpu)}: the NVSwitch fabric reports it "
                                    f"{fabric['health_summary'].replace('_', ' ')}",
                          subject=gpu_subject(gpu),
                          detail="The driver's fabric health summary for this GPU is not healthy: NVLink bandwidth "
                                 "to its peers may be degraded.",
                          text="Read nvidia-smi's Fabric section for this GPU and Fabric Manager's log.",
                          commands=[f"nvidia-smi -q -i {gpu.get('index')} | grep -A8 Fabric"])


def _fabric_readings(found: list[GpuFacts]) -> list[tuple[GpuFacts, Any]]:
    """The GPUs' fabric facts; NOT_SUPPORTED from the call is a GPU on no fabric, which is an answer."""
    unsupported = [(g, {"state": "not_supported"}) for g in found
                   if is_unavailable(g.get("fabric")) and g["fabric"]["unavailable"] == "not_supported"]
    others = [g for g in found if not any(g is u for u, _ in unsupported)]
    if not others:
        return unsupported
    return unsupported + readings(others, "fabric", "The NVSwitch fabric state")


def _booting(waiting: list[GpuFacts], matrix: Matrix) -> bool:
    """Whether every waiting GPU's host booted within the fabric entry's grace: registration still under way then
    is the normal course of a boot, not a fault."""
    grace = float(limits(matrix)["fabric-in-progress"]["boot_grace_s"])
    uptimes = [_uptime_s(g) for g in waiting]
    return all(u is not None and u < grace for u in uptimes)


def _not_registered(waiting: list[GpuFacts], total: int, state: str, severity: Optional[str],
                    booting: bool = False) -> Finding:
    words = "has not started" if state == "not_started" else "has not finished"
    return finding("GPU191", f"{len(waiting)} of {total} GPU(s) wait for Fabric Manager: registration with the "
                             f"NVSwitch fabric {words}" + (f", {_duration(_uptime_s(waiting[0]))} after boot" if booting else ""),
                   severity=severity,
                   detail=f"GPUs: {', '.join(str(g.get('index')) for g in waiting)}. On an NVSwitch system CUDA "
                          "refuses to start until the GPUs are registered: programs fail with error 802 "
                          "(cudaErrorSystemNotReady, 'system not yet initialized')."
                          + (" Registration is under way; it normally completes within a minute of boot." if severity else "")
                          + (" The machine booted moments ago: run the check again in a few minutes." if booting else ""),
                   text="Start Fabric Manager (the nvidia-fabricmanager package of exactly the driver's version) and "
                        "enable it at boot; if it refuses to start, its log names the version mismatch or the fault.",
                   commands=list(FABRIC_COMMANDS))


CHECKS = (
    Check("gpus.nvlink_errors", "gpus", "NVLink CRC errors below DCGM's rate", ("GPU182",),
          check_nvlink_errors, ("nvml",), reads_matrix=True),
    Check("gpus.pcie_replays", "gpus", "PCIe replays within DCGM's rate", ("GPU132",), check_pcie_replays, ("nvml",),
          reads_matrix=True),
    Check("gpus.fabric", "gpus", "every GPU on an NVSwitch fabric is registered with it", ("GPU191", "GPU192", "GPU193"),
          check_fabric, ("nvml",), reads_matrix=True),
)
