"""What the lab H100 itself printed, pasted back into `analyze` (recorded on nvidia-h100-x1, 2026-11-23 17:25 UTC,
tests/fixtures/real/h100x1-20261123/final/): `python -m torch.utils.collect_env` and `nvidia-smi` of a healthy
machine must give no error, and the facts read must equal what gpudoctor's own check found there."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gpudoctor.cli import cli

FINAL = Path(__file__).parent / "fixtures/real/h100x1-20261123/final"


def _analyze(*names: str) -> dict:
    result = CliRunner().invoke(cli, ["analyze", *[str(FINAL / n) for n in names], "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_lab_collect_env_is_read_and_judged_healthy():
    report = _analyze("collect_env.txt")
    own = json.loads((FINAL / "full.json").read_text())["facts"]
    assert [f for f in report["findings"] if f["severity"] in ("error", "warning")] == []
    facts = report["facts"]
    assert facts["nvml"]["driver_version"] == own["nvml"]["driver_version"] == "580.159.04"
    assert facts["frameworks"]["torch"]["info"]["version"] == own["frameworks"]["torch"]["info"]["version"]


def test_the_lab_nvidia_smi_table_is_read_and_judged_healthy():
    report = _analyze("nvidia-smi.txt")
    own = json.loads((FINAL / "full.json").read_text())["facts"]
    assert [f for f in report["findings"] if f["severity"] in ("error", "warning")] == []
    assert report["facts"]["nvml"]["driver_version"] == own["nvml"]["driver_version"]
    assert [g["name"] for g in report["facts"]["gpus"]] == [g["name"] for g in own["gpus"]]


def test_the_lab_text_report_ends_all_clear_with_its_proof_table():
    text = (FINAL / "full-text.txt").read_text()
    assert "no problems found" in text.splitlines()[0]
    assert "bf16 790 TFLOP/s (100% of 786 expected)" in text
