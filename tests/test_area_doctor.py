"""The doctor area: gpudoctor judging its own run (gpudoctor/checks/gates.py: doctor.selection, INT004 and
INT005, gates that cannot pass by checking nothing, docs/deployment.md "CI and health gates";
checks/internal.py's INT001-INT003, a probe or check that failed, are tested in tests/test_runner.py
beside the runner that records them).

Run through the real CLI on this machine, which has no GPU and no NVIDIA driver: exactly the case in
which ``--only gpus --require-gpus 1``, ``--only acceleration`` and ``--timeout 0.1`` could exit 0.
Each must fail in every format (text, json, markdown, junit) and with exit code 1, from the
findings alone; and the recordings of healthy real GPU machines, re-judged, must get no new finding.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner

from conftest import REAL_DIRS
from gpudoctor.checks.registry import CHECKS
from gpudoctor.cli import cli
from gpudoctor.probes.system import probe_driver_files
from helpers_facts import with_fact
from helpers_children import children_left

_driver = probe_driver_files()
NO_DRIVER = not _driver["nvml_library_files"] and not any(n["exists"] for n in _driver["device_nodes"].values())
no_driver = pytest.mark.skipif(not NO_DRIVER, reason="these tests reproduce a machine without an NVIDIA driver")

FORMATS = ("text", "json", "markdown", "junit")
#: Three reproductions of a doctor gate that passed a broken machine, each with the codes that must fail it.
CASES = {
    "require-gpus-only-gpus": (["--only", "gpus", "--require-gpus", "1"], {"INT005", "VIS005"}),
    "only-acceleration": (["--only", "acceleration"], {"INT005"}),
    "timeout": (["--timeout", "0.1"], {"INT004"}),
}
CHECK_AREAS = {c.id: c.area for c in CHECKS}


from test_cli import plain_env, runner  # noqa: E402,F401 - the same clean environment and runner (autouse there)


def _check(runner: CliRunner, *args: str) -> Any:
    result = runner.invoke(cli, ["check", *args])
    assert "Traceback" not in result.output
    return result


def _errors(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in report["findings"]:
        if f["severity"] == "error":
            out.setdefault(f["code"], []).append(f)
    return out


def _assert_judged(case: str, report: dict[str, Any]) -> None:
    """What each case's gate findings say is what the report's own checks show."""
    checks = {c["id"]: c for c in report["checks"]}
    errors = _errors(report)
    assert report["summary"]["verdict"] == "error"
    assert report["summary"]["counts"]["error"] == sum(len(v) for v in errors.values())
    if case == "timeout":
        timed_out = [c for c in report["checks"] if c["status"] == "timeout"]
        assert timed_out, "nothing timed out: the case tested nothing"
        [int004] = errors["INT004"]
        assert int004["title"] == f"{len(timed_out)} check(s) did not finish before the --timeout deadline"
        assert report["summary"]["checks"]["timeout"] == len(timed_out)
        for c in timed_out:  # every timed-out check is named, under the probe that held it up
            assert c["id"] in int004["detail"]
        assert int004["check"] == "doctor.gates"
        return
    area = "gpus" if case == "require-gpus-only-gpus" else "acceleration"
    selected = [c for c in report["checks"] if c["area"] == area]
    assert selected, f"no {area} check ran"
    codes_of = {c["id"]: set(c["finding_codes"]) for c in selected}
    for c in selected:  # none of them checked anything: skipped, or only noted that it ran on the CPU
        assert c["status"] == "skip" or (c["status"] == "pass" and codes_of[c["id"]] <= {"RUN017"}), c
    only = [f for f in errors["INT005"] if f["title"].startswith(f"--only {area} checked nothing: ")]
    assert len(only) == 1, errors["INT005"]
    for c in selected:
        assert f"{c['id']}: {c['status']}" in only[0]["detail"]
        if c["status"] == "skip":
            assert c["reason"] in only[0]["detail"]
    if case == "require-gpus-only-gpus":
        assert "visibility.required_gpus" in checks  # --require-gpus is checked whatever --only says
        [vis005] = errors["VIS005"]
        assert vis005["title"].startswith("could not confirm 1 usable GPU(s): NVML is not available")
        assert report["facts"]["options"] == {"require_gpus": 1, "only": ["gpus"]}
    else:
        assert report["facts"]["options"] == {"only": ["acceleration"]}


@no_driver
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_gate_that_checked_nothing_fails_in_every_format(runner, case, fmt):
    args, codes = CASES[case]
    result = _check(runner, *args, "--format", fmt)
    assert result.exit_code == 1, result.output
    out = result.stdout
    if fmt == "json":
        report = json.loads(out)
        assert codes <= set(_errors(report)), [(f["code"], f["title"]) for f in report["findings"]]
        _assert_judged(case, report)
    elif fmt == "text":
        assert "No problems found" not in out
        assert re.search(r"^Problems found\. [1-9]\d* error\(s\)", out, re.M), out
        for code in codes:
            assert re.search(rf"^    \S+ {code} ", out, re.M), out
    elif fmt == "markdown":
        assert out.startswith("## gpudoctor report: error\n")
        for code in codes:
            assert f"- **{code}** (error) " in out
    else:
        root = ET.fromstring(out)
        suites = root.findall("testsuite")
        assert sum(int(s.get("failures")) for s in suites) > 0
        failed = {c.get("name"): c.find("failure") for c in root.iter("testcase") if c.find("failure") is not None}
        assert "doctor.gates" in failed
        text = failed["doctor.gates"].text
        for code in codes - {"VIS005"}:
            assert f"error {code}: " in text
        if "VIS005" in codes:
            assert "error VIS005: could not confirm 1 usable GPU(s)" in failed["visibility.required_gpus"].text
    assert children_left() == []


@no_driver
def test_quick_alone_is_judged_as_before_and_quick_only_acceleration_says_why(runner):
    quick = json.loads(_check(runner, "--quick", "--format", "json").stdout)
    accel = [c for c in quick["checks"] if c["area"] == "acceleration"]
    assert accel and {c["status"] for c in accel} == {"skip"}  # nothing of acceleration ran...
    assert not {"INT004", "INT005"} & {f["code"] for f in quick["findings"]}  # ...and nothing asked for it
    assert "options" not in quick["facts"]

    result = _check(runner, "--quick", "--only", "acceleration", "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    [int005] = _errors(report)["INT005"]
    assert int005["title"].startswith("--only acceleration checked nothing: ")
    assert "(--quick)" in int005["title"]
    assert all(c["status"] == "skip" for c in report["checks"] if c["area"] == "acceleration")


@no_driver
def test_an_area_that_checked_something_is_not_a_gate_failure(runner):
    """--only python: the Python environment can be read without a GPU, so nothing is said about it."""
    report = json.loads(_check(runner, "--only", "python", "--format", "json").stdout)
    python = [c for c in report["checks"] if c["area"] == "python"]
    assert any(c["status"] not in ("skip", "timeout") for c in python)
    assert [f["code"] for f in report["findings"] if f["code"] in ("INT004", "INT005")] == []


@no_driver
def test_a_saved_report_keeps_its_verdict_in_analyze(runner, tmp_path):
    path = tmp_path / "r.json"
    result = _check(runner, "--only", "gpus", "--require-gpus", "1", "--format", "json", "--output", str(path))
    assert result.exit_code == 1
    saved = json.loads(path.read_text())
    again = runner.invoke(cli, ["analyze", str(path), "--format", "json"])
    assert again.exit_code == 1
    report = json.loads(again.stdout)
    assert [(f["code"], f["title"]) for f in report["findings"]] == [(f["code"], f["title"]) for f in saved["findings"]]
    assert "0 new, 0 no longer reported" in again.stderr


# --- re-judging saved reports: recordings of healthy real GPU machines -------------------------------

HEALTHY = [p for d in REAL_DIRS for p in sorted(d.glob("*.json")) if p.name == "report.json" or "workload-report" in p.name
           or p.name.startswith("deep-report")]


def _write(tmp_path: Path, report: dict[str, Any], facts: dict[str, Any]) -> Path:
    path = tmp_path / "derived.json"
    path.write_text(json.dumps({**report, "facts": facts}))
    return path


@pytest.mark.parametrize("path", HEALTHY, ids=[f"{p.parent.name}/{p.name}" for p in HEALTHY])
def test_a_healthy_real_report_rejudged_gets_no_new_finding(runner, path):
    saved = json.loads(path.read_text())
    assert "options" not in saved["facts"]  # recorded with no --only, --skip or --require-gpus
    result = runner.invoke(cli, ["analyze", str(path), "--format", "json"])
    report = json.loads(result.stdout)
    assert "gpudoctor: compared with the verdict saved by gpudoctor" in result.stderr
    assert re.search(r": 0 new, 0 no longer reported, \d+ unchanged", result.stderr), result.stderr
    assert {f["code"] for f in report["findings"]} == {f["code"] for f in saved["findings"]}
    gates = next(c for c in report["checks"] if c["id"] == "doctor.gates")
    assert gates["status"] == "pass" and gates["finding_codes"] == []
    assert result.exit_code == (1 if any(f["severity"] == "error" for f in saved["findings"]) else 0)


@pytest.mark.parametrize("real", REAL_DIRS, ids=[p.name for p in REAL_DIRS])
def test_on_a_real_gpu_machine_the_same_gates_pass(runner, real, tmp_path):
    """The gates judge what ran: on the real recordings the GPUs were read and the smoke kernel ran, so
    --only gpus / --only acceleration.smoke and --require-gpus (up to the GPUs there) pass; one GPU more fails."""
    saved = json.loads((real / "report.json").read_text())
    count = len(saved["facts"]["gpus"])
    for options, expected in (({"only": ["gpus", "acceleration.smoke"], "require_gpus": count}, []),
                              ({"only": ["gpus"], "require_gpus": count + 1}, ["VIS005"])):
        path = _write(tmp_path, saved, {**saved["facts"], "options": options})
        result = runner.invoke(cli, ["analyze", str(path), "--format", "json"])
        report = json.loads(result.stdout)
        assert [f["code"] for f in report["findings"]] == expected, report["findings"]
        assert result.exit_code == (1 if expected else 0)


@pytest.mark.parametrize("real", REAL_DIRS, ids=[p.name for p in REAL_DIRS])
def test_a_real_report_whose_nvml_probe_timed_out_fails(runner, real, tmp_path):
    saved = json.loads((real / "report.json").read_text())
    facts = with_fact(saved["facts"], "probes.nvml", {"status": "timeout", "duration_s": 25.0,
                                                      "title": "the driver and GPUs through NVML", "error": "no answer within 25 s"})
    facts = with_fact(facts, "options", {"require_gpus": 1})
    result = runner.invoke(cli, ["analyze", str(_write(tmp_path, saved, facts)), "--format", "json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    timed_out = [c["id"] for c in report["checks"] if c["status"] == "timeout"]
    assert "visibility.required_gpus" in timed_out
    errors = _errors(report)
    assert errors["INT004"][0]["title"] == f"{len(timed_out)} check(s) did not finish: a probe they need did not answer in time"
    assert [f["title"] for f in errors["INT005"]] == ["could not confirm 1 usable GPU(s) (--require-gpus 1): probe nvml timed out"]


LEGACY_DEADLINE = Path(__file__).parent / "fixtures/real/h100x1-20261123/hostile/nvcc-hang.json"


def test_a_legacy_deadline_record_is_judged_as_its_new_form(runner, tmp_path):
    """The H100 recording of a hanging nvcc under --timeout 3 was saved when a probe record said the deadline
    only in its ``error`` sentence. Re-judged as saved, and with the record in today's form (``reason``
    "deadline"), it gets the same findings and verdict: the INT004 of a deadline."""
    saved = json.loads(LEGACY_DEADLINE.read_text())
    record = saved["facts"]["probes"]["cuda_stack"]
    assert "reason" not in record and record["status"] == "timeout"  # the legacy form, as recorded
    judged = []
    for facts in (saved["facts"], with_fact(saved["facts"], "probes.cuda_stack", {**record, "reason": "deadline"})):
        result = runner.invoke(cli, ["analyze", str(_write(tmp_path, saved, facts)), "--format", "json"])
        report = json.loads(result.stdout)
        judged.append(([(f["code"], f["severity"], f["title"]) for f in report["findings"]], report["summary"],
                       result.exit_code))
    assert judged[0] == judged[1]
    assert any(code == "INT004" and title.endswith("before the --timeout deadline") for code, _, title in judged[0][0])


@pytest.mark.parametrize("fail_on,failed", [("error", False), ("warning", True)])
def test_junit_failures_follow_fail_on(runner, tmp_path, fail_on, failed):
    """A warning (INT001: a probe crashed) is a JUnit <failure> exactly when --fail-on makes it exit 1."""
    saved = json.loads((REAL_DIRS[0] / "report.json").read_text())
    facts = with_fact(saved["facts"], "probes.driver_files", {"status": "error", "duration_s": 0.1, "title": "the kernel driver",
                                                              "error": "PermissionError: denied"})
    path = _write(tmp_path, saved, facts)
    report = json.loads(runner.invoke(cli, ["analyze", str(path), "--format", "json"]).stdout)
    assert {f["severity"] for f in report["findings"]} == {"warning"}
    result = runner.invoke(cli, ["analyze", str(path), "--format", "junit", "--fail-on", fail_on])
    assert result.exit_code == (1 if failed else 0)
    root = ET.fromstring(result.stdout)
    warned = {f["check"] for f in report["findings"]}
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert {n for n in warned if cases[n].find("failure") is not None} == (warned if failed else set())
    assert (sum(int(s.get("failures")) for s in root.findall("testsuite")) > 0) is failed
