"""`--format junit`: each check a JUnit test case, each area a suite, so CI systems show them.

The test results must say what the exit code says: a CI job that is red because gpudoctor exited 1 must
show the failing test cases, and a job that passes must show none. So a test case fails exactly when its
check reported a finding at or above ``--fail-on`` (the findings that make the exit code 1,
``report.exit_code``), whatever the check's own status:

- ``--fail-on error`` (the default): checks with an error finding are ``<failure>``; a check that only warns
  passes, its findings in ``<system-out>``;
- ``--fail-on warning``: checks with an error or a warning are ``<failure>``;
- ``--fail-on never``: nothing fails (exit 0); every finding is still in ``<system-out>``.

A check that timed out is an ``<error>`` (a timeout always brings the error ``INT004`` from
``doctor.gates``, so the run fails under ``error`` and ``warning``), and ``<skipped>`` under ``never``. A
check that was skipped is ``<skipped>`` with its reason. A finding whose check is not among the report's
checks (a report edited by hand) gets a test case of its own, so no finding that sets the exit code is
missing from the results. Each ``<failure>`` names the first failing finding (``message``) and its
severity (``type``), and its text lists every finding of the check.

A failing check's text often quotes a framework's error, coloured with ANSI codes, and XML 1.0 allows
no escape character: every string is cleaned first (render/safe.py), so the file stays well-formed
exactly when CI needs to read it. ElementTree escapes the markup. Each finding's text is its parts as
render/finding.py reads them for every format."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from gpudoctor.findings import ERROR, PASS, SKIP, TIMEOUT
from gpudoctor.render import finding
from gpudoctor.render.safe import printable
from gpudoctor.report import FAIL_ON


def render_junit(report: dict[str, Any], fail_on: str = "error") -> str:
    """The report as JUnit XML whose failures are exactly the checks with findings at or above ``fail_on``."""
    failing = FAIL_ON.get(fail_on, (ERROR,))
    report = printable(report)  # keeps newlines and tabs (allowed in XML), shows every other control
    findings: dict[str, list[dict[str, Any]]] = {}
    for f in report.get("findings") or []:
        if isinstance(f, dict):
            findings.setdefault(str(f.get("check") or ""), []).append(f)
    checks = [c for c in report.get("checks") or [] if isinstance(c, dict) and c.get("id")]
    listed = {str(c["id"]) for c in checks}
    checks += [{"id": check or "findings", "area": "other", "title": "findings of no check in this report",
                "status": PASS, "duration_s": 0} for check in findings if check not in listed]
    if "" in findings:
        findings["findings"] = findings.pop("")
    suites = ET.Element("testsuites", name="gpudoctor")
    by_area: dict[str, ET.Element] = {}
    for check in checks:
        area = str(check.get("area") or "other")
        suite = by_area.get(area)
        if suite is None:
            suite = by_area[area] = ET.SubElement(suites, "testsuite", name=f"gpudoctor.{area}")
        case = ET.SubElement(suite, "testcase", classname=f"gpudoctor.{area}", name=str(check["id"]),
                             time=f"{_seconds(check.get('duration_s')):.6f}")
        own = findings.get(str(check["id"]), [])
        text = "\n".join(_finding_text(f) for f in own)
        status = check.get("status")
        worst = [f for f in own if f.get("severity") in failing]
        if worst:
            first, more = finding.parts(worst[0]), f" (+{len(worst) - 1} more)" if len(worst) > 1 else ""
            ET.SubElement(case, "failure", message=(first.head("{code} {title}") + more).strip(),
                          type=first.severity).text = text
            continue
        if status == TIMEOUT:
            tag = "error" if failing else "skipped"
            ET.SubElement(case, tag, message=f"timed out: {check.get('reason', '')}")
        elif status == SKIP:
            ET.SubElement(case, "skipped", message=str(check.get("reason", "")))
        if text:
            ET.SubElement(case, "system-out").text = text
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    time_total = 0.0
    for suite in by_area.values():
        cases = list(suite)
        counts = {"tests": len(cases)}
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            counts[attr] = sum(1 for c in cases if c.find(tag) is not None)
        seconds = sum(float(c.get("time", 0)) for c in cases)
        for attr, n in counts.items():
            suite.set(attr, str(n))
            totals[attr] += n
        suite.set("time", f"{seconds:.6f}")
        time_total += seconds
    for attr, n in totals.items():
        suites.set(attr, str(n))
    suites.set("time", f"{time_total:.6f}")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _finding_text(f: dict[str, Any]) -> str:
    """A finding in a test case's text: its head, detail, fix and commands (links are in the report)."""
    return "\n".join(finding.lines(finding.parts(f), "{severity} {code}: {title}", detail="  {}", fix="  Fix: {}",
                                    command="  $ {}"))


def render_report(report: dict[str, Any], options: Any) -> str:
    """``--format junit`` as the format table (render/formats.py) calls it: failures follow ``--fail-on``."""
    return render_junit(report, options.fail_on)
