"""Finding processes from /proc with the standard library only.

Both sides need it: gpudoctor (procs/processes.py, which wraps the pids in psutil handles before it
signals them) and a child whose lifeline broke (procs/childpath.py), which runs under the diagnosed
Python, where psutil may not be installed."""

from __future__ import annotations

import os
from typing import Callable, Optional, Union


def single_threaded() -> bool:
    """Whether this process has one thread, in Python and below it (a library's own thread shows in the
    kernel's count): the only time a fork is safe, as a lock another thread held at the fork stays held for
    ever in the copy."""
    import threading

    if threading.active_count() != 1:
        return False
    return _stat_field("self", 20) == 1  # num_threads


def start_ticks(pid: int) -> Optional[int]:
    """When ``pid`` started, in clock ticks since boot (/proc/PID/stat field 22), or None if it is gone."""
    return _stat_field(pid, 22)


def parent_pid(pid: int) -> Optional[int]:
    """``pid``'s parent (/proc/PID/stat field 4), or None if it is gone."""
    return _stat_field(pid, 4)


def _stat_fields(pid: Union[int, str]) -> Optional[list[bytes]]:
    """/proc/PID/stat from field 3 (the state) on, read past the name, which may hold spaces and parentheses;
    None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return None


def _stat_field(pid: Union[int, str], field: int) -> Optional[int]:
    """Field ``field`` (numbered as proc(5) does) of /proc/PID/stat, as a number."""
    fields = _stat_fields(pid)
    try:
        return int(fields[field - 3]) if fields is not None else None
    except (ValueError, IndexError):
        return None


def running(pid: int, ticks: Optional[int]) -> bool:
    """Whether the process ``pid`` that started at ``ticks`` (start_ticks) still runs: not gone, not another process
    of the same number, and not a zombie whose parent has yet to reap it."""
    fields = _stat_fields(pid)
    try:
        return fields is not None and fields[0] not in (b"Z", b"X") and int(fields[19]) == ticks
    except (ValueError, IndexError):
        return False


def environ(pid: int) -> Optional[bytes]:
    """/proc/PID/environ (NAME=value entries, each ended by a NUL), or None where it cannot be read (gone, or
    another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read()
    except OSError:
        return None


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
        for kid in child_pids(todo.pop()):
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
        except OSError:
            continue
        if since is not None and (start_ticks(int(name)) or 0) < since:
            continue
        env = environ(int(name))
        if env is not None and (needle + b"\0" in env or env.endswith(needle)):
            found.append(int(name))
    return found
