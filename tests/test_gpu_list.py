"""The list of GPUs CUDA enumerates, told from NVML's facts and CUDA_VISIBLE_DEVICES (probes/smoke/listing.py)
instead of a child that starts CUDA on every GPU; and the smoke probe, which goes back to CUDA's own count
wherever the list is unsure or a smoke child's CUDA says otherwise, so that its facts and findings are
those CUDA's count gives."""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from gpudoctor.procs.scope import RunScope
from gpudoctor import pipeline
from gpudoctor.probes import nvml, smoke
from gpudoctor.procs import child as child_module
from gpudoctor.procs.child import ChildResult, reopen, run_json_lines
from gpudoctor.probes.smoke.listing import cuda_list

from conftest import REAL

FIXTURES = Path(__file__).parent / "fixtures"


def _recorded_counts() -> list[tuple[str, dict[str, Any]]]:
    """Every recorded report whose smoke kernel's count CUDA itself made."""
    out = []
    for path in sorted(FIXTURES.rglob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        facts = doc.get("facts") if isinstance(doc, dict) else None
        if isinstance(facts, dict) and "devices" in ((facts.get("smoke") or {}).get("count") or {}):
            out.append((str(path.relative_to(FIXTURES)), facts))
    return out


def _env(facts: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in ((facts.get("host") or {}).get("env") or {}).items() if isinstance(v, str)}


def test_the_list_is_cudas_count_on_every_recorded_machine():
    """1, 2 and 4 GPUs, masks unset, "0", "1" and "0,1": the list names the GPUs CUDA counted there, with
    their ordinals, names, UUIDs and the driver's CUDA version; a report where it is not sure says why."""
    recorded = _recorded_counts()
    agreed, unsure = [], []
    for name, facts in recorded:
        listed, why = cuda_list(facts, _env(facts))
        if listed is None:
            unsure.append((why, _env(facts).get("CUDA_VISIBLE_DEVICES", "")))
            continue
        count = facts["smoke"]["count"]
        assert (listed["devices"], listed["driver_cuda"]) == (count["devices"], count["driver_cuda"]), name
        agreed.append(len(count["devices"]))
    assert {1, 2, 4} <= set(agreed) and len(agreed) >= len(recorded) - 2
    # the reports whose mask names a redacted UUID: not a UUID the list can be sure of
    assert unsure and all(why == "CUDA_VISIBLE_DEVICES has an entry that is not plain digits or a GPU- UUID"
                          and "GPU-redacted" in mask for why, mask in unsure)


def _h200x4() -> dict[str, Any]:
    return json.loads((REAL / "h200x4-20261121" / "report.json").read_text())["facts"]


def _changed(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    facts = copy.deepcopy(_h200x4())
    change(facts)
    return facts


def test_a_mask_gives_cudas_ordinals_to_the_gpus_it_names():
    facts = _h200x4()
    uuids = [g["uuid"] for g in facts["gpus"]]
    listed, _ = cuda_list(facts, {"CUDA_VISIBLE_DEVICES": "2,0"})
    assert [(d["ordinal"], d["uuid"]) for d in listed["devices"]] == [(0, uuids[2]), (1, uuids[0])]
    listed, _ = cuda_list(facts, {"CUDA_VISIBLE_DEVICES": uuids[3][:12], "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert [(d["ordinal"], d["uuid"]) for d in listed["devices"]] == [(0, uuids[3])]
    assert listed["source"] == "nvml+visibility"


def _mig_on(f: dict[str, Any]) -> None:
    f["gpus"][1]["mig"] = {"current": "enabled", "pending": "enabled", "devices": []}


def _mig_unknown(f: dict[str, Any]) -> None:
    f["gpus"][0]["mig"] = {"unavailable": "no_permission"}


def _mixed(f: dict[str, Any]) -> None:
    f["gpus"][3]["name"] = "NVIDIA H100 80GB HBM3"


def _buses_swapped(f: dict[str, Any]) -> None:
    f["gpus"][0]["pci"]["bus_id"], f["gpus"][1]["pci"]["bus_id"] = f["gpus"][1]["pci"]["bus_id"], f["gpus"][0]["pci"]["bus_id"]


def _no_uuid(f: dict[str, Any]) -> None:
    f["gpus"][2]["uuid"] = {"unavailable": "unknown"}


def _nvml_down(f: dict[str, Any]) -> None:
    f["nvml"]["init"] = {"ok": False}


def _nvml_stopped(f: dict[str, Any]) -> None:
    f["nvml"]["incomplete"] = {"while": "gpu 2", "reason": "timeout"}


def _gpu_unread(f: dict[str, Any]) -> None:
    f["gpus"][3] = {"index": 3, "handle": {"unavailable": "timeout"}}


def _no_driver_cuda(f: dict[str, Any]) -> None:
    f["nvml"]["cuda_driver_version"] = {"unavailable": "function_not_found"}


@pytest.mark.parametrize("change, env, why", [
    (_mig_on, {}, "MIG is on"), (_mig_unknown, {}, "MIG is on, or its mode unknown"),
    (_mixed, {}, "more than one model"), (_mixed, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "more than one model"),
    (_buses_swapped, {}, "PCI bus order"), (_no_uuid, {}, "name and UUID"), (_gpu_unread, {}, "name and UUID"),
    (_nvml_down, {}, "NVML did not start"), (_nvml_stopped, {}, "NVML did not start or finish"),
    (_no_driver_cuda, {}, "CUDA driver version"),
    (None, {"CUDA_DEVICE_ORDER": "SLOWEST_FIRST"}, "CUDA_DEVICE_ORDER"), (None, {"CUDA_DEVICE_ORDER": ""}, "CUDA_DEVICE_ORDER"),
    (None, {"CUDA_VISIBLE_DEVICES": "0, 1"}, "not plain"), (None, {"CUDA_VISIBLE_DEVICES": "-1"}, "not plain"),
    (None, {"CUDA_VISIBLE_DEVICES": ""}, "not plain"), (None, {"CUDA_VISIBLE_DEVICES": "MIG-0a1b2c3d"}, "not plain"),
    (None, {"CUDA_VISIBLE_DEVICES": "1abc"}, "not plain"), (None, {"CUDA_VISIBLE_DEVICES": "0,7"}, "stops at or refuses"),
    (None, {"CUDA_VISIBLE_DEVICES": "1,1"}, "stops at or refuses"), (None, {"CUDA_VISIBLE_DEVICES": "GPU-ffff"}, "stops at"),
])
def test_where_the_list_is_unsure_cuda_counts(change, env, why):
    facts = _changed(change) if change else _h200x4()
    listed, reason = cuda_list(facts, env)
    assert listed is None and why in reason


# --- the smoke probe: a fake libcuda behind the children, the real probe in front ---------------------------

class FakeCuda:
    """What the smoke worker would print on the machine ``facts`` records, where CUDA cannot start on ``broken`` (with
    that GPU visible, cuInit fails) and, with every GPU visible, either fails too (``count_fails``) or leaves
    it out. ``hang``: the run children of these GPUs never answer."""

    def __init__(self, facts: dict[str, Any], broken: tuple[str, ...] = (), count_fails: bool = False):
        self.uuids, self.name = [g["uuid"] for g in facts["gpus"]], facts["gpus"][0]["name"]
        self.driver_cuda = facts["nvml"]["cuda_driver_version"]
        self.broken, self.count_fails = broken, count_fails
        self.started: list[tuple[str, ...]] = []

    def run_module(self, module: str, args: Any = (), timeout_s: float = 0.0, env: Optional[dict[str, str]] = None,
                   **kwargs: Any) -> ChildResult:
        mask = (env or {}).get("CUDA_VISIBLE_DEVICES")
        self.started.append((*args, mask or "all"))
        visible = [u for u in self.uuids if mask is None or u == mask]
        if any(u in self.broken for u in visible) and (args[0] == "run" or self.count_fails):
            return _said("error", {"step": "cuInit", "code": 999, "name": "CUDA_ERROR_UNKNOWN"})
        if args[0] == "count":
            devices = [{"ordinal": i, "name": self.name, "uuid": u}
                       for i, u in enumerate(u for u in visible if u not in self.broken)]
            return _said("count", {"driver_cuda": self.driver_cuda, "devices": devices})
        return _said("run", {"ordinal": int(args[1]), "ok": True, "elements": 262144, "wrong_elements": 0,
                             "first_wrong": [], "total_s": 0.1})


def _said(section: str, data: Any) -> ChildResult:
    return ChildResult(lines=[{"section": section, "data": data}], returncode=0)


def _smoke_facts(monkeypatch, cuda: FakeCuda, nvml_facts: Optional[dict[str, Any]]) -> dict[str, Any]:
    reopen()
    monkeypatch.setattr(smoke, "run_module", cuda.run_module)
    monkeypatch.setattr(nvml, "published_facts", lambda scope, wait_s: nvml_facts)
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(name, raising=False)
    return smoke.probe_smoke(RunScope(), 5.0)["smoke"]  # a run of its own: nothing shared from another test's


def _as_recorded(facts: dict[str, Any], smoke_facts: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(facts)
    out["smoke"] = smoke_facts
    return out


def _without_source(smoke_facts: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(smoke_facts)
    (out.get("count") or {}).pop("source", None)
    return out


def test_a_healthy_machine_starts_no_cuda_count_and_pins_every_child(monkeypatch):
    facts = _h200x4()
    uuids = [g["uuid"] for g in facts["gpus"]]
    cuda = FakeCuda(facts)
    listed = _smoke_facts(monkeypatch, cuda, facts)
    assert sorted(cuda.started) == sorted(("run", str(i), u) for i, u in enumerate(uuids))  # no "count", none sees all
    assert listed["count"]["source"] == "nvml+visibility"
    assert [(r["ordinal"], r["uuid"], r["ok"]) for r in listed["runs"]] == [(i, u, True) for i, u in enumerate(uuids)]
    counted = _smoke_facts(monkeypatch, FakeCuda(facts), None)  # no NVML facts: CUDA counts
    assert counted["count"]["source"] == "cuda"
    assert _without_source(listed) == _without_source(counted)
    assert pipeline.judge(_as_recorded(facts, listed))["findings"] == pipeline.judge(_as_recorded(facts, counted))["findings"] == []


@pytest.mark.parametrize("count_fails", [False, True], ids=["cuda-leaves-it-out", "cuda-fails-to-start"])
def test_a_gpu_cuda_cannot_open_fails_its_child_and_cudas_count_decides(monkeypatch, count_fails):
    """GPU 2's smoke child fails with the CUDA error; the probe then asks CUDA with every GPU visible, and its
    facts and findings are those of CUDA's count: RUN003 where CUDA leaves the GPU out, RUN001 before any GPU
    where CUDA does not start at all."""
    facts = _h200x4()
    uuids = [g["uuid"] for g in facts["gpus"]]
    listed = _smoke_facts(monkeypatch, FakeCuda(facts, broken=(uuids[2],), count_fails=count_fails), facts)
    counted = _smoke_facts(monkeypatch, FakeCuda(facts, broken=(uuids[2],), count_fails=count_fails), None)
    assert listed == counted
    found = pipeline.judge(_as_recorded(facts, listed))["findings"]
    assert found == pipeline.judge(_as_recorded(facts, counted))["findings"]
    if count_fails:
        assert listed["runs"] == [] and listed["count"]["name"] == "CUDA_ERROR_UNKNOWN"
        assert [(f["code"], f["title"]) for f in found if f["check"] == "acceleration.smoke"] == [
            ("RUN001", "the smoke kernel failed before any GPU could be tested: cuInit returned CUDA_ERROR_UNKNOWN (999)")]
    else:
        assert [r["uuid"] for r in listed["runs"]] == [uuids[0], uuids[1], uuids[3]]
        assert "RUN003" in {f["code"] for f in found}


def test_a_gpu_whose_child_fails_after_cuda_started_keeps_its_error(monkeypatch):
    """A CUDA error past the start (a busy GPU's context refused) is that GPU's: CUDA's count, asked again,
    lists every GPU, and the run keeps its error under its own ordinal."""
    facts = _h200x4()
    uuids = [g["uuid"] for g in facts["gpus"]]
    cuda = FakeCuda(facts)
    busy = cuda.run_module

    def refusing(module: str, args: Any = (), timeout_s: float = 0.0, env: Optional[dict[str, str]] = None, **kw: Any):
        if args[0] == "run" and (env or {}).get("CUDA_VISIBLE_DEVICES") == uuids[1]:
            return _said("error", {"step": "cuDevicePrimaryCtxRetain", "code": 46, "name": "CUDA_ERROR_DEVICE_UNAVAILABLE"})
        return busy(module, args, timeout_s, env, **kw)

    cuda.run_module = refusing  # type: ignore[method-assign]
    listed = _smoke_facts(monkeypatch, cuda, facts)
    assert [r["ordinal"] for r in listed["runs"]] == [0, 1, 2, 3]
    assert listed["runs"][1]["error"]["code"] == 46 and listed["runs"][1]["uuid"] == uuids[1]
    found = [f for f in pipeline.judge(_as_recorded(facts, listed))["findings"] if f["check"] == "acceleration.smoke"]
    assert [(f["code"], f["subject"].get("gpu_index"), f["subject"].get("gpu_uuid")) for f in found] == [("RUN001", 1, uuids[1])]


def test_a_hanging_smoke_child_is_still_stopped_at_its_limit(monkeypatch):
    """Real children that never answer: each is killed at the smoke limit, CUDA's count is asked, and the probe
    returns with every GPU's timeout well within its own limit."""
    facts = _h200x4()
    cuda = FakeCuda(facts)
    counted = cuda.run_module

    def hanging(module: str, args: Any = (), timeout_s: float = 0.0, env: Optional[dict[str, str]] = None, **kw: Any):
        if args[0] == "count":
            return counted(module, args, timeout_s, env, **kw)
        return run_json_lines([sys.executable, "-c", "import time; time.sleep(600)"], timeout_s=timeout_s, env=env)

    reopen()
    monkeypatch.setattr(smoke, "run_module", hanging)
    monkeypatch.setattr(nvml, "published_facts", lambda scope, wait_s: facts)
    begun = time.monotonic()
    result = smoke.probe_smoke(RunScope(), 1.0)["smoke"]
    assert time.monotonic() - begun < 8.0
    assert [r["error"]["name"] for r in result["runs"]] == ["timeout"] * 4
    assert not child_module._live  # every child gone


def test_nvml_facts_of_a_previous_run_are_not_this_runs(monkeypatch):
    """The list takes the NVML facts of the run under way only: facts offered in one run's scope are not
    read by the next run's."""
    future_facts = {"nvml": {"init": {"ok": True}}, "gpus": []}
    monkeypatch.setattr(child_module, "run_module", lambda *a, **k: ChildResult(returncode=0))
    monkeypatch.setattr(nvml, "assemble", lambda *a, **k: future_facts)
    reopen()
    scope = RunScope()
    assert nvml.probe_nvml(1.0, scope=scope) is future_facts
    assert nvml.published_facts(scope, 0.1) is future_facts
    assert nvml.published_facts(RunScope(), 0.1) is None


def test_a_count_from_the_list_is_judged_as_cudas():
    """Every recorded report, its count marked as told from NVML: the same findings, and the report's shape
    holds (snapshot.SHAPE declares ``source``)."""
    from gpudoctor.snapshot import shape_error

    for name, facts in _recorded_counts():
        marked = copy.deepcopy(facts)
        marked["smoke"]["count"]["source"] = "nvml+visibility"
        assert pipeline.judge(marked)["findings"] == pipeline.judge(facts)["findings"], name
        assert shape_error({"facts": marked}) is None, name
    marked["smoke"]["count"]["source"] = 7
    assert "facts.smoke.count.source" in str(shape_error({"facts": marked}))
