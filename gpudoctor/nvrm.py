"""What the NVIDIA kernel driver's own log lines (``NVRM: ...``) say, parsed from one line of text.

One parser serves the live kernel-log probe (probes/driver_events.py) and the ticket reader
(pastes/forms/messages.py), so a pasted dmesg and this machine's log are read alike. An Xid line is
``NVRM: Xid (PCI:0000:2b:00): 79, pid=..., name=..., GPU has fallen off the bus.``; older drivers
left out ``PCI:`` (``NVRM: Xid (0000:01:00): 3, ...``), the domain may be non-zero (``PCI:0004:01:00``),
and under MIG a GPU instance follows the bus (``PCI:0000:01:00 GPU-I:05``). A few other NVRM lines say a GPU failed without an Xid number: each is
matched on the driver's fixed words (DRIVER_ERRORS), never on the log level, which healthy machines
also use for notices.
"""

from __future__ import annotations

import re
from typing import Any, Optional

_BUS = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?"
# under MIG the driver names the GPU instance after the bus: "Xid (PCI:0000:01:00 GPU-I:05): 94, ..."
XID = re.compile(r"NVRM: Xid \((?:PCI:)?(" + _BUS + r")(?: [^)]{1,40})?\): (\d{1,3})\b,? ?(.{0,300})")
_PID = re.compile(r"\bpid=(?:'?<unknown>'?|'N/A'|(\d{1,10}))")
_NAME = re.compile(r"\bname=([^,]{1,64})")
_ANY_BUS = re.compile(r"(?:PCI:)?(" + _BUS + r")")
#: (lowercase words, kind, what it means): NVRM lines that say a GPU failed, without an Xid number.
DRIVER_ERRORS = (
    ("has fallen off the bus", "gpu_lost", "the GPU has fallen off the bus"),
    ("rminitadapter failed", "init_failed", "the driver could not initialise the GPU (RmInitAdapter failed)"),
    ("rm_init_adapter failed", "init_failed", "the driver could not initialise the GPU (rm_init_adapter failed)"),
    ("gsp timeout", "gsp_timeout", "the GPU's GSP firmware stopped answering the driver (GSP Timeout)"),
    ("heartbeat timed out", "gsp_timeout", "the GPU's GSP firmware stopped answering the driver (heartbeat timed out)"),
    ("api mismatch", "version_mismatch", "the kernel module and a driver library are different versions (API mismatch)"),
)
#: Xid 154's words for the recovery the driver now asks for, and gpudoctor's severity of each.
RECOVERY_ACTIONS = {"none": "info", "drain p2p": "warning", "drain and reset": "error", "gpu reset required": "error",
                    "node reboot required": "error"}
_RECOVERY = re.compile(r"recovery action changed from \S+ \(([^)]{1,40})\) to \S+ \(([^)]{1,40})\)", re.I)


def parse_xid(text: str) -> Optional[dict[str, Any]]:
    """{"xid", "bus_id", "detail", "pid", "process"} for an Xid line (pid and process None where the driver
    printed none or '<unknown>'), else None."""
    m = XID.search(text)
    if not m:
        return None
    detail = m.group(3).strip(" ,")
    pid = _PID.search(detail)
    name = _NAME.search(detail)
    process = name.group(1).strip() if name and "<unknown>" not in name.group(1) else None
    return {"xid": int(m.group(2)), "bus_id": m.group(1), "detail": detail[:240],
            "pid": int(pid.group(1)) if pid and pid.group(1) else None, "process": process}


def driver_error(text: str) -> Optional[dict[str, Any]]:
    """{"kind", "meaning", "bus_id"} for an NVRM line that says a GPU failed without an Xid number, else None.
    An Xid line is not one (parse_xid reads it)."""
    if "NVRM:" not in text or XID.search(text):
        return None
    lowered = text.lower()
    for words, kind, meaning in DRIVER_ERRORS:
        if words in lowered:
            bus = _ANY_BUS.search(text.split("NVRM:", 1)[1])
            return {"kind": kind, "meaning": meaning, "bus_id": bus.group(1) if bus else None}
    return None


_CLIENT_VERSION = re.compile(r"client has the version (\d[\w.-]{0,30}?),")


def mismatch_client_version(text: str) -> Optional[str]:
    """The driver version of the client an "API mismatch" line names ("the client has the version 550.54.15, but"),
    None where the line does not say it."""
    m = _CLIENT_VERSION.search(text)
    return m.group(1) if m else None


#: Xid 94/95's own words on whether the GPU must now be reset ("RST: Yes") or drained and reset ("D-RST: Yes").
_RESET = re.compile(r"\b(?:D-)?RST: Yes\b")


def asks_reset(detail: str) -> bool:
    """Whether an error-containment Xid (94, 95) says the GPU must be reset, or drained and reset."""
    return bool(_RESET.search(detail))


def recovery_action(detail: str) -> Optional[str]:
    """The recovery an Xid 154 message says the GPU now needs ("GPU Reset Required"), None if it names none."""
    m = _RECOVERY.search(detail)
    return m.group(2).strip() if m else None


def bus_key(bus_id: Any) -> Optional[tuple[int, int, int]]:
    """(domain, bus, device) of a PCI address as the driver prints it (0000:2b:00), NVML (00000000:2B:00.0) or
    sysfs (0000:2b:00.0) writes it: the case, the domain's width and the function differ between them."""
    if not isinstance(bus_id, str):
        return None
    m = re.fullmatch(r"(?:PCI:)?([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-9a-fA-F])?", bus_id.strip())
    return (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)) if m else None
