"""`--format junit`: each check a JUnit test case, each area a suite, so CI systems show them.

A failing check's text often quotes a framework's error, coloured with ANSI codes, and XML 1.0 allows
no escape character: every string is cleaned first (render/safe.py), so the file stays well-formed
exactly when CI needs to read it. ElementTree escapes the markup."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from gpudoctor.findings import ERROR
from gpudoctor.render.safe import printable
from gpudoctor.report import FAIL_ON


def render_junit(report: dict[str, Any], fail_on: str = "error") -> str:
    """A check is a <failure> when it failed (an error) or reported a finding at or above ``fail_on``, so
    that the test results agree with the exit code; a check that timed out is an <error>."""
    failing = FAIL_ON.get(fail_on, (ERROR,))
    report = printable(report)  # keeps newlines and tabs (allowed in XML), shows every other control
    findings: dict[str, list[dict[str, Any]]] = {}
    for f in report.get("findings") or []:
        findings.setdefault(f.get("check", ""), []).append(f)
    suites = ET.Element("testsuites", name="gpudoctor")
    by_area: dict[str, ET.Element] = {}
    for check in report.get("checks") or []:
        area = check.get("area", "other")
        suite = by_area.get(area)
        if suite is None:
            suite = by_area[area] = ET.SubElement(suites, "testsuite", name=f"gpudoctor.{area}")
        case = ET.SubElement(suite, "testcase", classname=f"gpudoctor.{area}", name=check["id"],
                             time=f"{check.get('duration_s', 0):.6f}")
        text = "\n".join(_finding_text(f) for f in findings.get(check["id"], []))
        status = check.get("status")
        worst = [f for f in findings.get(check["id"], []) if f.get("severity") in failing]
        if status == "fail" or worst:
            message = _first_title(findings, check, "error") if status == "fail" else worst[0]["title"]
            ET.SubElement(case, "failure", message=message).text = text
        elif status == "timeout":
            ET.SubElement(case, "error", message=f"timed out: {check.get('reason', '')}")
        elif status == "skip":
            ET.SubElement(case, "skipped", message=check.get("reason", ""))
        elif text:
            ET.SubElement(case, "system-out").text = text
    for suite in by_area.values():
        cases = list(suite)
        suite.set("tests", str(len(cases)))
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            suite.set(attr, str(sum(1 for c in cases if c.find(tag) is not None)))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _first_title(findings: dict[str, list[dict[str, Any]]], check: dict[str, Any], severity: str) -> str:
    return next((f["title"] for f in findings.get(check["id"], []) if f.get("severity") == severity), check["title"])


def _finding_text(f: dict[str, Any]) -> str:
    rem = f.get("remediation") or {}
    lines = [f"{f['severity']} {f['code']}: {f['title']}"]
    if f.get("detail"):
        lines.append(f"  {f['detail']}")
    if rem.get("text"):
        lines.append(f"  Fix: {rem['text']}")
    lines += [f"  $ {c}" for c in rem.get("commands") or []]
    return "\n".join(lines)
