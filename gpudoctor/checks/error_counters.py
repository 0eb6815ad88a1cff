"""Error counters the driver keeps since it loaded, and each GPU's registration with an NVSwitch fabric.

The limits are data (compat_matrix/error_counters.json), each from the fleet tool that uses it: DCGM's
health watch and diag, Meta's GCM prolog. One reading since the driver loaded is not DCGM's watch over a
minute, so a limit is applied only where the reading proves it was crossed: a count above a per-run
limit, or an average over the host's uptime above a per-minute or per-second one (an average above a
limit means some minute or second was above it). NVLink recovery errors, which healthy H100s count at
link training, and the time with clocks held down, which a busy GPU spends at its power limit by design,
are shown and compared across nodes by ``merge``, never judged here. A counter that was not read leaves
its check "not checked" with the reason, never passed.
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Optional

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, require_gpus
from gpudoctor.findings import ERROR, WARNING, Finding, gpu_subject
from gpudoctor.snapshot import get, is_unavailable, known

DIAG_COMMAND = "dcgmi diag -r 2"
FABRIC_COMMANDS = ("systemctl status nvidia-fabricmanager", "sudo systemctl enable --now nvidia-fabricmanager")


def limits() -> dict[str, dict[str, Any]]:
    """The entries of compat_matrix/error_counters.json by id (a --matrix overlay's first)."""
    from gpudoctor.compat.data import load_topic

    out: dict[str, dict[str, Any]] = {}
    for entry in load_topic("error_counters")["entries"]:
        out.setdefault(entry["id"], entry)
    return out


def _label(gpu: dict[str, Any]) -> str:
    return f"GPU {gpu.get('index')} ({known(gpu.get('name')) or 'unknown model'})"


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _uptime_s(gpu: dict[str, Any]) -> Optional[float]:
    value = known(get(gpu, "counters.uptime_s"))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "an unknown time"
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / 3600:.1f} hours" if seconds >= 3600 else f"{seconds / 60:.0f} minutes"


def readings(found: list[dict[str, Any]], path: str, what: str) -> list[tuple[dict[str, Any], Any]]:
    """(GPU, value) for each GPU whose ``path`` was read; raises NotApplicable saying why none was."""
    read = [(g, get(g, path)) for g in found if get(g, path) is not None and not is_unavailable(get(g, path))]
    if read:
        return read
    reasons = sorted({get(g, path)["unavailable"].replace("_", " ") for g in found if is_unavailable(get(g, path))})
    if reasons:
        raise NotApplicable(f"{what} not read: {', '.join(reasons)}")
    raise NotApplicable(f"{what} not in the facts (a report from an older gpudoctor)")


# --- NVLink ----------------------------------------------------------------------------------------

def check_nvlink_errors(facts: Facts) -> Iterator[Finding]:
    found = require_gpus(facts)
    if all(is_unavailable(g.get("nvlink")) and g["nvlink"]["unavailable"] == "not_supported" for g in found):
        raise NotApplicable("no GPU has NVLink")
    table = limits()
    for gpu, links in readings(found, "counters.nvlink_errors", "NVLink error counters"):
        if not isinstance(links, list):
            continue
        yield from _crc(gpu, links, table)
        yield from _replay(gpu, links, table)


def _crc(gpu: dict[str, Any], links: list[Any], table: dict[str, dict[str, Any]]) -> Iterator[Finding]:
    flit_limit, data_limit = table["nvlink-crc-flit"]["above"], table["nvlink-crc-data"]["above"]
    per_s = table["nvlink-crc-rate"]["rate_per_s_at_least"]
    uptime = _uptime_s(gpu)
    over, fast = [], False
    for e in links:
        flit, data = _count(e.get("crc_flit")), _count(e.get("crc_data"))
        if (flit or 0) > flit_limit or (data or 0) > data_limit:
            over.append(f"link {e.get('link')}: {flit if flit is not None else 'n/a'} CRC-flit, "
                        f"{data if data is not None else 'n/a'} CRC-data")
            fast = fast or bool(uptime and ((flit or 0) + (data or 0)) / uptime >= per_s)
    if over:
        yield finding("GPU182", f"{_label(gpu)}: NVLink CRC errors above the fleet tools' limit on {len(over)} link(s)",
                      subject=gpu_subject(gpu), severity=ERROR if fast else None,
                      detail=f"Since the driver loaded ({_duration(uptime)} of uptime at most): {'; '.join(over)}. "
                             f"Meta's GCM prolog fails a link above {flit_limit} CRC-flit or {data_limit} CRC-data errors; "
                             f"DCGM fails a GPU at {per_s:g} CRC errors per second"
                             f"{', which this average reaches' if fast else ''}.",
                      text="Read the counters twice a minute apart: a link whose count keeps rising corrupts traffic "
                           "that NVLink then resends, and slows collectives. Run DCGM's diagnostic and, if the "
                           "errors keep rising, have the GPU, its baseboard or NVSwitch tray inspected.",
                      commands=[f"nvidia-smi nvlink -e -i {gpu.get('index')}", DIAG_COMMAND])


def _replay(gpu: dict[str, Any], links: list[Any], table: dict[str, dict[str, Any]]) -> Iterator[Finding]:
    above = table["nvlink-replay"]["above"]
    hits = [(e.get("link"), _count(e.get("replay"))) for e in links if (_count(e.get("replay")) or 0) > above]
    if hits:
        yield finding("GPU183", f"{_label(gpu)}: NVLink replay errors on {len(hits)} link(s)", subject=gpu_subject(gpu),
                      detail=f"Since the driver loaded ({_duration(_uptime_s(gpu))} of uptime at most): "
                             + ", ".join(f"link {link}: {n}" for link, n in hits)
                             + ". Healthy links read 0; DCGM's health watch fails a GPU on one new replay within a minute.",
                      text="Read the counters again later: replays that keep rising mean a link is resending data "
                           "and will slow or stall collectives. Run DCGM's diagnostic, and have the hardware "
                           "inspected if they keep rising.",
                      commands=[f"nvidia-smi nvlink -e -i {gpu.get('index')}", DIAG_COMMAND])


# --- PCIe ------------------------------------------------------------------------------------------

def check_pcie_replays(facts: Facts) -> Iterator[Finding]:
    entry = limits()["pcie-replay"]
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


def _replay_limit(gpu: dict[str, Any], entry: dict[str, Any]) -> tuple[int, int, int]:
    """DCGM's per-minute limit for the link at its top generation and full width; where either is unknown,
    the highest limit in the table, so that an unknown link is never judged by a stricter one."""
    rates = {int(k): float(v) for k, v in entry["replays_per_minute_per_lane"].items()}
    gen = _count(known(get(gpu, "pcie.gen_max"))) or _count(known(get(gpu, "pcie.gen_current")))
    width = _count(known(get(gpu, "pcie.width_max"))) or _count(known(get(gpu, "pcie.width_current")))
    gen = min(gen, max(rates)) if gen and gen > 0 else max(rates)
    width = width if width and width > 0 else 16
    return math.ceil(rates.get(gen, rates[max(rates)]) * width), gen, width


# --- NVSwitch fabric -------------------------------------------------------------------------------

def check_fabric(facts: Facts) -> Iterator[Finding]:
    found = require_gpus(facts)
    read = [(g, f) for g, f in _fabric_readings(found) if isinstance(f, dict)]
    for state, severity in (("not_started", None), ("in_progress", WARNING)):
        waiting = [g for g, f in read if f.get("state") == state]
        if waiting:
            yield _not_registered(waiting, len(found), state, severity)
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


def _fabric_readings(found: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Any]]:
    """The GPUs' fabric facts; NOT_SUPPORTED from the call is a GPU on no fabric, which is an answer."""
    unsupported = [(g, {"state": "not_supported"}) for g in found
                   if is_unavailable(g.get("fabric")) and g["fabric"]["unavailable"] == "not_supported"]
    others = [g for g in found if not any(g is u for u, _ in unsupported)]
    if not others:
        return unsupported
    return unsupported + readings(others, "fabric", "The NVSwitch fabric state")


def _not_registered(waiting: list[dict[str, Any]], total: int, state: str, severity: Optional[str]) -> Finding:
    words = "has not started" if state == "not_started" else "has not finished"
    return finding("GPU191", f"{len(waiting)} of {total} GPU(s) wait for Fabric Manager: registration with the "
                             f"NVSwitch fabric {words}",
                   severity=severity,
                   detail=f"GPUs: {', '.join(str(g.get('index')) for g in waiting)}. On an NVSwitch system CUDA "
                          "refuses to start until the GPUs are registered: programs fail with error 802 "
                          "(cudaErrorSystemNotReady, 'system not yet initialized')."
                          + (" Registration is under way; it normally completes within a minute of boot." if severity else ""),
                   text="Start Fabric Manager (the nvidia-fabricmanager package of exactly the driver's version) and "
                        "enable it at boot; if it refuses to start, its log names the version mismatch or the fault.",
                   commands=list(FABRIC_COMMANDS))


CHECKS = (
    Check("gpus.nvlink_errors", "gpus", "NVLink error counters within the fleet tools' limits", ("GPU182", "GPU183"),
          check_nvlink_errors, ("nvml",)),
    Check("gpus.pcie_replays", "gpus", "PCIe replays within DCGM's rate", ("GPU132",), check_pcie_replays, ("nvml",)),
    Check("gpus.fabric", "gpus", "every GPU on an NVSwitch fabric is registered with it", ("GPU191", "GPU192", "GPU193"),
          check_fabric, ("nvml",)),
)
