"""Nothing gpudoctor starts outlives it, held under a child subreaper (tests/reaper.py), where nothing
it leaves can hide behind init: every way of ending (a usage error, a normal end, SIGKILL in the middle
of a program that has a child of its own) is followed by an empty process table below the harness.

SIGKILL runs none of gpudoctor's code: the warden (procs/warden.py) kills what carries the run's mark.
Every other end reaps every child, orphans included (gpudoctor is a subreaper itself), before exiting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpudoctor.procs import pids, warden

ROOT = Path(__file__).resolve().parent.parent
HARNESS = Path(__file__).resolve().parent / "reaper.py"
GPUDOCTOR = [sys.executable, "-m", "gpudoctor"]


def reap(argv: list[str], **spec: object) -> dict:
    env = {"PYTHONPATH": str(ROOT), **spec.pop("env", {})}  # type: ignore[dict-item]
    out = subprocess.run([sys.executable, str(HARNESS), json.dumps({"argv": argv, "env": env, "cwd": str(ROOT), **spec})],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def hanging_nvcc(tmp_path: Path) -> tuple[Path, Path]:
    """A PATH folder whose nvcc is a shell that starts `sleep` as its own child and waits: the program
    gpudoctor runs has a child of its own, which the program's PR_SET_PDEATHSIG does not reach."""
    folder, pidfile = tmp_path / "bin", tmp_path / "pids"
    folder.mkdir()
    (folder / "nvcc").write_text(f"#!/bin/sh\nsleep 60 &\necho $! >> {pidfile}\necho $$ >> {pidfile}\nwait\n")
    (folder / "nvcc").chmod(0o755)
    return folder, pidfile


def assert_clean(result: dict, pidfile: Path = None) -> None:
    assert result["alive"] == [], result
    if pidfile is not None and pidfile.exists():
        for pid in (int(p) for p in pidfile.read_text().split()):
            assert pids.start_ticks(pid) is None or _zombie(pid), (pid, result)


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def test_a_usage_error_after_the_copies_were_forked_leaves_nothing():
    """`check --quick` forks its probes before it reads --skip: a bad name ends it at once, while the copies
    work (they were left stuck on a lock their signal handler waited for)."""
    for _ in range(8):
        result = reap(GPUDOCTOR + ["check", "--quick", "--skip", "nosuch"])
        assert result["rc"] == 2, result
        assert result["at_exit"] == [], result


def test_a_normal_end_reaps_every_child():
    """Nothing comes to the harness at all, not even a zombie: gpudoctor reaped it."""
    result = reap(GPUDOCTOR + ["check", "--only", "driver,toolkit", "--format", "json"])
    assert result["rc"] in (0, 1), result
    assert result["at_exit"] == [], result


@pytest.mark.parametrize("mode", [["--quick"], []], ids=["quick", "full"])
def test_sigkill_while_a_program_has_a_child_leaves_nothing(tmp_path, mode):
    """The nvcc gpudoctor runs has a `sleep` of its own; gpudoctor is SIGKILLed while both run."""
    folder, pidfile = hanging_nvcc(tmp_path)
    result = reap(GPUDOCTOR + ["check", *mode, "--only", "toolkit"], env={"PATH": f"{folder}:{os.environ['PATH']}"},
                  kill_when=str(pidfile), kill_lines=2)
    assert result["rc"] == -9, result
    assert_clean(result, pidfile)


def test_sigkill_while_the_diagnosed_python_has_a_child_leaves_nothing(tmp_path):
    """--python names a script that starts `sleep` and waits: gpudoctor runs it to describe it."""
    pidfile = tmp_path / "pids"
    script = tmp_path / "python3"
    script.write_text(f"#!/bin/sh\nsleep 60 &\necho $! >> {pidfile}\necho $$ >> {pidfile}\nwait\n")
    script.chmod(0o755)
    result = reap(GPUDOCTOR + ["check", "--quick", "--python", str(script)], kill_when=str(pidfile), kill_lines=2)
    assert_clean(result, pidfile)


def test_sigkill_of_a_merge_leaves_no_pool_worker(tmp_path):
    """merge judges many reports in forked workers: killed, gpudoctor must not leave them waiting."""
    real = sorted((ROOT / "tests" / "fixtures" / "real").rglob("*.json"))
    report = next(p for p in real if '"schema_version"' in p.read_text()[:2000])
    paths = []
    for i in range(300):
        path = tmp_path / f"node{i}.json"
        path.write_bytes(report.read_bytes())
        paths.append(str(path))
    result = reap(GPUDOCTOR + ["merge", *paths], kill_after=2.5)
    assert_clean(result)


def test_the_warden_kills_what_carries_the_runs_mark(tmp_path):
    """The warden's sweep alone: a process started with this run's mark, detached (its own session),
    is killed; one without the mark is not."""
    marked = subprocess.Popen(["sleep", "60"], env={**os.environ, warden.RUN_ENV: warden.run_mark()},
                              start_new_session=True)
    unmarked = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        since = pids.start_ticks(os.getpid())
        assert warden.sweep(since, []) == 1
        assert marked.wait(timeout=5) == -9
        assert unmarked.poll() is None
    finally:
        for proc in (marked, unmarked):
            proc.kill()
            proc.wait()


def test_every_program_carries_the_runs_mark():
    from gpudoctor.procs import processes

    env = processes.marked_env({"A": "1"}, "token")
    assert env[warden.RUN_ENV] == warden.run_mark() and env[processes.MARK_ENV] == "token"
    ran = processes.run_bounded(["sh", "-c", f"echo ${warden.RUN_ENV}"], timeout=10)
    assert ran.stdout.strip() == warden.run_mark()


def test_the_warden_holds_no_output_of_gpudoctors():
    """A caller reading gpudoctor's output to its end is not kept waiting by the warden."""
    code = textwrap.dedent("""
        import time
        from gpudoctor.procs import warden
        assert warden.start()
        print("started", flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20, cwd=ROOT)
    assert out.stdout.strip() == "started", out.stderr
