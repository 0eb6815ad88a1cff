"""Xid events and driver errors from the kernel log: the reader of each source, the catalogue that judges
an Xid, the window, the GPU a bus id names, and the ticket reader that shares the line parser.

The lines are real ones (tests/fixtures/kernel_log/index.json names where each was posted); the kmsg,
journal and syslog files are built from them in the form each source has."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import pipeline
from gpudoctor.checks.base import NotApplicable
from gpudoctor.checks.registry import CHECKS, run_check
from gpudoctor.checks.xid_events import WINDOW_S, check_xid_events
from gpudoctor.compat import xid as catalogue
from gpudoctor.compat.data import BUNDLED
from gpudoctor.findings import ERROR, INFO, SKIP, WARNING
from gpudoctor.nvrm import bus_key, parse_xid
from gpudoctor.pastes.forms import messages as paste_messages
from gpudoctor.probes import driver_events, kernel_log

FIXTURES = Path(__file__).parent / "fixtures" / "kernel_log"
INDEX = json.loads((FIXTURES / "index.json").read_text())["files"]
REAL = Path(__file__).parent / "fixtures" / "real" / "h100x1-20261127"
XID_CHECK = next(c for c in CHECKS if c.id == "gpus.xid")


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


def _kmsg(tmp_path: Path, records: list[tuple[float, str]], prio: int = 3) -> str:
    """A file of /dev/kmsg records ("PRI,SEQ,USEC,FLAGS;text"), each followed by a dictionary line."""
    path = tmp_path / "kmsg"
    path.write_text("".join(f"{prio},{i},{int(t * 1e6)},-;{text}\n SUBSYSTEM=pci\n" for i, (t, text) in enumerate(records)))
    return str(path)


def _probe(tmp_path: Path, kmsg: str, **kw: Any) -> dict[str, Any]:
    """The probe with no journal and no syslog files, unless given."""
    kw.setdefault("journalctl", (str(tmp_path / "no-journalctl"),))
    kw.setdefault("files", (str(tmp_path / "no-kern.log"),))
    return driver_events.probe_driver_events(kmsg=kmsg, **kw)


def _facts(log: dict[str, Any], bus: str = "00000000:41:00.0", container: bool = False) -> dict[str, Any]:
    return {"nvml": {"init": {"ok": True}, "device_count": 1},
            "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "pci": {"bus_id": bus}}],
            "host": {"container": {"detected": container, "markers": []}}, "kernel_log": log}


def _log(uptime: float, lines: list[tuple[float, str]], complete: bool = True) -> dict[str, Any]:
    return {"read": True, "source": "/dev/kmsg", "complete": complete, "records": 1000, "first_s": 0.0,
            "uptime_s": uptime, "boot_time": 1795000000.0, "tried": [], **driver_events.events_of(lines)}


# --- the real lines --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(INDEX))
def test_each_real_line_reads_as_its_poster_shows(name):
    found = driver_events.events_of([(0.0, line) for line in _lines(name)])
    assert [[e["xid"], e["bus_id"]] for e in found["events"]] == INDEX[name]["xids"]
    assert [[e["kind"], e["bus_id"]] for e in found["errors"]] == INDEX[name]["errors"]


def test_every_fixture_is_indexed_with_its_source():
    assert {p.name for p in FIXTURES.glob("*.txt")} == set(INDEX)
    assert all(meta["source"].startswith(("https://", "tests/fixtures/")) for meta in INDEX.values())


@pytest.mark.parametrize("name", sorted(n for n in INDEX if INDEX[n]["xids"]))
def test_a_pasted_log_gives_the_ticket_reader_the_same_xids(name):
    read = paste_messages.read(_lines(name)) or {"evidence": []}
    xids = {e["xid"] for e in read["evidence"] if e["kind"] == "xid"}
    assert xids == {x for x, _ in INDEX[name]["xids"]}


def test_the_xid_line_parts():
    line = "NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT"
    assert parse_xid(line) == {"xid": 109, "bus_id": "0000:cb:00", "pid": 1797828, "process": "pt_main_thread",
                               "detail": "pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT"}
    unknown = parse_xid("NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error")
    assert (unknown["pid"], unknown["process"]) == (None, None)


@pytest.mark.parametrize("a, b", [("0000:2b:00", "00000000:2B:00.0"), ("PCI:0004:01:00", "0004:01:00.0"),
                                  ("0000:0a:00.0", "00000000:0A:00.0")])
def test_a_bus_id_is_one_gpu_whatever_its_case_and_domain_width(a, b):
    assert bus_key(a) == bus_key(b) is not None


# --- the catalogue ---------------------------------------------------------------------------------

def test_the_catalogue_covers_the_xids_a_node_gate_needs_and_cites_nvidia():
    data = BUNDLED.topic("xid")
    codes = {e["xid"] for e in data["entries"]}
    assert {13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120} <= codes
    assert set(range(136, 160)) - {138, 152, 153} <= codes  # the Hopper and Blackwell Xids (138, 152, 153: unused)
    assert all(e["source"] in data["sources"] and e["as_of"] for e in data["entries"])
    assert all(e["severity"] in (ERROR, WARNING, INFO) and e["action"] for e in data["entries"])


def test_the_catalogue_judges_by_nvidias_resolution_buckets():
    for xid in (79, 48, 64, 95, 119, 120):  # RESTART_BM, WORKFLOW_XID_48, RESET_GPU
        assert catalogue.severity(BUNDLED, xid) == ERROR, xid
    for xid in (13, 31, 43, 45):  # the application's own fault, or cleanup after it
        assert catalogue.severity(BUNDLED, xid) == INFO, xid
    assert catalogue.severity(BUNDLED, 94, "Contained: CE User Channel (0x9). RST: No, D-RST: No") == WARNING
    assert catalogue.severity(BUNDLED, 94, "Contained: CE User Channel (0x9). RST: Yes, D-RST: No") == ERROR
    assert catalogue.severity(BUNDLED, 250) is None


@pytest.mark.parametrize("line, severity", [
    ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000)", ERROR),
    ("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008)", WARNING),
    ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", ERROR),
    ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)", INFO),
])
def test_an_xid_that_says_its_own_verdict_is_judged_by_it(line, severity):
    xid = parse_xid(line)
    assert catalogue.severity(BUNDLED, xid["xid"], xid["detail"]) == severity


# --- reading the sources ----------------------------------------------------------------------------

def test_kmsg_records_keep_their_time_level_and_only_the_kernels_nvrm_lines(tmp_path):
    real = [(t, line) for t, line in [(5107.64, "NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus.")]]
    path = tmp_path / "kmsg"
    path.write_text("6,0,0,-;Linux version 6.8.0\n"
                    "3,1,5107644336,-;" + real[0][1] + "\n SUBSYSTEM=pci\n DEVICE=+pci:0000:41:00.0\n"
                    # a process wrote this one (facility user): not the driver's word
                    "12,2,5200000000,-;NVRM: Xid (PCI:0000:41:00): 48, pid=1, Double Bit ECC\n")
    out = _probe(tmp_path, str(path))
    assert out["read"] is True and out["source"] == str(path) and out["complete"] is True
    assert out["records"] == 3 and out["first_s"] == 0.0 and out["last_s"] == 5200.0
    assert [(e["xid"], e["time_s"], e["bus_id"]) for e in out["events"]] == [(79, 5107.644, "0000:41:00")]


def test_kmsg_refused_under_dmesg_restrict_is_not_checked_never_no_xid(tmp_path, monkeypatch):
    real_open = os.open

    def refuse(path, *args, **kw):
        if path == "/dev/kmsg-restricted":
            raise PermissionError(errno.EPERM, "Operation not permitted", path)
        return real_open(path, *args, **kw)

    monkeypatch.setattr(kernel_log.os, "open", refuse)
    log = _probe(tmp_path, "/dev/kmsg-restricted")
    assert log["read"] is False and log["reason"] == "no_permission"
    assert [t["reason"] for t in log["tried"]] == ["no_permission", "not_found", "not_found"]
    result = run_check(XID_CHECK, _facts(log))
    assert result.status == SKIP and "not checked" in result.reason and "CAP_SYSLOG" in result.reason
    assert result.findings == []


def test_a_container_without_the_hosts_log_is_not_checked_and_says_where_the_log_is(tmp_path):
    log = _probe(tmp_path, str(tmp_path / "no-kmsg"))
    with pytest.raises(NotApplicable, match="outside this container"):
        list(check_xid_events(_facts(log, container=True), BUNDLED))


def test_journalctl_is_read_when_kmsg_is_not(tmp_path):
    journal = tmp_path / "journalctl"
    journal.write_text("#!/bin/sh\ncat <<'EOF'\n"  # --reverse: newest first, as the probe asks
                       "[ 3606.832215] h kernel: NVRM: Xid (PCI:0002:00:00): 119, pid=67769, name=nvidia-smi, Timeout waiting for RPC from GSP1!\n"
                       "[    1.058598] h kernel: NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\nEOF\n")
    journal.chmod(0o755)
    out = _probe(tmp_path, str(tmp_path / "no-kmsg"), journalctl=(str(journal),))
    assert out["source"] == "journalctl" and out["first_s"] == 1.058598
    assert [(e["xid"], e["time_s"]) for e in out["events"]] == [(119, 3606.832)]


def test_an_empty_journal_is_not_a_log_without_xids(tmp_path):
    journal = tmp_path / "journalctl"
    journal.write_text("#!/bin/sh\necho 'No journal files were found.' >&2\n")
    journal.chmod(0o755)
    out = _probe(tmp_path, str(tmp_path / "no-kmsg"), journalctl=(str(journal),))
    assert out["read"] is False and out["tried"][1]["reason"] == "empty"


def test_a_syslog_file_counts_only_the_lines_of_this_boot(tmp_path):
    boot = time.time() - 7200
    stamp = time.strftime("%b %e %H:%M:%S", time.localtime(boot + 600))
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(boot + 900))
    old = time.strftime("%b %e %H:%M:%S", time.localtime(boot - 86400))
    path = tmp_path / "kern.log"
    path.write_text(f"{old} worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE)\n"
                    f"{stamp} worker4 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n"
                    f"{iso} worker4 kernel: NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.\n")
    out = driver_events._from_file(str(path), boot)
    assert [e["xid"] for e in out["events"]] == [79] and abs(out["events"][0]["time_s"] - 600) < 2
    assert [e["kind"] for e in out["errors"]] == ["gpu_lost"] and abs(out["errors"][0]["time_s"] - 900) < 2


def test_a_log_that_never_ends_is_bounded_and_is_not_a_pass(tmp_path):
    started = time.monotonic()
    log = _probe(tmp_path, "/dev/zero", budget_s=0.1)
    assert time.monotonic() - started < 2.0
    assert log["read"] is True and log["complete"] is False
    with pytest.raises(NotApplicable, match="only in part"):
        list(check_xid_events(_facts(log), BUNDLED))


# --- the check: window, GPU, severity --------------------------------------------------------------

def test_a_recent_xid_79_is_an_error_on_the_gpu_its_bus_id_names():
    log = _log(9000.0, [(5107.6, "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.")])
    [found] = check_xid_events(_facts(log, bus="00000000:2B:00.0"), BUNDLED)
    assert (found.code, found.severity, found.subject.gpu_index) == ("GPU105", ERROR, 0)
    assert "Xid 79 (GPU has fallen off the bus)" in found.title and "GPU 0" in found.title
    assert "2026-" in found.detail or "UTC" in found.detail  # the wall time from the boot time


def test_application_xids_are_notes_and_repeats_are_counted():
    lines = [(8700.0 + i, line) for i, line in enumerate(_lines("gpud-46-xid13-109.txt"))]
    found = {f.code: f for f in check_xid_events(_facts(_log(9000.0, lines), bus="00000000:CB:00.0"), BUNDLED)}
    assert found["GPU107"].severity == INFO and "3 times" in found["GPU107"].title
    assert found["GPU105"].severity == ERROR and "Xid 109" in found["GPU105"].title  # RESET_GPU


def test_an_xid_older_than_the_window_is_listed_not_judged():
    line = "NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE)"
    [found] = check_xid_events(_facts(_log(WINDOW_S + 5000.0, [(219.5, line)]), bus="00000000:07:00.0"), BUNDLED)
    assert (found.code, found.severity) == ("GPU108", INFO) and "Xid 48 on GPU 0" in found.title
    [recent] = check_xid_events(_facts(_log(WINDOW_S - 100.0, [(219.5, line)]), bus="00000000:07:00.0"), BUNDLED)
    assert (recent.code, recent.severity) == ("GPU105", ERROR)


def test_an_xid_on_a_bus_nvml_does_not_list_names_the_bus():
    [found] = check_xid_events(_facts(_log(100.0, [(50.0, _lines("modal-gpu-health-xid79.txt")[0])])), BUNDLED)
    assert found.subject.kind == "host" and "the GPU at 0000:c6:00 (not listed by NVML now)" in found.title


def test_driver_errors_without_an_xid_are_warnings():
    lines = [(float(i), line) for i, line in enumerate(_lines("ogkm-1230-gsp-timeout-h100.txt"))]
    [found] = check_xid_events(_facts(_log(600.0, lines)), BUNDLED)
    assert (found.code, found.severity) == ("GPU109", WARNING) and "2 times" in found.title


def test_an_xid_the_catalogue_does_not_know_is_a_note_that_says_so():
    [found] = check_xid_events(_facts(_log(100.0, [(50.0, "NVRM: Xid (PCI:0000:41:00): 250, pid=1, something new")])), BUNDLED)
    assert (found.code, found.severity) == ("GPU107", INFO) and "not in gpudoctor's Xid catalogue" in found.title


def test_the_healthy_lab_h100s_kernel_log_gives_no_finding(tmp_path):
    lines = [line.split("] ", 1) for line in _lines("h100x1-20261127-healthy.txt")]
    path = _kmsg(tmp_path, [(float(t.strip("[ ")), text) for t, text in lines], prio=6)
    log = _probe(tmp_path, path)
    assert log["read"] is True and log["nvrm_lines"] == 3 and log["events"] == log["errors"] == []
    assert list(check_xid_events(_facts(log), BUNDLED)) == []


def test_a_recorded_healthy_report_with_its_real_kernel_log_stays_all_clear(tmp_path):
    report = json.loads((REAL / "quick.json").read_text())
    lines = [line.split("] ", 1) for line in _lines("h100x1-20261127-healthy.txt")]
    facts = {**report["facts"], "kernel_log": _log(20000.0, [(float(t.strip("[ ")), text) for t, text in lines])}
    judged = pipeline.judge(facts)
    assert judged["findings"] == [] and judged["summary"]["verdict"] == "ok"
    assert next(c for c in judged["checks"] if c["id"] == "gpus.xid")["status"] == "pass"


def test_a_report_from_before_the_kernel_log_was_read_skips_the_check():
    report = json.loads((REAL / "quick.json").read_text())
    result = run_check(XID_CHECK, report["facts"])
    assert result.status == SKIP and "not read" in result.reason


# --- the ticket reader shares the catalogue ----------------------------------------------------------

@pytest.mark.parametrize("name, severity", [
    ("modal-gpu-health-xid79.txt", ERROR),
    ("azurehpc-nhc-xid119-h100.txt", ERROR),
    ("gpud-46-xid13-109.txt", None),  # 13 (a warning in a ticket) and 109 (RESET_GPU: an error)
    ("ml-engineering-xid63.txt", INFO),  # a successful row remap: the catalogue's IGNORE, a note
    ("pastebin-xJaypMZt-old-format.txt", WARNING),  # an old driver's line, without "PCI:"
])
def test_a_tickets_xid_is_judged_by_the_catalogue(name, severity):
    from gpudoctor.checks.messages import check_driver_messages

    evidence = (paste_messages.read(_lines(name)) or {"evidence": []})["evidence"]
    for item in evidence:
        item["where"] = "issue.md, line 1"
    found = {f.title.split(" on the GPU")[0]: f.severity for f in check_driver_messages({"evidence": evidence}, BUNDLED)
             if f.code == "DRV020"}
    if severity is None:
        assert found == {"the kernel log shows Xid 13 (Graphics Engine Exception)": WARNING,
                         "the kernel log shows Xid 109 (Context Switch Timeout Error)": ERROR}
    else:
        assert list(found.values()) == [severity]


def test_a_machine_without_the_nvidia_module_has_no_driver_log_to_judge():
    facts = {**_facts(_log(100.0, [])), "driver": {"kernel_module": {"loaded": False}}}
    with pytest.raises(NotApplicable, match="not loaded"):
        list(check_xid_events(facts, BUNDLED))


def test_a_saved_redacted_report_reads_back_and_judges_its_xids_the_same(tmp_path):
    from click.testing import CliRunner

    from gpudoctor.cli import cli
    from gpudoctor.redact import redact_report
    from gpudoctor.report import to_json

    report = json.loads((REAL / "quick.json").read_text())
    lines = [(89000.0, "NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.")]
    facts = {**report["facts"], "kernel_log": _log(90000.0, lines)}
    saved = tmp_path / "report.json"
    saved.write_text(to_json(redact_report(pipeline.judge(facts))))
    result = CliRunner().invoke(cli, ["analyze", str(saved), "--format", "json"])
    again = json.loads(result.stdout)
    assert result.exit_code == 1
    assert [(f["code"], f["subject"].get("gpu_index")) for f in again["findings"]] == [("GPU105", 0)]
