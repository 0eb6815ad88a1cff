"""PyTorch's correctness checks and training step once per GPU model, its throughput on every GPU
(probes/workload/worker.py checks_elsewhere): which GPU makes them, what the other runs say, and how the
report shows it. The renderer cases start from a full check recorded on 4 x H200 (nvidia-h100-x4 served by
H200, 2026-11-27 06:56 UTC, tests/fixtures/real/h200x4-20261127/hosted-smoke-0656/report.json), where every
GPU made them all, and take GPUs 1-3's checks away one fact at a time, as a default check now records them."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import pipeline
from gpudoctor.compat.data import BUNDLED
from gpudoctor.probes.frameworks import children
from gpudoctor.probes.workload import worker
from gpudoctor.render import facts_text, proof

REPORT = Path(__file__).parent / "fixtures" / "real" / "h200x4-20261127" / "hosted-smoke-0656" / "report.json"
H200 = "NVIDIA H200"


def seen(*names: str) -> list[dict[str, Any]]:
    return [{"index": i, "name": n, "compute_capability": "9.0"} for i, n in enumerate(names)]


def test_the_first_gpu_of_each_model_makes_the_checks_for_the_others():
    assert worker.checks_elsewhere(["0", "1", "2", "3"], seen(H200, H200, H200, H200)) == {"1": "0", "2": "0", "3": "0"}
    mixed = seen("NVIDIA A100-SXM4-80GB", H200, "NVIDIA A100-SXM4-80GB", H200)
    assert worker.checks_elsewhere(["0", "1", "2", "3"], mixed) == {"2": "0", "3": "1"}
    assert worker.checks_elsewhere(["0"], seen(H200)) == {}


@pytest.mark.parametrize("facts", [[], seen(H200, None), seen(H200)], ids=["no-facts", "unnamed", "one-named"])
def test_every_gpu_makes_them_all_where_a_model_is_unknown(facts):
    assert worker.checks_elsewhere(["0", "1"], facts) == {}


@pytest.mark.parametrize("deep", [False, True])
def test_the_child_passes_where_the_checks_ran_to_each_gpus_run_and_deep_makes_them_everywhere(monkeypatch, capsys, deep):
    asked: dict[str, Any] = {}

    def run(device, deep, checks_on=None):
        asked[device] = checks_on
        return {"framework": "torch", "device": device}

    monkeypatch.setattr(children, "run", lambda key: run)
    monkeypatch.setattr(worker, "report", lambda name, placed: {"devices": seen(H200, H200, H200)})
    monkeypatch.setattr(worker, "cuda_early", lambda module, done: None)
    monkeypatch.setattr(worker, "contexts_early", lambda imported, done, then: None)
    assert worker.main(["torch", "0,1,2", "--facts", *(["--deep"] if deep else [])]) == 0
    capsys.readouterr()
    assert asked == ({"0": None, "1": None, "2": None} if deep else {"0": None, "1": "0", "2": "0"})


@pytest.mark.parametrize("with_facts", [True, False])
def test_the_contexts_learn_when_the_import_is_done_and_only_then(monkeypatch, capsys, with_facts):
    """The other GPUs' contexts are made while the import runs and wait for the facts after it: the child
    must tell them the moment the import ends, before its first question to the framework."""
    given: dict[str, threading.Event] = {}
    handed = threading.Event()
    seen_then: list[tuple[bool, bool]] = []

    def contexts(imported, done, then):
        given.update(imported=imported, done=done)
        handed.set()

    def state() -> tuple[bool, bool]:
        return given["imported"].is_set(), given["done"].is_set()

    def imported_module(name):
        assert handed.wait(5)
        seen_then.append(state())  # the import itself

    def report(name, placed):
        imported_module(name)
        placed()
        seen_then.append(state())  # the first question
        return {"devices": seen(H200)}

    monkeypatch.setattr(worker, "cuda_early", lambda module, done: None)
    monkeypatch.setattr(worker, "contexts_early", contexts)
    monkeypatch.setattr(worker, "report", report)
    monkeypatch.setattr(worker.importlib, "import_module", imported_module)
    monkeypatch.setattr(children, "run", lambda key: lambda device, deep, checks_on=None: seen_then.append(state()) or {})
    assert worker.main(["torch", "0", *(["--facts"] if with_facts else [])]) == 0
    capsys.readouterr()
    assert seen_then[0] == (False, False)  # while the framework imports
    assert seen_then[-1] == (True, True)  # its GPU's run: the facts are out
    if with_facts:
        assert seen_then[1] == (True, False)  # imported, the facts still being asked


def test_only_pytorch_takes_its_checks_elsewhere(monkeypatch, capsys):
    asked: dict[str, Any] = {}
    monkeypatch.setattr(children, "run", lambda key: lambda device, deep, checks_on=None: asked.update({device: checks_on}) or {})
    monkeypatch.setattr(worker, "report", lambda name, placed: {"devices": seen(H200, H200)})
    assert worker.main(["cupy", "0,1", "--facts"]) == 0  # placed once per model by the parent: never asked here
    capsys.readouterr()
    assert asked == {"0": None, "1": None}


def once_per_model(report: dict[str, Any]) -> dict[str, Any]:
    """The recorded 4-GPU facts as a default check now makes them: GPUs 1-3's PyTorch runs without their checks."""
    facts = copy.deepcopy(report["facts"])
    for run in facts["workload"]["runs"]:
        if run["framework"] == "torch" and run["device"] != "0":
            for step in ("elementwise", "conv", "training"):  # the matmul check stays: tensor cores are each GPU's
                del run[step]
            run["checks_on"] = "0"
    return facts


def test_the_proof_table_says_where_the_checks_of_a_gpu_were_made():
    facts = once_per_model(json.loads(REPORT.read_text()))
    rows = [r for r in proof.rows(facts, BUNDLED) if r["framework"] == "torch"]
    assert rows[0]["results"] == "6 of 6 correct" and "CPU speed" in rows[0]["training"]
    assert [(r["results"], r["training"]) for r in rows[1:]] == [
        ("2 of 2 correct, the rest on cuda:0, same model", "on cuda:0, same model")] * 3
    assert all(r["matmul"].startswith("bf16 ") for r in rows)  # the throughput is still every GPU's own


def test_the_acceleration_line_counts_only_the_checks_made_and_says_why_the_rest_are_elsewhere():
    report = json.loads(REPORT.read_text())
    before = facts_text.acceleration_line(report["facts"])
    after = facts_text.acceleration_line(once_per_model(report))
    assert "results vs CPU correct in 28 of 28" in before and "gave none" not in before
    assert "results vs CPU correct in 16 of 16" in after and "gave none" not in after  # 6 + 3 x 2 + JAX 2 + CuPy 2
    assert "training learned in 2 of 2" in after  # PyTorch on cuda:0 and JAX; CuPy has no training step
    assert "PyTorch checked and trained once per GPU model, its matmuls and throughput on every GPU" in after


def test_a_gpu_whose_checks_were_made_elsewhere_raises_no_finding():
    report = json.loads(REPORT.read_text())
    before = pipeline.judge(report["facts"], created=report.get("created"))
    after = pipeline.judge(once_per_model(report), created=report.get("created"))
    assert [f["code"] for f in after["findings"]] == [f["code"] for f in before["findings"]] == []
    assert after["summary"]["verdict"] == "ok"


def test_a_run_is_not_said_to_have_its_checks_where_that_gpus_run_made_none():
    """GPU 0 said it made its checks, then hung or crashed before the child printed it: GPUs 1-3 name it, but the
    report holds no checks there, so the table points at nothing and the line counts the training as not made."""
    facts = once_per_model(json.loads(REPORT.read_text()))
    first = next(r for r in facts["workload"]["runs"] if r["framework"] == "torch" and r["device"] == "0")
    for step in ("elementwise", "matmul", "conv", "training", "throughput"):
        del first[step]
    first["error"] = "the workload (one process for GPUs 0, 1, 2, 3) did not answer within 90 s"
    rows = [r for r in proof.rows(facts, BUNDLED) if r["framework"] == "torch"]
    assert rows[0]["results"] == "did not run"
    assert [(r["results"], r["training"]) for r in rows[1:]] == [("2 of 2 correct", proof.NONE)] * 3
    line = facts_text.acceleration_line(facts)
    assert "1 of 6 framework run(s) gave none" in line and "once per GPU model, its matmuls" not in line


def test_a_run_that_failed_is_not_said_to_have_its_checks_elsewhere():
    facts = once_per_model(json.loads(REPORT.read_text()))
    run = next(r for r in facts["workload"]["runs"] if r["device"] == "2" and r["framework"] == "torch")
    run["error"] = "RuntimeError: CUDA error: an illegal memory access was encountered"
    row = next(r for r in proof.rows(facts, BUNDLED) if r["gpu"] == "cuda:2" and r["framework"] == "torch")
    assert row["results"] == "did not run"
    assert "1 of 6 framework run(s) gave none" in facts_text.acceleration_line(facts)



def test_a_gpu_learns_whether_the_first_of_its_model_makes_the_checks(monkeypatch):
    from concurrent.futures import Future

    from gpudoctor.probes.workload import torch_child

    monkeypatch.setattr(torch_child, "_MAKES_CHECKS", {})
    torch_child._makes_checks("0").set_result(True)  # GPU 0 proved free and goes on to its checks
    assert torch_child.made_on("0") is True
    torch_child._makes_checks("4").set_result(False)  # GPU 4 was busy, or its run failed first
    assert torch_child.made_on("4") is False
    assert torch_child.made_on("6", wait_s=0.05) is False  # never said (a hung first call): make them here
    later: Future = torch_child._makes_checks("2")
    threading.Timer(0.05, lambda: later.set_result(True)).start()
    assert torch_child.made_on("2", wait_s=5) is True  # said while the asking GPU measured its throughput


def test_a_first_gpu_that_ends_before_its_checks_says_so(monkeypatch):
    """Whatever ends GPU 0's run before its checks (a busy GPU, an error at its first CUDA call), the other
    GPUs of its model learn that it made none, and make their own."""
    from gpudoctor.probes.workload import torch_child

    monkeypatch.setattr(torch_child, "_MAKES_CHECKS", {})

    def fails(torch, device, deep, checks_on, makes):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch_child, "_run_torch", fails)
    with pytest.raises(RuntimeError):
        torch_child.run_torch("0", False)
    assert torch_child.made_on("0", wait_s=1) is False

    def busy(torch, device, deep, checks_on, makes):
        return {"framework": "torch", "device": device, "skipped": "the GPU is busy: 70.0 of 79.6 GiB in use"}

    monkeypatch.setattr(torch_child, "_MAKES_CHECKS", {})
    monkeypatch.setattr(torch_child, "_run_torch", busy)
    torch_child.run_torch("0", False)
    assert torch_child.made_on("0", wait_s=1) is False


class FakeCuda:
    """torch.cuda as PyTorch's run asks it, for GPUs of which some are busy (this machine has none)."""

    def __init__(self, busy: set[str]):
        self.busy = busy

    def set_device(self, dev):
        pass

    def mem_get_info(self, dev):
        total = 80 << 30
        return (1 << 30 if dev in self.busy else total - (1 << 30)), total

    def get_device_name(self, dev):
        return H200


def run_two_gpus(monkeypatch, busy: set[str]) -> dict[str, dict[str, Any]]:
    """PyTorch's run on GPU 0 and GPU 1 of one model, in two threads as the child runs them, with the
    framework's steps replaced: what each GPU's run holds."""
    from types import SimpleNamespace

    from gpudoctor.probes.workload import torch_child

    fake = SimpleNamespace(__version__="2.11.0+cu130", device=lambda name: name.split(":")[-1], cuda=FakeCuda(busy))
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    monkeypatch.setattr(torch_child, "_MAKES_CHECKS", {})
    step = lambda *args: {"ok": True}  # noqa: E731
    for name in ("_torch_elementwise", "_torch_matmul", "_torch_conv", "_torch_training", "_torch_throughput"):
        monkeypatch.setattr(torch_child, name, step)
    monkeypatch.setattr(torch_child, "_cpu_training", lambda torch: (0.1, [0.01] * 10))
    out: dict[str, dict[str, Any]] = {}
    threads = [threading.Thread(target=lambda d=d, on=on: out.update({d: torch_child.run_torch(d, False, on)}))
               for d, on in (("0", None), ("1", "0"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return out


def test_with_the_first_gpu_free_the_second_measures_only_and_says_where_the_checks_ran(monkeypatch):
    runs = run_two_gpus(monkeypatch, busy=set())
    assert all(step in runs["0"] for step in ("elementwise", "matmul", "conv", "training", "throughput"))
    assert runs["1"]["checks_on"] == "0" and "throughput" in runs["1"] and "matmul" in runs["1"]
    assert not any(step in runs["1"] for step in ("elementwise", "conv", "training"))


def test_with_the_first_gpu_busy_the_second_makes_its_own_checks(monkeypatch):
    runs = run_two_gpus(monkeypatch, busy={"0"})
    assert runs["0"]["skipped"].startswith("the GPU is busy") and "training" not in runs["0"]
    assert "checks_on" not in runs["1"]
    assert all(runs["1"][step]["ok"] for step in ("elementwise", "matmul", "conv", "training", "throughput"))


RECORDED = Path(__file__).parent / "fixtures" / "real" / "h200x2-20261127" / "verify-1057" / "full.json"


def test_a_check_recorded_with_the_checks_once_per_model_reads_as_it_ran():
    """A default check recorded on 2 x H200 (nvidia-h100-x2 served by H200, 2026-11-27 11:01 UTC): GPU 0 made
    PyTorch's checks and training step, GPU 1 its own matmul check and throughput."""
    report = json.loads(RECORDED.read_text())
    runs = {r["device"]: r for r in report["facts"]["workload"]["runs"] if r["framework"] == "torch"}
    assert runs["1"]["checks_on"] == "0" and "checks_on" not in runs["0"]
    judged = pipeline.judge(report["facts"], created=report.get("created"))
    assert judged["findings"] == [] and judged["summary"]["verdict"] == "ok"
    rows = [r for r in proof.rows(report["facts"], BUNDLED) if r["framework"] == "torch"]
    assert [(r["results"], r["training"].startswith("loss ")) for r in rows] == [
        ("6 of 6 correct", True), ("2 of 2 correct, the rest on cuda:0, same model", False)]
    line = facts_text.acceleration_line(report["facts"])
    assert "results vs CPU correct in 12 of 12, training learned in 2 of 2" in line
