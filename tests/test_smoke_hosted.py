"""The smoke kernel hosted by PyTorch's workload child: where the workloads run too, the kernel runs from the
process that starts CUDA on every GPU anyway, and any GPU whose hosted run did not pass gets a child of its
own, so the facts and findings are those a child per GPU gives. The fake libcuda behind the children is
test_gpu_list's; the hosts are fakes that answer as PyTorch's child would."""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest

from gpudoctor.procs.scope import RunScope
from gpudoctor import pipeline, runner
from gpudoctor.probes import interpreter, nvml, smoke, workload
from gpudoctor.probes.smoke import worker as smoke_worker
from gpudoctor.procs.child import reopen

from test_gpu_list import FakeCuda, _as_recorded, _h200x4


def _passed(ordinal: str) -> dict[str, Any]:
    return {"ordinal": int(ordinal), "ok": True, "elements": 262144, "wrong_elements": 0, "first_wrong": [],
            "context_s": 0.0, "jit_s": 0.01, "kernel_and_copies_s": 0.002, "total_s": 0.02, "process": smoke_worker.HOSTED}


class FakeHost:
    """Answers the smoke probe as PyTorch's child would: a passing run for each GPU, except those in
    ``answers`` (a run of their own, or None: nothing printed, as when the child crashed)."""

    def __init__(self, answers: Optional[dict[str, Optional[dict[str, Any]]]] = None):
        self.answers = answers or {}
        self.asked: list[tuple[list[str], float]] = []

    def __call__(self, ordinals: list[str], wait_s: float) -> dict[str, dict[str, Any]]:
        self.asked.append((ordinals, wait_s))
        runs = {o: self.answers.get(o, _passed(o)) for o in ordinals}
        return {o: r for o, r in runs.items() if r is not None}


def _smoke(monkeypatch, cuda: FakeCuda, host: Any) -> dict[str, Any]:
    reopen()
    monkeypatch.setattr(smoke, "run_module", cuda.run_module)
    monkeypatch.setattr(nvml, "published_facts", lambda scope, wait_s: _h200x4())
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(name, raising=False)
    return smoke.probe_smoke(RunScope(), 5.0, host=host)["smoke"]


def _plain(run: dict[str, Any]) -> tuple[Any, ...]:
    return run["ordinal"], run["uuid"], run["ok"], run["wrong_elements"]


def test_hosted_runs_start_no_child_and_judge_as_a_child_per_gpu(monkeypatch):
    facts = _h200x4()
    host, cuda = FakeHost(), FakeCuda(facts)
    hosted = _smoke(monkeypatch, cuda, host)
    own = _smoke(monkeypatch, FakeCuda(facts), None)
    assert cuda.started == []  # no process of its own, not even CUDA's count
    assert host.asked and host.asked[0][0] == ["0", "1", "2", "3"] and 0 < host.asked[0][1] <= 5.0
    assert [r["process"] for r in hosted["runs"]] == [smoke_worker.HOSTED] * 4
    assert [_plain(r) for r in hosted["runs"]] == [_plain(r) for r in own["runs"]]
    assert hosted["count"] == own["count"]
    assert pipeline.judge(_as_recorded(facts, hosted))["findings"] == pipeline.judge(_as_recorded(facts, own))["findings"] == []


@pytest.mark.parametrize("answer", [
    {"ordinal": 1, "ok": False, "elements": 262144, "wrong_elements": 7, "first_wrong": [[0, 1.0, 2.0]]},
    {"ordinal": 1, "error": {"step": "cuModuleLoadData (PTX JIT)", "code": 218, "name": "CUDA_ERROR_INVALID_PTX"}},
    None,
], ids=["wrong-result", "cuda-error", "nothing-printed"])
def test_a_gpu_whose_hosted_run_did_not_pass_gets_a_child_of_its_own(monkeypatch, answer):
    """What the child of its own says is the report's: here it passes, so the hosted failure leaves no trace."""
    facts = _h200x4()
    uuids = [g["uuid"] for g in facts["gpus"]]
    cuda = FakeCuda(facts)
    found = _smoke(monkeypatch, cuda, FakeHost({"1": answer}))
    assert cuda.started == [("run", "1", uuids[1])]
    assert [r.get("process") for r in found["runs"]] == [smoke_worker.HOSTED, None, smoke_worker.HOSTED, smoke_worker.HOSTED]
    assert [(r["ordinal"], r["uuid"], r["ok"]) for r in found["runs"]] == [(i, u, True) for i, u in enumerate(uuids)]
    assert pipeline.judge(_as_recorded(facts, found))["findings"] == []


def test_a_gpu_that_fails_in_its_own_child_too_is_reported_as_without_a_host(monkeypatch):
    """GPU 2 cannot start CUDA: hosted or not, the facts are those CUDA's count and the child give."""
    facts = _h200x4()
    broken = (facts["gpus"][2]["uuid"],)
    hosted = _smoke(monkeypatch, FakeCuda(facts, broken=broken), FakeHost({"2": None}))
    own = _smoke(monkeypatch, FakeCuda(facts, broken=broken), None)
    assert hosted == own
    assert "RUN003" in {f["code"] for f in pipeline.judge(_as_recorded(facts, hosted))["findings"]}


def test_without_a_host_every_gpu_gets_a_child(monkeypatch):
    facts = _h200x4()
    cuda = FakeCuda(facts)
    found = _smoke(monkeypatch, cuda, FakeHost({o: None for o in "0123"}))
    assert sorted(s[1] for s in cuda.started) == ["0", "1", "2", "3"]
    assert all("process" not in r for r in found["runs"])


# --- the run: which probes host the kernel ----------------------------------------------------------------

def _probe(probes: list[runner.Probe], name: str) -> runner.Probe:
    return next(p for p in probes if p.name == name)


@pytest.mark.parametrize("deep", [False, True])
def test_the_kernel_is_hosted_only_where_the_workloads_run(deep):
    both = runner.select_probes({"smoke", "workload", "frameworks"}, deep=deep)
    assert _probe(both, "smoke").variant == "shared"
    alone = runner.select_probes({"smoke", "frameworks"}, deep=deep)
    assert _probe(alone, "smoke").variant == ""
    assert not any(p.name == "smoke" for p in runner.select_probes({"smoke", "workload"}, quick=True))


def test_every_probe_asks_for_the_same_child(monkeypatch):
    """The framework probe, the workload probe and the smoke probe share PyTorch's one child, started with
    --smoke, whichever asks first."""
    reopen()
    made: list[tuple[str, bool]] = []

    class Child:
        def __init__(self, scope, framework, deep, timeout_s, target, smoke=False):
            made.append((framework, smoke))

        def smoke_runs(self, ordinals, wait_s):
            return {}

    monkeypatch.setattr(workload, "FrameworkChild", Child)
    monkeypatch.setattr(workload, "installed", lambda name, target: True)
    target = interpreter.own()
    scope = RunScope()
    workload.hosted_smoke(scope, False, 1.0, target)(["0"], 0.1)
    workload.framework_child(scope, "torch", False, 1.0, target, smoke=True)
    workload.framework_child(scope, "jax", False, 1.0, target, smoke=True)
    assert made == [("torch", True), ("jax", False)]  # one torch child; only PyTorch's hosts the kernel
    workload.framework_child(RunScope(), "torch", False, 1.0, target, smoke=True)
    assert made[-1] == ("torch", True)  # another run has a child of its own


# --- the child's side ------------------------------------------------------------------------------------

def test_smoke_runs_waits_for_each_gpu_or_the_end(monkeypatch):
    """FrameworkChild.smoke_runs returns once every GPU's line came, or the child ended without them."""
    reopen()
    release = threading.Event()

    def run_module(module, args, timeout_s, env, on_line, result, python, feed):
        assert "--smoke" in args
        for o in ("0", "1"):
            line = {"section": "smoke", "data": _passed(o)}
            result.lines.append(line)
            on_line(line)
        release.wait(5)
        return result

    monkeypatch.setattr(workload, "run_module", run_module)
    monkeypatch.setattr(workload, "workload_env", lambda target: {})
    child = workload.FrameworkChild(RunScope(), "torch", False, 10.0, interpreter.own(), smoke=True)
    assert sorted(child.smoke_runs(["0", "1"], 5.0)) == ["0", "1"]
    assert sorted(child.smoke_runs(["0", "1", "2"], 0.05)) == ["0", "1"]  # GPU 2 never came: the wait ends
    release.set()
    child.wait()
    assert sorted(child.smoke_runs(["0", "1", "2"], 5.0)) == ["0", "1"]  # ended: no wait at all


def test_a_hosted_run_that_cannot_load_libcuda_says_so(monkeypatch):
    """On this machine (no driver) the hosted kernel prints the same failure a child of its own prints."""
    said: list[tuple[str, Any]] = []
    monkeypatch.setattr(smoke_worker, "emit", lambda section, data: said.append((section, data)))
    monkeypatch.setattr(smoke_worker, "load", lambda: (_ for _ in ()).throw(OSError("libcuda.so.1: cannot open shared object file")))
    locked: list[str] = []

    class Lock:
        def __init__(self, ordinal):
            locked.append(ordinal)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    for thread in smoke_worker.host(["0", "3"], Lock):
        thread.join(5)
    assert sorted(said, key=lambda s: s[1]["ordinal"]) == [
        ("smoke", {"ordinal": o, "error": {"step": "load libcuda.so.1", "code": None, "name": "library_not_found",
                                           "message": "libcuda.so.1: cannot open shared object file"}}) for o in (0, 3)]
    assert locked == []  # nothing reached a GPU


def test_the_check_of_the_result_reads_bytes_and_still_names_each_wrong_element():
    x, y, expected = smoke_worker.inputs()
    assert smoke_worker.wrong(smoke_worker.array("f", expected), expected) == []
    got = smoke_worker.array("f", expected)
    got[5], got[70000] = got[5] + 1.0, float("nan")
    assert smoke_worker.wrong(got, expected) == [5, 70000]
    signed = smoke_worker.array("f", expected)
    zero = next(i for i in range(smoke_worker.N) if expected[i] == 0.0)
    signed[zero] = -0.0  # other bytes, the same number: right
    assert smoke_worker.wrong(signed, expected) == []
    # every input is exact in float32, so a*x + y rounds to the same float whether fused or not
    assert all(smoke_worker.A * a + b == e for a, b, e in zip(x[:5000], y[:5000], expected[:5000]))


@pytest.mark.parametrize("line, smoke_lines", [("0\n", 1), ("cpu\n", 0)], ids=["a-gpu-named", "no-gpu"])
def test_the_real_torch_child_hosts_the_kernel_on_the_gpus_it_is_told(tmp_path, line, smoke_lines):
    """PyTorch's child for real on this machine (a CPU-only PyTorch, no driver): told GPU 0, it never starts
    CUDA, so the kernel runs after its facts and says libcuda cannot be loaded, as a child of its own says;
    told "cpu", it runs no kernel. Both print the facts and the workload as without --smoke."""
    pytest.importorskip("torch")
    from gpudoctor.procs.child import run_module

    reopen()
    env = workload.workload_env(interpreter.own())
    child = run_module(workload.WORKER, ["torch", "-", "--facts", "--smoke"], timeout_s=120.0, env=env, feed=lambda: line)
    assert child.returncode == 0 and child.section("framework") is not None
    assert [w.get("device") for w in child.sections("workload")] == [line.strip()]
    runs = child.sections("smoke")
    assert len(runs) == smoke_lines
    if smoke_lines:
        assert runs[0]["ordinal"] == 0 and runs[0]["error"]["name"] in ("library_not_found", "CUDA_ERROR_NO_DEVICE",
                                                                         "CUDA_ERROR_STUB_LIBRARY")
