"""Run one command as a child subreaper (PR_SET_CHILD_SUBREAPER) and say what it left behind.

Under a subreaper, whatever outlives the command comes to the subreaper instead of init, so nothing it
left can hide: ``at_exit`` is every process that came to us by the moment the command was reaped (a
zombie nobody reaped, or one still running), ``alive`` those still running ``settle`` seconds later.
Run as ``python tests/reaper.py SPEC`` (JSON: argv, env, kill_when: a file whose line count reaches
``kill_lines``, or ``kill_after`` seconds; settle). Prints JSON; kills what it found, so a failing test
leaves nothing either."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time


def children() -> list[int]:
    kids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as fh:
            kids.extend(int(k) for k in fh.read().split())
    return kids


def describe(pid: int) -> dict:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0].decode()
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return {"pid": pid, "state": "gone", "cmd": ""}
    return {"pid": pid, "state": state, "cmd": cmd[:200]}


def wait_for_kill(proc: subprocess.Popen, spec: dict) -> None:
    end = time.monotonic() + spec.get("kill_after", 30.0)
    while time.monotonic() < end and proc.poll() is None:
        path = spec.get("kill_when")
        if path and os.path.exists(path) and len(open(path).read().split()) >= spec.get("kill_lines", 1):
            time.sleep(spec.get("kill_delay", 0.2))
            break
        time.sleep(0.01)
    proc.kill()


def main() -> None:
    spec = json.loads(sys.argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    proc = subprocess.Popen(spec["argv"], env={**os.environ, **spec.get("env", {})}, cwd=spec.get("cwd"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if "kill_when" in spec or "kill_after" in spec:
        wait_for_kill(proc, spec)
    err = proc.communicate()[1].decode(errors="replace")
    at_exit = [describe(p) for p in children()]
    end = time.monotonic() + spec.get("settle", 3.0)
    alive: list[int] = []
    while time.monotonic() < end:
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        alive = children()
        if not alive:
            break
        time.sleep(0.02)
    found = [describe(p) for p in alive]
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    print(json.dumps({"rc": proc.returncode, "stderr": err[-2000:], "at_exit": at_exit, "alive": found}))


if __name__ == "__main__":
    main()
