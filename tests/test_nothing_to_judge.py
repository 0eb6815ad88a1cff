"""No verdict without something judged: an empty report, a README holding one, or prose without a
version is `nothing to judge` (one line, exit 2) from `analyze`, and a node with nothing judged is not ok
in `merge` (README "Exit codes"). `[✓]` marks only an area a check judged."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from conftest import REAL_DIRS
from gpudoctor import pipeline
from gpudoctor import report as rep
from gpudoctor.cli import cli
from gpudoctor.render.text import render_text

EMPTY = {"schema_version": 1, "facts": {}}
HEALTHY = REAL_DIRS[0] / "report.json"


def _analyze(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["analyze", *args])
    return result.exit_code, result.stdout, result.stderr


def test_empty_report_judges_nothing_and_marks_nothing_passed() -> None:
    report = pipeline.judge({})
    assert not rep.judged_anything(report)
    assert all(status == "skip" for area, status in report["summary"]["areas"].items() if area != "doctor")
    assert "[✓]" not in "\n".join(line for line in render_text(report).splitlines() if "Doctor" not in line)


def test_a_real_report_is_judged() -> None:
    assert rep.judged_anything(pipeline.judge(json.loads(HEALTHY.read_text(encoding="utf-8"))["facts"]))


def test_analyze_of_an_empty_report_is_nothing_to_judge(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(EMPTY), encoding="utf-8")
    code, out, err = _analyze(str(path))
    assert code == rep.EXIT_USAGE
    assert out == ""
    assert "nothing to judge" in err and "no problems found" not in err
    assert len(err.strip().splitlines()) == 1


def test_analyze_of_a_readme_holding_the_skeleton_is_nothing_to_judge(tmp_path: Path) -> None:
    path = tmp_path / "README.md"
    path.write_text(f"# my issue\n\nHere is my report:\n\n```json\n{json.dumps(EMPTY)}\n```\n", encoding="utf-8")
    code, out, err = _analyze(str(path))
    assert (code, out) == (rep.EXIT_USAGE, "")
    assert "nothing to judge" in err


def test_analyze_of_prose_without_a_version_is_nothing_to_judge(tmp_path: Path) -> None:
    path = tmp_path / "issue.md"
    path.write_text("My GPU does not work with PyTorch. Please help, it worked yesterday.\n", encoding="utf-8")
    code, out, err = _analyze(str(path))
    assert (code, out) == (rep.EXIT_USAGE, "")
    assert "nothing to judge" in err


def test_analyze_of_a_real_report_still_judges(tmp_path: Path) -> None:
    code, out, _ = _analyze(str(HEALTHY))
    assert code == rep.EXIT_OK and "no problems found" in out


def test_merge_shows_a_node_with_nothing_judged_as_not_ok(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(EMPTY), encoding="utf-8")
    for fail_on in ("error", "never"):
        result = CliRunner().invoke(cli, ["merge", "--format", "json", "--fail-on", fail_on, str(empty), str(HEALTHY)])
        assert result.exit_code == rep.EXIT_FINDINGS
        nodes = {n["file"]: n for n in json.loads(result.stdout)["nodes"]}
        assert nodes[str(empty)]["verdict"] == "nothing judged" and nodes[str(empty)]["failing"]
        assert nodes[str(HEALTHY)]["verdict"] == "ok" and not nodes[str(HEALTHY)]["failing"]
    text = CliRunner().invoke(cli, ["merge", str(empty), str(HEALTHY)]).stdout
    assert "1 with nothing judged (not ok): empty" in text.splitlines()[0]
