"""Run a probe in a child process with a hard time limit, keeping whatever it printed.

Used for everything that can hang or crash the interpreter: NVML on a wedged driver, framework
imports, GPU work. The child prints one JSON object per line; the parent keeps every complete
line, so a child killed at its deadline still contributes what it had found.

Every child dies with gpudoctor and takes what it started along: it holds the read end of
a lifeline pipe whose write end only gpudoctor holds, so gpudoctor's end, even by SIGKILL, is its
end-of-file (childpath.py). A lifeline, not PR_SET_PDEATHSIG: that signal fires when the *thread*
that started the child ends, and a probe thread may end while its child's exit is still under way.
What a child starts is watched while it runs and killed when it ends or is killed, found by tree,
group and the mark of its environment (processes.Family), so a grandchild that called setsid, or
whose parent is gone, is not left behind, and none can hold the child's pipes open past its end.

The children and the "no new child" switch (``_closed``, set by ``kill_all``, cleared by ``reopen``)
are module state on purpose, not an object passed down to the probes: they are the process's own.
``kill_all`` is called where Ctrl-C, SIGTERM or SIGHUP unwinds the command (cli/base.py), which has no
run to hand, as well as at a run's deadline and end, and it must reach the children of every probe
thread, including those the run stopped waiting for at its deadline, which keep running and would
otherwise start new children after it. A run object threaded through every probe would not reach
those, nor the interrupt; a flag that one lock guards does. The deadline itself never travels this way: the runner records it in the probe
records as data (``reason``: "deadline").
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, cast

from gpudoctor.procs import processes, warden
from gpudoctor.procs.childpath import BOOT, LIFELINE_ENV
from gpudoctor.procs.ending import EXIT_SECTION
from gpudoctor.procs.protocol import ENV, MAX_LINE_BYTES
from gpudoctor.trace import mark

STDERR_TAIL_BYTES = 4000
#: How often the descendants of a running child are looked at (processes.Family.look: a walk of its tree).
LOOK_EVERY_S = 0.25
_live: set[subprocess.Popen] = set()
_stopped: set[subprocess.Popen] = set()  # killed by kill_all() while running
_exiting: set[subprocess.Popen] = set()  # said their exit status, not gone yet (_reap drops them)
_families: dict[subprocess.Popen, processes.Family] = {}  # each running child with what it started
_live_lock = threading.Lock()
_closed = False  # set by kill_all(): a probe thread still running past the deadline may start no new child
_lock_dir: Optional[str] = None
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass
class ChildResult:
    lines: list[dict[str, Any]] = field(default_factory=list)
    timed_out: bool = False
    returncode: Optional[int] = None
    stderr_tail: str = ""
    duration_s: float = 0.0
    start_error: str = ""
    #: What the child has written to stderr so far (the last few KB), while it runs; stderr_tail when done.
    stderr_chunks: list[bytes] = field(default_factory=list, repr=False, compare=False)
    #: The same of its stdout, for a child that talks to gpudoctor on its own channel (run_module).
    stdout_chunks: list[bytes] = field(default_factory=list, repr=False, compare=False)

    def stderr_so_far(self) -> str:
        return b"".join(list(self.stderr_chunks))[-STDERR_TAIL_BYTES:].decode(errors="replace")

    def section(self, name: str) -> Any:
        """The data of the first line the child printed as ``{"section": name, "data": ...}``, or None."""
        return next((line["data"] for line in self.lines if line.get("section") == name), None)

    def sections(self, name: str) -> list[Any]:
        """The data of every line the child printed as ``{"section": name, "data": ...}``, in order."""
        return [line["data"] for line in self.lines if line.get("section") == name]

    def failure(self, what: str, timeout_s: float) -> dict[str, Any]:
        """The record of a child that printed no result: not started, no answer in time, or crashed."""
        if self.start_error:
            why = self.start_error
        elif self.timed_out:
            why = f"{what} gave no answer within {timeout_s:g} s"
        else:
            why = f"{what} crashed ({self.signal_name or f'exit status {self.returncode}'})"
        return {"ok": False, "error": why, "stderr_tail": self.stderr_tail[-1500:]}

    @property
    def signal_name(self) -> str:
        """The signal that ended the child (a segfault, the OOM killer's SIGKILL), if any."""
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return ""


def child_env(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The parent's environment as it is (``PYTHONPATH`` included: it decides which framework the user's
    import gets), plus ``extra``. The child finds gpudoctor itself through its start (childpath.BOOT)."""
    env = dict(os.environ)
    env.update(warden.run_env())
    env.update(extra or {})
    return env


def command(module: str, args: Sequence[str] = (), python: Optional[str] = None) -> list[str]:
    """The command line of a child running ``module``: under ``python`` (the diagnosed interpreter, for
    children that import a framework; gpudoctor's own when None, which also gets gpudoctor's own search
    path for its dependencies), isolated from the working directory and PYTHON* variables (childpath)."""
    config: dict[str, Any] = {"root": PACKAGE_ROOT, "cwd": _cwd()}
    if python is None:
        config["append"] = [p for p in sys.path if p and os.path.abspath(p) != config["cwd"]]
    return [python or sys.executable, "-I", "-u", "-c", BOOT, json.dumps(config), module, *args]


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the working directory was removed
        return "/"


def gpu_lock_dir() -> str:
    """The folder of per-GPU lock files (``GPUDOCTOR_LOCK_DIR``), one for the whole gpudoctor process:
    children of every probe that time work on a GPU take that GPU's lock (workload/worker.py ``_lock``),
    so the framework workloads and the multi-GPU tests never measure on the same GPU at once."""
    global _lock_dir
    with _live_lock:
        if _lock_dir is None or not os.path.isdir(_lock_dir):
            _lock_dir = tempfile.mkdtemp(prefix="gpudoctor-locks-")
            atexit.register(shutil.rmtree, _lock_dir, True)
        return _lock_dir


def run_module(module: str, args: Sequence[str] = (), timeout_s: float = 10.0,
               env: Optional[dict[str, str]] = None, feed: Optional[Callable[[], str]] = None,
               on_line: Optional[Callable[[dict[str, Any]], None]] = None,
               result: Optional[ChildResult] = None, python: Optional[str] = None) -> ChildResult:
    """Run ``python -m module args`` as a child (see command), keeping the lines it writes to its channel
    (protocol.py): what it prints on stdout is its output, not what it says to gpudoctor."""
    return run_json_lines(command(module, args, python), timeout_s, env or child_env(), feed, on_line, result,
                          channel=True)


def run_json_lines(cmd: Sequence[str], timeout_s: float, env: Optional[dict[str, str]] = None,
                   feed: Optional[Callable[[], str]] = None, on_line: Optional[Callable[[dict[str, Any]], None]] = None,
                   result: Optional[ChildResult] = None, channel: bool = False) -> ChildResult:
    """Run ``cmd`` and keep the JSON lines it prints: on a pipe of its own with ``channel`` (protocol.py),
    else on stdout. ``feed``: the child's stdin, a call that may block
    until what the child needs is known (the child starts at once and can import meanwhile); it runs
    in a thread of its own, and if it fails the child reads end-of-file. Without it stdin is empty.
    ``on_line`` is called with each line as it arrives, and ``result`` (filled as the child runs, where
    given) lets the caller read the lines and stderr before the child ends."""
    result = result if result is not None else ChildResult()
    start = time.monotonic()
    with _live_lock:  # start and register atomically, so kill_all() cannot miss a child
        if _closed:
            result.start_error = "not started: the run's deadline passed or it was interrupted"
            return result
        said_on, written = os.pipe() if channel else (None, None)
        life_in, lifeline = os.pipe()  # the child holds life_in; lifeline stays here until the child is gone
        token = processes.new_mark()
        extra = {LIFELINE_ENV: str(life_in), **({ENV: str(written)} if channel else {})}
        try:
            proc = subprocess.Popen(
                list(cmd), stdin=subprocess.PIPE if feed else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env={**processes.marked_env(env, token), **extra},
                start_new_session=True, cwd="/", pass_fds=cast("tuple[int, ...]", (life_in, written) if channel else (life_in,)),
            )
        except OSError as exc:
            result.start_error = f"{type(exc).__name__}: {exc}"
            for fd in (said_on, lifeline):
                if fd is not None:
                    os.close(fd)
            return result
        finally:
            for fd in (written, life_in):  # the child holds them now: end-of-file once it and its own are done
                if fd is not None:
                    os.close(fd)
        _live.add(proc)
        family = _families[proc] = processes.Family(proc.pid, token)
    what = " ".join(map(str, cmd[6:8])) if cmd[3:4] == ["-c"] else os.path.basename(str(cmd[0]))
    mark(f"spawned {what} as {proc.pid}")
    ended = threading.Event()
    said: Future[Any] = Future()
    lines = os.fdopen(said_on, "rb") if said_on is not None else proc.stdout
    readers = [
        threading.Thread(target=_read_lines, args=(lines, result.lines, on_line, said), daemon=True),
        threading.Thread(target=_read_tail, args=(proc.stderr, result.stderr_chunks), daemon=True),
    ]
    if said_on is not None:  # the child's own stdout: kept like stderr, a tail of it
        readers.append(threading.Thread(target=_read_tail, args=(proc.stdout, result.stdout_chunks), daemon=True))
    for reader in readers:
        reader.start()
    if feed:  # not joined: it may still wait for what to write when the child is gone; it then writes nothing
        threading.Thread(target=_feed, args=(proc.stdin, feed), daemon=True).start()
    threading.Thread(target=_reap, args=(proc, ended, family, lifeline), daemon=True).start()
    threading.Thread(target=_said_and_closed, args=(readers, said, ended), daemon=True).start()
    try:
        if not ended.wait(timeout_s):
            result.timed_out = True
            kill_group(proc)
    except BaseException:  # Ctrl-C or a deadline in the parent: never leave the child behind
        kill_group(proc)
        raise
    finally:
        with _live_lock:
            if result.timed_out or proc.returncode is not None or not said.done():
                _live.discard(proc)  # gone, or abandoned in the kernel; else _reap drops it once it is gone
            else:
                _exiting.add(proc)
            # killed by kill_all() (a signal, not its own exit): the run's deadline passed, or it was interrupted
            result.timed_out = result.timed_out or (proc in _stopped and (proc.returncode or 0) < 0)
            _stopped.discard(proc)
    for reader in readers:
        reader.join(timeout=1.0)
    streams = [lines, proc.stderr] + ([proc.stdout] if said_on is not None else [])
    for reader, stream in zip(readers, streams):
        if not reader.is_alive() and stream is not None:  # closed here, not left to the collector; a stuck one is abandoned
            stream.close()
    # the reaper sets returncode once the child is gone; until then, the status it said it exits with
    result.returncode = proc.returncode if proc.returncode is not None else said.result() if said.done() else None
    mark(f"ended {what} {proc.pid}: {result.returncode}")
    result.stderr_tail = result.stderr_so_far()
    result.duration_s = time.monotonic() - start
    return result


def reopen() -> None:
    """Allow children again (a new run in the same process, as tests do)."""
    global _closed
    with _live_lock:
        _closed = False
    processes.reopen()


def pinned(env: dict[str, str], uuid: Any) -> dict[str, str]:
    """``env`` for a child that works on one GPU: only that GPU visible (by its UUID, which names the same
    GPU whatever CUDA_VISIBLE_DEVICES said), so CUDA starts on that GPU alone. The child reads
    GPUDOCTOR_PINNED_GPU to know that its one GPU is 0 and not the ordinal it reports."""
    if not isinstance(uuid, str) or not uuid.upper().startswith(("GPU-", "MIG-")):
        return env
    return {**env, "CUDA_VISIBLE_DEVICES": uuid, "GPUDOCTOR_PINNED_GPU": "1"}


def kill_all() -> int:
    """Kill every child still running (a deadline passed, the user pressed Ctrl-C, or a run ended), and
    start no new one until reopen(); returns how many were killed. Waits (2 s at most) for them to be
    gone, except for those that said their exit status (ending.end_child): their exit is already under
    way, and waiting for it (the driver freeing GPU contexts) is what saying it saves."""
    global _closed
    with _live_lock:
        _closed = True
        procs = [p for p in _live if p not in _stopped]  # a second call does not wait on the same ones again
        _stopped.update(procs)
        exiting = _exiting & set(procs)
    stopped = processes.stop_all()  # the programs run_bounded runs (nvcc, ldconfig)
    for proc in procs:  # signal every group first, then wait for them all within one short budget
        _signal_group(proc)
    end = time.monotonic() + 2.0
    for proc in (p for p in procs if p not in exiting):  # not for an exit under way: the end of every run calls this
        try:
            proc.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass  # uninterruptible (D state) in the driver: abandon it rather than hang
    return len(procs) + stopped


def _signal_group(proc: subprocess.Popen) -> None:
    """Kill the child, its group and every process it started (processes.Family.kill)."""
    family = _families.get(proc)
    if family is not None:
        family.kill()
    elif proc.returncode is None:  # else gone, and what it left was killed then (_reap)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the child and anything it started; do not wait long for a process stuck in the kernel."""
    _signal_group(proc)
    try:
        proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        pass  # uninterruptible (D state) in the driver: abandon it rather than hang


def _feed(stream: Any, feed: Callable[[], str]) -> None:
    try:
        stream.write(feed().encode())
    except Exception:  # noqa: BLE001 - the feed failed, or the child is gone: it reads end-of-file
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _reap(proc: subprocess.Popen, ended: threading.Event, family: processes.Family, lifeline: int) -> None:
    """Wait for the child's end: the run's, unless it said its status first (_said_and_closed); a child
    that did stays killable (kill_all) until it is gone. Meanwhile look at what it starts, and at its
    end kill what it left (a daemon it double-forked, a grandchild holding its pipes), then let go of
    its lifeline."""
    while True:
        try:
            proc.wait(timeout=LOOK_EVERY_S)
            break
        except subprocess.TimeoutExpired:
            family.look()
    family.kill()
    os.close(lifeline)
    with _live_lock:
        _families.pop(proc, None)
        _live.discard(proc)
        if proc in _exiting:  # its run_json_lines has returned: nothing reads _stopped for it any more
            _exiting.discard(proc)
            _stopped.discard(proc)
    ended.set()


def _said_and_closed(readers: Sequence[threading.Thread], said: Future, ended: threading.Event) -> None:
    """The child's work is over once it has said its exit status (ending.end_child) and closed both its
    stdout and stderr: what is left is its exit (the driver freeing its GPU contexts), not the run's to wait
    for. A child that keeps an output open (or a grandchild that does) is waited for to its end."""
    for reader in readers:
        reader.join()
    if said.done():
        ended.set()


def _read_lines(stream: Any, out: list[dict[str, Any]], on_line: Optional[Callable[[dict[str, Any]], None]],
                said: Future) -> None:
    """Keep the child's JSON lines; its exit status (ending.end_child), if it says it, goes to ``said``."""
    for raw in _bounded_lines(stream):
        try:
            item = json.loads(raw)
        except (ValueError, RecursionError):
            continue  # not a line of ours (on stdout, a library's), or one nested past reason
        if isinstance(item, dict) and item.get("section") == EXIT_SECTION:
            if isinstance(item.get("data"), int) and not said.done():
                said.set_result(item["data"])
        elif isinstance(item, dict):
            out.append(item)
            if on_line:
                try:
                    on_line(item)
                except Exception:  # noqa: BLE001 - the caller's hook must not stop the reading
                    pass


def _bounded_lines(stream: Any) -> Any:
    """The lines of ``stream``, each at most protocol.MAX_LINE_BYTES: a longer one is dropped whole,
    read a bounded piece at a time, so one huge line cannot take the parent's memory."""
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(MAX_LINE_BYTES)
            continue
        yield raw


def _read_tail(stream: Any, chunks: list[bytes]) -> None:
    """Keep only the last few KB: a child may print megabytes of warnings."""
    size = 0
    for chunk in iter(lambda: stream.read1(65536), b""):  # what is there: the tail is readable while the child runs
        chunks.append(chunk)
        size += len(chunk)
        while size - len(chunks[0]) > STDERR_TAIL_BYTES and len(chunks) > 1:
            size -= len(chunks.pop(0))
