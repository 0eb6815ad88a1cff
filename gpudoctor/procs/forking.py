"""Work run in a forked copy of gpudoctor's own process, for the probes whose work is all Python.

``check --quick`` spends most of its time in three such probes (the CUDA libraries on disk, the Python
environment, the frameworks' package metadata): reading files and parsing them, which holds the one
interpreter lock. As threads they take turns with each other and with the import of the checks; each
in a copy of the process made by ``fork`` runs on a core of its own, with everything this process
already knows (its modules, the diagnosed interpreter, a test's replaced function) and no start-up
cost. A copy sends back its result as JSON, which is what the report keeps of it anyway.

A fork is only safe while this process has one thread: a lock another thread held at the fork stays
held for ever in the copy. So ``safe`` says no as soon as any other thread exists (the caller then
runs the work in threads, as before), and the copies are all made before the first thread that waits
for them is started. ``GPUDOCTOR_FORK=0`` in the environment turns forking off.

Each copy is a process gpudoctor started like any other: in a process group of its own, adopted by
processes.py (so the deadline, Ctrl-C, SIGTERM and the run's end kill it and what it started), told by
the kernel when gpudoctor's main thread ends, however it ends (PR_SET_PDEATHSIG: a SIGTERM, on which it
kills what it started and ends), and holding none of gpudoctor's open files (a caller waiting for the
end of gpudoctor's output is not kept waiting by a copy). It ends with ``os._exit``: it runs none of the
exit work of the process it was copied from.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any, Callable, Optional, Sequence

from gpudoctor.procs import processes, warden
from gpudoctor.procs.pids import single_threaded

#: The variable that turns forking off ("0").
ENV = "GPUDOCTOR_FORK"


def safe() -> bool:
    """Whether this process may fork copies now: the platform can, the user did not say no, and no other
    thread exists."""
    return hasattr(os, "fork") and os.environ.get(ENV) != "0" and single_threaded()


class Copy:
    """A forked copy of this process doing one piece of work; ``wait`` gives its JSON result."""

    def __init__(self, pid: int, reader: int) -> None:
        self.pid = pid
        self._reader = reader

    def wait(self) -> tuple[Optional[Any], str]:
        """The copy's result (None if it sent none that parses) and how it ended, e.g. "exit status 0" or
        "signal 9 (SIGKILL)". Returns once the copy has ended and been reaped."""
        chunks = []
        try:
            while True:
                chunk = os.read(self._reader, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        except OSError:
            pass
        finally:
            os.close(self._reader)
        try:
            _, status = os.waitpid(self.pid, 0)
            ended = _ended(status)
        except ChildProcessError:
            ended = "unknown end"
        finally:
            processes.release(self.pid)
        try:
            return json.loads(b"".join(chunks)), ended
        except ValueError:
            return None, ended


def fork_all(works: Sequence[Callable[[], Any]]) -> list[Optional[Copy]]:
    """Start one copy of this process per work, all before any thread is started; each copy runs its work
    and sends back what it returned (JSON). The caller checks ``safe`` first. A work whose copy could not
    be made (fork refused: no memory, too many processes) gets None, as does every one after it: the
    caller runs those itself."""
    parent = os.getpid()
    made: list[tuple[int, int]] = []
    for work in works:
        try:
            reader, writer = os.pipe()
        except OSError:
            break
        try:
            pid = os.fork()
        except OSError:
            os.close(reader)
            os.close(writer)
            break
        if pid == 0:
            _copy(work, reader, writer, parent)  # never returns
        os.close(writer)
        made.append((pid, reader))
    copies: list[Optional[Copy]] = []
    for pid, reader in made:  # adopted once all are made: no copy inherits another's adoption
        try:
            os.setpgid(pid, pid)  # also done in the copy: whichever runs first, the group exists before a kill
        except OSError:
            pass
        processes.adopt(pid)
        warden.register(pid)
        copies.append(Copy(pid, reader))
    return copies + [None] * (len(works) - len(copies))


def _copy(work: Callable[[], Any], reader: int, writer: int, parent: int) -> None:
    """The copy's whole life: detach from what it shares with gpudoctor, work, send, and end at once."""
    code = 0
    try:
        os.close(reader)
        os.setpgid(0, 0)
        for sig in (signal.SIGINT, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, _parent_gone)
        processes.on_parent_death(signal.SIGTERM)
        if os.getppid() != parent:  # gpudoctor ended before the request: the signal will never come
            _parent_gone()
        warden.detach_files(writer)
        data = json.dumps(work()).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(writer, view):]
    except BaseException:  # noqa: BLE001 - nothing may escape a copy: the parent sees no result
        code = 1
    finally:
        os._exit(code)


def _parent_gone(*_: Any) -> None:
    """gpudoctor ended (even by SIGKILL, which runs none of its clean-up) or a SIGTERM came: kill what this
    copy started, which a plain PR_SET_PDEATHSIG kill of the copy would leave (an nvcc's own children),
    and end. A signal handler: it takes no lock and imports nothing, as the code it interrupted may hold
    either (processes.kill_now)."""
    try:
        processes.kill_now()
    finally:
        os._exit(1)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"signal {sig} ({signal.Signals(sig).name})"
        except ValueError:
            return f"signal {sig}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"
