"""The command line, run in-process with Click's CliRunner on this real machine.

This machine is a Docker container with no GPU, no device nodes and no NVIDIA driver, so
``check`` must conclude CTR001 ("this container was started without GPU access").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.checks.registry import CHECKS
from gpudoctor.cli import cli
from gpudoctor.probes.system import probe_driver_files, probe_host
from gpudoctor.report import TOP_LEVEL_KEYS
from helpers_facts import with_fact
from helpers_children import children_left
from helpers_faults import HOST_ENV

import importlib.util as _util

#: Where PyTorch / tensorflow-cpu are installed (the test extra; any build), `check` runs their training step on
#: the CPU and notes it (RUN017), one note per framework; the system Python here has neither.
CPU_TRAINING_NOTES = ["RUN017"] * sum(_util.find_spec(n) is not None for n in ("torch", "tensorflow"))

_host, _driver = probe_host(), probe_driver_files()
pytestmark = pytest.mark.skipif(
    not _host["container"]["detected"] or _driver["nvml_library_files"] or any(
        n["exists"] for n in _driver["device_nodes"].values()),
    reason="these tests expect a container without GPU access (CTR001)")


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    """No CUDA/NVIDIA variables from the caller's shell, and the real pynvml."""
    for name in HOST_ENV + ("PYTHONPATH", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="module")
def saved_report(tmp_path_factory) -> Path:
    """A JSON report of this machine, written by ``check --output``."""
    path = tmp_path_factory.mktemp("report") / "report.json"
    result = CliRunner().invoke(cli, ["check", "--format", "json", "--output", str(path)])
    assert result.exit_code == 1, result.output
    return path


def one_line_error(result) -> str:
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_check_text(runner):
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 1
    assert "CTR001 this container was started without GPU access" in result.stdout
    assert f"Problems found. 1 error(s), 0 warning(s), {len(CPU_TRAINING_NOTES)} note(s)." in result.stdout
    assert "Traceback" not in result.output


def test_check_json(runner):
    result = runner.invoke(cli, ["check", "--format", "json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert list(report) == [*TOP_LEVEL_KEYS, "redacted"]  # "redacted" is added on the way out (gpudoctor/redact.py)
    assert list(report) == ["schema_version", "tool", "created", "facts", "checks", "findings", "summary", "redacted"]
    assert report["redacted"] is True
    assert report["schema_version"] == 1
    assert report["tool"]["name"] == "gpudoctor"
    assert [f["code"] for f in report["findings"]] == ["CTR001", *CPU_TRAINING_NOTES]
    assert report["findings"][0]["check"] == "driver.nvml"
    assert report["summary"]["verdict"] == "error"
    assert report["facts"]["nvml"]["init"]["reason"] == "library_not_found"
    assert [c["id"] for c in report["checks"]] == [c.id for c in CHECKS]
    from gpudoctor.runner import DEEP_ONLY, PROBES

    assert {p: r["status"] for p, r in report["facts"]["probes"].items()} == {p.name: "ok" for p in PROBES
                                                                              if p.name not in DEEP_ONLY}


@pytest.mark.parametrize("fail_on,code", [("never", 0), ("error", 1), ("warning", 1)])
def test_fail_on(runner, fail_on, code):
    result = runner.invoke(cli, ["check", "--fail-on", fail_on])
    assert result.exit_code == code
    assert "CTR001" in result.stdout


def test_check_markdown(runner):
    result = runner.invoke(cli, ["check", "--format", "markdown"])
    assert result.exit_code == 1
    out = result.stdout
    assert out.startswith("## gpudoctor report: error\n")
    assert "| Area | Status | |\n|---|---|---|\n" in out
    assert "| Driver | ❌ fail |" in out
    assert "- **CTR001** (error) this container was started without GPU access" in out
    assert out.count("<details>") == 3 and out.count("</details>") == 3


def test_output_writes_file(runner, tmp_path):
    target = tmp_path / "out.md"
    result = runner.invoke(cli, ["check", "--format", "markdown", "--output", str(target)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip() == f"gpudoctor: report written to {target}"
    assert target.read_text(encoding="utf-8").startswith("## gpudoctor report: error")
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]  # no temporary file left behind


def test_output_into_missing_directory_exits_3(runner, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "report.json"
    result = runner.invoke(cli, ["check", "--format", "json", "--output", str(target)])
    assert result.exit_code == 3
    line = one_line_error(result)
    assert line.startswith(f"Error: could not write the report to {target}:")
    assert not target.exists()


def test_output_into_read_only_directory_exits_3(runner, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: a read-only directory is still writable")
        result = runner.invoke(cli, ["check", "--output", str(ro / "report.txt")])
        assert result.exit_code == 3
        assert "could not write the report" in one_line_error(result)
    finally:
        ro.chmod(0o700)


def test_analyze_round_trip(runner, saved_report):
    saved = json.loads(saved_report.read_text())
    result = runner.invoke(cli, ["analyze", str(saved_report), "--format", "json"])
    assert result.exit_code == 1
    again = json.loads(result.stdout)
    assert [f["code"] for f in again["findings"]] == [f["code"] for f in saved["findings"]] == ["CTR001", *CPU_TRAINING_NOTES]
    assert again["facts"] == saved["facts"]
    assert again["created"] == saved["created"]


def test_analyze_text(runner, saved_report):
    result = runner.invoke(cli, ["analyze", str(saved_report)])
    assert result.exit_code == 1
    assert "CTR001 this container was started without GPU access" in result.stdout


def test_analyze_derived_fault(runner, saved_report, tmp_path):
    """A fault derived from the real recording by changing one fact is judged by today's checks."""
    saved = json.loads(saved_report.read_text())
    facts = with_fact(saved["facts"], "nvml.init", {"ok": False, "reason": "driver_not_loaded", "code": 9,
                                                   "message": "Driver Not Loaded"})
    path = tmp_path / "derived.json"
    path.write_text(json.dumps({**saved, "facts": facts}))
    result = runner.invoke(cli, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 1
    assert [f["code"] for f in json.loads(result.stdout)["findings"]] == ["DRV002", *CPU_TRAINING_NOTES]


BAD_REPORTS = {
    "malformed": ("{not json", "is not valid JSON"),
    "list": ("[1, 2, 3]", "is not a gpudoctor report (expected a JSON object)"),
    "no-facts": ('{"schema_version": 1}', "is not a gpudoctor report (missing facts)"),
    "future-schema": ('{"schema_version": 999, "facts": {}}', "uses report schema 999"),
    "string-schema": ('{"schema_version": "1", "facts": {}}', "has an invalid schema_version '1'"),
    "facts-not-object": ('{"schema_version": 1, "facts": []}', "has malformed facts"),
    "empty": ("", "is not valid JSON"),
}


@pytest.mark.parametrize("name", sorted(BAD_REPORTS))
def test_analyze_bad_report(runner, tmp_path, name):
    text, message = BAD_REPORTS[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    result = runner.invoke(cli, ["analyze", str(path)])
    assert result.exit_code == 2
    line = one_line_error(result)
    assert line.startswith(f"Error: {path} ")
    assert message in line


def test_analyze_truncated(runner, tmp_path, saved_report):
    text = saved_report.read_text()
    path = tmp_path / "truncated.json"
    path.write_text(text[: len(text) // 2])
    result = runner.invoke(cli, ["analyze", str(path)])
    assert result.exit_code == 2
    assert "is not valid JSON" in one_line_error(result)


def test_analyze_binary_file(runner, tmp_path):
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00garbage\x80")
    result = runner.invoke(cli, ["analyze", str(path)])
    assert result.exit_code == 2
    assert one_line_error(result).startswith(f"Error: cannot read {path}")


def test_analyze_missing_file(runner, tmp_path):
    path = tmp_path / "nope.json"
    result = runner.invoke(cli, ["analyze", str(path)])
    assert result.exit_code == 2
    assert one_line_error(result) == f"Error: cannot read {path}: No such file or directory"


def test_unknown_option(runner):
    result = runner.invoke(cli, ["check", "--no-such-option"])
    assert result.exit_code == 2
    assert "No such option" in result.stderr and "--no-such-option" in result.stderr
    assert "Traceback" not in result.output


def test_unknown_format(runner):
    result = runner.invoke(cli, ["check", "--format", "yaml"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_explain(runner):
    result = runner.invoke(cli, ["explain", "DRV001"])
    assert result.exit_code == 0
    assert result.stdout.startswith("DRV001 nvml-library-not-found (error)\n\nWhat it means: ")
    assert "\n\nWhy it matters: " in result.stdout and "\n\nHow to fix: " in result.stdout
    assert runner.invoke(cli, ["explain", "drv001"]).stdout == result.stdout


def test_explain_unknown(runner):
    result = runner.invoke(cli, ["explain", "NOPE"])
    assert result.exit_code == 2
    assert one_line_error(result) == "Error: unknown finding code 'NOPE'; `gpudoctor checks` lists them"


def test_checks_lists_every_check(runner):
    result = runner.invoke(cli, ["checks"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.stdout.splitlines() if line and not line.startswith(" ")]
    assert listed == [c.id for c in CHECKS]
    for c in CHECKS:
        assert c.title in result.stdout


def test_devices(runner):
    """No GPU here: the listing says so, and exits 1, as `check` does on this machine."""
    result = runner.invoke(cli, ["devices"])
    assert result.exit_code == 1
    assert result.stdout.startswith("NVIDIA driver: ")
    assert "No GPU listed by NVML." in result.stdout
    assert result.stderr.startswith("gpudoctor: no GPU listed (NVIDIA driver: ")


def test_devices_json(runner):
    result = runner.invoke(cli, ["devices", "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert sorted(data) == ["gpus", "nvml", "topology"]
    assert data["gpus"] == []
    assert data["nvml"]["init"]["reason"] == "library_not_found"


def test_devices_of_a_saved_report(runner, saved_report):
    result = runner.invoke(cli, ["devices", "--report", str(saved_report), "--json"])
    assert result.exit_code == 1  # this machine's report: no GPU in it
    assert json.loads(result.stdout)["gpus"] == []


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["-h"]])
def test_help_shows_exit_codes(runner, args):
    result = runner.invoke(cli, args)
    assert result.exit_code == 0
    out = result.stdout
    assert "Exit codes:" in out
    for line in ("0  nothing at or above --fail-on", "1  findings at or above --fail-on",
                 "2  usage error or bad input", "3  gpudoctor itself could not complete"):
        assert line in out


def test_version(runner):
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("gpudoctor, version ")


def test_quiet_prints_one_line_per_problem(runner):
    result = runner.invoke(cli, ["check", "--quiet"])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["gpudoctor: error CTR001 [host] this container was started without GPU access"]


def test_only_runs_only_the_named_areas_and_their_probes(runner):
    result = runner.invoke(cli, ["check", "--only", "driver", "--format", "json"])
    report = json.loads(result.stdout)
    assert {c["area"] for c in report["checks"]} == {"doctor", "driver"}
    assert set(report["facts"]["probes"]) == {"host", "driver_files", "nvml", "python"}


def test_skip_leaves_out_an_area(runner):
    report = json.loads(runner.invoke(cli, ["check", "--skip", "driver", "--format", "json"]).stdout)
    assert "driver" not in {c["area"] for c in report["checks"]}
    assert [f["code"] for f in report["findings"]] == CPU_TRAINING_NOTES


def test_unknown_area_is_bad_input(runner):
    result = runner.invoke(cli, ["check", "--only", "nope"])
    assert result.exit_code == 2
    assert "unknown area or check: nope" in result.stderr


def test_timeout_reports_unfinished_work_and_still_exits_properly(runner):
    result = runner.invoke(cli, ["check", "--timeout", "0.1", "--format", "json", "--fail-on", "never"])
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert "timeout" in {r["status"] for r in report["facts"]["probes"].values()}
    assert any(c["status"] == "timeout" for c in report["checks"])
    assert children_left() == []


def test_require_gpus_on_a_machine_without_gpus(runner):
    result = runner.invoke(cli, ["check", "--require-gpus", "1", "--only", "visibility", "--format", "json"])
    assert result.exit_code == 1
    assert [f["code"] for f in json.loads(result.stdout)["findings"]] == ["VIS005"]


def test_junit_has_a_testcase_per_check(runner):
    from xml.etree import ElementTree as ET

    result = runner.invoke(cli, ["check", "--format", "junit"])
    root = ET.fromstring(result.stdout)
    cases = root.findall(".//testcase")
    assert {c.get("name") for c in cases} == {c.id for c in CHECKS}
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["driver.nvml"]


def test_analyze_says_what_changed_since_the_report_was_saved(runner, tmp_path):
    """A report saved by an older gpudoctor, judged again: the finding this version adds is named as new,
    the one it no longer reports as gone, the rest counted as unchanged."""
    real = Path(__file__).parent / "fixtures/real/h200x2-20261121/faults/system-cudnn-first-on-ld-library-path.json"
    saved = json.loads(real.read_text())
    kept = [f for f in saved["findings"] if f["code"] == "LIB001"]
    saved["findings"] = kept + [{"code": "OLD001", "severity": "warning", "title": "retired check", "subject": {"kind": "host"}}]
    saved["tool"]["version"] = "0.0.9"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(saved))
    result = runner.invoke(cli, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == ("gpudoctor: compared with the verdict saved by gpudoctor 0.0.9: "
                        "1 new, 1 no longer reported, 2 unchanged")
    assert lines[1].startswith("  new: FWK007 PyTorch was built for cuDNN 9.19.0")
    assert lines[2] == "  gone: OLD001 retired check"
    json.loads(result.stdout)  # stdout stays the report, untouched
