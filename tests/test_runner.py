"""runner.run_probes with probes that pass, raise and hang; the checks that judge those records."""

from __future__ import annotations

import threading
import time

import pytest

from gpudoctor.checks import registry
from gpudoctor.checks.base import Check, NotApplicable, finding
from gpudoctor.findings import FAIL, PASS, SKIP, TIMEOUT, WARN, WARNING
from gpudoctor.procs.scope import RunScope
from gpudoctor.run_options import RunOptions
from gpudoctor.runner import Probe, run_probes
from helpers_faults import findings, result_of


@pytest.fixture
def release():
    """An event the hanging probes wait on; set at teardown so no thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


def _raise(target: object, scope: object) -> dict:
    raise RuntimeError("boom in probe")


def test_ok_error_timeout_records(release):
    hang_s = 0.5
    probes = (
        Probe("good", "a probe that works", lambda target, scope: {"good": {"value": 1}}, 5.0),
        Probe("broken", "a probe that raises", _raise, 5.0),
        Probe("stuck", "a probe that hangs", lambda target, scope: (release.wait(), {"stuck": {"late": True}})[1], hang_s),
    )
    start = time.monotonic()
    facts = run_probes(probes, RunOptions())
    elapsed = time.monotonic() - start
    assert hang_s <= elapsed < hang_s + 1.0

    records = facts["probes"]
    assert list(records) == ["good", "broken", "stuck"]
    assert records["good"]["status"] == "ok"
    assert records["good"]["title"] == "a probe that works"
    assert facts["good"] == {"value": 1}

    assert records["broken"]["status"] == "error"
    assert records["broken"]["error"] == "RuntimeError: boom in probe"
    assert "in _raise" in records["broken"]["traceback_tail"]
    assert records["broken"]["title"] == "a probe that raises"

    assert records["stuck"]["status"] == "timeout"
    assert records["stuck"]["reason"] == "timeout"  # its own limit, as data
    assert records["stuck"]["error"] == "no answer within 0.5 s"
    assert records["stuck"]["duration_s"] >= hang_s
    assert "stuck" not in facts  # a probe that did not answer contributes no facts

    results = registry.run_checks(facts)
    doctor = result_of(results, "doctor.probes")
    assert [f.code for f in doctor.findings] == ["INT001", "INT002"]
    int001, int002 = doctor.findings
    assert int001.title == "could not check a probe that raises: RuntimeError: boom in probe"
    assert int002.title == "could not check a probe that hangs: no answer within 0.5 s"
    assert {int001.severity, int002.severity} == {WARNING}
    assert doctor.status == WARN
    assert [r.id for r in results] == [c.id for c in registry.CHECKS]


def test_nvml_timeout_is_drv009_not_int002(release):
    probes = (
        Probe("host", "the host", lambda target, scope: {"host": {"env": {}}}, 5.0),
        Probe("nvml", "the driver and GPUs through NVML", lambda target, scope: (release.wait(), {})[1], 0.3),
    )
    facts = run_probes(probes, RunOptions())
    assert facts["probes"]["nvml"]["status"] == "timeout"
    results = registry.run_checks(facts)
    assert findings(results, "INT002") == []
    assert [f.title for f in findings(results, "DRV009")] == ["NVML did not answer while starting"]
    # every check that needs the NVML facts says it timed out rather than passing
    for check in registry.CHECKS:
        if "nvml" in check.needs:
            r = result_of(results, check.id)
            assert (r.status, r.reason) == (TIMEOUT, "probe nvml timed out"), check.id


def test_error_in_needed_probe_skips_checks():
    facts = run_probes((Probe("driver_files", "the kernel driver", _raise, 5.0),), RunOptions())
    results = registry.run_checks(facts)
    nouveau = result_of(results, "driver.nouveau")
    assert (nouveau.status, nouveau.reason) == (SKIP, "probe driver_files failed")
    assert [f.code for f in findings(results, "INT001")] == ["INT001"]


@pytest.mark.parametrize("order", [("first", "second"), ("second", "first")])
def test_merge_follows_probe_order_not_timing(order):
    """The slow probe finishes last, but facts merge in the declared order: the later probe wins."""
    def slow(target, scope):
        time.sleep(0.3)
        return {"shared": "first", "only_first": 1}

    made = {
        "first": Probe("first", "slow", slow, 5.0),
        "second": Probe("second", "fast", lambda target, scope: {"shared": "second", "only_second": 2}, 5.0),
    }
    facts = run_probes([made[name] for name in order], RunOptions())
    assert list(facts["probes"]) == list(order)
    assert facts["shared"] == order[-1]
    assert (facts["only_first"], facts["only_second"]) == (1, 2)


def test_progress_says_what_is_still_running_until_all_have_ended():
    import threading

    release = threading.Event()
    seen: list = []
    slow = Probe("slow", "thing slow", lambda target, scope: release.wait(5.0) and {}, 5.0)

    def watch(progress):
        seen.append(progress)
        if len(seen) == 3:
            release.set()

    run_probes((Probe("fast", "thing fast", lambda target, scope: {}, 5.0), slow), RunOptions(), on_progress=watch)
    assert seen[0].total == 2 and seen[0].running == ("thing slow",) and seen[0].done == 1
    assert [p.running for p in seen[:3]] == [("thing slow",)] * 3  # reported while it waits, every 0.1 s
    assert (seen[-1].done, seen[-1].running) == (2, ())
    assert seen[-1].elapsed_s >= 0.2


def test_progress_line():
    from gpudoctor.cli import progress_line
    from gpudoctor.runner import Progress

    assert progress_line(Progress(6, 9, ("framework workloads on every GPU", "a smoke kernel"), 4.4), "|") == \
        "gpudoctor: | 6/9 done, 4 s; running: framework workloads on every GPU, +1 more"
    assert progress_line(Progress(9, 9, (), 12.0)) == "gpudoctor: 9/9 done, 12 s"


def test_crashing_check_gives_int003_and_others_still_run():
    def crashes(facts):
        yield finding("VIS004", "half-way")
        raise KeyError("gpus")

    def works(facts):
        return [finding("GPU171", "mixed models")]

    def not_here(facts):
        raise NotApplicable("nothing to judge")

    checks = (
        Check("test.crashes", "doctor", "crashes", ("VIS004",), crashes),
        Check("test.works", "gpus", "works", ("GPU171",), works),
        Check("test.skips", "gpus", "skips", (), not_here),
    )
    results = registry.run_checks({}, checks)
    assert [r.id for r in results] == ["test.crashes", "test.works", "test.skips"]

    crashed = results[0]
    assert [f.code for f in crashed.findings] == ["INT003"]
    assert crashed.findings[0].title == "check test.crashes crashed: KeyError: 'gpus'"
    assert crashed.findings[0].check == "test.crashes"
    assert crashed.status == WARN

    assert [(f.code, f.check) for f in results[1].findings] == [("GPU171", "test.works")]
    assert results[1].status == PASS
    assert (results[2].status, results[2].reason) == (SKIP, "nothing to judge")


def test_run_check_single_crash():
    check = Check("test.zero", "doctor", "divides", (), lambda facts: [1 / 0])
    r = registry.run_check(check, {"probes": {}})
    assert [f.code for f in r.findings] == ["INT003"]
    assert r.findings[0].title == "check test.zero crashed: ZeroDivisionError: division by zero"
    assert r.duration_s >= 0


def test_a_probe_stopped_at_the_deadline_says_so_as_data(release):
    """The run's --timeout deadline passes before a probe's own limit: its record carries reason "deadline"
    (for the checks) beside the sentence (for people), and the gate says the deadline passed."""
    from gpudoctor.checks.gates import _timed_out
    from gpudoctor.snapshot import DEADLINE_SENTENCE, stopped_by

    probes = (Probe("host", "the host", lambda target, scope: {"host": {}}, 5.0),
              Probe("cuda_stack", "the CUDA toolkit and libraries", lambda target, scope: (release.wait(), {})[1], 30.0))
    start = time.monotonic()
    facts = run_probes(probes, RunOptions(deadline=start + 0.3))
    assert time.monotonic() - start < 0.3 + 2.0 + 1.0  # the deadline, the stopped probes' grace, some slack
    record = facts["probes"]["cuda_stack"]
    assert (record["status"], record["reason"], record["error"]) == ("timeout", "deadline", DEADLINE_SENTENCE)
    assert stopped_by(record) == "deadline" and stopped_by(facts["probes"]["host"]) is None
    stack_checks = [c for c in registry.CHECKS if "cuda_stack" in c.needs]
    assert _timed_out(facts, stack_checks).title == f"{len(stack_checks)} check(s) did not finish before the --timeout deadline"


def _nvml_stopped(h200x2: dict, record: dict) -> list:
    from helpers_facts import with_fact

    facts = with_fact(h200x2, "probes.nvml", {"status": "timeout", "duration_s": 8.0, "title": "NVML", **record})
    facts = with_fact(facts, "nvml.incomplete", {"while": "GPU 1", "reason": "timeout"})
    return [(f.code, f.severity, f.title) for f in findings(registry.run_checks(facts), "DRV009")]


def test_the_checks_read_why_a_probe_stopped_from_data_not_from_its_sentence(h200x2):
    """DRV009 and INT004 follow ``reason``: the sentence in ``error`` is for people, and a record whose
    sentence says nothing of a deadline is still judged as stopped at it."""
    from gpudoctor.checks.gates import _timed_out

    at_deadline = _nvml_stopped(h200x2, {"reason": "deadline", "error": "stopped"})
    assert at_deadline == [("DRV009", "error", "NVML had not answered while reading GPU 1 when the --timeout "
                                               "deadline passed (8 s in)")]
    own_limit = _nvml_stopped(h200x2, {"reason": "timeout", "error": "unfinished when the --timeout deadline passed"})
    assert own_limit == [("DRV009", "error", "NVML did not answer while reading GPU 1")]
    stack_checks = [c for c in registry.CHECKS if "cuda_stack" in c.needs]
    for reason, words in (("deadline", "before the --timeout deadline"), ("timeout", ": a probe they need did not answer in time")):
        facts = {"probes": {"cuda_stack": {"status": "timeout", "title": "t", "error": "stopped", "reason": reason}}}
        assert _timed_out(facts, stack_checks).title.endswith(words)


def test_a_saved_report_of_the_legacy_form_is_judged_as_a_new_one(h200x2):
    """A report saved before records carried ``reason`` says the deadline only in ``error``
    (tests/fixtures/real/h100x1-20261123/hostile/nvcc-hang.json): snapshot.stopped_by reads that sentence,
    so its findings are those of the same record with ``reason``."""
    from gpudoctor.snapshot import DEADLINE_SENTENCE, stopped_by

    legacy = {"error": DEADLINE_SENTENCE}
    assert stopped_by({"status": "timeout", **legacy}) == "deadline"
    assert stopped_by({"status": "timeout", "error": "no answer within 25 s"}) == "timeout"
    assert stopped_by({"status": "ok", **legacy}) is None
    assert _nvml_stopped(h200x2, legacy) == _nvml_stopped(h200x2, {**legacy, "reason": "deadline"})
    assert _nvml_stopped(h200x2, {"error": "no answer within 25 s"}) == \
        _nvml_stopped(h200x2, {"error": "no answer within 25 s", "reason": "timeout"})


def test_one_mapping_from_findings_to_each_layer():
    """gpudoctor/status.py: a report's verdict (a timed-out check alone makes it a warning), its areas (the
    worst check), check's exit code per --fail-on, and `matrix check`'s verdict and exit code."""
    from gpudoctor import report, status
    from gpudoctor.findings import CheckResult

    warn, err, info = finding("GPU131", "w"), finding("GPU101", "e"), finding("GPU171", "i")
    results = [CheckResult("a.one", "a", "t", PASS, 0.0, [info]), CheckResult("a.two", "a", "t", TIMEOUT, 0.0),
               CheckResult("b.one", "b", "t", SKIP, 0.0)]
    summary = report.summarise(results)
    assert (summary["verdict"], summary["areas"]) == ("warning", {"a": TIMEOUT, "b": SKIP})
    assert report.summarise(results[:1])["verdict"] == "ok"
    assert report.summarise([CheckResult("a.one", "a", "t", WARN, 0.0, [warn]), *results])["verdict"] == "warning"
    assert report.summarise([CheckResult("a.one", "a", "t", FAIL, 0.0, [err]), *results])["verdict"] == "error"
    assert [report.exit_code([warn], fail_on) for fail_on in ("error", "warning", "never")] == [0, 1, 0]
    assert [report.exit_code([err], fail_on) for fail_on in ("error", "warning", "never")] == [1, 1, 0]
    assert status.matrix_verdict([WARNING], unknown=True) == "unknown"
    assert status.matrix_verdict(["error", WARNING], unknown=True) == "error"
    assert [status.matrix_exit_code(v) for v in status.MATRIX_VERDICTS] == [0, 0, 0, 1]


def test_status_of_worst_severity_wins():
    assert registry.status_of([]) == PASS
    assert registry.status_of([finding("GPU171", "i")]) == PASS
    assert registry.status_of([finding("GPU171", "i"), finding("GPU131", "w")]) == WARN
    assert registry.status_of([finding("GPU131", "w"), finding("GPU101", "e")]) == FAIL


def test_the_progress_display_shows_on_a_terminal_only(tmp_path):
    """Standard error on a pseudo-terminal gets the live line, cleared before the report; a pipe gets none."""
    import os
    import pty
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "gpudoctor", "check", "--only", "driver", "--output", str(tmp_path / "r.txt")]
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    os.close(leader)
    shown = b"".join(chunks).decode()
    assert "gpudoctor: " in shown and "/4 done, " in shown and "; running: the " in shown
    assert "\r\x1b[2Kgpudoctor: report written to " in shown  # the live line is cleared first
    piped = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert piped.stderr == f"gpudoctor: report written to {tmp_path / 'r.txt'}\n"


def test_the_multi_gpu_tests_start_once_the_workloads_have_ended(monkeypatch):
    """Their children hold contexts on every GPU, which a workload timing its GPU would see as another process."""
    import threading as _threading
    import time as _time

    from gpudoctor import runner
    from gpudoctor.probes import interpreter

    order: list[str] = []
    release = _threading.Event()

    def workload(scope, target, timeout_s=0.0, deep=False, smoke=False):
        order.append("workload begins")
        release.wait(5)
        order.append("workload ends")
        return {"workload": {}}

    monkeypatch.setattr(runner, "probe_workload", workload)
    monkeypatch.setattr(runner, "probe_multigpu", lambda target, scope: order.append("multigpu begins") or {"multigpu": {}})
    probes = {p.name: p for p in runner.select_probes({"smoke", "workload", "multigpu"}, deep=True)}
    assert probes["multigpu"].timeout_s == runner.MULTIGPU_TIMEOUT_S + probes["workload"].timeout_s
    target = interpreter.own()
    threads = [_threading.Thread(target=probes[n].run, args=(target, RunScope())) for n in ("multigpu", "workload")]
    for t in threads:
        t.start()
    _time.sleep(0.2)
    assert order == ["workload begins"]  # the tests wait
    release.set()
    for t in threads:
        t.join(5)
    assert order == ["workload begins", "workload ends", "multigpu begins"]
    alone = {p.name: p for p in runner.select_probes({"multigpu"}, deep=True)}
    assert alone["multigpu"].timeout_s == runner.MULTIGPU_TIMEOUT_S  # no workloads: nothing to wait for
