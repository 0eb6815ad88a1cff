"""A shared GPU is not a slow GPU: NVML's processes around each timed step (probes/workload/sharing.py), and
how a run's own children are told from other processes. How the throughput check judges what the sampling
recorded (RUN019 instead of RUN014, on the real shared-GPU recording of 1 x H100) is tested in
test_area_acceleration.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gpudoctor.procs import pids
from gpudoctor.procs.child import child_env
from gpudoctor.procs.warden import RUN_ENV, RUN_PID_ENV, run_mark
from gpudoctor.probes.workload import sharing


def test_judged_needs_both_samples_known_to_say_not_shared():
    assert sharing.judged({"known": True, "others": []}, {"known": True, "others": []}) == {"shared": False}
    assert sharing.judged({"known": True, "others": []}, {"known": False, "why": "x"})["shared"] is None
    seen = sharing.judged({"known": True, "others": []}, {"known": True, "others": [{"pid": 9}]})
    assert seen["shared"] is True and seen["others"] == [{"pid": 9}]


def test_without_nvml_nothing_is_guessed():
    assert sharing.sample("GPU-00000000-0000-0000-0000-000000000000")["known"] is False
    assert sharing.sample(None)["known"] is False


@pytest.fixture
def ours_and_theirs(monkeypatch):
    """A sleeping child of the run (its environment as gpudoctor gives it) and one without the run's token."""
    monkeypatch.setenv(RUN_ENV, run_mark())
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=child_env())
    theirs = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              env={k: v for k, v in os.environ.items() if k != RUN_ENV})
    time.sleep(0.2)
    yield ours, theirs
    for proc in (ours, theirs):
        proc.kill()
        proc.wait()


def test_this_runs_children_are_told_from_other_processes_by_the_token(ours_and_theirs):
    """Every child of a run carries its token; a process without it (the user's training job) is another's."""
    ours, theirs = ours_and_theirs
    assert sharing._ours(os.getpid()) and sharing._ours(ours.pid)
    assert not sharing._ours(theirs.pid)
    assert sharing._describe(theirs.pid, 5 << 20)["name"].startswith("python")


def test_a_child_of_the_run_that_has_exited_is_still_ours(monkeypatch, ours_and_theirs):
    """A child of the run that has exited is listed on its GPU until it is reaped (recorded on 1 x H100 and
    4 x H200: RUN019 named a zombie sibling, CuPy's child, holding 634 MiB). Its environment is gone then; it
    is ours where it descends from the gpudoctor that started the run, whose id every child is given."""
    sibling, stranger = ours_and_theirs
    for gone in (b"", None):  # exiting (empty), or a zombie's (not readable): both seen on the GPU machines
        monkeypatch.setattr(sharing, "_environ", lambda pid, gone=gone: gone)
        monkeypatch.setenv(RUN_PID_ENV, str(os.getpid()))  # this test plays the gpudoctor of the run
        assert sharing._ours(sibling.pid)
        monkeypatch.setenv(RUN_PID_ENV, "1")  # gpudoctor as a container's init: all it started is its
        assert sharing._ours(sibling.pid)
        monkeypatch.setenv(RUN_PID_ENV, str(sibling.pid))  # a process that did not start the stranger
        assert not sharing._ours(stranger.pid)
        monkeypatch.delenv(RUN_PID_ENV)  # a child not told: the process that started it stands in
        with monkeypatch.context() as patched:
            patched.setattr(sharing.os, "getppid", lambda: os.getpid())
            assert sharing._ours(sibling.pid)


def test_every_child_is_told_which_gpudoctor_started_the_run():
    from gpudoctor.procs import processes

    assert child_env()[RUN_PID_ENV] == str(os.getpid())
    assert processes.marked_env({}, "token")[RUN_PID_ENV] == str(os.getpid())


def test_a_parent_is_read_past_a_name_with_spaces_and_parentheses():
    named = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'x) 1 (y', 0, 0, 0); time.sleep(30)"  # PR_SET_NAME
    child = subprocess.Popen([sys.executable, "-c", named])
    try:
        time.sleep(0.2)
        assert open(f"/proc/{child.pid}/comm").read().strip() == "x) 1 (y"
        assert pids.parent_pid(child.pid) == os.getpid()
        assert pids.parent_pid(2**22 + 7) is None  # no such process
    finally:
        child.kill()
        child.wait()


def test_a_real_zombie_child_is_ours_and_its_environment_is_gone(monkeypatch):
    monkeypatch.setenv(RUN_ENV, run_mark())
    zombie = subprocess.Popen([sys.executable, "-c", "pass"], env=child_env())
    try:
        deadline = time.monotonic() + 10
        while "Z" not in open(f"/proc/{zombie.pid}/stat").read().rpartition(")")[2].split()[0] and time.monotonic() < deadline:
            time.sleep(0.01)  # exited, not reaped: Popen waits only when asked
        assert not sharing._environ(zombie.pid)  # the kernel shows a zombie's environment no more
        monkeypatch.setenv(RUN_PID_ENV, str(os.getpid()))  # this test plays the gpudoctor of the run
        assert sharing._ours(zombie.pid)
    finally:
        zombie.wait()
