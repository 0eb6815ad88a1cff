"""The driver's own word on GPUs it will not drive, read from the kernel log (/dev/kmsg, what dmesg reads).

A driver branch that no longer drives a GPU logs, once per GPU while it loads:
  NVRM: The NVIDIA GeForce GT 710 GPU installed in this system is
  NVRM:  supported through the NVIDIA 470.xx Legacy drivers. ...  The 535.129.03 NVIDIA driver will ignore
  NVRM:  this GPU.  Continuing probe...
(compat_matrix/driver_branches.json NVRM-LOG-535, NVRM-LOG-595). That line is the evidence for the check
driver.branch; without it the check still judges from the PCI device id. The read is bounded in records,
bytes and time and never blocks (O_NONBLOCK: the end of the buffer is EAGAIN, not a wait); a log this
process may not read (kernel.dmesg_restrict) is "not read", never a finding.
"""

from __future__ import annotations

import errno
import os
import re
import time
from typing import Any, Callable, Iterator, Optional

KMSG = "/dev/kmsg"
MAX_RECORDS = 20000
MAX_BYTES = 4 * 1024 * 1024
MAX_SECONDS = 0.25
_RECORD_BYTES = 8192  # one read returns one record; the kernel caps a record below this

_NOTICE = re.compile(r"The NVIDIA (?P<name>.+?) GPU installed in this system is supported through the NVIDIA "
                     r"(?P<branch>\d+)\.xx Legacy drivers\b(?:.*?The (?P<driver>\d+\.\d+(?:\.\d+)?) NVIDIA driver will ignore)?")
_START = "GPU installed in this system is"
_FOLLOWING = 4  # the notice is printed as up to five NVRM lines
_DICT_LINE = re.compile(r"^ [A-Z_]+=")  # a kmsg record's dictionary line (" SUBSYSTEM=pci"), not a message


def probe_legacy_notices(path: str = KMSG, pci_devices: Any = None) -> dict[str, Any]:
    """{"read": true, "notices": [{"name", "branch", "driver"}]} or {"read": false, "reason": ...}.
    Given the NVIDIA GPUs on the PCI bus, the log is read only if one has no driver bound: a GPU the driver
    ignores stays unbound, so on a healthy machine the read costs nothing ("not_needed")."""
    if isinstance(pci_devices, list) and not any(isinstance(d, dict) and d.get("driver") is None for d in pci_devices):
        return {"read": False, "reason": "not_needed"}
    try:
        messages = _read_messages(path)
    except OSError as exc:
        reason = "no_permission" if exc.errno in (errno.EPERM, errno.EACCES) else "not_found" if exc.errno == errno.ENOENT \
            else errno.errorcode.get(exc.errno or 0, "unknown").lower()
        return {"read": False, "reason": reason}
    return {"read": True, "notices": legacy_notices(messages)}


def legacy_notices(messages: list[str]) -> list[dict[str, Any]]:
    """The legacy-branch notices in a kernel log's messages (each without its kmsg header), one per GPU
    named; a notice split over several NVRM lines is joined first."""
    out: list[dict[str, Any]] = []
    for i, text in enumerate(messages):
        if _START not in text:
            continue
        joined = " ".join(_body(m) for m in messages[i:i + 1 + _FOLLOWING])
        match = _NOTICE.search(re.sub(r"\s+", " ", joined))
        if match:
            notice = {"name": match["name"].removeprefix("NVIDIA ").strip(), "branch": match["branch"],
                      "driver": match["driver"]}
            if notice not in out:
                out.append(notice)
    return out


def _body(message: str) -> str:
    """A message without its "NVRM:" tag, so a notice split over lines reads as one sentence."""
    return re.sub(r"^\s*NVRM:\s*", "", message)


def _read_messages(path: str) -> list[str]:
    """The messages of /dev/kmsg records ("PRI,SEQ,TIME,FLAGS;text"), oldest first, within the bounds.
    An overwritten record (EPIPE) is skipped; the end of the buffer (EAGAIN) or of a file ends the read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    messages: list[str] = []
    total = 0
    try:
        for chunk in _chunks(fd, MAX_SECONDS, lambda: len(messages) < MAX_RECORDS and total < MAX_BYTES):
            if not chunk:
                break
            total += len(chunk)
            messages.extend(_messages(chunk.decode("utf-8", "replace")))
    finally:
        os.close(fd)
    return messages


def _chunks(fd: int, max_seconds: float, more: Callable[[], bool]) -> Iterator[bytes]:
    """An open kmsg's records, one read each (a plain file gives many lines a read), while ``more()`` and
    the time allow; an empty chunk is the end of the buffer (EAGAIN) or of the file. A record overwritten
    while it was being read (EPIPE) is skipped."""
    deadline = time.monotonic() + max_seconds
    while more() and time.monotonic() < deadline:
        try:
            chunk = os.read(fd, _RECORD_BYTES)
        except BlockingIOError:
            chunk = b""
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                continue
            raise
        yield chunk
        if not chunk:
            return


def _messages(chunk: str) -> list[str]:
    """A kmsg record's text (after the first ';'; continuation lines " KEY=value" dropped); a plain file
    of such records, one a line, gives one message a line."""
    out = []
    for line in chunk.splitlines():
        if not line.strip() or _DICT_LINE.match(line):
            continue
        head, sep, text = line.partition(";")
        out.append(text if sep and "," in head else line)
    return [m.replace("\\x0a", " ") for m in out]


def read_records(path: str = KMSG, max_seconds: float = MAX_SECONDS, keep: bytes = b"NVRM") -> dict[str, Any]:
    """The kernel's own records of /dev/kmsg whose text holds ``keep``, oldest first, as (level, seconds since
    boot, text); with how many records were read, the time of the first (the buffer reaches back no further:
    older ones were overwritten) and of the last, and whether a bound ended the read before the buffer's end.
    Only the kernel's facility counts: a process may write a record of its own into /dev/kmsg. Raises OSError
    when the file cannot be opened (EPERM under kernel.dmesg_restrict without CAP_SYSLOG)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    kept: list[tuple[int, float, str]] = []
    count, total, first_s, complete, last = 0, 0, None, False, b""
    try:
        for chunk in _chunks(fd, max_seconds, lambda: count < MAX_RECORDS * 10 and total < MAX_BYTES * 4):
            if not chunk:
                complete = True
                break
            total += len(chunk)
            if first_s is None or keep in chunk or chunk.count(b"\n") > 1:
                # one read of /dev/kmsg is one record (and its " KEY=value" lines); a plain file gives many at once
                lines = [line for line in chunk.split(b"\n") if line[:1].isdigit()]
            else:
                count, last = count + 1, chunk
                continue
            count += len(lines)
            last = lines[-1] if lines else last
            if first_s is None:
                first = next((r for r in map(_record, lines) if r is not None), None)
                first_s = first[1] if first else None
            for line in lines:
                record = _record(line) if keep in line else None
                if record is not None and record[0] >= 0:
                    kept.append(record)
    finally:
        os.close(fd)
    ended = _record(last) if last else None
    return {"records": count, "first_s": first_s, "last_s": ended[1] if ended else None, "complete": complete,
            "kept": kept}


def _record(line: bytes) -> Optional[tuple[int, float, str]]:
    """(level, seconds since boot, text) of one kmsg record's line "PRI,SEQ,USEC,FLAGS;text"; level -1 for a
    record another facility than the kernel's wrote; None for a line that is no record."""
    head, sep, rest = line.partition(b";")
    fields = head.split(b",")
    if not sep or len(fields) < 3 or not fields[0].isdigit() or not fields[2].isdigit():
        return None
    prio = int(fields[0])
    text = rest.decode("utf-8", "replace").replace("\\x0a", " ")
    return (prio & 7 if prio >> 3 == 0 else -1), int(fields[2]) / 1e6, text
