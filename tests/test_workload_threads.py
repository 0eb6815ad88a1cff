"""One workload child per framework for every GPU, a thread per GPU: which children are started, how
each GPU's result comes back on its own line, and what a GPU that hangs or a framework that fails
leaves in the report. The threads run for real (in-process and in a real child killed at its limit);
the framework runners are replaced, since this machine has no GPU."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from gpudoctor.procs.scope import RunScope
from gpudoctor.probes import workload
from gpudoctor.procs.child import child_env, run_json_lines
from gpudoctor.probes.interpreter import own
from gpudoctor.probes.frameworks import children
from gpudoctor.probes.workload import Job, common, locks, plan, torch_child, worker

UUIDS = {str(i): f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(4)}


def test_pytorch_gets_one_child_for_every_gpu_the_others_one_gpu_of_the_model_each():
    jobs = plan(["torch", "tensorflow", "jax", "cupy"], ["0", "1", "2", "3"], UUIDS)
    assert [(j.framework, j.devices, j.uuid) for j in jobs] == [
        ("torch", ["0", "1", "2", "3"], None),
        ("tensorflow", ["3"], UUIDS["3"]),  # a child of its own, pinned by the parent
        ("jax", ["2"], None),  # started before the count: it pins itself (devices_line)
        ("cupy", ["1"], None)]


def test_without_a_gpu_only_frameworks_that_train_on_the_cpu_run():
    assert plan(["torch", "tensorflow", "jax", "cupy"], [], {}) == [Job("torch", ["cpu"]), Job("tensorflow", ["cpu"])]


class _Child:
    def __init__(self, lines, timed_out=False, returncode=0):
        from gpudoctor.procs.child import ChildResult

        self.result = ChildResult(lines=[{"section": "workload", "data": d} for d in lines], timed_out=timed_out,
                                  returncode=returncode, stderr_tail="Fatal Python error: ...")


def test_a_gpu_the_child_printed_nothing_for_gets_the_childs_failure_the_others_keep_theirs():
    done = [{"framework": "torch", "device": d, "training": {"ok": True}} for d in ("0", "1", "3")]
    runs = workload._runs(Job("torch", ["0", "1", "2", "3"]), _Child(done, timed_out=True, returncode=-9).result, 90.0)
    assert [r["device"] for r in runs] == ["0", "1", "2", "3"]  # the job's order, not the order printed
    assert runs[0] is done[0] and runs[3] is done[2]
    assert runs[2]["error"] == "the torch workload (one process for GPUs 0, 1, 2, 3) gave no answer within 90 s"
    assert runs[2]["stderr_tail"] == "Fatal Python error: ..."


def test_a_one_gpu_child_that_crashed_says_so():
    runs = workload._runs(Job("tensorflow", ["2"], UUIDS["2"]), _Child([], returncode=-11).result, 90.0)
    assert runs == [{"framework": "tensorflow", "device": "2", "error": "the workload crashed (SIGSEGV)",
                     "stderr_tail": "Fatal Python error: ..."}]


def test_every_gpu_gets_its_own_line_and_a_failing_gpu_does_not_stop_the_others(monkeypatch, capsys):
    started = []

    def fake(device, deep, checks_on=None):
        started.append(threading.current_thread().name)
        if device == "1":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return {"framework": "torch", "device": device, "deep": deep}

    monkeypatch.setattr(children, "run", lambda key: fake)
    monkeypatch.setattr(worker.importlib, "import_module", lambda name: None)
    assert worker.main(["torch", "0,1,2", "--deep"]) == 0
    lines = [__import__("json").loads(line) for line in capsys.readouterr().out.splitlines()]
    by_device = {line["data"]["device"]: line["data"] for line in lines}
    assert sorted(by_device) == ["0", "1", "2"] and {line["section"] for line in lines} == {"workload"}
    assert by_device["1"]["error"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert by_device["0"]["deep"] is True and "import_s" in by_device["0"] and by_device["2"]["work_s"] >= 0
    assert sorted(started) == ["gpu0", "gpu1", "gpu2"]  # one thread per GPU


def test_tensorflow_devices_run_one_after_another_in_the_main_thread(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(children, "run", lambda key: lambda device, deep, checks_on=None:
                        seen.append(threading.current_thread().name) or {"device": device})
    monkeypatch.setattr(worker.importlib, "import_module", lambda name: None)
    worker.main(["tensorflow", "0,1"])
    assert seen == ["MainThread", "MainThread"]


def test_a_failed_import_is_each_gpus_error(monkeypatch, capsys):
    monkeypatch.setattr(worker.importlib, "import_module", lambda name: (_ for _ in ()).throw(ImportError(name)))
    monkeypatch.setattr(children, "run", lambda key: lambda device, deep, checks_on=None: __import__("no_such_module_for_gpudoctor"))
    worker.main(["jax", "0,1"])
    out = capsys.readouterr().out
    assert out.count('"error": "ModuleNotFoundError: No module named \'no_such_module_for_gpudoctor\'"') == 2
    assert '"import_s"' not in out


def test_references_are_computed_once_for_all_gpus_threads():
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.05)  # the other threads arrive while it is being computed
        return object()

    key = f"test-{time.monotonic_ns()}"
    got = []
    threads = [threading.Thread(target=lambda: got.append(common.reference(key, compute))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 4 and len({id(g) for g in got}) == 1


def test_a_failed_reference_is_tried_again():
    key = f"test-{time.monotonic_ns()}"
    with pytest.raises(ZeroDivisionError):
        common.reference(key, lambda: 1 / 0)
    assert common.reference(key, lambda: 42) == 42


def test_host_timed_steps_of_two_gpus_do_not_interleave():
    """Training steps are timed by the host clock: after its first step, one GPU's loop runs alone."""
    log = []

    def loop(name):
        def step():
            log.append(name)
            time.sleep(0.01)
        common.host_timed(step, 5, "cpu")

    threads = [threading.Thread(target=loop, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(log) == 10
    for name in "ab":  # each loop's last four steps are one unbroken run
        last = max(i for i, n in enumerate(log) if n == name)
        assert log[last - 3:last + 1] == [name] * 4


HANGING_WORKER = """
import sys, time
from gpudoctor.probes.frameworks import children
from gpudoctor.probes.workload import worker

def fake(device, deep, checks_on=None):
    if device == "2":
        time.sleep(600)  # a wedged GPU: this thread never returns
    return {"framework": "torch", "device": device, "training": {"ok": True}}

children.run = lambda key: fake
worker.importlib.import_module = lambda name: None
sys.exit(worker.main(["torch", "0,1,2,3"]))
"""


def test_a_gpu_that_hangs_keeps_the_other_gpus_results_in_a_real_child(tmp_path):
    """The real child: three GPUs print, the fourth hangs, the parent kills the child at its limit and
    keeps the three lines."""
    script = tmp_path / "hanging.py"
    script.write_text(textwrap.dedent(HANGING_WORKER))
    job = Job("torch", ["0", "1", "2", "3"])
    child = run_json_lines([sys.executable, str(script)], timeout_s=5.0, env=child_env())
    runs = workload._runs(job, child, 5.0)
    assert child.timed_out
    assert [r.get("training", {}).get("ok") for r in runs] == [True, True, None, True]
    assert runs[2] == {"framework": "torch", "device": "2", "stderr_tail": child.stderr_tail,
                       "error": "the torch workload (one process for GPUs 0, 1, 2, 3) gave no answer within 5 s"}


def test_the_written_out_adam_updates_as_torch_optim_adam_does():
    """The training step's Adam (written out to spare the TorchDynamo import) against PyTorch's own, on the
    PyTorch here, on its CPU device: the same losses and weights after 20 steps, to float32 rounding."""
    torch = pytest.importorskip("torch")

    def train(ours: bool):
        torch.manual_seed(5)
        net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        x = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
        y = (x[:, 0] > 0).long()
        opt = torch_child._TorchAdam(torch, list(net.parameters()), lr=1e-2) if ours else torch.optim.Adam(net.parameters(), lr=1e-2)
        losses = []
        for _ in range(20):
            if not ours:
                opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach() for p in net.parameters()]

    (ours, ours_w), (theirs, theirs_w) = train(True), train(False)
    assert ours[-1] < 0.7 * ours[0]
    assert max(abs(a - b) for a, b in zip(ours, theirs)) < 1e-5
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(ours_w, theirs_w))


def _counted(*names):
    from gpudoctor.procs.child import ChildResult

    return ChildResult(lines=[{"section": "count", "data": {"devices": [
        {"ordinal": i, "name": n, "uuid": UUIDS[str(i)]} for i, n in enumerate(names)]}}])


def test_children_started_before_the_count_read_it_on_stdin(monkeypatch):
    monkeypatch.setattr(workload, "installed", lambda name, target: name in ("torch", "jax", "cupy"))
    four = _counted(*["NVIDIA H100 80GB HBM3"] * 4)
    assert workload.devices_line("torch", four, own()) == "0,1,2,3\n"
    assert workload.devices_line("jax", four, own()) == f"3 {UUIDS['3']}\n"  # one GPU, and the UUID to pin itself to
    assert workload.devices_line("cupy", four, own()) == f"2 {UUIDS['2']}\n"
    assert workload.devices_line("jax", _counted("NVIDIA H100 80GB HBM3"), own()) == "0\n"  # one GPU: nothing to pin
    assert workload.devices_line("torch", _counted(), own()) == "cpu\n"  # no GPU: PyTorch still trains on the CPU
    assert workload.devices_line("cupy", _counted(), own()) == "\n"  # ...CuPy has nothing to do


def test_the_worker_takes_its_gpus_from_stdin(monkeypatch, capsys):
    import io

    monkeypatch.setattr(children, "run", lambda key: lambda device, deep, checks_on=None: {"framework": "cupy", "device": device})
    monkeypatch.setattr(worker.importlib, "import_module", lambda name: None)
    monkeypatch.setattr(sys, "stdin", io.StringIO("0,1\n"))
    worker.main(["cupy", "-"])
    assert sorted(line.split('"device": ')[1][:3] for line in capsys.readouterr().out.splitlines()) == ['"0"', '"1"']
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    worker.main(["cupy", "-"])
    assert capsys.readouterr().out == ""  # nothing to run: nothing printed


def test_a_child_reads_what_its_feed_gives_once_that_is_known():
    """The child starts at once and blocks on stdin; the feed (waiting 0.3 s, as for the count) then
    writes its line. A feed that fails closes stdin: the child reads end-of-file."""
    echo = [sys.executable, "-c", "import json, sys; print(json.dumps({'section': 'got', 'data': sys.stdin.read()}))"]
    child = run_json_lines(echo, timeout_s=10.0, feed=lambda: time.sleep(0.3) or "0,1,2,3\n")
    assert child.section("got") == "0,1,2,3\n"
    child = run_json_lines(echo, timeout_s=10.0, feed=lambda: 1 / 0)
    assert child.section("got") == ""


# --- one child per framework for the framework probe and the workloads --------------------------

FACTS_THEN_WORK = """
import json, sys, time
print(json.dumps({"section": "started", "data": "torch"}), flush=True)
print("a warning from the import", file=sys.stderr, flush=True)
time.sleep(0.3)
print(json.dumps({"section": "framework", "data": {"version": "9.9"}}), flush=True)
devices = sys.stdin.readline().strip()
time.sleep(1.0)  # the workloads
for d in devices.split(","):
    print(json.dumps({"section": "workload", "data": {"framework": "torch", "device": d}}), flush=True)
"""
HANGS_BEFORE_FACTS = "import time; time.sleep(600)"
CRASHES = "import os, sys; print('Fatal Python error: Segmentation fault', file=sys.stderr, flush=True); os.abort()"


def _scripted(monkeypatch, tmp_path, script):
    """FrameworkChild's child replaced by ``script`` (the real child machinery otherwise), with a count of
    two GPUs already done for this run."""
    from gpudoctor.procs import child as child_module

    path = tmp_path / "child.py"
    path.write_text(textwrap.dedent(script))
    monkeypatch.setattr(workload, "run_module", lambda module, args, python=None, **kw: run_json_lines([sys.executable, str(path)], **kw))
    counted = child_module.ChildResult(lines=[{"section": "count", "data": {"devices": [
        {"ordinal": 0, "name": "NVIDIA H200", "uuid": UUIDS["0"]}, {"ordinal": 1, "name": "NVIDIA H200", "uuid": UUIDS["1"]}]}}])
    monkeypatch.setattr(workload, "count_gpus", lambda scope: counted)


def test_the_framework_probe_reads_the_facts_as_soon_as_the_shared_child_prints_them(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path, FACTS_THEN_WORK)
    shared_child = workload.FrameworkChild(RunScope(), "torch", deep=False, timeout_s=30.0, target=own())
    facts = shared_child.facts(20.0)
    assert not shared_child._done.done()  # the workloads are still running
    assert facts.section("framework") == {"version": "9.9"} and not facts.timed_out and facts.returncode == 0
    assert facts.stderr_tail == "a warning from the import\n"  # what it had printed to stderr by then
    done = shared_child.wait()
    assert [d["device"] for d in done.sections("workload")] == ["0", "1"]  # it read the count on stdin


def test_a_shared_child_that_hangs_before_its_facts_is_a_framework_timeout(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path, HANGS_BEFORE_FACTS)
    shared_child = workload.FrameworkChild(RunScope(), "torch", deep=False, timeout_s=3.0, target=own())
    facts = shared_child.facts(0.5)
    assert facts.timed_out and facts.section("framework") is None
    from gpudoctor.probes.frameworks import summarise

    assert summarise(facts, 0.5)["status"] == "timeout"
    done = shared_child.wait()  # killed at its own limit, for the workloads
    assert done.timed_out


def test_a_shared_child_that_crashes_is_a_crashed_import(monkeypatch, tmp_path):
    from gpudoctor.probes.frameworks import summarise

    _scripted(monkeypatch, tmp_path, CRASHES)
    facts = workload.FrameworkChild(RunScope(), "torch", deep=False, timeout_s=10.0, target=own()).facts(10.0)
    out = summarise(facts, 10.0)
    assert out["status"] == "crashed" and "SIGABRT" in out["error"] and "Segmentation fault" in out["stderr_tail"]


def test_a_check_imports_each_threaded_framework_once(monkeypatch):
    """The real check on this machine (its PyTorch, no GPU): PyTorch's framework facts and its CPU training
    step come from one child; TensorFlow keeps a framework-probe child of its own."""
    pytest.importorskip("torch")
    from gpudoctor import pipeline
    from gpudoctor.probes import frameworks

    started = []
    real_frameworks, real_workload = frameworks.run_module, workload.run_module
    monkeypatch.setattr(frameworks, "run_module", lambda module, args, **kw: started.append(("frameworks", *args)) or real_frameworks(module, args, **kw))
    monkeypatch.setattr(workload, "run_module", lambda module, args, **kw: started.append(("workload", *args)) or real_workload(module, args, **kw))
    report = pipeline.check(pipeline.RunOptions(only=("frameworks", "acceleration")))
    torch_children = [s for s in started if "torch" in s]
    assert torch_children == [("workload", "torch", "-", "--facts", "--smoke")]
    assert report["facts"]["frameworks"]["torch"]["status"] == "ok"
    assert report["facts"]["frameworks"]["torch"]["info"]["version"].startswith("2.")
    assert [r["training"]["ok"] for r in report["facts"]["workload"]["runs"] if r["framework"] == "torch"] == [True]


def test_untimed_work_shares_a_gpu_and_a_measurement_has_it_alone(monkeypatch, tmp_path):
    """The real flock: two untimed holders (two frameworks compiling) overlap; a measurement waits for
    both to leave, and untimed work waits for the measurement."""
    monkeypatch.setenv("GPUDOCTOR_LOCK_DIR", str(tmp_path))
    log = []

    def hold(name, shared, seconds, delay=0.0):
        time.sleep(delay)
        with locks.gpu_lock("0", shared=shared):
            log.append((name, "in", time.monotonic()))
            time.sleep(seconds)
            log.append((name, "out", time.monotonic()))

    plan_ = [("compile-a", True, 0.3, 0.0), ("compile-b", True, 0.3, 0.05), ("measure", False, 0.2, 0.1),
             ("check", True, 0.05, 0.15)]
    threads = [threading.Thread(target=hold, args=args) for args in plan_]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    at = {(n, e): t for n, e, t in log}
    assert at[("compile-b", "in")] < at[("compile-a", "out")]  # shared with shared: together
    assert at[("measure", "in")] >= max(at[("compile-a", "out")], at[("compile-b", "out")])  # alone
    assert at[("check", "in")] >= at[("measure", "out")] or at[("check", "out")] <= at[("measure", "in")]


def test_a_facts_report_that_fails_still_gives_the_framework_probe_its_line(monkeypatch, capsys):
    """Reading the facts raised outside the import's own guard: the child prints the framework line with
    the error at once, rather than leaving the framework probe to wait out its limit."""
    monkeypatch.setattr(worker, "report", lambda name, *_: (_ for _ in ()).throw(OSError("/proc/self/maps: gone")))
    monkeypatch.setattr(children, "run", lambda key: lambda device, deep, checks_on=None: {"framework": "torch", "device": device})
    worker.main(["torch", "cpu", "--facts"])
    lines = [__import__("json").loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["section"] == "framework" and lines[0]["data"]["import_error"] == "OSError: /proc/self/maps: gone"
    assert lines[1]["data"] == {"framework": "torch", "device": "cpu", "duration_s": lines[1]["data"]["duration_s"],
                                "work_s": lines[1]["data"]["work_s"]}  # no import time: the import did not succeed


def test_a_shared_child_that_cannot_be_set_up_leaves_the_framework_probe_its_own(monkeypatch):
    def broken(*args):
        raise RuntimeError("no threads left")

    monkeypatch.setattr(workload, "FrameworkChild", broken)
    facts = workload.framework_facts(RunScope(), deep=False, timeout_s=5.0)
    assert facts("torch", 1.0, own()) is None  # the probe then starts its own child
    assert facts("tensorflow", 1.0, own()) is None  # never shared


def test_xla_autotuning_is_off_in_the_workloads_unless_the_user_chose_a_level(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert workload.workload_env(own())["XLA_FLAGS"] == "--xla_gpu_autotune_level=0"
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/d")
    assert workload.workload_env(own())["XLA_FLAGS"] == "--xla_dump_to=/tmp/d --xla_gpu_autotune_level=0"
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=4 --xla_dump_to=/tmp/d")
    assert workload.workload_env(own())["XLA_FLAGS"] == "--xla_gpu_autotune_level=4 --xla_dump_to=/tmp/d"


@pytest.mark.parametrize("flags, autotunes", [
    (None, True),  # XLA's default: autotuning on
    ("--xla_gpu_autotune_level=0", False),
    ("--xla_dump_to=/tmp/d --xla_gpu_autotune_level=0", False),
    ("--xla_gpu_autotune_level=0 --xla_gpu_autotune_level=4", True),  # the last one counts
    ("--xla_gpu_autotune_level=2", True),
])
def test_a_jax_compile_takes_the_gpu_lock_only_while_xla_autotunes_on_the_gpu(monkeypatch, flags, autotunes):
    if flags is None:
        monkeypatch.delenv("XLA_FLAGS", raising=False)
    else:
        monkeypatch.setenv("XLA_FLAGS", flags)
    assert locks.xla_autotunes() is autotunes


def test_the_flags_the_workloads_get_turn_autotuning_off_for_the_worker_too(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv("XLA_FLAGS", workload.workload_env(own())["XLA_FLAGS"])
    assert locks.xla_autotunes() is False


class FakeLibcuda:
    """libcuda as contexts_early sees it: not loaded, then loaded, then started by the framework's cuInit."""

    def __init__(self):
        self.loaded = self.started = False
        self.retained: list[int] = []
        self.modes: list[int] = []
        self.gpus = 2

    def open(self, name, mode=0):
        self.modes.append(mode)
        if not self.loaded:
            raise OSError(f"{name}: not loaded")
        return self

    def cuDeviceGetCount(self, ref):
        if not self.started:
            return 3  # CUDA_ERROR_NOT_INITIALIZED
        ref._obj.value = self.gpus
        return 0

    def cuDeviceGet(self, ref, ordinal):
        ref._obj.value = ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, ctx, dev):
        self.retained.append(dev.value)
        return 0


def start_contexts_early(monkeypatch, then=lambda: None, imported=None) -> tuple[FakeLibcuda, threading.Event, threading.Thread]:
    fake, done = FakeLibcuda(), threading.Event()
    monkeypatch.setattr(worker.ctypes, "CDLL", fake.open)
    early = threading.Thread(target=worker.contexts_early, args=(imported or threading.Event(), done, then))
    early.start()
    time.sleep(0.05)
    return fake, done, early


def wait_for(test, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not test() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_contexts_are_made_once_the_framework_has_started_cuda_and_only_then(monkeypatch):
    import os

    hosted = []
    fake, done, early = start_contexts_early(monkeypatch, then=lambda: hosted.append(fake.started))
    fake.loaded = True  # the framework's import loaded libcuda
    time.sleep(0.05)
    assert fake.retained == [] and hosted == []  # loaded, but CUDA not started: nothing before the framework's own cuInit
    fake.started = True
    early.join(5)
    assert fake.retained == [0, 1]  # GPU 0's first, then the others while the framework still imports
    assert hosted == [True]  # the smoke kernel's host starts once the contexts are made, and once
    assert all(mode & os.RTLD_NOLOAD for mode in fake.modes)  # never loads a libcuda of its own


def test_the_contexts_left_when_the_import_is_done_wait_for_the_facts(monkeypatch):
    hosted, imported = [], threading.Event()
    fake, done, early = start_contexts_early(monkeypatch, then=lambda: hosted.append(True), imported=imported)
    fake.gpus = 3
    imported.set()  # the framework's facts now ask CUDA: its first kernel must not wait behind other GPUs' contexts
    fake.loaded = fake.started = True
    wait_for(lambda: fake.retained)
    time.sleep(0.05)
    assert fake.retained == [0] and hosted == []
    done.set()
    early.join(5)
    wait_for(lambda: len(fake.retained) == 3)
    assert sorted(fake.retained) == [0, 1, 2] and hosted == [True]


def test_with_one_gpu_the_smoke_host_starts_without_waiting_for_the_facts(monkeypatch):
    hosted, imported = [], threading.Event()
    fake, done, early = start_contexts_early(monkeypatch, then=lambda: hosted.append(True), imported=imported)
    fake.gpus = 1
    imported.set()
    fake.loaded = fake.started = True
    early.join(5)
    assert not early.is_alive() and not done.is_set()
    assert fake.retained == [0] and hosted == [True]


def test_without_cuda_the_early_contexts_give_up_when_the_facts_are_done(monkeypatch):
    hosted = []
    fake, done, early = start_contexts_early(monkeypatch, then=lambda: hosted.append(True))
    done.set()
    early.join(5)
    assert not early.is_alive() and fake.retained == [] and hosted == []  # the host runs the kernel after the facts


class FakeCudart:
    """The CUDA runtime a framework's extension module brought in, as cuda_early sees it."""

    def __init__(self):
        self.modes: list[int] = []
        self.counted = 0

    def open(self, name, mode=0):
        self.modes.append(mode)
        return self

    def cudaGetDeviceCount(self, ref):
        self.counted += 1
        return 0


def start_cuda_early(monkeypatch, maps: list[str], module="fakefw._C"):
    fake, done = FakeCudart(), threading.Event()
    monkeypatch.setattr(worker.ctypes, "CDLL", fake.open)
    monkeypatch.setattr(worker, "mapped_one", lambda family: maps[0] if len(set(maps)) == 1 else None)
    monkeypatch.delitem(sys.modules, module, raising=False)
    early = threading.Thread(target=worker.cuda_early, args=(module, done))
    early.start()
    time.sleep(0.05)
    return fake, done, early


def test_cuda_starts_through_the_frameworks_own_runtime_once_its_module_is_in(monkeypatch):
    import os
    import types

    fake, done, early = start_cuda_early(monkeypatch, ["/venv/nvidia/cu13/lib/libcudart.so.13"])
    assert fake.counted == 0  # the framework's runtime is not in yet: nothing is loaded in its place
    monkeypatch.setitem(sys.modules, "fakefw._C", types.ModuleType("fakefw._C"))
    early.join(5)
    assert not early.is_alive() and fake.counted == 1
    assert fake.modes and all(m & os.RTLD_NOLOAD for m in fake.modes)  # the runtime already loaded, never another


@pytest.mark.parametrize("maps", [[], ["/a/libcudart.so.12", "/b/libcudart.so.13"]], ids=["static", "two"])
def test_cuda_is_left_to_the_framework_without_exactly_one_runtime_loaded(monkeypatch, maps):
    import types

    fake, done, early = start_cuda_early(monkeypatch, maps)
    monkeypatch.setitem(sys.modules, "fakefw._C", types.ModuleType("fakefw._C"))
    early.join(5)
    assert not early.is_alive() and fake.counted == 0 and fake.modes == []


def test_cuda_early_gives_up_when_the_facts_are_done_without_the_module(monkeypatch):
    fake, done, early = start_cuda_early(monkeypatch, ["/venv/libcudart.so.13"])
    done.set()  # a CPU-only build, or a failed import: the module never came
    early.join(5)
    assert not early.is_alive() and fake.counted == 0


def test_the_runtime_is_found_among_what_this_process_mapped(tmp_path):
    """A library named as the CUDA runtime (a copy of libm: any shared library maps the same way), loaded by a
    process, is the one that process has mapped; none, and two copies, give nothing."""
    source = next((line.split()[-1] for line in open("/proc/self/maps") if "/libm.so" in line), None)  # the interpreter's
    if source is None:
        pytest.skip("this interpreter has no shared libm mapped to copy")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(source, tmp_path / folder / "libcudart.so.13")
    ask = ("import ctypes, sys\nfor path in sys.argv[1:]: ctypes.CDLL(path)\n"
           "from gpudoctor.probes.workload.worker import mapped_one\nprint(mapped_one('libcudart'))")
    found = [subprocess.run([sys.executable, "-c", ask, *paths], capture_output=True, text=True, env=child_env()).stdout.strip()
             for paths in ([str(tmp_path / "a" / "libcudart.so.13")], [],
                           [str(tmp_path / f / "libcudart.so.13") for f in ("a", "b")])]
    assert found == [str(tmp_path / "a" / "libcudart.so.13"), "None", "None"]


def test_only_the_threaded_every_gpu_framework_names_a_module_that_brings_cuda():
    from gpudoctor import frameworks_table

    early = [f.key for f in frameworks_table.FRAMEWORKS if f.cuda_runtime_module]
    assert early == ["torch"] and all(frameworks_table.get(k).every_gpu for k in early)


def test_a_background_compile_hands_its_result_or_its_failure_to_the_step_that_asks():
    import threading as threads

    ran_in = []
    done = common.in_background(lambda: ran_in.append(threads.current_thread().name) or 42, "jax-training-compile")
    assert done.result(5) == 42 and ran_in == ["jax-training-compile"]

    def fails():
        raise RuntimeError("XLA: out of memory while compiling")

    with pytest.raises(RuntimeError, match="out of memory"):
        common.in_background(fails, "jax-training-compile").result(5)


def test_the_smoke_host_starts_once_and_only_where_asked(monkeypatch):
    started = []
    monkeypatch.setattr(worker.smoke_worker, "host", lambda devices, lock: started.append(devices) or [])
    host = worker.SmokeHost(True)
    host.start(["0", "1"])
    host.start(["0", "1"])  # the facts done after CUDA started it: not again
    host.join()
    worker.SmokeHost(False).start(["0"])
    worker.SmokeHost(True).start(["cpu"])
    assert started == [["0", "1"], []]


def test_the_cpu_comparison_runs_beside_gpu_0s_work_and_adds_to_its_training():
    from gpudoctor.probes.workload import torch_child as torch_run

    began = time.monotonic()
    slow = common.in_background(lambda: time.sleep(0.2) or (0.2, [0.5, 0.5, 0.5, 0.004, 0.006, 0.005]), "cpu-compare")
    assert time.monotonic() - began < 0.1  # started, not waited for
    training = {"ok": True, "warm_step_s": 0.001}
    torch_run._compare_cpu(training, *slow.result())
    assert training["cpu_compare_s"] == 0.2 and training["cpu_warm_step_s"] == 0.005
    assert training["speedup_vs_cpu"] == pytest.approx(5.0)
    failing = common.in_background(lambda: 1 / 0, "cpu-compare")
    with pytest.raises(ZeroDivisionError):
        failing.result()


def test_a_hosted_kernel_that_hangs_does_not_hold_the_child(monkeypatch):
    hang = threading.Event()
    monkeypatch.setattr(worker, "HOSTED_WAIT_S", 0.2)
    monkeypatch.setattr(worker.smoke_worker, "host", lambda devices, lock: [
        threading.Thread(target=hang.wait, daemon=True) for _ in devices])
    host = worker.SmokeHost(True)
    host.start(["0"])
    for thread in host._threads or []:
        thread.start()
    began = time.monotonic()
    host.join()
    assert time.monotonic() - began < 1.0
    hang.set()


def test_a_training_model_is_made_while_another_gpus_thread_holds_the_tf32_switch():
    """The tf32 switch and the default generator are two locks: a thread timing tf32 matmuls holds the switch
    for the whole timing, and GPU 0's training must not wait for it to make its model."""
    torch = pytest.importorskip("torch")
    trained: list = []
    with locks._TF32:  # another GPU's thread timing tf32 matmuls
        thread = threading.Thread(target=lambda: trained.append(torch_child._train(torch, torch.device("cpu"), "cpu", 3, False)))
        thread.start()
        thread.join(30)
        assert not thread.is_alive() and len(trained[0][0]) == 3  # three losses, made while the switch was held


@pytest.fixture
def said(monkeypatch):
    """The steps a framework child says, from a fresh start (stage "import")."""
    from gpudoctor.probes.frameworks import asking

    lines: list = []
    monkeypatch.setattr(asking, "_stage", "import")
    monkeypatch.setattr(asking, "_said", 0)
    monkeypatch.setattr(asking, "_beside", 0)
    monkeypatch.setattr(asking, "_beside_said", None)
    monkeypatch.setattr(asking.protocol, "emit", lambda section, data, default=None: lines.append(data))
    return lines


def test_cuda_started_beside_the_import_is_where_a_child_dies_meanwhile(said):
    from gpudoctor.probes.frameworks import asking

    with asking.beside("cuda_init", "import"):
        assert asking.reached() == "cuda_init"  # a driver that kills the child now: it died starting CUDA
    assert said == ["cuda_init", "import"]  # the import goes on: dying after is dying in the import


def test_the_main_threads_own_step_is_never_undone_by_a_step_beside_it(said):
    from gpudoctor.probes.frameworks import asking

    with asking.beside("cuda_init", "import"):
        asking.stage("cuda_init")  # the import ended; the framework's own CUDA start
        asking.stage("devices")
    assert said == ["cuda_init", "cuda_init", "devices"] and asking.reached() == "devices"
    with asking.beside("cuda_init", "import"):  # a context made after the main thread has moved on
        pass
    assert asking.reached() == "devices" and said[-1] == "devices"


def test_steps_beside_each_other_say_the_import_again_only_when_the_last_ends(said):
    from gpudoctor.probes.frameworks import asking

    first, second = asking.beside("cuda_init", "import"), asking.beside("cuda_init", "import")
    first.__enter__()
    second.__enter__()  # GPU 1's context while GPU 0's is made
    first.__exit__(None, None, None)
    assert asking.reached() == "cuda_init"
    second.__exit__(None, None, None)
    assert said == ["cuda_init", "import"]


def test_bf16_is_asked_only_of_gpus_that_compute_in_it():
    """PyTorch's bf16 matmul check, training and timing run where the GPU has bf16 units (compute capability
    8.0 on), as JAX's and TensorFlow's do: cuBLAS refuses bf16 matmuls on some older GPUs, which is no fault."""
    from types import SimpleNamespace

    def torch_with(capability):
        def get_device_capability(dev):
            if capability is None:
                raise RuntimeError("CUDA error: invalid device ordinal")
            return capability
        return SimpleNamespace(cuda=SimpleNamespace(get_device_capability=get_device_capability))

    gpu, cpu = SimpleNamespace(type="cuda"), SimpleNamespace(type="cpu")
    assert torch_child._bf16(torch_with((8, 0)), gpu) and torch_child._bf16(torch_with((12, 0)), gpu)
    assert not any(torch_child._bf16(torch_with(c), gpu) for c in ((7, 5), (7, 0), (6, 0), (5, 2), None))
    assert not torch_child._bf16(torch_with((9, 0)), cpu)


@pytest.mark.parametrize("bf16", [False, True])
def test_the_matmul_check_asks_bf16_only_where_the_gpu_has_it(monkeypatch, bf16):
    """The matmul check on PyTorch here, on its CPU device, with _bf16 saying what a GPU would: the bfloat16
    check is made where it says yes, and only there."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch_child, "_bf16", lambda torch, dev: bf16)
    result = torch_child._torch_matmul(torch, torch.device("cpu"))
    assert result["ok"]
    assert [c["what"] for c in result["checks"]] == ["matmul float32"] + (["matmul bfloat16"] if bf16 else [])
