"""Nothing gpudoctor starts outlives it: its children reaped before it exits, and a warden for its death.

Two mechanisms, because gpudoctor can end two ways:

* **Its own end** (any exit, error or interrupt that runs atexit). gpudoctor is a child subreaper
  (PR_SET_CHILD_SUBREAPER), so a grandchild whose parent dies (an ``nvcc``'s helper, a framework's
  daemon) becomes gpudoctor's own child instead of init's. ``finish`` then kills every child still
  there, with its process group, and reaps them all, round after round until none is left: nothing
  is left running, and nothing is left for another process to reap.
* **Its death by SIGKILL** (or a crash), where none of its code runs. A warden, forked from gpudoctor
  at its start while it is still one thread, holds the read end of a pipe that only gpudoctor can
  write. The kernel closes the other end when gpudoctor dies, however it dies; the warden then kills
  every process whose environment carries this run's mark (``RUN_ENV``, which every program and
  child gpudoctor starts inherits, through ``setsid`` and double forks) and the process groups of the
  copies gpudoctor forked of itself (``register``), and ends. A program's own PR_SET_PDEATHSIG reaches
  only that program, not what it started.

The warden is in a process group of its own, ignores the terminal's and a scheduler's signals (it ends
by itself the moment gpudoctor is gone), and holds none of gpudoctor's open files, so a caller waiting
for the end of gpudoctor's output is not kept waiting. ``GPUDOCTOR_WARDEN=0`` turns both off.

Standard library only, and cheap to import: it runs at the start of every command.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import time
from typing import Any, Optional

from gpudoctor.procs.pids import marked_pids, single_threaded, start_ticks
from gpudoctor.trace import mark

#: In the environment of every process gpudoctor starts (processes.marked_env, child.child_env): this run's
#: mark. It also tells this run's GPU processes from others' (workload/sharing.py).
RUN_ENV = "GPUDOCTOR_RUN"
#: Beside it: the process id of the gpudoctor that made the mark, which every process of the run descends
#: from (workload/sharing.py tells the run's exited children by it, whose environment is gone).
RUN_PID_ENV = "GPUDOCTOR_RUN_PID"
#: The variable that turns the warden and the final reaping off ("0").
ENV = "GPUDOCTOR_WARDEN"
#: How long ``finish`` waits for its children to be gone (one in uninterruptible sleep in a driver is abandoned).
FINISH_S = 3.0
#: Rounds of stop-then-kill: a stopped process forks no more, so a few rounds find all it had started.
ROUNDS = 8

_PR_SET_CHILD_SUBREAPER = 36
_QUIT = b"q"

_run = os.urandom(8).hex()
_run_pid = os.getpid()  # gpudoctor's own, at import: a copy it forks keeps it
_warden: Optional[int] = None
_writer: Optional[int] = None


def run_mark() -> str:
    """This run's mark, the value of ``RUN_ENV`` in every process gpudoctor starts."""
    return _run


def run_env() -> dict[str, str]:
    """What every process gpudoctor starts holds in its environment of this run: its mark and gpudoctor's id."""
    return {RUN_ENV: _run, RUN_PID_ENV: str(_run_pid)}


def start() -> bool:
    """Make gpudoctor a subreaper, fork the warden and arrange ``finish`` at exit; once, and only while
    this process has one thread (a fork beside another thread can copy a lock held for ever). Whether
    the warden runs."""
    global _warden, _writer
    if _warden is not None or os.environ.get(ENV) == "0" or not hasattr(os, "fork") or not single_threaded():
        return False
    call = prctl()
    if call is None:
        return False
    try:
        reader, writer = os.pipe()
    except OSError:  # no descriptor left (ulimit -n): the run goes on without a warden
        return False
    try:
        pid = os.fork()
    except OSError:
        os.close(reader)
        os.close(writer)
        return False
    if pid == 0:
        _watch(reader, writer)  # never returns
    os.close(reader)
    _warden, _writer = pid, writer
    call(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    atexit.register(finish)
    return True


def register(pid: int) -> None:
    """Tell the warden of a copy gpudoctor forked of itself (forking.py): its environment is gpudoctor's
    own, without the run's mark, so the warden kills its group by number (checked against its start)."""
    if _writer is None:
        return
    try:
        os.write(_writer, f"{pid} {start_ticks(pid) or 0}\n".encode())
    except OSError:
        pass


def finish(budget_s: float = FINISH_S) -> int:
    """At gpudoctor's end: kill every child still there (with its group) and reap them all, including the
    orphans that came to gpudoctor as subreaper meanwhile; then let the warden go. Returns how many
    children were reaped."""
    global _warden, _writer
    if _warden is None:
        return 0
    reaped = _reap_children(time.monotonic() + budget_s)
    if _writer is not None:
        try:
            os.write(_writer, _QUIT)
            os.close(_writer)
        except OSError:
            pass
        _writer = None
    _wait(_warden, time.monotonic() + 1.0)
    _warden = None
    mark(f"warden: {reaped} children reaped at the end")
    return reaped


def _reap_children(end: float) -> int:
    """Kill and reap every child but the warden until none is left or ``end`` passes."""
    reaped = 0
    while True:
        reaped += _reap_zombies()
        kids = [k for k in _children() if k != _warden]
        if not kids or time.monotonic() >= end:
            return reaped
        for kid in kids:
            _kill_group_and(kid)
        time.sleep(0.005)


def _reap_zombies() -> int:
    """Reap every child that has ended, but the warden (its end is waited for in ``finish``)."""
    count = 0
    for kid in _children():
        if kid == _warden:
            continue
        try:
            done, _ = os.waitpid(kid, os.WNOHANG)
        except ChildProcessError:
            continue  # reaped meanwhile by the thread that started it (subprocess)
        count += bool(done)
    return count


def _children() -> list[int]:
    """This process's children, from ``/proc/self/task/*/children`` (each thread's own)."""
    kids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return kids
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children", "rb") as fh:
                kids.extend(int(k) for k in fh.read().split())
        except (OSError, ValueError):
            continue
    return kids


def _kill_group_and(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


def _wait(pid: int, end: float) -> None:
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() >= end:
            return
        time.sleep(0.001)


# --- the warden's side -----------------------------------------------------------------------------


def _watch(reader: int, writer: int) -> None:
    """The warden's whole life: detach, wait for gpudoctor's end, kill what it left unless told it left
    nothing, end."""
    code = 0
    try:
        os.close(writer)
        os.setpgid(0, 0)
        for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None), getattr(signal, "SIGTSTP", None)):
            if sig is not None:
                signal.signal(sig, signal.SIG_IGN)
        detach_files(reader)
        since = start_ticks(os.getpid())
        told = bytearray()
        while True:
            chunk = os.read(reader, 4096)
            if not chunk:
                break  # gpudoctor is gone without saying it cleaned up: it died
            told += chunk
            if told.endswith(_QUIT):
                os._exit(0)
        copies = _copies(bytes(told))
        sweep(since, copies)
    except BaseException:  # noqa: BLE001 - nothing may escape the warden
        code = 1
    finally:
        os._exit(code)


def _copies(told: bytes) -> list[tuple[int, int]]:
    out = []
    for line in told.splitlines():
        try:
            pid, ticks = (int(x) for x in line.split())
        except ValueError:
            continue
        out.append((pid, ticks))
    return out


def sweep(since: Optional[int], copies: list[tuple[int, int]]) -> int:
    """Stop, then kill, every process of this user carrying this run's mark and started since ``since``,
    and the groups of the copies still what they were; returns how many processes were killed."""
    for pid, ticks in copies:
        if start_ticks(pid) == ticks:
            _signal_group(pid, signal.SIGKILL)
    needle = f"{RUN_ENV}={_run}".encode()
    stopped: set[int] = set()
    for _ in range(ROUNDS):
        found = set(marked_pids(needle, skip=os.getpid(), since=since, uid=os.getuid())) - stopped
        if not found:
            break
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        _signal(pid, signal.SIGKILL)
    return len(stopped)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def detach_files(keep: int) -> None:
    """Standard input and outputs to /dev/null, every other inherited descriptor but ``keep`` closed."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


_PRCTL: list = []


def prctl() -> Any:
    """libc's prctl, or None where there is none; looked up once."""
    if not _PRCTL:
        try:
            call = ctypes.CDLL(None, use_errno=True).prctl
            call.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
            call.restype = ctypes.c_int
        except (OSError, AttributeError):
            call = None
        _PRCTL.append(call)
    return _PRCTL[0]
