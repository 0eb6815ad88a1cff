"""Processes gpudoctor starts are bounded, and die with it.

Each case is a fake program written into tmp_path: an ``nvcc`` that hangs, one
that floods stdout, one that leaves a background grandchild holding its stdout; framework children
that double-fork or call setsid; gpudoctor itself ended by SIGHUP, SIGTERM or SIGKILL while a child
runs. Every test checks by pid that nothing it started is left.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from gpudoctor.probes import toolkit
from gpudoctor.procs import processes
from gpudoctor.procs.child import child_env, kill_all, run_module
from gpudoctor.procs.processes import run_bounded
from helpers_children import children_left, default_signals

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def no_leftover_children():
    assert children_left() == []
    yield
    assert children_left() == []


def gone(pid: int, within_s: float = 3.0) -> bool:
    """Whether ``pid`` is gone (or a zombie waiting for whoever adopted it) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def pids_in(path: Path, count: int, within_s: float = 10.0) -> list[int]:
    """The ``count`` pids a fake program wrote into ``path``, one a line, once they are all there."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(x) for x in path.read_text().split()]
            if len(pids) >= count:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"{path} did not get {count} pids")


def fake_nvcc(tmp_path: Path, body: str) -> Path:
    """An ``nvcc`` on a PATH of its own in tmp_path, running ``body`` (sh)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    nvcc = folder / "nvcc"
    nvcc.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    nvcc.chmod(0o755)
    return folder


VERSION = "Cuda compilation tools, release 12.4, V12.4.131"


# --- external programs: nvcc (toolkit.py), through processes.run_bounded ---------------------------------

def test_a_hanging_nvcc_is_bounded_and_killed(tmp_path, monkeypatch):
    """An nvcc that hangs must not outlive gpudoctor: it costs NVCC_TIMEOUT_S and is gone after."""
    pidfile = tmp_path / "pids"
    folder = fake_nvcc(tmp_path, f"echo $$ > {pidfile}\nexec sleep 60\n")
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setattr(toolkit, "NVCC_TIMEOUT_S", 1.0)
    start = time.monotonic()
    nvcc = toolkit._nvcc()
    elapsed = time.monotonic() - start
    assert nvcc["version"] == {"unavailable": "timeout"}
    assert 1.0 <= elapsed < 2.0
    [pid] = pids_in(pidfile, 1)
    assert gone(pid, 0.5)


def test_a_hanging_nvcc_ends_at_the_runs_deadline(tmp_path, monkeypatch):
    """A hanging nvcc must neither hold ``check --timeout`` past its deadline nor outlive the run: the deadline
    kills it (kill_all -> processes.stop_all), so the run ends at its deadline, the nvcc with it."""
    from gpudoctor import pipeline

    pidfile = tmp_path / "pids"
    folder = fake_nvcc(tmp_path, f"echo $$ > {pidfile}\nexec sleep 60\n")
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    limit = 1.5
    start = time.monotonic()
    report = pipeline.check(pipeline.RunOptions(quick=True, deadline=start + limit, only=("toolkit",)))
    elapsed = time.monotonic() - start
    assert limit <= elapsed < limit + 1.0  # before: limit + 2 s, the grace the runner gives a probe to hand in
    assert report["facts"]["probes"]["cuda_stack"]["status"] == "timeout"
    [pid] = pids_in(pidfile, 1)
    assert gone(pid, 0.5)


def test_a_flooding_nvcc_is_read_only_up_to_its_cap(tmp_path, monkeypatch):
    """An nvcc that floods stdout would cost seconds and gigabytes if read to the end: NVCC_MAX_BYTES is read,
    then it is killed: well under a second, and no more memory than the cap."""
    folder = fake_nvcc(tmp_path, f"exec yes '{VERSION} {'x' * 200}'\n")
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    start = time.monotonic()
    nvcc = toolkit._nvcc()
    assert time.monotonic() - start < 2.0
    assert (nvcc["version"], nvcc["release"]) == ("12.4.131", "12.4")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 64 * 1024
    ran = run_bounded([str(folder / "nvcc")], timeout=5, max_bytes=10_000)
    assert len(ran.stdout.encode()) == 10_000 and not ran.timed_out
    assert ran.rc == -signal.SIGKILL  # the rest was not read: it was killed


@pytest.mark.parametrize("launch", ["sleep 60 &", "setsid sleep 60 &"], ids=["background", "setsid"])
def test_an_nvcc_that_leaves_a_grandchild_holding_stdout(tmp_path, monkeypatch, launch):
    """A grandchild left by nvcc (``sleep 30 &``) holding its stdout must neither hold the run nor leak: the run
    does not wait on that pipe, and the grandchild (even one in a session of its own) is killed."""
    pidfile = tmp_path / "pids"
    folder = fake_nvcc(tmp_path, f"{launch}\necho $! >> {pidfile}\necho '{VERSION}'\n")
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    start = time.monotonic()
    nvcc = toolkit._nvcc()
    assert time.monotonic() - start < 3.0  # waiting on the pipe would take 15 s, nvcc's own time limit
    assert nvcc["version"] == "12.4.131"
    [grandchild] = pids_in(pidfile, 1)
    assert gone(grandchild, 1.0)


def test_run_bounded_keeps_both_outputs_and_the_exit_status(tmp_path):
    ran = run_bounded([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(4)"],
                      timeout=10)
    assert ran == processes.Ran(4, "out\n", "err\n", False)
    with pytest.raises(FileNotFoundError):
        run_bounded([str(tmp_path / "missing")], timeout=1)


def test_run_bounded_waits_within_its_deadline_for_a_program_that_closed_its_outputs():
    code = "import os, time; os.close(1); os.close(2); time.sleep({})"
    assert run_bounded([sys.executable, "-c", code.format(0.3)], timeout=10) == processes.Ran(0, "", "", False)
    start = time.monotonic()
    ran = run_bounded([sys.executable, "-c", code.format(60)], timeout=1)
    assert (ran.rc, ran.timed_out) == (-signal.SIGKILL, True)
    assert time.monotonic() - start < 3.0


def test_run_bounded_starts_nothing_after_the_run_was_stopped():
    kill_all()
    with pytest.raises(processes.NotStarted):
        run_bounded(["true"], timeout=1)


def test_a_program_run_bounded_runs_dies_with_gpudoctor_killed(tmp_path):
    """PR_SET_PDEATHSIG: a program still running when gpudoctor is SIGKILLed goes with it."""
    pidfile = tmp_path / "pids"
    folder = fake_nvcc(tmp_path, f"echo $$ > {pidfile}\nexec sleep 60\n")
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from gpudoctor.procs.processes import run_bounded
        run_bounded([{str(folder / 'nvcc')!r}], timeout=60)
    """)])
    [pid] = pids_in(pidfile, 1)
    parent.kill()
    parent.wait()
    assert gone(pid)


# --- framework children (child.py) ---------------------------------------------------------------------

def write_module(tmp_path: Path, name: str, code: str) -> dict[str, str]:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(code))
    return child_env({"PYTHONPATH": str(tmp_path)})


DOUBLE_FORK = """
    import os, sys, time
    from gpudoctor.procs import protocol
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open({pidfile!r}, "a") as fh:
                fh.write(f"{{os.getpid()}}\\n")
            {grandchild}
            time.sleep(60)
        os._exit(0)
    os.wait()
    protocol.emit("child", os.getpid())
    {then}
"""


def test_a_child_that_double_forks_leaves_no_grandchild(tmp_path):
    """A framework child that double-forks (and calls setsid) must leave no grandchild, though one reparented
    to init is in no tree: the mark of its environment finds it when the child ends."""
    pidfile = tmp_path / "pids"
    env = write_module(tmp_path, "doublefork", DOUBLE_FORK.format(pidfile=str(pidfile), grandchild="", then=""))
    start = time.monotonic()
    result = run_module("doublefork", timeout_s=20, env=env)
    assert time.monotonic() - start < 5.0
    assert (result.returncode, result.timed_out) == (0, False)
    [grandchild] = pids_in(pidfile, 1)
    assert gone(grandchild)


def test_a_grandchild_holding_the_childs_pipes_does_not_hold_the_run(tmp_path):
    """The grandchild keeps the child's stdout and stderr (inherited): the run ends with the child, not at
    its time limit, and the grandchild is killed."""
    pidfile = tmp_path / "pids"
    env = write_module(tmp_path, "holder", DOUBLE_FORK.format(
        pidfile=str(pidfile), grandchild="print('grandchild here', flush=True)", then="print('child done', flush=True)"))
    start = time.monotonic()
    result = run_module("holder", timeout_s=20, env=env)
    assert time.monotonic() - start < 5.0
    assert (result.returncode, result.timed_out) == (0, False)
    [grandchild] = pids_in(pidfile, 1)
    assert gone(grandchild)


def test_a_child_killed_at_its_limit_takes_its_setsid_grandchild_along(tmp_path):
    pidfile = tmp_path / "pids"
    env = write_module(tmp_path, "hangs", f"""
        import subprocess, sys, time
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        with open({str(pidfile)!r}, "w") as fh:
            fh.write(f"{{kid.pid}}\\n")
        time.sleep(60)
    """)
    result = run_module("hangs", timeout_s=1.5, env=env)
    assert result.timed_out
    [grandchild] = pids_in(pidfile, 1)
    assert gone(grandchild)


def test_a_thread_that_ends_does_not_kill_a_healthy_child(tmp_path):
    """PR_SET_PDEATHSIG fires when the *thread* that started a child ends: a probe thread may end while its
    child's exit is under way (it said its status). The lifeline belongs to the process, so the child lives on."""
    done = tmp_path / "done"
    env = write_module(tmp_path, "outlives", f"""
        import os, time
        from gpudoctor.procs import protocol
        protocol.emit("pid", os.getpid())
        protocol.emit("exit", 0)
        protocol.close(); os.close(1); os.close(2)
        time.sleep(1.0)  # the thread that started it has ended by now
        open({str(done)!r}, "w").close()
        os._exit(0)
    """)
    got = {}
    thread = threading.Thread(target=lambda: got.update(result=run_module("outlives", timeout_s=20, env=env)))
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and got["result"].returncode == 0
    deadline = time.monotonic() + 10
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert done.exists()


# --- gpudoctor itself ended: SIGHUP, SIGTERM, SIGKILL (cli main(), the lifeline) --------------------------

SLEEPER = """
    import os, subprocess, sys, time
    kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    with open({pidfile!r}, "w") as fh:
        fh.write(f"{{os.getpid()}}\\n{{kid.pid}}\\n")
    time.sleep(60)
"""

#: gpudoctor's own entry point (cli.main) with the NVML probe replaced by a framework-like child that hangs.
FAKE_GPUDOCTOR = """
    import sys
    sys.path.insert(0, {root!r})
    from dataclasses import replace
    from gpudoctor import runner
    from gpudoctor.procs.child import child_env, run_module

    def hang(target, scope):
        run_module("sleeper", timeout_s=60, env=child_env({{"PYTHONPATH": {tmp!r}}}))
        return {{}}

    runner.PROBES = tuple(replace(p, run=hang, quick_run=None) if p.name == "nvml" else p for p in runner.PROBES)
    sys.argv = ["gpudoctor", "check", "--quick", "--only", "driver"]
    from gpudoctor.cli import main
    main()
"""


def start_fake_gpudoctor(tmp_path: Path, **popen: object) -> tuple[subprocess.Popen, list[int]]:
    pidfile = tmp_path / "pids"
    (tmp_path / "sleeper.py").write_text(textwrap.dedent(SLEEPER.format(pidfile=str(pidfile))))
    popen.setdefault("preexec_fn", default_signals)
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(FAKE_GPUDOCTOR.format(root=str(ROOT), tmp=str(tmp_path)))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)
    return proc, pids_in(pidfile, 2, within_s=20)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_children_die_with_gpudoctor(tmp_path, sig):
    """No framework child outlives gpudoctor, whatever signal ends it. SIGHUP and SIGTERM
    end it as Ctrl-C does (children killed, exit 3); after SIGKILL, which runs nothing of gpudoctor's, the
    child's lifeline ends it and what it started."""
    proc, (child, grandchild) = start_fake_gpudoctor(tmp_path)
    start = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - start < 5.0
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 3, err
        assert "gpudoctor: interrupted" in err.decode()
    assert gone(child) and gone(grandchild)


def test_a_hangup_ignored_by_nohup_stays_ignored(tmp_path):
    """``nohup gpudoctor check``: a hang-up ignored when gpudoctor started must not end it."""
    proc, (child, grandchild) = start_fake_gpudoctor(
        tmp_path, preexec_fn=lambda: (default_signals(), signal.signal(signal.SIGHUP, signal.SIG_IGN)))
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert proc.poll() is None and psutil.pid_exists(child)
    proc.terminate()
    proc.communicate(timeout=10)
    assert proc.returncode == 3
    assert gone(child) and gone(grandchild)


# --- gpudoctor's own pipes and files are closed, not left to the collector ----------------------------------

def test_no_resource_warning_under_dev_mode(tmp_path):
    """With PYTHONWARNINGS=error and PYTHONDEVMODE=1, gpudoctor prints no "Exception ignored ...
    ResourceWarning: unclosed file": the pipes of its children are closed. The nvcc on PATH here leaves a
    grandchild holding its stdout, so run_bounded's pipes are exercised too."""
    pidfile = tmp_path / "pids"
    folder = fake_nvcc(tmp_path, f"sleep 60 &\necho $! >> {pidfile}\necho '{VERSION}'\n")
    env = {**os.environ, "PYTHONWARNINGS": "error", "PYTHONDEVMODE": "1", "PATH": f"{folder}:{os.environ['PATH']}"}
    run = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--quick"], capture_output=True, text=True,
                         env=env, cwd=str(ROOT), timeout=120)
    assert run.returncode in (0, 1), run.stderr
    assert "Exception ignored" not in run.stderr and "ResourceWarning" not in run.stderr, run.stderr
    [grandchild] = pids_in(pidfile, 1)
    assert gone(grandchild)


SWALLOWING = """
    from gpudoctor import pipeline as _pipeline
    _real = _pipeline.run_probes

    def _swallowing(*args, **kwargs):
        import threading, time
        threading.Thread(target=_real, args=args, kwargs=kwargs, daemon=True).start()
        while True:  # as Python does for a KeyboardInterrupt raised in a weakref callback: it goes nowhere
            try:
                time.sleep(60)
            except KeyboardInterrupt:
                pass

    _pipeline.run_probes = _swallowing
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_whose_interrupt_python_swallowed_still_ends_gpudoctor(tmp_path, sig):
    """A stop lands where Python drops the KeyboardInterrupt it raises (seen under load: a hang-up during an
    import, "Exception ignored in _get_module_lock"): the backstop still ends gpudoctor as the clean-up would,
    children killed and exit 3, a few seconds later instead of at the run's own end."""
    from gpudoctor.cli import STOP_GRACE_S

    pidfile = tmp_path / "pids"
    (tmp_path / "sleeper.py").write_text(textwrap.dedent(SLEEPER.format(pidfile=str(pidfile))))
    fake = textwrap.dedent(FAKE_GPUDOCTOR.format(root=str(ROOT), tmp=str(tmp_path)))
    fake = fake.replace("from gpudoctor.cli import main\n", textwrap.dedent(SWALLOWING) + "from gpudoctor.cli import main\n")
    proc = subprocess.Popen([sys.executable, "-c", fake], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_signals)
    child, grandchild = pids_in(pidfile, 2, within_s=20)
    time.sleep(1.0)  # the main thread is past the import of the checks, waiting on the probes
    start = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 3, err
    assert STOP_GRACE_S - 0.5 < time.monotonic() - start < STOP_GRACE_S + 5, err
    assert "gpudoctor: interrupted" in err.decode()
    assert gone(child) and gone(grandchild)
