"""The visibility area (checks/visibility.py): visibility.cuda_visible_devices (VIS001-VIS004, what
CUDA_VISIBLE_DEVICES leaves CUDA programs) and visibility.required_gpus (VIS005, --require-gpus).

CUDA_VISIBLE_DEVICES applied to hand-built facts: what CUDA programs see (views/visibility.py), and the
findings; then the fault recorded for real on 2 x H200 (CUDA_VISIBLE_DEVICES=1)."""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from gpudoctor import pipeline
from gpudoctor.checks import visibility
from gpudoctor.checks.registry import run_check
from gpudoctor.findings import ERROR, FAIL, INFO, PASS, SKIP, WARN, WARNING
from helpers_facts import with_fact
from gpudoctor.views.visibility import Visibility, resolve

from conftest import REAL
from helpers_judge import findings as judged_findings, load_fault

CHECK = visibility.CHECKS[0]
A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"

UUIDS = [
    "GPU-1a2b3c4d-0000-4000-8000-000000000000",
    "GPU-3f0e9d8c-1111-4111-8111-111111111111",
    "GPU-3f9e8d7c-2222-4222-8222-222222222222",
    "GPU-7c6b5a49-3333-4333-8333-333333333333",
]
MIG_UUIDS = [
    "MIG-4b1f5e2a-aaaa-5aaa-aaaa-aaaaaaaaaaaa",
    "MIG-9d0c3b7e-bbbb-5bbb-bbbb-bbbbbbbbbbbb",
]


def _gpu(index: int, name: str = A100, mig_devices: Optional[list[str]] = None) -> dict[str, Any]:
    mig: dict[str, Any] = {"current": "disabled", "pending": "disabled", "devices": []}
    if mig_devices:
        mig = {"current": "enabled", "pending": "enabled", "devices": [
            {"index": i, "uuid": u, "name": f"{name} MIG 3g.40gb", "memory_total_bytes": 40 * 1024**3}
            for i, u in enumerate(mig_devices)]}
    return {"index": index, "name": name, "uuid": UUIDS[index], "mig": mig}


def make_facts(env: dict[str, str], names: Optional[list[str]] = None, mig_on: Optional[int] = 3) -> dict[str, Any]:
    """Four GPUs (GPU 3 in MIG mode with two MIG devices unless ``mig_on`` is None)."""
    names = names or [A100] * 4
    gpus = [_gpu(i, n, MIG_UUIDS if i == mig_on else None) for i, n in enumerate(names)]
    return {
        "probes": {"host": {"status": "ok"}, "nvml": {"status": "ok"}},
        "host": {"env": env},
        "nvml": {"init": {"ok": True}, "device_count": len(gpus)},
        "gpus": gpus,
    }


def mapping(vis: Visibility) -> list[tuple[int, int, Optional[str]]]:
    return [(d.cuda_index, d.gpu_index, d.mig_uuid) for d in vis.devices]


def judged(env: dict[str, str], **kw: Any):
    r = run_check(CHECK, make_facts(env, **kw))
    return r, [f.code for f in r.findings]


def test_unset_shows_every_gpu_and_the_check_skips():
    vis = resolve(make_facts({}))
    assert vis.mask is None
    assert mapping(vis) == [(0, 0, None), (1, 1, None), (2, 2, None), (3, 3, None)]
    r, found = judged({})
    assert (r.status, found, r.reason) == (SKIP, [], "CUDA_VISIBLE_DEVICES is not set")


def test_check_skips_without_nvml():
    facts = make_facts({"CUDA_VISIBLE_DEVICES": ""})
    facts["nvml"]["init"] = {"ok": False, "reason": "library_not_found"}
    assert run_check(CHECK, facts).status == SKIP


@pytest.mark.parametrize("mask", ["", "-1"])
def test_hides_all(mask):
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": mask}))
    assert vis.devices == []
    assert vis.invalid_entry == mask
    r, found = judged({"CUDA_VISIBLE_DEVICES": mask})
    assert found == ["VIS001"]
    assert r.status == FAIL
    assert r.findings[0].severity == ERROR
    assert r.findings[0].title == f"CUDA_VISIBLE_DEVICES={mask!r} hides every GPU from CUDA programs"
    assert r.findings[0].remediation.commands == ("unset CUDA_VISIBLE_DEVICES",)


def test_reordered():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "1,0"}))
    assert mapping(vis) == [(0, 1, None), (1, 0, None)]
    assert vis.invalid_entry is None
    r, found = judged({"CUDA_VISIBLE_DEVICES": "1,0"})
    assert (r.status, found) == (PASS, ["VIS004"])


def test_vis004_lists_the_mapping():
    r, found = judged({"CUDA_VISIBLE_DEVICES": "2,0"})
    assert found == ["VIS004"]
    vis004 = r.findings[0]
    assert vis004.severity == INFO
    assert vis004.title == f"CUDA programs will see 2 GPU(s): cuda:0 = GPU 2 {A100}; cuda:1 = GPU 0 {A100}"


def test_invalid_entry_after_valid_ones():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "0,7"}))
    assert mapping(vis) == [(0, 0, None)]
    assert vis.invalid_entry == "7"
    assert vis.hidden_entries == []
    r, found = judged({"CUDA_VISIBLE_DEVICES": "0,7"})
    assert found == ["VIS002", "VIS004"]
    assert r.status == WARN
    vis002 = r.findings[0]
    assert vis002.severity == WARNING
    assert vis002.remediation.commands == ("export CUDA_VISIBLE_DEVICES=0",)
    assert r.findings[1].title == f"CUDA programs will see 1 GPU(s): cuda:0 = GPU 0 {A100}"


def test_invalid_entry_hides_the_entries_after_it():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "0,7,1"}))
    assert mapping(vis) == [(0, 0, None)]
    assert (vis.invalid_entry, vis.hidden_entries) == ("7", ["1"])
    r, found = judged({"CUDA_VISIBLE_DEVICES": "0,7,1"})
    assert found == ["VIS002", "VIS004"]
    assert "1" in r.findings[0].title.split("ignored too: ")[1]


def test_invalid_first_entry_hides_all():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "7,0"}))
    assert vis.devices == []
    assert (vis.invalid_entry, vis.hidden_entries) == ("7", ["0"])
    r, found = judged({"CUDA_VISIBLE_DEVICES": "7,0"})
    assert (r.status, found) == (FAIL, ["VIS001"])
    assert r.findings[0].detail.startswith("Entry '7': there is no GPU 7")


def test_uuid_unique_prefix():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "GPU-1a2b"}))
    assert mapping(vis) == [(0, 0, None)]
    assert vis.devices[0].uuid == UUIDS[0]
    _, found = judged({"CUDA_VISIBLE_DEVICES": "GPU-1a2b"})
    assert found == ["VIS004"]


def test_full_uuids_in_any_order():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": f"{UUIDS[2]},{UUIDS[1]}"}))
    assert mapping(vis) == [(0, 2, None), (1, 1, None)]


def test_uuid_ambiguous_prefix():
    # GPU 1 and GPU 2 both start with GPU-3f
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "GPU-3f,0"}))
    assert vis.devices == []
    assert vis.invalid_entry == "GPU-3f"
    assert vis.invalid_reason == "this UUID prefix matches several GPUs"
    _, found = judged({"CUDA_VISIBLE_DEVICES": "GPU-3f,0"})
    assert found == ["VIS001"]


def test_uuid_unknown():
    mask = f"{UUIDS[0]},GPU-ffffffff-0000-0000-0000-000000000000"
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": mask}))
    assert mapping(vis) == [(0, 0, None)]
    assert vis.invalid_entry == "GPU-ffffffff-0000-0000-0000-000000000000"
    assert vis.invalid_reason == "no GPU has this UUID"
    _, found = judged({"CUDA_VISIBLE_DEVICES": mask})
    assert found == ["VIS002", "VIS004"]


def test_mig_uuid():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": MIG_UUIDS[1]}))
    assert mapping(vis) == [(0, 3, MIG_UUIDS[1])]
    r, found = judged({"CUDA_VISIBLE_DEVICES": MIG_UUIDS[1]})
    assert found == ["VIS004"]
    assert r.findings[0].title == f"CUDA programs will see 1 GPU(s): cuda:0 = GPU 3 {A100} ({MIG_UUIDS[1]})"


def test_unknown_mig_uuid():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "MIG-00000000-dead-beef-0000-000000000000"}))
    assert vis.devices == []
    assert vis.invalid_reason == "no MIG device has this UUID"


def test_two_mig_devices_of_one_gpu():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": f"{MIG_UUIDS[0]},{MIG_UUIDS[1]}"}))
    assert mapping(vis) == [(0, 3, MIG_UUIDS[0]), (1, 3, MIG_UUIDS[1])]


def test_whitespace_around_entries():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": " 1 , 0 "}))
    assert mapping(vis) == [(0, 1, None), (1, 0, None)]
    assert vis.invalid_entry is None
    _, found = judged({"CUDA_VISIBLE_DEVICES": " 1 , 0 "})
    assert found == ["VIS004"]


def test_not_a_gpu_at_all():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "cuda:0"}))
    assert vis.devices == []
    assert vis.invalid_entry == "cuda:0"


MIXED = [A100, A100, L4, L4]


def test_mixed_models_numeric_mask_without_pci_order():
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "0,2"}, names=MIXED, mig_on=None))
    assert vis.order_uncertain is True
    r, found = judged({"CUDA_VISIBLE_DEVICES": "0,2"}, names=MIXED, mig_on=None)
    assert found == ["VIS003", "VIS004"]
    assert r.status == WARN
    assert r.findings[0].remediation.commands == ("export CUDA_DEVICE_ORDER=PCI_BUS_ID",)
    assert "order is uncertain" in r.findings[1].detail


def test_mixed_models_numeric_mask_with_pci_order():
    env = {"CUDA_VISIBLE_DEVICES": "0,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    vis = resolve(make_facts(env, names=MIXED, mig_on=None))
    assert vis.order_uncertain is False
    assert mapping(vis) == [(0, 0, None), (1, 2, None)]
    r, found = judged(env, names=MIXED, mig_on=None)
    assert (r.status, found) == (PASS, ["VIS004"])
    assert "uncertain" not in r.findings[0].detail


def test_mixed_models_uuid_mask_needs_no_order():
    env = {"CUDA_VISIBLE_DEVICES": f"{UUIDS[2]},{UUIDS[0]}"}
    r, found = judged(env, names=MIXED, mig_on=None)
    assert (r.status, found) == (PASS, ["VIS004"])
    assert r.findings[0].title == f"CUDA programs will see 2 GPU(s): cuda:0 = GPU 2 {L4}; cuda:1 = GPU 0 {A100}"


def test_same_model_numeric_mask_has_no_vis003():
    _, found = judged({"CUDA_VISIBLE_DEVICES": "3,1"}, mig_on=None)
    assert found == ["VIS004"]


# --- the fault recorded for real on 2 x H200 (tests/fixtures/real/h200x2-20261121/faults) ------------------

def test_recorded_cuda_visible_devices_1():
    facts = load_fault("cuda-visible-devices-1")
    assert facts["host"]["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    found = judged_findings(facts)
    assert [(f["code"], f["severity"]) for f in found] == [("VIS004", "info")]
    for name in ("torch", "jax", "cupy"):
        info = facts["frameworks"][name]["info"]
        assert facts["frameworks"][name]["status"] == "ok"
        assert len(info["devices"]) == 1, name
    assert pipeline.judge(facts)["summary"]["verdict"] == "ok"


# --- visibility.required_gpus (--require-gpus N) on the real 2 x H200 recording with its smoke runs ---------

def _required(facts: dict[str, Any], wanted: int) -> list[dict[str, Any]]:
    facts = {**facts, "options": {**(facts.get("options") or {}), "require_gpus": wanted}}
    return [f for f in judged_findings(facts) if f["check"] == "visibility.required_gpus"]


def _workload_h200x2() -> dict[str, Any]:
    return json.loads((REAL / "h200x2-20261121" / "workload-report.json").read_text())["facts"]


def test_as_many_usable_gpus_as_required_is_no_finding():
    assert _required(_workload_h200x2(), 2) == []


def test_more_gpus_required_than_usable():
    (found,) = _required(_workload_h200x2(), 3)
    assert (found["code"], found["severity"], found["title"]) == ("VIS005", "error", "2 usable GPU(s), 3 required")
    assert found["detail"].endswith(": GPU 0, 1.")


def test_a_gpu_that_failed_the_smoke_kernel_is_not_usable():
    facts = _workload_h200x2()
    facts = with_fact(facts, "smoke.runs.1.ok", False)
    (found,) = _required(facts, 2)
    assert found["title"] == "1 usable GPU(s), 2 required" and found["detail"].endswith(": GPU 0.")


def test_without_nvml_no_gpu_is_confirmed():
    facts = with_fact(_workload_h200x2(), "nvml.init", {"ok": False, "reason": "driver_not_loaded"})
    assert [f["title"] for f in _required(facts, 1)] == [
        "could not confirm 1 usable GPU(s): NVML is not available (driver_not_loaded)"]


# --- CUDA's own reading, in ASCII: measured with cuInit and cuDeviceGetCount on 4 x H100 (driver 580, 2026-11-26)

MEASURED_ON_4_H100 = [  # (CUDA_VISIBLE_DEVICES, how many devices libcuda enumerated)
    ("0", 1), ("\uff10", 0), ("\u0660", 0), ("\uff11", 0), ("\u00a00", 0), ("\u20030", 0), ("0,\u00a00", 1),
    ("0 1", 1), ("\t0", 1),
]


@pytest.mark.parametrize("mask, count", MEASURED_ON_4_H100, ids=[ascii(m) for m, _ in MEASURED_ON_4_H100])
def test_cuda_visible_devices_is_read_as_cuda_reads_it(mask, count):
    """Only C's white space around an entry and ASCII digits: a no-break space copied from a web page, or a
    full-width or Arabic-Indic digit, makes the entry invalid, where Python's strip() and \\d took it for 0."""
    assert len(resolve(make_facts({"CUDA_VISIBLE_DEVICES": mask}, mig_on=None)).devices) == count


def test_a_no_break_space_before_a_repeated_number_is_not_a_repeat():
    """'0,\\u00a00': the second entry is invalid and ends the list (GPU 0 stays); it does not name GPU 0 again
    (which would make CUDA refuse the whole list)."""
    vis = resolve(make_facts({"CUDA_VISIBLE_DEVICES": "0,\u00a00"}, mig_on=None))
    assert [d.gpu_index for d in vis.devices] == [0] and not vis.refused and vis.invalid_entry == "\u00a00"


@pytest.mark.parametrize("mask", ["\u00a00", "\uff10"])
def test_require_gpus_fails_where_cuda_sees_none(mask):
    facts = with_fact(make_facts({"CUDA_VISIBLE_DEVICES": mask}, mig_on=None), "options", {"require_gpus": 1})
    codes = {f["code"] for f in pipeline.judge(facts)["findings"]}
    assert {"VIS001", "VIS005"} <= codes
