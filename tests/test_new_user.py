"""What a new user reads on a first run must be true: a paste that did not show an area is not read as
that area's failure."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.render.facts_text import area_headline
from gpudoctor.compat.data import BUNDLED

TICKETS = Path(__file__).resolve().parent / "fixtures" / "tickets"
#: An issue template and prose that name torch ("PyTorch version (GPU?): 1.11.0 (True)") but no driver,
#: GPU list or container: only the message checks of those areas run on it.
PROSE_ONLY = TICKETS / "accelerate-1012.md"


def _headlines(text: str) -> dict[str, str]:
    return dict(re.findall(r"^\[.\] ([^:\n]+): (.*)$", text, flags=re.M))


def test_a_paste_without_driver_facts_does_not_say_the_driver_is_missing():
    result = CliRunner().invoke(cli, ["analyze", str(PROSE_ONLY)])
    lines = _headlines(result.output)
    assert result.exit_code == 0, result.output
    for area in ("Driver", "GPUs", "Container"):
        assert lines[area].startswith("not shown in the pastes"), lines[area]


def test_a_paste_that_shows_no_gpu_still_says_none_listed():
    # nvidia-smi's "No devices were found" is a fact the paste holds: NVML answered and counted none
    facts = {"paste": {"not_checked": {}}, "nvml": {"init": {"ok": True}, "device_count": 0}}
    assert area_headline("gpus", facts, BUNDLED) == "none listed"
    assert area_headline("driver", facts, BUNDLED) != "not available"


def test_a_live_check_without_a_driver_still_says_not_available():
    facts = {"nvml": {"init": {"ok": False, "reason": "library_not_found"}}}
    assert area_headline("driver", facts, BUNDLED) == "not available"
    assert area_headline("gpus", facts, BUNDLED) == "none listed"
    assert area_headline("container", {"host": {"container": {"detected": False}}}, BUNDLED) == "not detected"


def test_an_empty_folder_beside_reports_is_refused_not_dropped(tmp_path: Path):
    # a fleet gate given one folder per node: a node that wrote no report must not pass unseen
    report = Path(__file__).resolve().parent / "fixtures" / "real" / "h100x1-20261127" / "full.json"
    (tmp_path / "node-b").mkdir()
    result = CliRunner().invoke(cli, ["merge", str(report), str(tmp_path / "node-b")])
    assert result.exit_code == 2, result.output
    assert "1 file(s) refused" in result.stdout.splitlines()[0]
    assert re.search(r"^node-b\s+refused", result.stdout, flags=re.M)
    assert "node-b is a folder that holds no .json report" in result.stdout


def test_the_active_venv_is_diagnosed_framework_or_not(tmp_path: Path, monkeypatch):
    """The README's rule: $VIRTUAL_ENV is diagnosed whether or not it holds a framework (it is the
    environment the user is working in); python3 on PATH only when it holds one."""
    import os
    import sys

    from gpudoctor.probes import interpreter

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "python3"):
        os.symlink(sys.executable, venv / "bin" / name)
    monkeypatch.setattr(interpreter, "holds_frameworks", lambda path: False)
    chosen = interpreter.choose(environ={"VIRTUAL_ENV": str(venv), "PATH": str(venv / "bin")})
    assert chosen.executable == str(venv / "bin" / "python") and not chosen.own
    assert "$VIRTUAL_ENV names it" in chosen.reason
    monkeypatch.setattr(interpreter, "_prefix_holds_frameworks", lambda prefix: False)
    assert interpreter.choose(environ={"PATH": str(venv / "bin")}).own


def test_analyze_of_a_folder_is_one_line_and_exit_2(tmp_path: Path):
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: cannot read {tmp_path}: ") and "Usage" not in lines[0]


def test_analyze_of_a_markdown_report_does_not_call_its_findings_new(tmp_path: Path):
    """The Markdown report embeds the facts, not the verdict: comparing against no saved findings would
    call every finding "new" although the report showed it."""
    report = Path(__file__).resolve().parent / "fixtures" / "real" / "h100x1-20261123" / "quick.json"
    md = tmp_path / "report.md"
    made = CliRunner().invoke(cli, ["analyze", "--format", "markdown", "--output", str(md), str(report)])
    assert made.exit_code == 0 and md.is_file()
    result = CliRunner().invoke(cli, ["analyze", str(md)])
    assert result.exit_code == 0, result.output
    assert "compared with the verdict saved" not in result.stderr
    assert "compared with the verdict saved" in CliRunner().invoke(cli, ["analyze", str(report)]).stderr


def test_merge_output_extension_picks_the_format_its_help_names(tmp_path: Path):
    nodes = Path(__file__).resolve().parent / "fixtures" / "real" / "h200x4-20261127" / "final-0504"
    help_text = " ".join(CliRunner().invoke(cli, ["merge", "--help"]).stdout.split())
    assert ".json json, .md markdown, .prom prometheus, else text" in help_text
    opening = {".json": "{", ".md": "#", ".prom": "# HELP gpudoctor_info", ".txt": "gpudoctor merge: "}
    for suffix, start in opening.items():
        out = tmp_path / f"fleet{suffix}"
        result = CliRunner().invoke(cli, ["merge", str(nodes), "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert out.read_text(encoding="utf-8").startswith(start), suffix
