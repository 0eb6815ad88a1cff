"""Error counters and NVSwitch fabric state (probes/nvml/counters.py, checks/error_counters.py).

The probe is run against the fake pynvml of tests/helpers_faults.py, which has the real bindings'
signatures (nvmlDeviceGetGpuFabricInfo* fill a struct passed by reference) and the values a healthy
4 x H100 read on 2026-11-26. The checks are judged on the real 2 x H200 recording with the healthy
counters added, in both shapes a report may hold them (per link, as older reports do, and the GPU's
totals), then one fact changed at a time; and on the real 4 x H200 recordings, whose healthy links
count CRC-data errors from boot.
"""

from __future__ import annotations

import copy
import json
import math
import types
from typing import Any

import pytest

from gpudoctor.checks import error_counters as counters_check
from gpudoctor.checks.error_counters import limits
from gpudoctor.checks.registry import run_checks
from gpudoctor.pipeline import judge
from gpudoctor.probes.nvml import _binding as nv
from gpudoctor.nvlink_totals import nvlink_totals
from gpudoctor.probes import boot_clock
from gpudoctor.probes.nvml import counters
from gpudoctor.compat.data import BUNDLED
from helpers_facts import with_fact

from conftest import REAL
from helpers_faults import FAKE_PYNVML, full_facts, install_fake_pynvml
from helpers_judge import codes, only, statuses

CHECK_IDS = ("gpus.nvlink_errors", "gpus.pcie_replays", "gpus.fabric")
OUR_CODES = {"GPU132", "GPU182", "GPU183", "GPU191", "GPU192", "GPU193"}
#: The 4 x H200 recordings: healthy hosts whose links count CRC-data errors at a steady 4-9 a second per GPU.
H200X4 = sorted((REAL / "h200x4-20261127").glob("*/*.json"))
#: Those made by a probe that read only the NVLink totals, which driver 580.159.04 does not keep on H200.
H200X4_TOTALS_ONLY = sorted((REAL / "h200x4-20261127" / "count-ab-0450").glob("*.json"))
#: `check --quick` recordings since the full check reads the links one by one: --quick reads the totals only.
H200X4_QUICK = sorted(p for p in H200X4 if p.name.startswith("quick") and p not in H200X4_TOTALS_ONLY
                      and "nvlink_errors_unread" in p.read_text())


def healthy(facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` with what the healthy 4 x H100 read: recovery 1-24 on every active link, every other NVLink
    counter 0, PCIe replay 0-2, a fabric registered; a day of uptime."""
    out = copy.deepcopy(facts)
    for gpu in out["gpus"]:
        links = [e["link"] for e in gpu["nvlink"]["links"] if e["active"]]
        gpu["counters"] = {
            "uptime_s": 86400.0,
            "pcie_replay": gpu["index"] % 3,
            "nvlink_errors": [{"link": n, "replay": 0, "recovery": (n * 7 + gpu["index"]) % 24 + 1,
                               "crc_flit": 0, "crc_data": 0} for n in links],
            "violation_ns": {"sw_power_cap": 1_500_000_000, "sync_boost": {"unavailable": "not_supported"},
                             "sw_thermal_slowdown": 0, "hw_thermal_slowdown": 0, "hw_power_brake_slowdown": 0},
        }
        gpu["fabric"] = {"state": "completed", "status": "success", "api": "v3", "health_summary": "not_supported"}
    return out


def as_totals(facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` with each GPU's per-link NVLink counts summed over its links, as the probe now reads them."""
    out = copy.deepcopy(facts)
    for gpu in out["gpus"]:
        links = gpu["counters"]["nvlink_errors"]
        gpu["counters"]["nvlink_errors"] = {k: sum(e[k] for e in links) for k in ("replay", "recovery", "crc_flit", "crc_data")}
    return out


@pytest.fixture
def node(h200x2):
    return healthy(h200x2)


@pytest.fixture(params=["per_link", "totals"])
def either(request, h200x2):
    """The healthy node in each shape a report may hold its NVLink counters in."""
    return healthy(h200x2) if request.param == "per_link" else as_totals(healthy(h200x2))


def crc_path(facts: dict[str, Any], kind: str) -> str:
    """Where GPU 0's ``kind`` count is: link 2's in the per-link shape, the total in the other."""
    return f"gpus.0.counters.nvlink_errors.{'2.' if isinstance(facts['gpus'][0]['counters']['nvlink_errors'], list) else ''}{kind}"


# --- judged on a real recording ------------------------------------------------------------------

def test_the_healthy_values_are_quiet(node):
    assert {k: v for k, v in statuses(node, "gpus").items() if k in CHECK_IDS} == {c: "pass" for c in CHECK_IDS}
    assert codes(node) == set()


def test_the_largest_healthy_recovery_count_is_quiet(node):
    """Recovery errors are shown, not judged: healthy H100 links count up to 24 at link training."""
    assert codes(with_fact(node, "gpus.1.counters.nvlink_errors.4.recovery", 24_000)) & OUR_CODES == set()


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REAL)) for p in H200X4
                                  if p not in H200X4_TOTALS_ONLY and p not in H200X4_QUICK))
def test_the_healthy_h200x4_recordings_are_quiet(path):
    """Every GPU's links count CRC-data errors from boot (27 on one link 57 s after it); none of the
    counter checks may fire, and the NVLink check must have judged them, not skipped them."""
    facts = json.loads((REAL / path).read_text())["facts"]
    assert any(isinstance(g["counters"]["nvlink_errors"], list) and
               sum(e["crc_data"] for e in g["counters"]["nvlink_errors"]) > 0 for g in facts["gpus"])
    checks = {c["id"]: c for c in judge(facts)["checks"]}
    assert checks["gpus.nvlink_errors"]["status"] == "pass"
    assert codes(facts) & OUR_CODES == set()


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REAL)) for p in H200X4_TOTALS_ONLY))
def test_a_recording_without_totals_or_per_link_counts_is_not_passed(path):
    """Made before the full check read the links one by one: nothing to judge, and it says why."""
    facts = json.loads((REAL / path).read_text())["facts"]
    assert {json.dumps(g["counters"]["nvlink_errors"]) for g in facts["gpus"]} == {'{"unavailable": "not_supported"}'}
    check = {c["id"]: c for c in judge(facts)["checks"]}["gpus.nvlink_errors"]
    assert (check["status"], check["reason"]) == ("skip", "NVLink error counters not read: not supported")
    assert codes(facts) & OUR_CODES == set()


@pytest.mark.parametrize("kind,value", [("crc_data", 27), ("crc_data", 3000), ("crc_flit", 500), ("replay", 5)])
def test_counts_since_the_driver_loaded_are_not_judged(either, kind, value):
    """GCM's per-link limits (30 CRC-flit, 10 CRC-data) are for counts taken in a prolog; a count since load
    below DCGM's rate, or a replay count that one reading cannot date, is shown and compared by merge."""
    assert codes(with_fact(either, crc_path(either, kind), value)) & OUR_CODES == set()


@pytest.mark.parametrize("kind,words", [("crc_flit", "CRC-flit"), ("crc_data", "CRC-data")])
def test_a_crc_storm_at_dcgms_rate_is_an_error(either, kind, words):
    """100 a second over the whole uptime (a day): some second reached DCGM's limit."""
    assert limits(BUNDLED)["nvlink-crc-rate"]["rate_per_s_at_least"] == 100
    assert codes(with_fact(either, crc_path(either, kind), 100 * 86400 - 1)) & OUR_CODES == set()
    f = only(with_fact(either, crc_path(either, kind), 100 * 86400), "GPU182")
    assert (f["check"], f["severity"], f["subject"]["gpu_index"]) == ("gpus.nvlink_errors", "error", 0)
    assert f["title"] == "GPU 0 (NVIDIA H200): NVLink CRC errors at 100 a second on average since the driver loaded"
    assert f"8,640,000 {words} errors (100 a second)" in f["detail"]


def test_a_link_whose_count_was_not_read_leaves_that_total_unjudged(node):
    facts = with_fact(node, "gpus.0.counters.nvlink_errors.2.crc_data", 100 * 86400)
    facts = with_fact(facts, "gpus.0.counters.nvlink_errors.5.crc_data", {"unavailable": "no_permission"})
    assert codes(facts) & OUR_CODES == set()  # a sum that skips a link is no total
    assert "GPU182" in codes(with_fact(facts, "gpus.0.counters.nvlink_errors.3.crc_flit", 100 * 86400))


def test_without_uptime_no_rate_is_judged(either):
    facts = with_fact(with_fact(either, crc_path(either, "crc_flit"), 10**9), "gpus.0.counters.uptime_s",
                      {"unavailable": "not_found"})
    assert codes(facts) & OUR_CODES == set()


def test_a_pcie_replay_storm(node):
    f = only(with_fact(node, "gpus.0.counters.pcie_replay", 250_000), "GPU132")
    assert (f["check"], f["severity"], f["subject"]["gpu_index"]) == ("gpus.pcie_replays", "warning", 0)
    assert f["title"] == "GPU 0 (NVIDIA H200): 250000 PCIe replays since the driver loaded, 174 a minute on average"
    assert "above 31 a minute on a Gen5 x16 link" in f["detail"]


@pytest.mark.parametrize("count,uptime_s,found", [
    (80, 60.0, False),          # no more than DCGM's diag allows in one run
    (2000, 86400.0, False),     # above that, but 1.4 a minute over a day: under Gen5 x16's 31
    (2000, 60.0, True),         # the same count within a minute
])
def test_pcie_replays_need_both_the_count_and_the_rate(node, count, uptime_s, found):
    facts = with_fact(with_fact(node, "gpus.0.counters.pcie_replay", count), "gpus.0.counters.uptime_s", uptime_s)
    assert ("GPU132" in codes(facts)) is found


def test_an_unknown_link_is_judged_by_the_highest_rate(node):
    facts = with_fact(with_fact(node, "gpus.0.pcie", {"unavailable": "no_permission"}), "gpus.0.counters.uptime_s", 60.0)
    assert "GPU132" not in codes(with_fact(facts, "gpus.0.counters.pcie_replay", 62))  # Gen6 x16: 62 a minute
    assert "above 62 a minute on a Gen6 x16 link" in only(with_fact(facts, "gpus.0.counters.pcie_replay", 100), "GPU132")["detail"]


def test_fabric_manager_not_running(node):
    facts = quick(node)  # a smoke kernel that ran would prove the GPUs registered
    for i in (0, 1):
        facts = with_fact(facts, f"gpus.{i}.fabric.state", "not_started")
    f = only(facts, "GPU191")
    assert (f["check"], f["severity"]) == ("gpus.fabric", "error")
    assert f["title"] == "2 of 2 GPU(s) wait for Fabric Manager: registration with the NVSwitch fabric has not started"
    assert "error 802" in f["detail"]
    assert f["remediation"]["commands"] == ["systemctl status nvidia-fabricmanager",
                                            "sudo systemctl enable --now nvidia-fabricmanager"]


def quick(facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` as `check --quick` leaves them: no smoke kernel ran."""
    return {k: v for k, v in facts.items() if k != "smoke"}


def test_fabric_registration_in_progress_is_a_warning(node):
    assert only(with_fact(quick(node), "gpus.1.fabric.state", "in_progress"), "GPU191")["severity"] == "warning"


def test_fabric_registration_failed(node):
    f = only(with_fact(node, "gpus.1.fabric.status", "nvml_error_999"), "GPU192")
    assert (f["severity"], f["subject"]["gpu_index"]) == ("error", 1)


def test_fabric_limited_capacity(node):
    assert only(with_fact(node, "gpus.0.fabric.health_summary", "limited_capacity"), "GPU193")["severity"] == "warning"


def test_a_gpu_on_no_fabric_is_quiet(node):
    facts = with_fact(node, "gpus.0.fabric", {"unavailable": "not_supported"})
    facts = with_fact(facts, "gpus.1.fabric", {"state": "not_supported", "status": "success", "api": "v1"})
    assert statuses(facts, "gpus")["gpus.fabric"] == "pass"
    assert codes(facts) == set()


def test_a_recording_without_counters_is_not_checked(h200x2):
    checks = {c["id"]: c for c in judge(h200x2)["checks"]}
    for check_id in CHECK_IDS:
        assert checks[check_id]["status"] == "skip"
        assert "older gpudoctor" in checks[check_id]["reason"]


@pytest.mark.parametrize("reason,words", [("no_permission", "no permission"), ("function_not_found", "function not found")])
def test_counters_not_read_are_not_checked_with_the_reason(node, reason, words):
    facts = node
    for i in (0, 1):
        facts = with_fact(facts, f"gpus.{i}.counters.nvlink_errors", {"unavailable": reason})
        facts = with_fact(facts, f"gpus.{i}.counters.pcie_replay", {"unavailable": reason})
    checks = {c["id"]: c for c in judge(facts)["checks"]}
    assert checks["gpus.nvlink_errors"]["reason"] == f"NVLink error counters not read: {words}"
    assert checks["gpus.pcie_replays"]["reason"] == f"PCIe replay counters not read: {words}"
    assert {checks[c]["status"] for c in ("gpus.nvlink_errors", "gpus.pcie_replays")} == {"skip"}


# --- the probe, through the fake bindings ----------------------------------------------------------

def test_the_probe_reads_the_healthy_x4_values_and_they_are_quiet(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch)
    facts = full_facts()
    gpu = facts["gpus"][1]
    recovery = sum((link * 7 + 1) % 24 + 1 for link in range(18))  # the fake's per-link counts, summed
    assert gpu["counters"]["nvlink_errors"] == {"replay": 0, "recovery": recovery, "crc_flit": 0, "crc_data": 0}
    assert gpu["counters"]["pcie_replay"] == 1
    assert gpu["counters"]["violation_ns"] == {"sw_power_cap": 1_500_000_000, "sync_boost": {"unavailable": "not_supported"},
                                              "sw_thermal_slowdown": 0, "hw_thermal_slowdown": 0,
                                              "hw_power_brake_slowdown": 0}
    assert gpu["fabric"] == {"state": "completed", "status": "success", "api": "v3", "health_summary": "healthy"}
    assert facts["nvml"]["missing_functions"] == []
    results = {r.id: r for r in run_checks(facts)}
    assert {c: (results[c].status, results[c].findings) for c in CHECK_IDS} == {c: ("pass", []) for c in CHECK_IDS}


def test_not_supported_everywhere_is_absent_never_zero(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch, fail="nvmlDeviceGetNvLinkErrorCounter:3,nvmlDeviceGetPcieReplayCounter:3,"
                                                     "nvmlDeviceGetGpuFabricInfoV:3,nvmlDeviceGetFieldValues:3")
    gpu = full_facts()["gpus"][0]
    assert gpu["counters"]["pcie_replay"] == {"unavailable": "not_supported"}
    assert gpu["counters"]["nvlink_errors"] == {"unavailable": "not_supported"}
    assert gpu["counters"]["violation_ns"] == {"unavailable": "not_supported"}
    assert gpu["fabric"] == {"unavailable": "not_supported"}


def test_a_driver_without_totals_full_check_reads_per_link_and_quick_says_it_did_not(tmp_path, monkeypatch):
    """The NVML worker as the full check and ``check --quick`` start it, on the 4 x H200's driver (no totals)."""
    install_fake_pynvml(tmp_path, monkeypatch, nvlink="per_link_only")
    full = full_facts()
    links = full["gpus"][1]["counters"]["nvlink_errors"]
    assert [e["link"] for e in links] == list(range(18))
    assert [e["crc_data"] for e in links] == [(n * 5 + 1) % 27 + 1 for n in range(18)]
    results = {r.id: r for r in run_checks(full)}
    assert (results["gpus.nvlink_errors"].status, results["gpus.nvlink_errors"].findings) == ("pass", [])
    quick = full_facts(quick=True)
    assert {g["counters"]["nvlink_errors_unread"] for g in quick["gpus"]} == {"quick"}
    assert {json.dumps(g["counters"]["nvlink_errors"]) for g in quick["gpus"]} == {'{"unavailable": "not_supported"}'}
    result = {r.id: r for r in run_checks(quick)}["gpus.nvlink_errors"]
    assert (result.status, result.reason) == ("skip", counters_check.QUICK_PER_LINK)


def test_without_the_versioned_call_the_older_one_reads_the_fabric(tmp_path, monkeypatch):
    install_fake_pynvml(tmp_path, monkeypatch, missing="nvmlDeviceGetGpuFabricInfoV")
    facts = full_facts()
    assert facts["gpus"][0]["fabric"] == {"state": "completed", "status": "success", "api": "v1"}
    assert facts["nvml"]["missing_functions"] == []  # the older call read the same, so nothing is missing


# --- the probe in this process, with the fake bindings as _binding's module -------------------------

@pytest.fixture
def fake(monkeypatch):
    module = types.ModuleType("pynvml")
    exec(compile(FAKE_PYNVML, "fake_pynvml", "exec"), module.__dict__)
    module.nvmlInit()
    monkeypatch.setattr(nv, "_pynvml", module)
    monkeypatch.setattr(nv, "missing_functions", set())
    return module


def test_a_fabric_call_with_the_wrong_signature_is_an_absent_fact(fake):
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(nv.NvmlFailure) as caught:
        nv.call("nvmlDeviceGetGpuFabricInfo", handle)  # one argument: the installed bindings raise TypeError
    assert caught.value.reason == "bindings_mismatch"
    assert nv.query("nvmlDeviceGetGpuFabricInfoV", handle) == {"unavailable": "bindings_mismatch"}


def test_a_driver_older_than_the_struct_gets_the_older_struct(fake, monkeypatch):
    versions = []

    def fabric_v(device, info):
        versions.append(info._obj.version)
        if info._obj.version == 0x3000028:
            raise fake.NVMLError(25)  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        return fake._fill_fabric(info)

    class V2(fake.ctypes.Structure):
        _fields_ = fake.c_nvmlGpuFabricInfo_v3_t._fields_[:-1]

        def __init__(self):
            super().__init__(version=0x02000024)

    monkeypatch.setattr(fake, "nvmlDeviceGetGpuFabricInfoV", fabric_v, raising=False)
    monkeypatch.setattr(fake, "c_nvmlGpuFabricInfo_v2_t", V2, raising=False)
    assert counters.read_fabric(fake.nvmlDeviceGetHandleByIndex(0)) == {"state": "completed", "status": "success", "api": "v2"}
    assert versions == [0x3000028, 0x02000024]


def counted(fake, monkeypatch) -> dict[str, list[Any]]:
    """Record the arguments of every counter call the probe could make."""
    calls: dict[str, list[Any]] = {}
    for name in ("nvmlDeviceGetFieldValues", "nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetPcieReplayCounter"):
        real = getattr(fake, name)

        def wrapper(*args, _name=name, _real=real):
            calls.setdefault(_name, []).append(args[1:])
            return _real(*args)
        monkeypatch.setattr(fake, name, wrapper)
    return calls


def test_every_counter_of_a_gpu_is_one_field_values_call(fake, monkeypatch):
    """The driver serves NVML calls one at a time: a call per link and kind made --quick too slow on 4 GPUs."""
    calls = counted(fake, monkeypatch)
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    nvlink = {"links": [{"link": n, "active": True} for n in range(18)]}
    read = counters.read_counters(handle, nvlink)
    assert list(calls) == ["nvmlDeviceGetFieldValues"]
    assert calls["nvmlDeviceGetFieldValues"] == [([52, 59, 38, 45, 94, 74, 76, 269, 270, 271],)]
    assert read["nvlink_errors"]["recovery"] == sum((link * 7) % 24 + 1 for link in range(18))
    assert read["pcie_replay"] == 0


def test_a_gpu_without_nvlink_is_not_asked_for_nvlink_totals(fake, monkeypatch):
    calls = counted(fake, monkeypatch)
    read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(0), {"unavailable": "not_supported"})
    assert read["nvlink_errors"] == {"unavailable": "not_supported"}
    assert calls == {"nvmlDeviceGetFieldValues": [([94, 74, 76, 269, 270, 271],)]}


def without_totals(fake, monkeypatch, status: int = 3) -> None:
    """The fake's NVLink totals (field ids 38, 45, 52, 59) answer ``status``: NOT_SUPPORTED, as driver 580.159.04
    answers on a 4 x H200, by default."""
    real = fake.nvmlDeviceGetFieldValues

    def no_totals(handle, ids):
        return [v if v.fieldId not in (38, 45, 52, 59) else type(v)(fieldId=v.fieldId, nvmlReturn=status, valueType=3,
                                                                     value=v.value) for v in real(handle, ids)]
    monkeypatch.setattr(fake, "nvmlDeviceGetFieldValues", no_totals)


def test_without_totals_quick_leaves_the_links_unread_and_says_so(fake, monkeypatch):
    without_totals(fake, monkeypatch)
    calls = counted(fake, monkeypatch)
    read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(0), {"links": [{"link": 0, "active": True}]}, quick=True)
    assert read["nvlink_errors"] == {"unavailable": "not_supported"}
    assert read["nvlink_errors_unread"] == "quick"
    assert read["violation_ns"]["sw_power_cap"] == 1_500_000_000
    assert "nvmlDeviceGetNvLinkErrorCounter" not in calls


def test_without_totals_the_full_check_reads_each_active_link(fake, monkeypatch):
    without_totals(fake, monkeypatch)
    calls = counted(fake, monkeypatch)
    nvlink = {"links": [{"link": n, "active": n != 3} for n in range(6)]}
    read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(1), nvlink)
    assert read["nvlink_errors"] == [{"link": n, "replay": 0, "recovery": (n * 7 + 1) % 24 + 1, "crc_flit": 0, "crc_data": 0}
                                     for n in (0, 1, 2, 4, 5)]
    assert "nvlink_errors_unread" not in read
    assert sorted({args[0] for args in calls["nvmlDeviceGetNvLinkErrorCounter"]}) == [0, 1, 2, 4, 5]
    assert len(calls["nvmlDeviceGetNvLinkErrorCounter"]) == 5 * 4


def test_with_totals_no_link_is_read_one_by_one(fake, monkeypatch):
    calls = counted(fake, monkeypatch)
    nvlink = {"links": [{"link": n, "active": True} for n in range(18)]}
    for quick in (False, True):
        read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(0), nvlink, quick=quick)
        assert isinstance(read["nvlink_errors"], dict) and "nvlink_errors_unread" not in read
    assert "nvmlDeviceGetNvLinkErrorCounter" not in calls


@pytest.mark.parametrize("status,reason", [(4, "no_permission"), (15, "gpu_lost")])
def test_totals_the_per_link_getter_would_fail_alike_are_not_retried_per_link(fake, monkeypatch, status, reason):
    without_totals(fake, monkeypatch, status)
    calls = counted(fake, monkeypatch)
    read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(0), {"links": [{"link": 0, "active": True}]})
    assert read["nvlink_errors"] == {"unavailable": reason}
    assert "nvmlDeviceGetNvLinkErrorCounter" not in calls and "nvlink_errors_unread" not in read


def test_a_counter_the_gpu_lacks_is_asked_once(fake, monkeypatch):
    without_totals(fake, monkeypatch)
    real = fake.nvmlDeviceGetNvLinkErrorCounter

    def no_flit(device, link, counter):
        if counter == fake.NVML_NVLINK_ERROR_DL_CRC_FLIT:
            raise fake.NVMLError(3)
        return real(device, link, counter)
    monkeypatch.setattr(fake, "nvmlDeviceGetNvLinkErrorCounter", no_flit)
    calls = counted(fake, monkeypatch)
    read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(0), {"links": [{"link": n, "active": True} for n in range(4)]})
    assert [e["crc_flit"] for e in read["nvlink_errors"]] == [{"unavailable": "not_supported"}] * 4
    assert [args[1] for args in calls["nvmlDeviceGetNvLinkErrorCounter"]].count(fake.NVML_NVLINK_ERROR_DL_CRC_FLIT) == 1
    assert nvlink_totals(read["nvlink_errors"]) == {"replay": 0, "recovery": sum((n * 7) % 24 + 1 for n in range(4)),
                                                    "crc_flit": {"unavailable": "not_supported"}, "crc_data": 0}


def test_a_gpu_without_any_per_link_counter_is_one_absent_fact(fake, monkeypatch):
    without_totals(fake, monkeypatch)

    def none(device, link, counter):
        raise fake.NVMLError(3)
    monkeypatch.setattr(fake, "nvmlDeviceGetNvLinkErrorCounter", none)
    calls = counted(fake, monkeypatch)
    read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(0), {"links": [{"link": n, "active": True} for n in range(18)]})
    assert read["nvlink_errors"] == {"unavailable": "not_supported"}
    assert len(calls["nvmlDeviceGetNvLinkErrorCounter"]) == 4  # each counter asked on the first link only


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REAL)) for p in H200X4 if p.name == "full-noredact.json"))
def test_the_recorded_h200_links_read_one_by_one_are_judged_and_quiet(fake, monkeypatch, path):
    """The per-link counts a 4 x H200 recorded, served by a driver without totals: the full check reads them
    per link and judges them by DCGM's rate, which they are far below; at that rate they are an error."""
    facts = json.loads((REAL / path).read_text())["facts"]
    kinds = {getattr(fake, c): k for k, (c, _) in counters.NVLINK_COUNTERS.items()}
    without_totals(fake, monkeypatch)
    for gpu in facts["gpus"]:
        recorded = {e["link"]: e for e in gpu["counters"]["nvlink_errors"]}
        monkeypatch.setattr(fake, "nvmlDeviceGetNvLinkErrorCounter",
                            lambda device, link, counter, _links=recorded: _links[link][kinds[counter]])
        read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(0), gpu["nvlink"])
        assert read["nvlink_errors"] == gpu["counters"]["nvlink_errors"]
        gpu["counters"]["nvlink_errors"] = read["nvlink_errors"]
    checks = {c["id"]: c for c in judge(facts)["checks"]}
    assert checks["gpus.nvlink_errors"]["status"] == "pass"
    uptime = facts["gpus"][0]["counters"]["uptime_s"]
    stormy = with_fact(facts, "gpus.0.counters.nvlink_errors.0.crc_data", math.ceil(100 * uptime))
    assert only(stormy, "GPU182")["subject"]["gpu_index"] == 0


def test_quick_without_totals_is_not_checked_never_passed(node):
    quick = node
    for i in (0, 1):
        quick = with_fact(with_fact(quick, f"gpus.{i}.counters.nvlink_errors", {"unavailable": "not_supported"}),
                          f"gpus.{i}.counters.nvlink_errors_unread", "quick")
    check = {c["id"]: c for c in judge(quick)["checks"]}["gpus.nvlink_errors"]
    assert (check["status"], check["reason"]) == ("skip", "not checked in --quick: this driver gives NVLink error "
                                                          "counts per link only; the full check reads them")
    # a GPU that was read is still judged beside one left unread, and its error is not hidden
    mixed = with_fact(node, "gpus.1.counters.nvlink_errors_unread", "quick")
    mixed = with_fact(mixed, "gpus.1.counters.nvlink_errors", {"unavailable": "not_supported"})
    assert {c["id"]: c for c in judge(mixed)["checks"]}["gpus.nvlink_errors"]["status"] == "skip"
    stormy = with_fact(mixed, "gpus.0.counters.nvlink_errors.2.crc_data", 100 * 86400)
    assert only(stormy, "GPU182")["subject"]["gpu_index"] == 0


def test_a_driver_without_the_pcie_replay_field_is_asked_with_the_getter(fake, monkeypatch):
    real = fake.nvmlDeviceGetFieldValues

    def no_field_94(handle, ids):
        return [v if v.fieldId != 94 else type(v)(fieldId=94, nvmlReturn=2, valueType=3, value=v.value)
                for v in real(handle, ids)]  # NVML_ERROR_INVALID_ARGUMENT: a field id this driver lacks
    monkeypatch.setattr(fake, "nvmlDeviceGetFieldValues", no_field_94)
    calls = counted(fake, monkeypatch)
    read = counters.read_counters(fake.nvmlDeviceGetHandleByIndex(1), {"unavailable": "not_supported"})
    assert read["pcie_replay"] == 1
    assert calls["nvmlDeviceGetPcieReplayCounter"] == [()]


# --- the facts view ----------------------------------------------------------------------------------

def test_the_facts_view_shows_each_counter_as_its_range_over_the_links(node):
    from gpudoctor.render.facts_view import facts_view

    text = facts_view(with_fact(node, "gpus.1.counters.nvlink_errors.0.crc_flit", {"unavailable": "no_permission"}))
    assert "NVLink errors : 18 active link(s): replay 0, recovery 1-24, CRC-flit 0, CRC-data 0\n" in text
    assert "NVLink errors : 18 active link(s): replay 0, recovery 1-24, CRC-flit 0 (unavailable: no_permission), " \
           "CRC-data 0\n" in text  # one link's CRC-flit not read: the others' range, and that
    assert "Violation ns  : sw_power_cap 1.5 s, sync_boost (unavailable: not_supported), sw_thermal_slowdown 0 s, " \
           "hw_thermal_slowdown 0 s, hw_power_brake_slowdown 0 s\n" in text
    assert "Uptime        : 86400 s\n" in text


def test_the_facts_view_shows_the_totals_of_a_report_that_holds_them(node):
    from gpudoctor.render.facts_view import facts_view

    text = facts_view(with_fact(as_totals(node), "gpus.1.counters.nvlink_errors.crc_flit", {"unavailable": "no_permission"}))
    assert "NVLink errors : all links: replay 0, recovery 225, CRC-flit 0, CRC-data 0\n" in text
    assert "NVLink errors : all links: replay 0, recovery 219, CRC-flit (unavailable: no_permission), CRC-data 0\n" in text


def test_the_facts_view_says_why_quick_left_the_links_unread(node):
    from gpudoctor.render.facts_view import facts_view

    quick = with_fact(with_fact(node, "gpus.0.counters.nvlink_errors", {"unavailable": "not_supported"}),
                      "gpus.0.counters.nvlink_errors_unread", "quick")
    lines = [line.strip() for line in facts_view(quick).splitlines()]
    assert "NVLink errors unread : per link only on this driver; not read in --quick, the full check reads them" in lines
    assert "NVLink errors        : (unavailable: not_supported)" in lines


# --- against nvidia-smi's own answers ------------------------------------------------------------------

def test_the_counters_are_compared_with_nvidia_smi_where_a_recording_has_both(node):
    """tests/nvidia_smi.py compares each recording with the nvidia-smi -q -x taken beside it; the 2 x H200's says
    Fabric Completed, PCIe replays 0 and every slowdown counter 0 us."""
    from conftest import REAL_DIRS
    from nvidia_smi import compare_smi_xml

    xml = (next(p for p in REAL_DIRS if p.name.startswith("h200x2")) / "nvidia-smi-q.xml").read_text()
    for i in (0, 1):
        node = with_fact(node, f"gpus.{i}.counters.pcie_replay", 0)
    smi = compare_smi_xml(node, xml)
    assert smi.mismatches == []
    assert {w.split(" ", 1)[1] for w in smi.compared if "fabric" in w or "replay" in w or "counter" in w} == {
        "PCIe replays", "fabric state", "clocks event counter sw_therm_slowdown us",
        "clocks event counter hw_therm_slowdown us", "clocks event counter hw_power_brake us"}
    wrong = compare_smi_xml(with_fact(node, "gpus.1.fabric.state", "not_started"), xml)
    assert [m for m in wrong.mismatches if "fabric" in m] == [
        f"{node['gpus'][1]['pci']['bus_id']} fabric state: gpudoctor 'not_started' != nvidia-smi 'completed'"]


@pytest.mark.parametrize("uptime,btime_ago,expected", [
    ("60.00 10.0\n", 86400.0, 86400.0),   # /proc/uptime virtualised to the container's start: boot time wins
    ("86400.00 10.0\n", 60.0, 86400.0),   # /proc/stat's boot time virtualised: uptime wins
])
def test_the_window_is_the_longer_of_uptime_and_boot_time(monkeypatch, uptime, btime_ago, expected):
    import io
    import time as clock

    now = 1_800_000_000.0
    files = {"/proc/uptime": uptime, "/proc/stat": f"cpu  1 2 3\nbtime {int(now - btime_ago)}\nprocesses 9\n"}
    monkeypatch.setattr(boot_clock, "open", lambda path, *a, **k: io.BytesIO(files[path].encode()), raising=False)
    monkeypatch.setattr(clock, "time", lambda: now)
    assert counters._uptime_s() == expected


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REAL)) for p in H200X4_QUICK))
def test_a_quick_recording_on_h200_says_the_links_were_not_read(path):
    """A real --quick on 4 x H200: the driver keeps no totals, so the NVLink check is skipped with why."""
    facts = json.loads((REAL / path).read_text())["facts"]
    check = {c["id"]: c for c in judge(facts)["checks"]}["gpus.nvlink_errors"]
    assert check["status"] == "skip" and "not checked in --quick" in check["reason"]
    assert codes(facts) & OUR_CODES == set()
