"""Each GPU's error history since this boot: the Xid events and other driver errors in the kernel log
(facts ``kernel_log``, probes/driver_events.py), judged by NVIDIA's Xid catalogue (compat/xid.py).

The window: an event logged within the last WINDOW_S seconds before the check (24 hours, or since boot
when the machine is younger) is judged by its Xid: a GPU that needs a reset, a reboot or its hardware
checked (79, 48, 64, 74, 95, 119, ...) is an error; a warning where the application had to restart for a
cause the catalogue does not pin on it, or memory or a link degrades (94, 92); a note for the
application's own faults (13, 31, 43, 45). An event older than the window is a note at most: the GPU's
state now is judged by NVML (lost GPUs, ECC, pending remaps), and an old Xid says only what happened.
A log that could not be read, or was read only in part, is "not checked" with the reason, never "no Xid".
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Iterator, Optional

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding
from gpudoctor.compat import xid as catalogue
from gpudoctor.findings import ERROR, INFO, WARNING, Finding, Subject, gpu_subject
from gpudoctor.nvrm import bus_key, mismatch_client_version
from gpudoctor.snapshot import gpus

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix
    from gpudoctor.facts_types import GpuFacts

#: How far back an event is judged by its Xid: a day covers the jobs a node gate runs between checks.
WINDOW_S = 24 * 3600
LOG_COMMAND = "sudo dmesg -T | grep -E 'NVRM: Xid|NVRM: GPU' | tail -n 30"
_CODE = {ERROR: "GPU105", WARNING: "GPU106", INFO: "GPU107"}
_READER_WORDS = {
    "no_permission": "not permitted",
    "not_found": "not there",
    "empty": "no kernel messages",
    "timeout": "did not answer in time",
    "no_entries_this_boot": "nothing logged since this boot",
    "no_time_left": "not tried: the time bound was spent",
}


def check_xid_events(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    log = facts.get("kernel_log")
    if not isinstance(log, dict):
        raise NotApplicable("the kernel log was not read (a report from a gpudoctor that did not read it, or a paste)")
    if not log.get("read"):
        raise NotApplicable(not_read_reason(log, facts))
    events = [e for e in log.get("events") or [] if isinstance(e, dict) and isinstance(e.get("xid"), int)]
    errors = [e for e in log.get("errors") or [] if isinstance(e, dict)]
    module = (facts.get("driver") or {}).get("kernel_module")
    if not events and not errors and isinstance(module, dict) and module.get("loaded") is False:
        raise NotApplicable("the NVIDIA kernel module is not loaded: the driver has logged nothing to judge")
    if not log.get("complete", True) and not events and not errors:
        raise NotApplicable(f"the kernel log ({log.get('source')}) was read only in part within gpudoctor's time "
                            f"bound ({log.get('records')} records, up to {_clock(log.get('last_s'))} after boot)")
    by_bus = {bus_key((g.get("pci") or {}).get("bus_id")): g for g in gpus(facts)}
    uptime = log.get("uptime_s") if isinstance(log.get("uptime_s"), (int, float)) else None
    reloaded = log.get("module_loaded_s") if isinstance(log.get("module_loaded_s"), (int, float)) else None
    before = [e for e in [*events, *errors] if reloaded is not None and _seconds(e) < reloaded]
    events = [e for e in events if not any(e is b for b in before)]
    errors = [e for e in errors if not any(e is b for b in before)]
    if before:
        yield _older_finding(before, by_bus, log, uptime, f"before the NVIDIA kernel module was loaded again, "
                                                          f"{_ago({'time_s': reloaded}, uptime)}")
    older: list[dict[str, Any]] = []
    for group in _groups(events, lambda e: (e["xid"], bus_key(e.get("bus_id")))):
        newest = group[-1]
        if not _recent(newest, uptime):
            older += group
            continue
        gpu = by_bus.get(bus_key(newest.get("bus_id")))
        yield _xid_finding(matrix, group, gpu, log, uptime, outside=gpu is None and _all_listed_in_container(facts))
    for group in _groups(errors, lambda e: (e.get("kind"), bus_key(e.get("bus_id")))):
        if not _recent(group[-1], uptime):
            older += group
            continue
        gpu = by_bus.get(bus_key(group[-1].get("bus_id")))
        outside = gpu is None and bool(group[-1].get("bus_id")) and _all_listed_in_container(facts)
        yield _error_finding(group, gpu, log, uptime, "it is a GPU of the host not given to this container" if outside
                             else _since_over(group[-1], gpu, facts))
    if older:
        yield _older_finding(older, by_bus, log, uptime)


def not_read_reason(log: dict[str, Any], facts: Facts) -> str:
    """Why no kernel log was read, per source, and what would let gpudoctor read it."""
    tried = [t for t in log.get("tried") or [] if isinstance(t, dict)]
    restrict = ", kernel.dmesg_restrict=1" if log.get("dmesg_restrict") == 1 else ""
    said = "; ".join(f"{t.get('source')}: {_READER_WORDS.get(str(t.get('reason')), str(t.get('reason')))}"
                     f"{restrict if t.get('reason') == 'no_permission' else ''}" for t in tried)
    container = ((facts.get("host") or {}).get("container") or {}).get("detected") is True
    if any(t.get("reason") == "no_permission" for t in tried):
        fix = "run gpudoctor as root or with CAP_SYSLOG"
    elif container:
        fix = "the host's log is outside this container: run gpudoctor on the host, or give the container /dev/kmsg and CAP_SYSLOG"
    else:
        fix = "no source of the kernel log is readable here"
    return f"not checked: the kernel log could not be read ({said}): {fix}"


def _groups(items: list[dict[str, Any]], key: Any) -> list[list[dict[str, Any]]]:
    """Items with one key together, oldest first; the groups in the order of their newest item."""
    out: dict[Any, list[dict[str, Any]]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return sorted(out.values(), key=lambda g: _seconds(g[-1]))


def _seconds(event: dict[str, Any]) -> float:
    value = event.get("time_s")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _recent(event: dict[str, Any], uptime: Optional[float]) -> bool:
    """Within the window before the check; an event whose age is unknown counts as recent (a past error is
    never silenced for want of a clock)."""
    return uptime is None or uptime - _seconds(event) <= WINDOW_S


def _all_listed_in_container(facts: Facts) -> bool:
    """In a container, whether NVML listed every GPU it counted, each with its bus: the host's kernel log then
    names GPUs this container was not given, and an Xid on one of them says nothing of the GPUs here. (A GPU
    here that fell off the bus is still counted by NVML, but cannot be read, so this is then False.)"""
    if ((facts.get("host") or {}).get("container") or {}).get("detected") is not True:
        return False
    listed = list(gpus(facts))
    count = (facts.get("nvml") or {}).get("device_count")
    return bool(listed) and count == len(listed) and all(bus_key((g.get("pci") or {}).get("bus_id")) for g in listed)


def _xid_finding(matrix: Matrix, group: list[dict[str, Any]], gpu: Optional[GpuFacts], log: dict[str, Any],
                 uptime: Optional[float], outside: bool = False) -> Finding:
    newest = group[-1]
    xid = newest["xid"]
    severity = INFO if outside else catalogue.severity(matrix, xid, str(newest.get("detail") or "")) or INFO
    entry = catalogue.entry(matrix, xid) or {}
    text = str(entry.get("action") or "gpudoctor's catalogue does not describe this Xid: look it up in NVIDIA's "
                                      "Xid catalogue, with the message's own words.")
    buckets = [b for b in (entry.get("immediate_action"), entry.get("investigatory_action")) if b]
    if buckets:
        text += f" (NVIDIA's catalogue: {' / '.join(buckets)})"
    return finding(_CODE[severity], f"{_who(gpu, newest, outside)} logged {catalogue.describe(matrix, xid)} {_ago(newest, uptime)}"
                                    f"{_times(group)}",
                   detail=_quote(newest, log), subject=_subject(gpu), severity=severity,
                   text=text, commands=_commands(gpu), links=[catalogue.XID_DOCS])


def _times(group: list[dict[str, Any]]) -> str:
    return f" ({len(group)} times since boot, the last shown)" if len(group) > 1 else ""


def _since_over(event: dict[str, Any], gpu: Optional[GpuFacts], facts: Facts) -> Optional[str]:
    """Why a driver error logged earlier this boot no longer holds, from this run's facts; None where it may.
    A GPU whose initialisation failed has no NVML handle (nvidia-smi: "Unable to determine the device handle"),
    so one NVML now names by its UUID was initialised after all; an API mismatch whose client is the version of
    the kernel module loaded now was followed by a reload of the module."""
    if event.get("kind") == "init_failed" and gpu is not None and gpu.get("uuid"):
        return "NVML answers for this GPU now, so a later attempt initialised it"
    module = ((facts.get("driver") or {}).get("kernel_module") or {}).get("version")
    client = mismatch_client_version(str(event.get("text") or ""))
    if event.get("kind") == "version_mismatch" and client and client == module:
        return f"the kernel module loaded now is that client's version ({module}): the module was reloaded since"
    return None


def _error_finding(group: list[dict[str, Any]], gpu: Optional[GpuFacts], log: dict[str, Any],
                   uptime: Optional[float], over: Optional[str] = None) -> Finding:
    newest = group[-1]
    if over:
        return finding("GPU109", f"{_who(gpu, newest)}: earlier this boot the driver logged that {newest.get('meaning')}, "
                                 f"{_ago(newest, uptime)}{_times(group)}; {over}",
                       detail=_quote(newest, log), subject=_subject(gpu), severity=INFO,
                       text="Nothing to do now; if it recurs, read the kernel log around the line shown.",
                       commands=[LOG_COMMAND], links=[catalogue.XID_DOCS])
    return finding("GPU109", f"{_who(gpu, newest)}: the driver logged that {newest.get('meaning')}, "
                             f"{_ago(newest, uptime)}{_times(group)}",
                   detail=_quote(newest, log), subject=_subject(gpu),
                   text="Work on this GPU fails while it is in this state: reboot (or reset the GPU when nothing uses it); "
                        "if it recurs, check its power, cooling and seating, and update the driver.",
                   commands=_commands(gpu), links=[catalogue.XID_DOCS])


def _older_finding(items: list[dict[str, Any]], by_bus: dict[Any, GpuFacts], log: dict[str, Any],
                   uptime: Optional[float], when: str = f"more than {WINDOW_S // 3600} h ago") -> Finding:
    items = sorted(items, key=_seconds)
    named = []
    for item in items:
        what = f"Xid {item['xid']}" if "xid" in item else str(item.get("kind"))
        label = _who(by_bus.get(bus_key(item.get("bus_id"))), item)
        if (what, label) not in named:
            named.append((what, label))
    listed = ", ".join(f"{w} on {label}" for w, label in named[:6]) + (" and more" if len(named) > 6 else "")
    return finding("GPU108", f"earlier this boot, {when}: {listed}",
                   detail=_quote(items[-1], log),
                   text="Nothing to do for these now: the GPUs' present state is judged by the other checks. If they "
                        "recur, look each Xid up in NVIDIA's catalogue.",
                   commands=[LOG_COMMAND], links=[catalogue.XID_DOCS])


def _who(gpu: Optional[GpuFacts], event: dict[str, Any], outside: bool = False) -> str:
    if gpu is not None:
        return f"GPU {gpu.get('index')} ({gpu.get('name') or 'unknown model'}, {event.get('bus_id')})"
    bus = event.get("bus_id")
    if outside:
        return f"the host's GPU at {bus}, one not given to this container," if bus else "a GPU of the host"
    return f"the GPU at {bus} (not listed by NVML now)" if bus else "a GPU"


def _subject(gpu: Optional[GpuFacts]) -> Optional[Subject]:
    return gpu_subject(gpu) if gpu is not None else None


def _commands(gpu: Optional[GpuFacts]) -> list[str]:
    return [LOG_COMMAND] + ([f"nvidia-smi -q -i {gpu.get('index')}"] if gpu is not None else [])


def _ago(event: dict[str, Any], uptime: Optional[float]) -> str:
    if uptime is None:
        return f"{_clock(event.get('time_s'))} after boot"
    return f"{_clock(max(0.0, uptime - _seconds(event)))} before the check"


def _clock(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "an unknown time"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _quote(event: dict[str, Any], log: dict[str, Any]) -> str:
    """The line as logged, where it was read, and when: seconds after boot and, where the boot time is
    known, the wall time (approximate, as dmesg -T's: a suspended machine's log clock stood still)."""
    at = f"{event.get('time_s')} s after boot"
    boot = log.get("boot_time")
    if isinstance(boot, (int, float)):
        at += time.strftime(" (%Y-%m-%d %H:%M:%S UTC)", time.gmtime(boot + _seconds(event)))
    return f"{log.get('source')}, {at}: {str(event.get('text') or '')[:300]}"


CHECKS = (
    Check("gpus.xid", "gpus", "no Xid or driver error in the kernel log", ("GPU105", "GPU106", "GPU107", "GPU108", "GPU109"),
          check_xid_events, ("kernel_log",), reads_matrix=True),
)
