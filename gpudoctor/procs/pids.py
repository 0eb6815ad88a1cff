"""Finding processes from /proc with the standard library only.

Both sides need it: gpudoctor (procs/processes.py, which wraps the pids in psutil handles before it
signals them) and a child whose lifeline broke (procs/childpath.py), which runs under the diagnosed
Python, where psutil may not be installed."""

from __future__ import annotations

import os
from typing import Callable, Optional


def single_threaded() -> bool:
    """Whether this process has one thread, in Python and below it (a library's own thread shows in the
    kernel's count): the only time a fork is safe, as a lock another thread held at the fork stays held for
    ever in the copy."""
    import threading

    if threading.active_count() != 1:
        return False
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(b")") + 2:].split()[17]) == 1  # field 20: num_threads
    except (OSError, ValueError, IndexError):
        return False


def start_ticks(pid: int) -> Optional[int]:
    """When ``pid`` started, in clock ticks since boot (/proc/PID/stat field 22), or None if it is gone."""
    return _stat_field(pid, 22)


def parent_pid(pid: int) -> Optional[int]:
    """``pid``'s parent (/proc/PID/stat field 4), or None if it is gone."""
    return _stat_field(pid, 4)


def _stat_field(pid: int, field: int) -> Optional[int]:
    """Field ``field`` (numbered as proc(5) does) of /proc/PID/stat, read past the name, which may hold
    spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(b")") + 2:].split()[field - 3])
    except (OSError, ValueError, IndexError):
        return None


def running(pid: int, ticks: Optional[int]) -> bool:
    """Whether the process ``pid`` that started at ``ticks`` (start_ticks) still runs: not gone, not another process
    of the same number, and not a zombie whose parent has yet to reap it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rindex(b")") + 2:].split()
        return fields[0] not in (b"Z", b"X") and int(fields[19]) == ticks
    except (OSError, ValueError, IndexError):
        return False


def child_pids(pid: int) -> list[int]:
    """``pid``'s own children (not theirs), from ``/proc/PID/task/TID/children``."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                kids += [int(k) for k in fh.read().split()]
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return kids


def descendant_pids(pid: int) -> list[int]:
    """The processes below ``pid``, from ``/proc/PID/task/TID/children``: the cost is the tree's size, not a
    scan of every process of the node."""
    found: dict[int, None] = {}
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue  # gone meanwhile
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children", "rb") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except (OSError, ValueError):
                continue  # the thread ended meanwhile
            for kid in kids:
                if kid not in found and kid != pid:
                    found[kid] = None
                    todo.append(kid)
    return list(found)


def marked_pids(needle: bytes, skip: int, since: Optional[int] = None, admit: Optional[Callable[[int], bool]] = None,
                uid: Optional[int] = None) -> list[int]:
    """The processes whose environment holds ``needle`` (``NAME=value``), other than ``skip``: those started
    at or after ``since`` (start_ticks), whose pid ``admit`` accepts, owned by ``uid`` (any when None or 0)."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == skip or admit is not None and not admit(int(name)):
            continue
        try:
            if uid and os.stat(f"/proc/{name}").st_uid != uid:
                continue
            if since is not None and (start_ticks(int(name)) or 0) < since:
                continue
            with open(f"/proc/{name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle + b"\0" in env or env.endswith(needle):
            found.append(int(name))
    return found
