"""Whether a process gpudoctor could not start was stopped by a limit of this process, and which.

Every probe starts a process; starting one needs free file descriptors (its pipes), a free process
slot, and room for its arguments and environment. When one of those runs out, the operating system's
error names it (EMFILE, EAGAIN, E2BIG, ...), and the cause is the limit, not the driver or framework
the process was to examine. ``host.limits`` holds the values in force (probes/system.py).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Optional

from gpudoctor.snapshot import get

_ERRNO = re.compile(r"\[Errno (\d+)\]")


class Limit(NamedTuple):
    """A limit that stopped a process: what ran out, said for this machine, and the command that raises it."""

    what: str
    fix: str


def limit_hit(error: Any, facts: dict[str, Any]) -> Optional[Limit]:
    """The limit an error from starting a process names (``OSError: [Errno 24] ...``), or None when the
    error is not about a limit."""
    match = _ERRNO.search(error) if isinstance(error, str) else None
    if match is None:
        return None
    limits = get(facts, "host.limits") or {}
    errno = int(match.group(1))
    if errno == 24:  # EMFILE
        value = limits.get("open_files")
        shown = f" (ulimit -n is {value})" if isinstance(value, int) else ""
        return Limit(f"this process may open no more files{shown}", "ulimit -n 4096")
    if errno == 23:  # ENFILE
        return Limit("the system's table of open files is full", "cat /proc/sys/fs/file-nr")
    if errno == 7:  # E2BIG
        size, most = limits.get("environment_bytes"), limits.get("arg_max_bytes")
        shown = f" ({size} bytes, against at most {most} for a new process)" if isinstance(size, int) and isinstance(most, int) else ""
        return Limit(f"the environment is too large to hand to a new process{shown}", "env | wc -c")
    if errno == 11:  # EAGAIN from fork: the limit on processes
        value = limits.get("processes")
        shown = f" (ulimit -u is {value})" if isinstance(value, int) else ""
        return Limit(f"this user may start no more processes{shown}", "ulimit -u 4096")
    if errno == 12:  # ENOMEM
        return Limit("there is not enough memory to start a process", "free -m")
    return None
