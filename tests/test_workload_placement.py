"""Where each framework's workload runs: PyTorch on every GPU, the others once per GPU model on a GPU of
their own, pinned to it before CUDA starts; what the report says about it, and that the checks take a
framework given one GPU on purpose for what it is, not for a framework that misses GPUs. The children
are replaced (this machine has no GPU); the recorded 4 x H100 report is judged for real."""

from __future__ import annotations

import copy
import io
import json
import os
import sys
from pathlib import Path

from gpudoctor import pipeline
from gpudoctor.probes.frameworks import children
from gpudoctor.probes.frameworks import worker as facts_worker
from gpudoctor.probes.workload import placement, placement_fact, plan, worker
from gpudoctor.render import facts_text

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
UUIDS = {str(i): f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(4)}
FOUR_H100 = Path(__file__).parent / "fixtures" / "real" / "h100x4-20261127" / "full.json"


def test_on_one_model_each_framework_but_pytorch_gets_a_gpu_of_its_own_from_the_last_down():
    where = placement(["torch", "jax", "cupy"], ["0", "1", "2", "3"], {o: H100 for o in "0123"})
    assert where == {"torch": ["0", "1", "2", "3"], "jax": ["3"], "cupy": ["2"]}


def test_on_two_models_each_framework_runs_once_on_each_model():
    names = {"0": H100, "1": A100, "2": H100, "3": A100}
    where = placement(["torch", "tensorflow", "jax", "cupy"], ["0", "1", "2", "3"], names)
    assert where["torch"] == ["0", "1", "2", "3"]
    for framework in ("tensorflow", "jax", "cupy"):
        assert sorted(names[o] for o in where[framework]) == sorted([H100, A100])


def test_more_frameworks_than_gpus_of_a_model_share_them():
    where = placement(["torch", "tensorflow", "jax", "cupy"], ["0", "1"], {"0": H100, "1": H100})
    assert where == {"torch": ["0", "1"], "tensorflow": ["1"], "jax": ["0"], "cupy": ["1"]}


def test_on_one_gpu_everything_runs_on_it_and_the_fact_says_every_gpu():
    where = placement(["torch", "jax", "cupy"], ["0"], {"0": H100})
    assert placement_fact(where, ["0"]) == {f: {"devices": ["0"], "why": "every GPU"} for f in ("torch", "jax", "cupy")}


def test_the_fact_says_which_ran_once_per_model():
    where = placement(["torch", "jax"], ["0", "1"], {"0": H100, "1": H100})
    assert placement_fact(where, ["0", "1"]) == {"torch": {"devices": ["0", "1"], "why": "every GPU"},
                                                 "jax": {"devices": ["1"], "why": "once per GPU model"}}


def test_tensorflow_children_are_pinned_to_their_one_gpu():
    jobs = plan(["torch", "tensorflow"], ["0", "1"], UUIDS, {"torch": ["0", "1"], "tensorflow": ["1"]})
    assert [(j.framework, j.devices, j.uuid) for j in jobs] == [("torch", ["0", "1"], None),
                                                               ("tensorflow", ["1"], UUIDS["1"])]


def _facts_child(monkeypatch, capsys, line: str, started: bool = False) -> tuple[list[dict], list[str]]:
    """worker.main as the framework probe's JAX child, the framework replaced: what it printed, and the
    CUDA_VISIBLE_DEVICES its framework saw when asked for its facts and when it ran."""
    seen: list[str] = []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "untouched")
    monkeypatch.setenv("GPUDOCTOR_PINNED_GPU", "")
    monkeypatch.setattr(worker, "cuda_started", lambda: started)
    monkeypatch.setattr(facts_worker.importlib, "import_module", lambda name: None)
    monkeypatch.setattr(children, "probe", lambda key: lambda: seen.append(os.environ["CUDA_VISIBLE_DEVICES"]) or
                        {"version": "0.0", "devices": [{"index": 0}]})
    monkeypatch.setattr(facts_worker, "_loaded", lambda: [])
    monkeypatch.setattr(children, "run", lambda key: lambda device, deep, checks_on=None: seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
                        or {"framework": "jax", "device": device})
    monkeypatch.setattr(sys, "stdin", io.StringIO(line))
    worker.main(["jax", "-", "--facts"])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    return lines, seen


def test_a_child_given_one_gpu_pins_itself_before_the_framework_starts_cuda(monkeypatch, capsys):
    lines, seen = _facts_child(monkeypatch, capsys, f"3 {UUIDS['3']}\n")
    assert seen == [UUIDS["3"], UUIDS["3"]]  # for its facts and for its work
    framework = next(x["data"] for x in lines if x["section"] == "framework")
    assert framework["pinned"] == {"uuid": UUIDS["3"]}
    assert [x["data"]["device"] for x in lines if x["section"] == "workload"] == ["3"]  # the report keeps the ordinal


def test_a_child_where_cuda_already_started_stays_unpinned_on_the_ordinal(monkeypatch, capsys):
    lines, seen = _facts_child(monkeypatch, capsys, f"3 {UUIDS['3']}\n", started=True)
    assert seen == ["untouched", "untouched"]
    framework = next(x["data"] for x in lines if x["section"] == "framework")
    assert "pinned" not in framework
    assert [x["data"]["device"] for x in lines if x["section"] == "workload"] == ["3"]


def _four_h100() -> dict:
    return json.loads(FOUR_H100.read_text(encoding="utf-8"))


def _placed(report: dict) -> dict:
    """The recorded 4 x H100 report as this placement makes it: JAX on GPU 3, CuPy on GPU 2, each given
    that GPU alone."""
    facts = copy.deepcopy(report["facts"])
    where = {"torch": ["0", "1", "2", "3"], "tensorflow": [], "jax": ["3"], "cupy": ["2"]}
    facts["workload"]["runs"] = [r for r in facts["workload"]["runs"] if str(r.get("device")) in where[r["framework"]]]
    facts["workload"]["placement"] = placement_fact({f: d for f, d in where.items() if d}, ["0", "1", "2", "3"])
    for name, ordinal in (("jax", "3"), ("cupy", "2")):
        info = facts["frameworks"][name]["info"]
        info["devices"] = info["devices"][:1]
        info["pinned"] = {"uuid": next(d["uuid"] for d in facts["smoke"]["count"]["devices"] if str(d["ordinal"]) == ordinal)}
    return facts


def test_a_framework_given_one_gpu_is_not_a_framework_that_misses_gpus():
    report = _four_h100()
    before = pipeline.judge(report["facts"], created=report.get("created"))
    after = pipeline.judge(_placed(report), created=report.get("created"))
    assert [f["code"] for f in after["findings"]] == [f["code"] for f in before["findings"]]
    blind = copy.deepcopy(_placed(report))
    del blind["frameworks"]["jax"]["info"]["pinned"]  # one GPU seen without being given one: still a finding
    assert "FWK003" in [f["code"] for f in pipeline.judge(blind, created=report.get("created"))["findings"]]


def test_the_report_says_what_ran_where_in_one_line():
    facts = _placed(_four_h100())
    line = facts_text.acceleration_line(facts)
    assert "JAX on cuda:3, CuPy on cuda:2 (once per GPU model), PyTorch on every GPU" in line
    assert "\n" not in line
    assert "jax 0.11.2 (CUDA 13.0, sees 1 GPU(s), given one GPU)" in facts_text.frameworks_line(facts)
    assert "torch 2.11.0+cu130 (CUDA 13.0, sees 4 GPU(s));" in facts_text.frameworks_line(facts)


def test_a_report_where_everything_ran_everywhere_reads_as_before():
    facts = _four_h100()["facts"]
    line = facts_text.acceleration_line(facts)
    facts["workload"]["placement"] = placement_fact({"torch": ["0", "1", "2", "3"], "jax": ["0", "1", "2", "3"]},
                                                    ["0", "1", "2", "3"])
    assert facts_text.acceleration_line(facts) == line
