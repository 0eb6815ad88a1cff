"""What `merge` keeps of each node: the node judged on its report as saved, and only what the merged output
shows redacted (fleet.judged_view). On every report recorded on a real machine, that is exactly what
redacting the whole report first and judging it gave; and what is shown never carries a secret or an
identity of the node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import fleet
from gpudoctor.redact import redact_report

REAL = Path(__file__).parent / "fixtures" / "real"
RECORDED = sorted(p for p in REAL.rglob("*.json") if '"schema_version"' in p.read_text()[:4000])


def _loaded(path: Path) -> dict[str, Any]:
    report = json.loads(path.read_text())
    if not isinstance(report.get("facts"), dict):
        pytest.skip(f"{path.name} is not a report")
    return report


def _the_whole_way(report: dict[str, Any], identities: bool) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """What merge showed when it redacted every node's whole report and judged that."""
    redacted = redact_report(report, identities=identities)
    judged = fleet.judge_node(redacted["facts"], redacted.get("created"))
    shown = {"created": redacted.get("created"), "facts": fleet.shown_facts(redacted["facts"]),
             "redacted": redacted["redacted"]}
    return shown, [(f["code"], f["severity"], f["title"]) for f in judged["findings"]]


@pytest.mark.parametrize("identities", [True, False], ids=["redacted", "no-redact"])
@pytest.mark.parametrize("path", RECORDED, ids=[str(p.relative_to(REAL)) for p in RECORDED])
def test_a_node_is_shown_as_its_whole_report_redacted(path: Path, identities: bool) -> None:
    report = _loaded(path)
    if fleet.job_nodes(report["facts"]):
        pytest.skip("a torchrun job's report is redacted whole, as before")
    shown, verdict = fleet.judged_view(report, identities)
    expected_shown, expected_findings = _the_whole_way(report, identities)
    assert shown == expected_shown
    assert [(f["code"], f["severity"], f["title"]) for f in verdict["findings"]] == expected_findings


def test_what_is_shown_keeps_no_secret_and_no_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finding's title written from the saved facts (a path, a host name, a token in a variable) is shown
    redacted with the node's own pseudonyms."""
    report = json.loads((REAL / "h100x1-20261127" / "full.json").read_text())
    report["facts"]["host"]["hostname"] = "alice-ws"
    uuid = report["facts"]["gpus"][0]["uuid"] = "GPU-5f1c9a2e-7b3d-4e8f-9a01-23456789abcd"
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    title = f"HF_TOKEN={token} in /home/alice/.bashrc on alice-ws for {uuid}"
    judged = fleet.judge_node(report["facts"], report.get("created"))
    judged["findings"].append({"code": "ENV001", "severity": "warning", "title": title, "subject": {"kind": "host"}})
    monkeypatch.setattr(fleet, "judge_node", lambda facts, created, matrix: judged)
    shown, verdict = fleet.judged_view(report, identities=True)
    text = json.dumps([shown, verdict])
    for secret in (token, "alice", uuid):
        assert secret not in text
    assert verdict["findings"][-1]["title"] == "HF_TOKEN=*** in ~/.bashrc on host-redacted for GPU-redacted-0"
    assert shown["facts"]["host"]["hostname"] == "host-redacted"
    assert shown["facts"]["gpus"][0]["uuid"] == "GPU-redacted-0"
