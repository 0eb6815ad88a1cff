"""Control of every process gpudoctor starts: bounded in time and in what is read, and dead at the end.

A program gpudoctor runs is not trusted to behave: an ``nvcc`` that hangs would outlive gpudoctor and
stretch ``check --timeout``; one that floods stdout would cost minutes and gigabytes to read whole;
one that leaves ``sleep 30 &`` holding its stdout would keep the run waiting for end-of-file and then
leak it; a framework child that double-forks or calls ``setsid`` would leak its grandchild. So:

* each program runs in a session of its own, its environment marked with a token of its own
  (``MARK_ENV``): its descendants inherit the mark even after ``setsid`` and after their parent is
  gone (reparented to init, where no tree walk finds them), so ``Family.kill`` finds them by it;
* a ``Family`` is the program with every descendant seen while it ran and found at its end: the
  group, the tree (``/proc/PID/task/TID/children``, else psutil) and the marked processes are
  stopped first (so none can fork a new one meanwhile), then killed;
* ``run_bounded`` reads at most ``max_bytes`` of each output, never past its deadline, and never
  waits on a pipe a grandchild holds: once the program has ended, what it left is killed and the
  pipes are drained for a moment only;
* ``stop_all`` (called by child.kill_all: the run's deadline, Ctrl-C, SIGTERM, SIGHUP) kills every
  program still running, and no new one starts until ``reopen``.

Programs run by ``run_bounded`` also get ``PR_SET_PDEATHSIG`` (SIGKILL), so one still running when
gpudoctor itself is SIGKILLed dies with it. That is safe here because the thread that starts the
program is the thread that waits for it and kills it before returning: the signal is sent when the
*thread* that forked ends (prctl(2)), and that thread never ends while the program should live.
Framework children (child.py) use a lifeline pipe instead (childpath.py), as they may outlive the
thread that started them by the moment their exit takes.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Sequence

from gpudoctor.procs import warden
from gpudoctor.procs.pids import descendant_pids, marked_pids, start_ticks

if TYPE_CHECKING:
    import psutil

# psutil is imported where a process is handled, not here: the package's workers import this module on
# their way in (procs/child.py) under the diagnosed interpreter, which need not have psutil (a pipx
# install of gpudoctor checking a venv without it). Only gpudoctor's own process handles processes.

#: In the environment of every process gpudoctor starts, a token of that process alone; inherited by
#: everything it starts, it names them as its own after they left its tree.
MARK_ENV = "GPUDOCTOR_CHILD"
#: The most a caller of run_bounded keeps of each output, unless it says otherwise.
MAX_BYTES = 1 << 20
#: How long the pipes are drained once the program has ended and its leftovers were killed.
DRAIN_S = 0.5
#: How long a kill waits for a process to be gone (one in uninterruptible sleep in a driver is abandoned).
KILL_WAIT_S = 2.0
_PR_SET_PDEATHSIG = 1
_TREE_FILES = os.path.exists(f"/proc/self/task/{os.getpid()}/children")  # CONFIG_PROC_CHILDREN

_lock = threading.Lock()
_running: dict[int, "Family"] = {}
_stopped: set[int] = set()  # pids run_bounded started that stop_all killed: reported as timed out
_closed = False


class NotStarted(OSError):
    """run_bounded was asked to start a program after stop_all (the run's deadline passed, or it was interrupted)."""


class Ran(NamedTuple):
    """What run_bounded saw: the exit status (negative: the signal that ended it), each output cut to
    ``max_bytes`` and decoded, and whether the deadline (or stop_all) ended it."""

    rc: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool


def new_mark() -> str:
    return uuid.uuid4().hex


def marked_env(env: Optional[dict[str, str]], token: str) -> dict[str, str]:
    """``env`` (the parent's when None) with ``token`` as MARK_ENV and the run's mark (warden.run_env),
    replacing any marks inherited."""
    return {**(env if env is not None else os.environ), MARK_ENV: token, **warden.run_env()}


def descendants(pid: int) -> list[psutil.Process]:
    """Every process below ``pid`` in the tree, as psutil handles (which refuse to signal a reused pid).
    Read from ``/proc/PID/task/TID/children``, which costs only the tree's size (a scan of every process
    for each look, as psutil's ``children`` does, would cost milliseconds on a busy node); psutil where
    the kernel has no such file."""
    if not _TREE_FILES:
        return _psutil_descendants(pid)
    return _handles(descendant_pids(pid))


def _psutil_descendants(pid: int) -> list[psutil.Process]:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _handles(pids: Any) -> list[psutil.Process]:
    pids = list(pids)
    if not pids:
        return []  # and no import of psutil
    import psutil

    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            pass
    return out


def marked(token: str, since: Optional[int] = None, after_pid: Optional[int] = None) -> list[psutil.Process]:
    """The processes of this user whose environment carries ``token`` (MARK_ENV): the descendants that
    left the tree. Only processes started at or after ``since`` (clock ticks, start_ticks) are read,
    and with ``after_pid`` (the family's root) only pids the kernel gave out since it (pids go up, then
    wrap: ``/proc/sys/kernel/ns_last_pid``), so a scan costs a few reads, not one per process of a node."""
    given = _given_since(after_pid) if after_pid is not None else None
    return _handles(marked_pids(f"{MARK_ENV}={token}".encode(), skip=os.getpid(), since=since, admit=given,
                                uid=os.getuid()))


def _given_since(first: int) -> Optional[Callable[[int], bool]]:
    """Whether a pid was given out after ``first`` (up to the last pid given), or None if unknown."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "rb") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        return None
    if last >= first:
        return lambda pid: first < pid <= last
    return lambda pid: pid > first or pid <= last  # wrapped past pid_max


class Family:
    """A process gpudoctor started and everything it started, found by tree, group and mark."""

    def __init__(self, pid: int, token: str = "") -> None:
        self.pid = pid
        self.token = token
        self.since = start_ticks(pid)
        self.seen: dict[int, psutil.Process] = {}
        self._lock = threading.Lock()
        self._root: Optional[list[psutil.Process]] = None

    @property
    def root(self) -> list[psutil.Process]:
        """The root as a psutil handle, made when first needed (most children end without one: psutil's
        import is then not paid), and only while ``pid`` is still the process that started at ``since``,
        as a handle made at the start would be (it refuses to signal a reused pid)."""
        with self._lock:
            if self._root is None:
                self._root = _handles([self.pid])[:1] if self._alive() else []
            return self._root

    def _alive(self) -> bool:
        """Whether ``pid`` is still the root (its start time unchanged; a zombie still is, as for psutil)."""
        return self.since is not None and start_ticks(self.pid) == self.since

    def look(self) -> None:
        """Remember the descendants there now (while the root lives, the tree finds them all)."""
        kids = descendants(self.pid)
        with self._lock:
            for proc in kids:
                self.seen.setdefault(proc.pid, proc)

    def kill(self, root: bool = True, scan: bool = True) -> int:
        """Stop, then kill, the root (with ``root``; without, it is spared: a child whose exit is under
        way), its group, every descendant seen, in the tree now, or (with ``scan``) marked with its token.
        Returns how many processes were signalled one by one."""
        spare = {os.getpid()} | (set() if root else {self.pid})
        self._group(signal.SIGSTOP, root)
        with self._lock:
            todo = dict(self.seen)
        if root:
            todo.update({p.pid: p for p in self.root})
        todo.update({p.pid: p for p in descendants(self.pid)})
        if scan and self.token:  # those that left the tree (setsid, a parent gone)
            todo.update({p.pid: p for p in marked(self.token, self.since, self.pid)})
        stopped: dict[int, psutil.Process] = {}
        for _ in range(8):  # a stopped process forks no more: a few rounds find all it had started
            new = {pid: p for pid, p in todo.items() if pid not in stopped and pid not in spare}
            if not new:
                break
            for proc in new.values():
                _signal(proc, signal.SIGSTOP)
            stopped.update(new)
            todo = {p.pid: p for proc in new.values() for p in descendants(proc.pid)}
        self._group(signal.SIGKILL, root)
        for proc in stopped.values():
            _signal(proc, signal.SIGKILL)
        return len(stopped)

    def _group(self, sig: int, root: bool) -> None:
        """Signal the root's process group, unless the root is to be spared and still there, or its pid
        now names another process (a group's number is not reused while a member of it is left)."""
        alive = self._alive()
        if alive and not root or not alive and start_ticks(self.pid) is not None:  # the pid names another now
            return
        try:
            os.killpg(self.pid, sig)
        except OSError:
            pass


def _signal(proc: psutil.Process, sig: int) -> None:
    import psutil

    try:
        proc.send_signal(sig)
    except (psutil.Error, OSError):
        pass


def _pdeathsig() -> Optional[Callable[[], None]]:
    """The preexec function that makes a program die when the thread that started it ends (see the
    module's docstring), or None where prctl is not there. Kept trivial: it runs between fork and exec."""
    prctl = warden.prctl()
    if not prctl:
        return None
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the call: the signal will never come
            os._exit(1)

    return die_with_parent


def run_bounded(argv: Sequence[str], timeout: float, max_bytes: int = MAX_BYTES,
                env: Optional[dict[str, str]] = None, cwd: Optional[str] = None) -> Ran:
    """Run ``argv`` with empty stdin; keep at most ``max_bytes`` of each of stdout and stderr. Ends when
    the program has ended and its pipes are closed, when ``timeout`` passes (timed_out), when an output
    passes ``max_bytes`` (the rest is not read: the program is killed), or at stop_all (timed_out). What
    the program leaves behind (a background grandchild holding its stdout) is killed when it ends; the
    program and all it started are killed on every way out. Raises OSError if it cannot start
    (NotStarted after stop_all)."""
    token = new_mark()
    with _lock:
        if _closed:
            raise NotStarted("not started: the run's deadline passed or it was interrupted")
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=marked_env(env, token), cwd=cwd,
                                    start_new_session=True, preexec_fn=_pdeathsig())
        except RuntimeError as exc:  # preexec_fn refused: the interpreter is shutting down (or a subinterpreter)
            raise NotStarted(f"not started: {exc}") from None
        family = _running[proc.pid] = Family(proc.pid, token)
    timed_out = False
    outs = (bytearray(), bytearray())
    try:
        timed_out = _read(proc, family, timeout, max_bytes, outs)
    finally:
        family.kill()
        try:
            proc.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            pass  # uninterruptible in the kernel: abandoned
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        with _lock:
            _running.pop(proc.pid, None)
            timed_out = timed_out or proc.pid in _stopped
            _stopped.discard(proc.pid)
    return Ran(proc.returncode, bytes(outs[0]).decode(errors="replace"), bytes(outs[1]).decode(errors="replace"),
               timed_out)


def _read(proc: subprocess.Popen, family: Family, timeout: float, max_bytes: int,
          outs: tuple[bytearray, bytearray]) -> bool:
    """Read stdout and stderr into ``outs`` until both close, the deadline, or ``max_bytes`` of one.
    Returns whether the deadline ended it."""
    assert proc.stdout is not None and proc.stderr is not None
    which = {proc.stdout.fileno(): outs[0], proc.stderr.fileno(): outs[1]}
    end = time.monotonic() + timeout
    ended = False
    with selectors.DefaultSelector() as sel:
        for fd in which:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if now >= end:
                return not ended  # the end of the drain of an ended program is no timeout
            if not ended and proc.poll() is not None:
                ended = True  # it has ended: what it left behind, holding its pipes, goes now
                family.kill(root=False)
                end = min(end, now + DRAIN_S)
            for key, _ in sel.select(min(0.05, end - now)):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = which[key.fd]
                buf += chunk[:max(0, max_bytes - len(buf))]
                if len(buf) >= max_bytes:
                    return False  # enough: the rest is not read, and the program is killed
    try:  # both outputs closed: its exit status, within the deadline
        proc.wait(timeout=max(0.0, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        return not ended
    return False


def stop_all() -> int:
    """Kill every program run_bounded is running and start no new one until reopen(); returns how many."""
    global _closed
    with _lock:
        _closed = True
        families = list(_running.values())
        _stopped.update(f.pid for f in families)
    for family in families:
        family.kill()
    return len(families)


def kill_now() -> None:
    """Kill the group of every program still running, at once: for a signal handler, so it takes no lock
    and imports nothing (the code it interrupted may hold either, and would wait for ever). What those
    programs started and that left their group is the warden's (warden.sweep)."""
    for pid in list(_running):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def adopt(pid: int) -> Family:
    """Count ``pid``, a process gpudoctor made without run_bounded (a forked copy of itself: forking.py),
    among the programs stop_all kills, until ``release``."""
    family = Family(pid)
    with _lock:
        _running[pid] = family
    return family


def release(pid: int) -> None:
    """``pid`` (adopted) has been reaped: stop_all no longer has it to kill."""
    with _lock:
        _running.pop(pid, None)
        _stopped.discard(pid)


def load() -> None:
    """Import psutil, which killing a child at the run's end needs (a framework or NVML child whose exit is
    under way is still signalled, with what it left): for a caller about to wait anyway (runner.run_probes),
    so that the import is not added to the run's end."""
    import psutil  # noqa: F401


def on_parent_death(sig: int) -> bool:
    """Ask the kernel for ``sig`` when the thread that made this process ends (PR_SET_PDEATHSIG); whether
    it could. For a forked copy of gpudoctor (forking.py), made by the main thread, that is gpudoctor's end."""
    prctl = warden.prctl()
    return bool(prctl) and prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def die_with_parent(parent: int) -> None:
    """For a worker forked by gpudoctor's main thread (merge's pool), ``parent`` being gpudoctor: killed
    when gpudoctor ends, however it ends, instead of waiting for ever on a result pipe nobody reads."""
    on_parent_death(signal.SIGKILL)
    if os.getppid() != parent:  # gpudoctor ended before the request: the signal will never come
        os._exit(1)


def closed() -> bool:
    """Whether stop_all was called since the last reopen: the run's deadline passed or it was interrupted,
    and a probe still running may as well stop (what it would find is not used)."""
    return _closed


def reopen() -> None:
    """Allow programs again (a new run in the same process)."""
    global _closed
    with _lock:
        _closed = False
