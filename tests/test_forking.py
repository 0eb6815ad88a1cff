"""The --quick probes in forked copies of gpudoctor's process (procs/forking.py, runner.start_early): the
same facts as threads, only while no other thread exists, and nothing left behind at a deadline or a
copy's crash. Each case runs in a fresh Python: the test process has threads of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpudoctor.procs import forking

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, env: dict | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def test_no_fork_beside_another_thread_or_when_turned_off():
    out = _python("""
        import threading, time
        from gpudoctor.procs import forking
        alone = forking.safe()
        stop = threading.Event()
        t = threading.Thread(target=stop.wait); t.start()
        beside = forking.safe()
        stop.set(); t.join()
        print(alone, beside)
    """)
    assert out.stdout.split() == ["True", "False"], out.stderr
    off = _python("from gpudoctor.procs import forking; print(forking.safe())", env={forking.ENV: "0"})
    assert off.stdout.strip() == "False"


def test_copies_send_results_and_say_how_they_ended():
    out = _python("""
        import json, os, signal
        from gpudoctor.procs import forking
        def good(): return {"pid": os.getpid(), "text": "caf\\udce9", "n": [1, 2.5, None]}
        def broken(): raise RuntimeError("boom")
        def killed(): os.kill(os.getpid(), signal.SIGKILL)
        def odd(): return {"set": {1}}  # not JSON
        copies = forking.fork_all([good, broken, killed, odd])
        print(json.dumps([c.wait() for c in copies] + [os.getpid()]))
    """)
    (good, good_end), (broken, broken_end), (killed, killed_end), (odd, odd_end), me = json.loads(out.stdout)
    assert good["pid"] != me and good["text"] == "caf\udce9" and good["n"] == [1, 2.5, None]
    assert good_end == "exit status 0"
    assert (broken, broken_end) == (None, "exit status 1")
    assert (killed, killed_end) == (None, "signal 9 (SIGKILL)")
    assert (odd, odd_end) == (None, "exit status 1")


def test_a_copy_holds_none_of_the_parents_output():
    """A caller reading gpudoctor's output to its end is not kept waiting by a copy still working."""
    out = _python("""
        import sys, time
        from gpudoctor.procs import forking, processes
        copies = forking.fork_all([lambda: time.sleep(30)])
        print("parent done", flush=True)
        processes.stop_all()
        print(copies[0].wait()[1], flush=True)
    """, timeout=20)
    assert out.stdout.splitlines() == ["parent done", "signal 9 (SIGKILL)"]


def test_quick_check_forks_its_python_probes_and_finds_what_threads_find(tmp_path):
    """The same facts and findings with and without forking, and the three probes run in other processes."""
    reports = {}
    for mode in ("1", "0"):
        trace = tmp_path / f"trace-{mode}"
        report = tmp_path / f"report-{mode}.json"
        run = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--quick", "--format", "json", "-o",
                              str(report)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env={**os.environ, forking.ENV: mode, "GPUDOCTOR_TRACE": str(trace)})
        assert run.returncode in (0, 1, 2), run.stderr
        reports[mode] = json.loads(report.read_text())
        events = [line.split(None, 3) for line in trace.read_text().splitlines()]
        main = {pid for _, pid, _, what in events if what == "cli: check command starts"}
        probe_pids = {what.split()[1]: pid for _, pid, _, what in events if what.startswith("probe ")}
        forked = {name for name, pid in probe_pids.items() if pid not in main}
        assert forked == ({"cuda_stack", "python", "frameworks"} if mode == "1" else set()), probe_pids

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in ("duration_s", "created", "uptime_s")}
        return [strip(v) for v in node] if isinstance(node, list) else node

    assert strip(reports["1"]["facts"]) == strip(reports["0"]["facts"])
    assert reports["1"]["findings"] == reports["0"]["findings"]
    assert strip(reports["1"]["checks"]) == strip(reports["0"]["checks"])


def test_a_forked_probe_past_the_deadline_is_a_timeout_and_leaves_nothing():
    out = _python("""
        import json, os, time
        from gpudoctor import runner
        from gpudoctor.probes import interpreter
        from gpudoctor.procs import child, pids
        from gpudoctor.run_options import RunOptions
        def hang(target, read_versions=True):
            time.sleep(60)
        runner._cuda_stack = hang
        target = interpreter.own()
        early = runner.start_early((), target, fork=("cuda_stack",))
        (started,) = early.probes
        options = RunOptions(interpreter=target, deadline=time.monotonic() + 1.0, early=early)
        facts = runner.run_probes(runner.select_probes(["cuda_stack"], quick=True), options)
        child.kill_all()
        print(json.dumps([facts["probes"]["cuda_stack"], pids.descendant_pids(os.getpid())]))
    """, timeout=30)
    record, left = json.loads(out.stdout)
    assert record["status"] == "timeout" and record["reason"] == "deadline", record
    assert left == []


def test_a_forked_probe_that_raises_is_its_error_record():
    out = _python("""
        import json
        from gpudoctor import runner
        from gpudoctor.probes import interpreter
        from gpudoctor.run_options import RunOptions
        def broken(target, read_versions=True):
            raise OSError("disk on fire")
        runner._cuda_stack = broken
        target = interpreter.own()
        early = runner.start_early((), target, fork=("cuda_stack",))
        facts = runner.run_probes(runner.select_probes(["cuda_stack"], quick=True), RunOptions(interpreter=target, early=early))
        print(json.dumps(facts["probes"]["cuda_stack"]))
    """)
    record = json.loads(out.stdout)
    assert record["status"] == "error" and record["error"] == "OSError: disk on fire", record
    assert "traceback_tail" in record


@pytest.mark.parametrize("threads", [False, True])
def test_start_early_without_fork_leaves_the_probes_to_threads(threads):
    """Beside another thread (or with GPUDOCTOR_FORK=0) nothing is forked: run_probes starts the probes."""
    out = _python(f"""
        import threading, os
        from gpudoctor import runner
        from gpudoctor.probes import interpreter
        if {threads}:
            threading.Thread(target=threading.Event().wait, daemon=True).start()
        early = runner.start_early((), interpreter.own(), fork=runner.FORKED_QUICK)
        print(sorted(s.name for s in early.probes))
    """, env={} if threads else {forking.ENV: "0"})
    assert out.stdout.strip() == "[]", out.stderr


def test_a_refused_fork_leaves_that_probe_and_the_rest_to_threads():
    out = _python("""
        import json, os
        from gpudoctor import runner
        from gpudoctor.probes import interpreter
        from gpudoctor.run_options import RunOptions
        real, calls = os.fork, []
        def fork():
            calls.append(1)
            if len(calls) > 1:
                raise BlockingIOError(11, "Resource temporarily unavailable")
            return real()
        os.fork = fork
        target = interpreter.own()
        started = runner.start_early((), target, fork=runner.FORKED_QUICK)
        early = sorted(s.name for s in started.probes)
        os.fork = real
        facts = runner.run_probes(runner.select_probes(list(runner.FORKED_QUICK), quick=True),
                                  RunOptions(interpreter=target, early=started))
        print(json.dumps([early, {k: v["status"] for k, v in facts["probes"].items()}]))
    """)
    early, statuses = json.loads(out.stdout)
    assert early == ["cuda_stack"], out.stderr
    assert statuses == {"cuda_stack": "ok", "python": "ok", "frameworks": "ok"}


def test_what_a_copy_started_dies_when_gpudoctor_is_killed(tmp_path):
    """SIGKILL of gpudoctor runs none of its clean-up: a copy waiting on a hanging nvcc (a shell whose
    `sleep` is a grandchild, which PR_SET_PDEATHSIG alone would leave) is told, and kills them all.
    Recorded on 1 x H100 (2026-11-23) before this: `sleep 300` left after `check --quick` was SIGKILLed."""
    from test_hostile_processes import fake_nvcc, gone, pids_in

    pidfile = tmp_path / "pids"
    folder = fake_nvcc(tmp_path, f"sleep 60 &\necho $! >> {pidfile}\necho $$ >> {pidfile}\nwait\n")
    gpudoctor = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from gpudoctor.procs import forking, processes
        def work():
            return processes.run_bounded([{str(folder / 'nvcc')!r}], timeout=60).rc
        forking.fork_all([work])
        time.sleep(60)
    """)], cwd=ROOT)
    sleeper, shell = pids_in(pidfile, 2)
    gpudoctor.kill()
    gpudoctor.wait()
    assert gone(shell) and gone(sleeper)


REAL = ROOT / "tests" / "fixtures" / "real" / "h100x1-20261123" / "quick-fork-2056"


def _strip(node):
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("duration_s", "created", "uptime_s")}
    return [_strip(v) for v in node] if isinstance(node, list) else node


def test_on_a_real_h100_forked_and_threaded_quick_checks_agree():
    """Recorded on nvidia-h100-x1 (2026-11-23 20:57 UTC, tools/device/quick_ab.sh): one `check --quick` with
    the probes forked, one with GPUDOCTOR_FORK=0, from an installed gpudoctor diagnosing the image's torch
    venv. Every fact is the same but the GPU's live readings (its power draw moved by 13 mW); re-judged
    today, both are all clear with the same checks."""
    from gpudoctor import pipeline

    forked, threaded = (json.loads((REAL / f"{name}.json").read_text()) for name in ("fork", "thread"))
    assert {k: v for k, v in _strip(forked["facts"]).items() if k != "gpus"} == \
        {k: v for k, v in _strip(threaded["facts"]).items() if k != "gpus"}
    ids = [[(g["uuid"], g["name"], g["pci"]["bus_id"]) for g in r["facts"]["gpus"]] for r in (forked, threaded)]
    assert ids[0] == ids[1] and len(ids[0]) == 1
    assert forked["facts"]["python"]["diagnosed"]["own"] is False  # the torch venv, not gpudoctor's own
    again = [pipeline.judge(r["facts"]) for r in (forked, threaded)]
    assert again[0]["findings"] == again[1]["findings"] == []
    assert [(c["id"], c["status"]) for c in again[0]["checks"]] == [(c["id"], c["status"]) for c in again[1]["checks"]]


def test_on_a_real_h100_a_forked_probe_stopped_at_the_deadline_is_reported_as_such():
    """`check --quick --timeout 2` with an nvcc that hangs first on PATH (tools/device/record_hostile.sh,
    1 x H100, 2026-11-23): the forked cuda_stack probe is stopped at the deadline (2.28 s in all, nothing
    left running) and is the only probe that did not finish."""
    from gpudoctor import pipeline

    report = json.loads((REAL / "hostile" / "nvcc-hang-quick.json").read_text())
    probes = report["facts"]["probes"]
    assert {name for name, p in probes.items() if p["status"] != "ok"} == {"cuda_stack"}
    assert (probes["cuda_stack"]["status"], probes["cuda_stack"]["reason"]) == ("timeout", "deadline")
    assert [f["code"] for f in pipeline.judge(report["facts"])["findings"]] == ["INT002", "INT004"]
    assert "nvcc-hang-quick leftovers=0" in (REAL / "hostile" / "summary.txt").read_text()


def test_the_forked_probes_facts_survive_json_exactly():
    """A forked probe's facts come back through JSON; the threads hand over the objects themselves. Both
    give the checks the same only if the facts are JSON's own types (no tuple, no int key): held here on
    what the three probes find on this machine."""
    from gpudoctor import runner
    from gpudoctor.probes import interpreter
    from gpudoctor.procs.scope import RunScope

    target = interpreter.choose(None)
    for probe in runner.select_probes(list(runner.FORKED_QUICK), quick=True):
        slot = runner._work_of(probe, target, RunScope())()
        assert slot["record"]["status"] == "ok", slot["record"]
        assert json.loads(json.dumps(slot)) == slot, probe.name
