"""Driver branch x GPU architecture (compat_matrix/driver_branches.json): matrix check, matrix suggest,
the judgement of a report's stack, the kernel-log notice, and the live check driver.branch.

Sources of the expectations: NVIDIA's 'CUDA Toolkit, Driver, and Architecture Matrix' (Kepler's last
driver R470; Maxwell, Pascal, Volta R580), and two real kernel logs of a driver ignoring a GPU
(siderolabs/talos#8764: GeForce GT 710 under 535.129.03; NixOS/nixos-hardware#1880: GeForce GTX 1050
under 595.71.05), quoted in the matrix file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.checks.branches import check_driver_branch
from gpudoctor.cli import cli
from gpudoctor.compat import branches, rules
from gpudoctor.compat.data import BUNDLED
from gpudoctor.compat.from_facts import stack_from_facts
from gpudoctor.compat.stack import judge_stack
from gpudoctor.probes import kernel_log

TALOS = """NVRM: The NVIDIA GeForce GT 710 GPU installed in this system is
 NVRM:  supported through the NVIDIA 470.xx Legacy drivers. Please
 NVRM:  visit http://www.nvidia.com/object/unix.html for more
 NVRM:  information.  The 535.129.03 NVIDIA driver will ignore
 NVRM:  this GPU.  Continuing probe...
NVRM: No NVIDIA GPU found."""

NIXOS = """NVRM: The NVIDIA NVIDIA GeForce GTX 1050 GPU installed in this system is
                           NVRM:  supported through the NVIDIA 580.xx Legacy drivers. Please
                           NVRM:  visit http://www.nvidia.com/object/unix.html for more
                           NVRM:  information.  The 595.71.05 NVIDIA driver will ignore
                           NVRM:  this GPU.  Continuing probe..."""



# --- the data -------------------------------------------------------------------------------------

def test_every_entry_is_sourced_and_dated():
    data = BUNDLED.topic("driver_branches")
    assert data["entries"]
    for entry in data["entries"]:
        assert entry["source"] in data["sources"], entry
        assert entry.get("as_of"), entry
        if entry.get("newest_driver"):
            assert entry["newest_driver_source"] in data["sources"]
            assert branches.branch_of(entry["newest_driver"]) == int(entry["last_branch"]), entry


def test_every_architecture_has_an_entry():
    known = {e["architecture"] for e in BUNDLED.topic("driver_branches")["entries"]}
    assert {e["architecture"] for e in BUNDLED.topic("architectures")["entries"]} <= known


@pytest.mark.parametrize("driver, cc, status, needs", [
    ("535.104.05", "3.7", rules.FAIL, "470"), ("470.82.01", "3.7", rules.OK, None),
    ("590.44.01", "6.0", rules.FAIL, "580"), ("580.95.05", "6.0", rules.OK, None),
    ("590.44.01", "7.0", rules.FAIL, "580"), ("595.71.05", "5.2", rules.FAIL, "580"),
    ("418.87.00", "2.0", rules.FAIL, "390"), ("590.44.01", "9.0", rules.OK, None),
    ("590.44.01", "7.5", rules.OK, None),
    ("474.44", "3.7", rules.OK, None), ("581.57", "6.1", rules.OK, None),  # Windows numbering of R470, R580
    ("590.44.01", "7.2", rules.OK, None),  # Jetson Xavier: its driver is JetPack's, not these branches
])
def test_drives(driver, cc, status, needs):
    verdict = branches.drives(BUNDLED, driver, cc)
    assert (verdict.status, verdict.needs) == (status, needs)


def test_gpu_by_pci_id_reuses_gpus_json():
    assert branches.gpu_by_pci_id(BUNDLED, "0x102D")["model"] == "K80"
    assert branches.gpu_by_pci_id(BUNDLED, "0x15f8")["compute_capability"] == "6.0"
    assert branches.gpu_by_pci_id(BUNDLED, "0xffff") is None


# --- matrix check and suggest ---------------------------------------------------------------------

def _check(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("args, branch", [
    (("--gpu", "Tesla K80", "--driver", "535.104.05"), "R470"),
    (("--gpu", "Tesla K80", "--driver", "535.104.05", "--torch", "2.7.0+cu118"), "R470"),
    (("--gpu", "Tesla P100-PCIE-16GB", "--driver", "590.44.01"), "R580"),
])
def test_matrix_check_a_driver_that_does_not_drive_the_gpu_is_an_error(args, branch):
    code, out = _check(*args)
    assert code == 1 and out["verdict"] == "error"
    cmp010 = [f for f in out["findings"] if f["code"] == "CMP010"]
    assert len(cmp010) == 1 and f"{branch} is the last branch" in cmp010[0]["title"]


@pytest.mark.parametrize("args", [
    ("--gpu", "Tesla K80", "--driver", "470.82.01"),
    ("--gpu", "Tesla P100-PCIE-16GB", "--driver", "580.95.05"),
    ("--gpu", "NVIDIA H100 80GB HBM3", "--driver", "590.44.01"),
    ("--cc", "7.2", "--driver", "590.44.01"),
    ("--gpu", "Tesla K80", "--driver", "474.44", "--os", "windows"),  # Windows numbers R470 as 47x.xx
])
def test_matrix_check_a_driver_that_drives_the_gpu_has_no_cmp010(args):
    _, out = _check(*args)
    assert not [f for f in out["findings"] if f["code"] == "CMP010"]


def _suggest(*args: str) -> list[str]:
    result = CliRunner().invoke(cli, ["matrix", "suggest", *args])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_suggest_never_unlocks_a_driver_that_cannot_drive_a_k80():
    lines = _suggest("--gpu", "Tesla K80", "--driver", "470.82.01")
    assert not any("unlocks" in line for line in lines)
    assert "R470" in lines[-1] and "CUDA 11.8" in lines[-1] and "Nothing newer" in lines[-1]


def test_suggest_for_a_driver_that_cannot_drive_the_gpu_suggests_for_its_last_branch():
    lines = _suggest("--gpu", "Tesla K80", "--driver", "535.104.05")
    assert "R470" in lines[0] and "470.239.06" in lines[0]
    assert lines[1:] == _suggest("--gpu", "Tesla K80", "--driver", "470.239.06")


def test_suggest_for_pascal_on_535_unlocks_only_up_to_r580():
    lines = _suggest("--gpu", "Tesla P100-PCIE-16GB", "--driver", "535.104.05")
    unlock = [line for line in lines if "unlocks" in line]
    assert unlock and all(branches.branch_of(line.split()[1]) <= 580 for line in unlock)
    assert "CUDA 12.9" in lines[-1]


def test_suggest_for_a_gpu_still_driven_says_nothing_of_branches():
    assert not any("R5" in line or "Nothing newer" in line
                   for line in _suggest("--gpu", "NVIDIA H100 80GB HBM3", "--driver", "535.104.05"))


# --- a report's stack (analyze, check) ------------------------------------------------------------

def _facts(driver: str, name: str, cc: str) -> dict:
    return {"nvml": {"init": {"ok": True}, "driver_version": driver, "device_count": 1},
            "gpus": [{"index": 0, "name": name, "compute_capability": cc}]}


def test_report_with_a_driver_that_cannot_drive_its_gpu_is_cmp010():
    found = judge_stack(BUNDLED, stack_from_facts(BUNDLED, _facts("590.44.01", "Tesla P100-PCIE-16GB", "6.0")))
    assert [f.code for f in found if f.code == "CMP010"] == ["CMP010"]
    assert not [f for f in judge_stack(BUNDLED, stack_from_facts(BUNDLED, _facts("580.95.05", "Tesla P100-PCIE-16GB", "6.0")))
                if f.code == "CMP010"]


# --- the kernel log ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, notice", [
    (TALOS, {"name": "GeForce GT 710", "branch": "470", "driver": "535.129.03"}),
    (NIXOS, {"name": "GeForce GTX 1050", "branch": "580", "driver": "595.71.05"}),
])
def test_legacy_notice_from_real_logs(text, notice):
    assert kernel_log.legacy_notices([line.strip() for line in text.splitlines()]) == [notice]


def test_kmsg_records_are_read_to_their_end(tmp_path: Path):
    records = [f"3,{i},{i * 1000},-;{line.strip()}" for i, line in enumerate(TALOS.splitlines())]
    path = tmp_path / "kmsg"
    path.write_text("\n".join(["6,0,0,-;Linux version 6.8", " SUBSYSTEM=pci", *records]) + "\n")
    out = kernel_log.probe_legacy_notices(str(path))
    assert out == {"read": True, "notices": [{"name": "GeForce GT 710", "branch": "470", "driver": "535.129.03"}]}


def test_kmsg_is_not_read_while_every_gpu_has_a_driver(tmp_path: Path):
    path = tmp_path / "kmsg"
    path.write_text(TALOS)
    bound = [{"bus_id": "0000:01:00.0", "driver": "nvidia"}, {"bus_id": "0000:02:00.0", "driver": "vfio-pci"}]
    assert kernel_log.probe_legacy_notices(str(path), bound) == {"read": False, "reason": "not_needed"}
    unbound = [*bound, {"bus_id": "0000:41:00.0", "driver": None}]
    assert kernel_log.probe_legacy_notices(str(path), unbound)["notices"][0]["branch"] == "470"


def test_kmsg_that_cannot_be_read_is_not_read(tmp_path: Path):
    assert kernel_log.probe_legacy_notices(str(tmp_path / "absent")) == {"read": False, "reason": "not_found"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_kmsg_without_permission_is_not_read(tmp_path: Path):
    path = tmp_path / "kmsg"
    path.write_text("")
    path.chmod(0)
    assert kernel_log.probe_legacy_notices(str(path)) == {"read": False, "reason": "no_permission"}


def test_reading_a_kmsg_that_never_ends_stops_at_its_bound(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(kernel_log, "MAX_RECORDS", 50)
    out = kernel_log.probe_legacy_notices("/dev/zero")
    assert out["read"] is True and out["notices"] == []


# --- the live check ------------------------------------------------------------------------------

def _pci(bus: str, device: str, driver) -> dict:
    return {"bus_id": bus, "device_id": device, "class": "0x030200", "driver": driver}


def _live(pci: list, listed: list[str], driver: str = "535.104.05", notices=None, container: bool = False) -> dict:
    facts = {"host": {"container": {"detected": container, "markers": []}},
             "driver": {"kernel_module": {"loaded": True, "version": driver}, "pci_devices": pci},
             "nvml": {"init": {"ok": True}, "driver_version": driver, "device_count": len(listed)},
             "gpus": [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "pci": {"bus_id": "0000" + b}} for i, b in enumerate(listed)]}
    if notices is not None:
        facts["driver"]["legacy_notices"] = notices
    return facts


def _codes(facts: dict) -> list[str]:
    return [f.code for f in check_driver_branch(facts, BUNDLED)]


def test_a_k80_beside_a_listed_gpu_is_named_with_its_branch():
    facts = _live([_pci("0000:01:00.0", "0x20b2", "nvidia"), _pci("0000:41:00.0", "0x102d", None)], ["0000:01:00.0"],
                  notices={"read": False, "reason": "no_permission"})
    found = list(check_driver_branch(facts, BUNDLED))
    assert [f.code for f in found] == ["DRV021"]
    assert "Tesla K80" in found[0].title and "R470" in found[0].title and "0000:41:00.0" in found[0].title
    assert "not read (no_permission)" in found[0].detail


def test_the_only_gpu_ignored_while_the_module_found_nothing_is_named():
    facts = _live([_pci("0000:41:00.0", "0x102d", None)], [])
    facts["nvml"] = {"init": {"ok": False, "reason": "driver_not_loaded"}}
    facts["driver"]["kernel_module"] = {"loaded": False, "version": {"unavailable": "not_found"}}
    facts["driver"]["nvml_library_files"] = ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.129.03"]
    assert _codes(facts) == ["DRV021"]


def test_a_notice_names_a_gpu_the_matrix_has_no_id_for():
    notice = {"read": True, "notices": [{"name": "GeForce GT 710", "branch": "470", "driver": "535.104.05"}]}
    found = list(check_driver_branch(_live([_pci("0000:41:00.0", "0x9999", None)], [], notices=notice), BUNDLED))
    assert [f.code for f in found] == ["DRV021"] and "GeForce GT 710" in found[0].title


def test_a_notice_from_another_driver_is_not_evidence():
    notice = {"read": True, "notices": [{"name": "GeForce GT 710", "branch": "470", "driver": "535.104.05"}]}
    assert _codes(_live([_pci("0000:41:00.0", "0x9999", None)], [], driver="470.239.06", notices=notice)) == []


@pytest.mark.parametrize("facts", [
    _live([_pci("0000:01:00.0", "0x102d", "nvidia")], ["0000:01:00.0"], driver="470.239.06"),  # listed: driven
    _live([_pci("0000:41:00.0", "0x102d", "vfio-pci")], []),  # given to a VM
    _live([_pci("0000:41:00.0", "0x102d", None)], [], container=True),  # the host's bus, not ours
    _live([_pci("0000:41:00.0", "0x20b2", None)], []),  # an A100 unbound: DRV014's, not a branch
    _live([_pci("0000:41:00.0", "0x102d", None)], [], driver="470.239.06"),  # R470 drives it: not the branch
])
def test_quiet_where_the_branch_is_not_the_cause(facts):
    assert _codes(facts) == []


def test_an_overlay_branch_that_is_not_a_number_is_unknown_not_a_crash(tmp_path: Path):
    overlay = tmp_path / "m.json"
    overlay.write_text(json.dumps({"topic": "driver_branches", "as_of": "2026-11-27", "sources": {"S": "mine"},
                                   "entries": [{"architecture": "kepler", "last_branch": "R470", "newest_driver": 470,
                                                "source": "S", "as_of": "2026-11-27"}]}))
    result = CliRunner().invoke(cli, ["matrix", "check", "--matrix", str(overlay), "--gpu", "Tesla K80",
                                      "--driver", "535.104.05"])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "CMP010" not in result.output and "Traceback" not in result.output


def test_an_unbound_k80_is_one_finding_not_two():
    """The GPU the branch no longer drives is also unbound (DRV014's case) or, bound, not listed (DRV013's):
    driver.branch names it with its cause, and driver.gpu_count does not say it again."""
    from gpudoctor.checks.driver import check_gpu_count

    for bound in (None, "nvidia"):
        facts = _live([_pci("0000:01:00.0", "0x20b2", "nvidia"), _pci("0000:41:00.0", "0x102d", bound)], ["0000:01:00.0"])
        assert _codes(facts) == ["DRV021"]
        assert [f.code for f in check_gpu_count(facts, BUNDLED)] == []
    unbound_a100 = _live([_pci("0000:01:00.0", "0x20b2", "nvidia"), _pci("0000:41:00.0", "0x20b2", None)], ["0000:01:00.0"])
    assert [f.code for f in check_gpu_count(unbound_a100, BUNDLED)] == ["DRV014"]
