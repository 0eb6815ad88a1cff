"""Xid events and the NVIDIA driver's other error messages since this boot, read from the kernel log.

Command line equivalent: ``sudo dmesg | grep -E 'NVRM'``. The first source that can be read is used, in
this order: /dev/kmsg (what dmesg reads: this boot only, with each record's level and its time since
boot), ``journalctl -k -b`` (this boot, newest first so a bound drops the oldest), /var/log/kern.log,
/var/log/messages (syslog files span boots: only lines stamped after this boot began count). Each is
bounded in time and bytes: /dev/kmsg is opened O_NONBLOCK (its end is EAGAIN, never a wait), journalctl
runs through processes.run_bounded. Only NVRM lines are kept, from the text after ``NVRM:``, so no
hostname or other process's message reaches the report.

A log that cannot be read is a fact with its reason per source (``tried``): /dev/kmsg refused under
kernel.dmesg_restrict=1 without CAP_SYSLOG, absent in a container, no journal, no syslog file. The check
then says "not checked" with that reason, never "no Xid".
"""

from __future__ import annotations

import errno
import os
import re
import time
from datetime import datetime
from typing import Any, Callable, Optional

from gpudoctor.nvrm import driver_error, parse_xid
from gpudoctor.probes import boot_clock
from gpudoctor.probes.kernel_log import KMSG, read_records

#: The time a full check gives the read, and --quick (which must stay within 0.5 s on one H100).
BUDGET_S = 1.0
QUICK_BUDGET_S = 0.25
#: Events kept in the facts (the newest); the counts say how many there were.
MAX_EVENTS = 100
#: How much of a syslog file's end, or of journalctl's output, is read.
MAX_TEXT_BYTES = 8 << 20
LOG_FILES = ("/var/log/kern.log", "/var/log/messages")
JOURNALCTL = ("journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic", "-q", "--reverse")
#: The kernel module's line as it loads ("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04 ...").
_LOADING = "NVRM: loading NVIDIA UNIX"
_MONOTONIC = re.compile(r"\[\s*(\d{1,10}\.\d{1,9})\]")
_ISO = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
_CLASSIC = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}:\d{2}:\d{2})")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                        "Dec"), 1)}


def probe_driver_events(budget_s: float = BUDGET_S, kmsg: str = KMSG, files: tuple[str, ...] = LOG_FILES,
                        journalctl: tuple[str, ...] = JOURNALCTL) -> dict[str, Any]:
    """{"read": true, "source", "events", "errors", ...} from the first readable source, or {"read": false,
    "reason", "tried"}; both with the machine's uptime (uptime_s) and boot time (boot_time, seconds since
    the epoch), against which each event's time since boot (time_s) is placed."""
    end = time.monotonic() + budget_s
    read = boot_clock.uptime_s()
    uptime = round(read, 3) if read is not None else None
    context: dict[str, Any] = {"uptime_s": uptime, "boot_time": _boot_time(uptime),
                               "dmesg_restrict": _dmesg_restrict()}
    readers: list[tuple[str, Callable[[float], dict[str, Any]]]] = [
        (kmsg, lambda left: _from_kmsg(kmsg, left)),
        ("journalctl", lambda left: _from_journal(journalctl, left)),
        *((path, lambda left, path=path: _from_file(path, context["boot_time"])) for path in files)]
    tried: list[dict[str, Any]] = []
    for source, reader in readers:
        left = end - time.monotonic()
        if left <= 0:
            tried.append({"source": source, "reason": "no_time_left"})
            continue
        got = reader(left)
        if got.get("read"):
            return {**got, "source": source, "tried": tried, **context}
        tried.append({"source": source, **got})
    reasons = [t["reason"] for t in tried]
    reason = next((r for r in reasons if r not in ("not_found", "no_time_left")), reasons[0] if reasons else "not_found")
    return {"read": False, "reason": reason, "tried": tried, **context}


def events_of(lines: list[tuple[float, str]]) -> dict[str, Any]:
    """The Xid events and other driver errors among (seconds since boot, text) lines, oldest first: the
    newest MAX_EVENTS of each, and how many there were; and when the kernel module last logged its loading
    (module_loaded_s): an event before a reload happened to a driver instance that is gone, whose GPUs the
    reload initialised again."""
    xids: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    nvrm = 0
    loaded: Optional[float] = None
    for seconds, text in lines:
        at = text.find("NVRM:")
        if at < 0:
            continue
        nvrm += 1
        text = text[at:at + 400]
        if text.startswith(_LOADING):
            loaded = round(seconds, 3)
            continue
        xid = parse_xid(text)
        if xid:
            xids.append({**xid, "time_s": round(seconds, 3), "text": text[:300]})
            continue
        error = driver_error(text)
        if error:
            errors.append({**error, "time_s": round(seconds, 3), "text": text[:300]})
    return {"nvrm_lines": nvrm, "xid_count": len(xids), "events": xids[-MAX_EVENTS:], "error_count": len(errors),
            "errors": errors[-MAX_EVENTS:], "module_loaded_s": loaded}


def _from_kmsg(path: str, left: float) -> dict[str, Any]:
    try:
        got = read_records(path, max_seconds=left)
    except OSError as exc:
        return _refused(exc)
    return {"read": True, "records": got["records"], "first_s": got["first_s"], "last_s": got["last_s"],
            "complete": got["complete"], **events_of([(s, t) for _, s, t in got["kept"]])}


def _from_journal(argv: tuple[str, ...], left: float) -> dict[str, Any]:
    from gpudoctor.procs.processes import run_bounded

    try:
        ran = run_bounded(list(argv), max(0.05, left), MAX_TEXT_BYTES)
    except OSError as exc:
        return _refused(exc)
    lines = [(float(m.group(1)), line) for line in ran.stdout.splitlines() for m in [_MONOTONIC.match(line)] if m]
    if not lines:
        said = ran.stderr.strip().splitlines()
        reason = "timeout" if ran.timed_out else "no_permission" if "permission" in ran.stderr.lower() else "empty"
        return {"reason": reason, "detail": said[0][:200] if said else f"exit status {ran.rc}, no kernel messages"}
    lines.reverse()  # journalctl printed the newest first (--reverse: a bound drops the oldest); oldest first again
    complete = not ran.timed_out and len(ran.stdout) < MAX_TEXT_BYTES
    return {"read": True, "records": len(lines), "first_s": lines[0][0], "last_s": lines[-1][0], "complete": complete,
            **events_of(lines)}


def _from_file(path: str, boot_time: Optional[float]) -> dict[str, Any]:
    """A syslog file's lines of this boot (stamped at or after the boot time); its end only, MAX_TEXT_BYTES."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - MAX_TEXT_BYTES))
            text = fh.read(MAX_TEXT_BYTES).decode("utf-8", "replace")
    except OSError as exc:
        return _refused(exc)
    if boot_time is None:
        return {"reason": "no_boot_time", "detail": "/proc/uptime could not be read, so this boot's lines are unknown"}
    lines = []
    for line in text.splitlines():
        wall = wall_time(line)
        if wall is not None and wall >= boot_time - 1:
            mono = _MONOTONIC.search(line)
            lines.append((float(mono.group(1)) if mono else wall - boot_time, line))
    if not lines:
        return {"reason": "no_entries_this_boot", "detail": f"no line of {path} is stamped after this boot began"}
    return {"read": True, "records": len(lines), "first_s": lines[0][0], "last_s": lines[-1][0],
            "complete": size <= MAX_TEXT_BYTES or lines[0][0] < 60, **events_of(lines)}


def wall_time(line: str, now: Optional[float] = None) -> Optional[float]:
    """Seconds since the epoch of a syslog line's stamp: RFC 3339 (rsyslog's high-precision format) or the
    classic 'Nov 27 03:52:09' in local time, whose year is this one unless that puts it in the future."""
    m = _ISO.match(line)
    if m:
        zone = (m.group(4) or "").replace("Z", "+00:00")
        zone = zone[:3] + ":" + zone[3:] if len(zone) == 5 else zone
        try:
            stamp = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{m.group(3) or ''}{zone}")
        except ValueError:
            return None
        return stamp.timestamp()
    m = _CLASSIC.match(line)
    if not m or m.group(1) not in _MONTHS:
        return None
    now = time.time() if now is None else now
    year = time.localtime(now).tm_year
    for y in (year, year - 1):
        try:
            when = time.mktime(time.strptime(f"{y} {_MONTHS[m.group(1)]} {m.group(2)} {m.group(3)}", "%Y %m %d %H:%M:%S"))
        except (ValueError, OverflowError):
            return None
        if when <= now + 86400:
            return when
    return None


def _refused(exc: OSError) -> dict[str, Any]:
    code = exc.errno or 0
    reason = "no_permission" if code in (errno.EPERM, errno.EACCES) else "not_found" if code == errno.ENOENT \
        else "not_started" if exc.__class__.__name__ == "NotStarted" else errno.errorcode.get(code, "unknown").lower()
    return {"reason": reason, "detail": str(exc)[:200]}


def _boot_time(uptime: Optional[float]) -> Optional[float]:
    """The kernel's boot time; now minus the uptime where /proc/stat does not say."""
    boot = boot_clock.boot_time()
    if boot is not None:
        return boot
    return round(time.time() - uptime, 3) if uptime else None


def _dmesg_restrict() -> Optional[int]:
    try:
        with open("/proc/sys/kernel/dmesg_restrict", "rb") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None
