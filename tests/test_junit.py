"""`--format junit` agrees with the exit code: a finding at or above `--fail-on` is a <failure>.

A warning that fails the gate (`--fail-on warning`, exit 1) must not show as 0 failures: a red CI
job with only green tests. A test case fails exactly when its check has a finding at or above
`--fail-on`, whatever the check's own status, so `--fail-on never` (exit 0) shows no failure either.

The reports are real recordings (tests/fixtures/real, see its README.md):
- h100x1-20261123/env-faults/slowing.json: a full `check` on 1 x H100 with three debugging settings
  (`CUDA_LAUNCH_BLOCKING=1` among them) in the environment: one warning (RUN014, the GPU slower than
  it should be) and three notes (FWK106 and others);
- h100x1-20261123/bogus_alloc.json: PyTorch refusing `PYTORCH_CUDA_ALLOC_CONF=bogus_option:1`: errors;
- h100x1-20261121/faults/stub-libcuda-first-on-ld-library-path.json: several errors in one check;
- h100x1-20261123/full.json: healthy; with its NVML probe's record changed to a timeout (one fact) for
  the timed-out case.

The JUnit layout CI tools read: https://github.com/testmoapp/junitxml (testsuites/testsuite/testcase,
<failure>, <error>, <skipped>, <system-out>, and the tests/failures/errors/skipped counts), as GitLab
(https://docs.gitlab.com/ci/testing/unit_test_reports/) and GitHub test reporters consume it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor import report as rep
from gpudoctor.cli import cli
from gpudoctor.render.junit import render_junit
from helpers_faults import HOST_ENV

REAL = Path(__file__).parent / "fixtures" / "real"
SLOWING = REAL / "h100x1-20261123" / "env-faults" / "slowing.json"
BOGUS = REAL / "h100x1-20261123" / "bogus_alloc.json"
STUB = REAL / "h100x1-20261121" / "faults" / "stub-libcuda-first-on-ld-library-path.json"
FULL = REAL / "h100x1-20261123" / "full.json"
ORDER = {"error": 2, "warning": 1, "info": 0}
AT_OR_ABOVE = {"error": ("error",), "warning": ("error", "warning"), "never": ()}


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    for name in HOST_ENV + ("PYTHONPATH", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def analyze(path: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["analyze", str(path), *args])


def judged(path: Path) -> dict[str, Any]:
    result = analyze(path, "--format", "json")
    return json.loads(result.stdout)


def cases(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml.split("\n", 1)[1] if xml.startswith("<?xml") else xml)
    return {c.get("name"): c for c in root.iter("testcase")}


def totals(xml: str) -> dict[str, int]:
    root = ET.fromstring(xml.split("\n", 1)[1])
    return {k: int(root.get(k)) for k in ("tests", "failures", "errors", "skipped")}


def test_a_real_warning_fails_under_fail_on_warning():
    report = judged(SLOWING)
    warnings = [f for f in report["findings"] if f["severity"] == "warning"]
    assert [f["code"] for f in warnings] == ["RUN014"]
    assert {f["severity"] for f in report["findings"]} == {"warning", "info"}
    result = analyze(SLOWING, "--format", "junit", "--fail-on", "warning")
    assert result.exit_code == 1
    found = cases(result.stdout)
    failed = {name for name, case in found.items() if case.find("failure") is not None}
    assert failed == {f["check"] for f in warnings}
    assert totals(result.stdout)["failures"] == len(warnings) == 1
    failure = found[warnings[0]["check"]].find("failure")
    assert failure.get("type") == "warning"
    assert failure.get("message") == f"RUN014 {warnings[0]['title']}"
    assert "warning RUN014" in failure.text
    # the notes fail nothing: their checks pass, the notes in <system-out>
    for note in (f for f in report["findings"] if f["severity"] == "info"):
        case = found[note["check"]]
        assert case.find("failure") is None and note["code"] in case.find("system-out").text


def test_the_same_warning_passes_under_fail_on_error():
    result = analyze(SLOWING, "--format", "junit", "--fail-on", "error")
    assert result.exit_code == 0
    assert totals(result.stdout)["failures"] == 0 and totals(result.stdout)["errors"] == 0
    warned = next(f for f in judged(SLOWING)["findings"] if f["code"] == "RUN014")
    case = cases(result.stdout)[warned["check"]]
    assert case.find("failure") is None and "warning RUN014" in case.find("system-out").text


@pytest.mark.parametrize("fail_on,exit_code", [("error", 1), ("warning", 1), ("never", 0)])
def test_errors_fail_only_when_the_gate_does(fail_on, exit_code):
    """Errors are failures under --fail-on error and warning, and not under never (exit 0): the test
    results never say the opposite of the exit code."""
    report = judged(BOGUS)
    errors = {f["check"] for f in report["findings"] if f["severity"] == "error"}
    assert errors and any(c["status"] == "fail" for c in report["checks"])
    result = analyze(BOGUS, "--format", "junit", "--fail-on", fail_on)
    assert result.exit_code == exit_code
    failed = {name for name, case in cases(result.stdout).items() if case.find("failure") is not None}
    assert failed == (errors if exit_code else set())
    assert (totals(result.stdout)["failures"] > 0) is (exit_code == 1)


def test_several_findings_of_one_check_are_one_failure_listing_them_all():
    report = judged(STUB)
    by_check: dict[str, list[dict[str, Any]]] = {}
    for f in report["findings"]:
        by_check.setdefault(f["check"], []).append(f)
    crowded = next(c for c, fs in by_check.items() if len([f for f in fs if f["severity"] == "error"]) > 1)
    result = analyze(STUB, "--format", "junit")
    failure = cases(result.stdout)[crowded].find("failure")
    codes = [f["code"] for f in by_check[crowded]]
    assert failure.get("message").endswith(f"(+{len(codes) - 1} more)")
    assert [line.split(":")[0].split()[1] for line in failure.text.splitlines() if not line.startswith(" ")] == codes
    assert totals(result.stdout)["failures"] == len({f["check"] for f in report["findings"] if f["severity"] == "error"})


def test_each_finding_is_its_parts_in_order_and_the_failure_names_the_first():
    """A failing case's text is, for each finding of its check, the finding's head, detail, fix text and each
    command (render/finding.py's order; links stay in the report), and the failure's message and type are its
    first failing finding's code, title and severity."""
    report = judged(STUB)
    xml = analyze(STUB, "--format", "junit").stdout
    failing = [c for c in cases(xml).values() if c.find("failure") is not None]
    assert failing
    for case in failing:
        own = [f for f in report["findings"] if f["check"] == case.get("name")]
        want = []
        for f in own:
            rem = f["remediation"]
            want.append(f"{f['severity']} {f['code']}: {f['title']}")
            want += [f"  {f['detail']}"] if f["detail"] else []
            want += [f"  Fix: {rem['text']}"] if rem["text"] else []
            want += [f"  $ {c}" for c in rem["commands"]]
        failure = case.find("failure")
        assert failure.text == "\n".join(want)
        first = next(f for f in own if f["severity"] == "error")
        assert failure.get("message").startswith(f"{first['code']} {first['title']}")
        assert failure.get("type") == "error"


@pytest.mark.parametrize("fail_on", ["error", "never"])
def test_a_timed_out_check_is_an_error_unless_nothing_fails(tmp_path, fail_on):
    """One fact changed: the NVML probe timed out. Its checks time out, and doctor.gates reports INT004
    (an error): under --fail-on error a red run, the timed-out checks <error>, gates a <failure>; under
    never a green run with no failure and no error, the timed-out checks skipped with why."""
    saved = json.loads(FULL.read_text())
    saved["facts"]["probes"]["nvml"] = {"status": "timeout", "duration_s": 25.0, "title": "the driver and GPUs through NVML",
                                        "error": "no answer within 25 s"}
    path = tmp_path / "timeout.json"
    path.write_text(json.dumps(saved))
    report = judged(path)
    timed_out = {c["id"] for c in report["checks"] if c["status"] == "timeout"}
    assert timed_out and "INT004" in {f["code"] for f in report["findings"]}
    result = analyze(path, "--format", "junit", "--fail-on", fail_on)
    found = cases(result.stdout)
    if fail_on == "error":
        assert result.exit_code == 1
        assert {n for n, c in found.items() if c.find("error") is not None} == timed_out
        assert found["doctor.gates"].find("failure").get("message").startswith("INT004 ")
    else:
        assert result.exit_code == 0
        assert totals(result.stdout)["failures"] == totals(result.stdout)["errors"] == 0
        assert all(found[n].find("skipped").get("message").startswith("timed out: ") for n in timed_out)


def test_one_testcase_per_check_and_skipped_checks_skipped():
    report = judged(FULL)
    result = analyze(FULL, "--format", "junit")
    assert result.exit_code == 0
    found = cases(result.stdout)
    assert sorted(found) == sorted(c["id"] for c in report["checks"])  # grouped by area, one case each
    skipped = {c["id"] for c in report["checks"] if c["status"] == "skip"}
    assert skipped and {n for n, c in found.items() if c.find("skipped") is not None} == skipped
    for check in report["checks"]:
        if check["status"] == "skip":
            assert found[check["id"]].find("skipped").get("message") == check["reason"]
    root = ET.fromstring(result.stdout.split("\n", 1)[1])
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [f"gpudoctor.{a}" for a in report["summary"]["areas"]]
    for key in ("tests", "failures", "errors", "skipped"):
        assert int(root.get(key)) == sum(int(s.get(key)) for s in suites)
    assert totals(result.stdout) == {"tests": len(report["checks"]), "failures": 0, "errors": 0, "skipped": len(skipped)}


def test_a_finding_of_no_listed_check_still_fails():
    """A report edited by hand: a finding whose check is not among the checks still sets the exit code,
    so it gets a test case of its own."""
    report = judged(FULL)
    report["findings"].append({"code": "GPU001", "severity": "error", "title": "GPU 0 has fallen off the bus",
                               "check": "gpus.retired", "subject": {"kind": "gpu", "gpu_index": 0}})
    report["findings"].append({"code": "X", "severity": "warning", "title": "no check at all"})
    xml = render_junit(report, "warning")
    found = cases(xml)
    assert found["gpus.retired"].find("failure").get("message") == "GPU001 GPU 0 has fallen off the bus"
    assert found["findings"].find("failure").get("type") == "warning"
    assert totals(xml)["failures"] == 2


@pytest.mark.parametrize("path", sorted(p for p in REAL.rglob("*.json") if "truth" not in p.name),
                         ids=lambda p: str(p.relative_to(REAL)))
def test_failures_agree_with_the_exit_code_on_every_recording(path):
    """On every real report, re-judged as `analyze` does, for each --fail-on: the failing test cases are
    exactly the checks with a finding at or above it, and there are some exactly when the exit code is 1."""
    report = pipeline.judge(json.loads(path.read_text())["facts"])
    findings = rep.findings_of(report)
    for fail_on in ("error", "warning", "never"):
        xml = render_junit(report, fail_on)
        failed = {n for n, c in cases(xml).items() if c.find("failure") is not None}
        assert failed == {f["check"] for f in report["findings"] if f["severity"] in AT_OR_ABOVE[fail_on]}
        assert (totals(xml)["failures"] > 0) is (rep.exit_code(findings, fail_on) == rep.EXIT_FINDINGS)
        if fail_on == "never":
            assert totals(xml)["errors"] == 0
