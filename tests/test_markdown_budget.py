"""`--format markdown` fits a GitHub issue, and `analyze` reads it back to the same verdict.

GitHub refuses an issue body over 65,536 characters (the REST API answers "body is too long (maximum is
65536 characters)", as quoted in https://github.com/peter-evans/create-issue-from-file/issues/1705 and
https://github.com/PyGithub/PyGithub/issues/1906); gpudoctor's budget is 60,000
bytes of UTF-8 (render/markdown.py BUDGET), room left for the reporter's own words. Every report
recorded on a real machine (tests/fixtures/real/README.md: 1 x H100, 1, 2 and 4 x H200, the torchrun
jobs) must fit, and its Markdown, given back to `gpudoctor analyze`, must give the same finding codes
as its JSON: the compressed facts block carries everything the checks read.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.pastes import markdown_report
from gpudoctor.render.markdown import BUDGET, DROP_ORDER, facts_block, render_markdown

REAL = Path(__file__).parent / "fixtures" / "real"


def _is_report(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return isinstance(data, dict) and "facts" in data and "schema_version" in data


RECORDED = sorted(p for p in REAL.rglob("*.json") if _is_report(p))


def _analyze(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["analyze", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1), result.output
    return result


def _codes(report_json: str) -> Counter:
    return Counter(f["code"] for f in json.loads(report_json)["findings"])


def test_every_recorded_report_is_found():
    """The recordings the README lists are all here: the 1 x H100, the 4 x H200 and the 2 x 2 job among them."""
    names = {str(p.relative_to(REAL)) for p in RECORDED}
    assert {"h100x1-20261123/full.json", "h200x4-20261121/workload-report-1717.json",
            "h200x4-20261121/deep-report-1709.json", "h200x4-20261121/cluster/job-2x2.json"} <= names
    assert len(RECORDED) >= 60


@pytest.mark.parametrize("path", RECORDED, ids=[str(p.relative_to(REAL)) for p in RECORDED])
def test_recorded_report_fits_and_reads_back(path: Path, tmp_path: Path):
    markdown = _analyze(str(path), "--format", "markdown", "--fail-on", "never").stdout
    assert len(markdown.encode("utf-8")) < BUDGET, len(markdown.encode("utf-8"))
    assert "Left out to fit" not in markdown  # every recorded report fits whole
    assert "`--format json --output report.json`" in markdown  # where the whole report is
    pasted = tmp_path / "issue.md"
    pasted.write_text(markdown, encoding="utf-8")
    again = _analyze(str(pasted), "--format", "json", "--fail-on", "never")
    assert "judged from what was pasted" not in again.stderr  # read as a report, not as words
    direct = _analyze(str(path), "--format", "json", "--fail-on", "never")
    assert _codes(again.stdout) == _codes(direct.stdout)
    assert json.loads(again.stdout)["summary"]["areas"] == json.loads(direct.stdout)["summary"]["areas"]


def test_the_verdict_comes_first():
    path = REAL / "h200x2-20261121" / "faults" / "stub-libcuda-first-on-ld-library-path.json"
    lines = _analyze(str(path), "--format", "markdown").stdout.splitlines()
    assert lines[0] == "## gpudoctor report: error"
    assert lines[2].startswith("**Problems found.** 4 problem(s) to fix. 8 error(s)")
    assert lines.index("### Findings") < next(i for i, line in enumerate(lines) if line.startswith("| Area |"))


def _many_nodes(count: int) -> dict[str, Any]:
    """The recorded 2 x 2 torchrun job with its second node's own report copied ``count`` times: a job the
    size of a large cluster, whose facts do not fit whole."""
    report = json.loads((REAL / "h200x4-20261121" / "cluster" / "job-2x2.json").read_text())
    nodes = report["facts"]["cluster"]["nodes"]
    other = next(n for n in nodes if n.get("report"))
    for i in range(count):
        clone = copy.deepcopy(other)
        clone["node_rank"] = 2 + i
        clone["report"]["facts"]["host"]["boot_id"] = f"{i:032x}"  # compressible copies are not the point
        nodes.append(clone)
    return report


def test_facts_that_do_not_fit_leave_out_parts_in_order_and_say_so(tmp_path: Path):
    report = _many_nodes(60)
    whole = len(json.dumps(report["facts"]))
    markdown = render_markdown(report, {0: [0], 1: [1]})
    assert whole > BUDGET * 5 and len(markdown.encode("utf-8")) <= BUDGET
    first = DROP_ORDER[0][0]
    assert f"Left out to fit an issue: {first}." in markdown
    assert markdown_report.facts_left_out(markdown) == [first]
    facts = markdown_report.embedded_facts(markdown)
    assert facts is not None and all(n.get("report") is None for n in facts["cluster"]["nodes"])
    assert {k: v for k, v in facts.items() if k != "cluster"} == {k: v for k, v in report["facts"].items() if k != "cluster"}


def test_no_room_leaves_the_facts_out_with_a_sentence():
    facts = json.loads((REAL / "h100x1-20261123" / "full.json").read_text())["facts"]
    assert facts_block(facts, 10**6).count("```gpudoctor-facts") == 1
    block = facts_block(facts, 300)
    assert "```" not in block and "The facts did not fit an issue and are left out." in block
    assert "--format json --output report.json" in block


def test_block_is_base64_only_and_exact():
    report = json.loads((REAL / "h100x1-20261123" / "full.json").read_text())
    markdown = render_markdown(report, {0: [0]})
    body = re.search(r"\n```gpudoctor-facts\n(.*?)\n```\n", markdown, re.S).group(1)
    header, *lines = body.split("\n")
    assert header == "zlib+base64 json v1" and all(re.fullmatch(r"[A-Za-z0-9+/=]{1,100}", line) for line in lines)
    assert json.loads(zlib.decompress(base64.b64decode("".join(lines)))) == report["facts"]


def test_a_cut_or_damaged_block_falls_back_to_the_words(tmp_path: Path):
    """A report cut inside its facts (a paste that hit a limit) or with a damaged line is read from its
    area table as any other paste: no error, no partial facts."""
    markdown = _analyze(str(REAL / "h100x1-20261123" / "full.json"), "--format", "markdown").stdout
    start = markdown.index("```gpudoctor-facts")
    cut = markdown[:start + 2000]
    middle = start + (len(markdown) - start) // 2  # one base64 character changed: zlib's checksum fails
    damaged = markdown[:middle] + ("A" if markdown[middle] != "A" else "B") + markdown[middle + 1:]
    quoted = markdown[:start] + "\n".join("> " + line for line in markdown[start:].splitlines())
    assert markdown_report.embedded_facts(cut) is None and markdown_report.embedded_facts(damaged) is None
    assert markdown_report.embedded_facts(quoted) is not None  # a reply quoting the block still reads
    for text in (cut, damaged):
        path = tmp_path / "issue.md"
        path.write_text(text, encoding="utf-8")
        result = _analyze(str(path), "--format", "json")
        assert "judged from what was pasted" in result.stderr
        assert json.loads(result.stdout)["facts"]["nvml"]["driver_version"] == "580.159.04"


def test_a_block_that_inflates_past_a_report_is_refused():
    """A few kilobytes that inflate to more than a saved report may hold (16 MiB) are not inflated whole."""
    bomb = base64.b64encode(zlib.compress(b"{" + b" " * (17 * 1024 * 1024), 9)).decode()
    text = "## gpudoctor report: ok\n\n```gpudoctor-facts\nzlib+base64 json v1\n" + bomb + "\n```\n"
    assert len(text) < 100_000 and markdown_report.embedded_facts(text) is None


def test_older_reports_with_json_facts_still_read():
    facts = {"nvml": {"init": {"ok": True}, "driver_version": "580.159.04"}}
    text = "## gpudoctor report: ok\n\n<details><summary>All facts (JSON)</summary>\n\n```json\n" + json.dumps(facts) + "\n```\n"
    assert markdown_report.embedded_facts(text) == facts


def test_the_compressed_facts_are_redacted_too(tmp_path: Path):
    """A grep of the Markdown cannot see inside the compressed block: decoded, it holds no secret and no
    host name either (redaction runs before any renderer; gpudoctor/cli/output.py emit)."""
    token = "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly0123"  # the shape tests/test_secrets.py uses
    report = json.loads((REAL / "h100x1-20261123" / "bogus_alloc.json").read_text())
    report["facts"]["frameworks"]["torch"]["info"]["init_error"] = f"remote: {token} https://alice:urlPassw0rd@x.example/"
    report["facts"]["host"]["hostname"] = "gpu-node-17.corp.example"
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    markdown = _analyze(str(path), "--format", "markdown").stdout
    facts = json.dumps(markdown_report.embedded_facts(markdown))
    assert "init_error" in facts and token not in facts and "urlPassw0rd" not in facts
    assert "gpu-node-17" not in facts and "gpu-node-17" not in markdown


# One root cause, one entry ----------------------------------------------------------------------------

def _slow_everywhere() -> dict[str, Any]:
    """The recorded 4 x H200 with every GPU's bf16 matmul at 300 TFLOP/s: RUN014 on each of the four."""
    from gpudoctor import pipeline

    facts = json.loads((REAL / "h200x4-20261121" / "deep-report-1709.json").read_text())["facts"]
    for run in facts["workload"]["runs"]:
        if isinstance(run.get("throughput"), dict):
            run["throughput"]["matmul_bf16_tflops"] = 300.0
    return pipeline.judge(facts)


def test_the_same_finding_on_every_gpu_is_one_entry_with_one_fix():
    from gpudoctor import pipeline
    from gpudoctor.render.text import render_text

    report = _slow_everywhere()
    assert [f["code"] for f in report["findings"]] == ["RUN014"] * 4
    text = render_text(report)
    assert text.count(" RUN014 ") == 1 and text.count("Fix: ") == 1
    assert "    ! RUN014 4 findings on GPUs 0, 1, 2, 3, one fix:\n" in text
    assert all(f"GPU {i}: PyTorch on cuda:{i} (NVIDIA H200) is slower" in text for i in range(4))
    assert [f"-i {i}" in text for i in range(4)] == [True] * 4  # each GPU's own command, listed once
    assert ": works, with warnings (1 to fix: RUN014)" in text.splitlines()[0]
    markdown = render_markdown(report, pipeline.cuda_numbers(report["facts"]))
    assert markdown.count("**RUN014**") == 1 and markdown.count("*Fix:*") == 1
    assert "- **RUN014** (warning) 4 findings on GPUs 0, 1, 2, 3, one fix:\n" in markdown
    assert "**Works, with warnings.** 1 problem(s) to fix. 0 error(s), 4 warning(s)" in markdown


def test_findings_with_the_same_commands_show_them_once():
    from gpudoctor.render.text import render_text

    report = json.loads((REAL / "h200x2-20261121" / "faults" / "stub-libcuda-first-on-ld-library-path.json").read_text())
    from gpudoctor import pipeline

    report = pipeline.judge(report["facts"])
    lib002 = next(f for f in report["findings"] if f["code"] == "LIB002")
    twin = copy.deepcopy(lib002) | {"code": "LIB999", "title": "another cause, the same commands", "check": lib002["check"]}
    twin["remediation"] = dict(twin["remediation"], text="A different fix text.")
    report["findings"].append(twin)
    text = render_text(report)
    assert text.count("$ ldconfig -p | grep libcuda.so") == 1
    assert "        (the same commands as for LIB002 above)" in text
    markdown = render_markdown(report, {0: [0], 1: [1]})
    assert "  *Commands:* the same as for **LIB002** above." in markdown
    # three frameworks that loaded the stub: one entry, each framework's title under it, the fix once
    assert "- **LIB002** (error) 3 findings, one fix:\n  - PyTorch loaded" in markdown
    assert markdown.count("Remove the stubs directory from LD_LIBRARY_PATH and the loader cache.") == 1


def test_a_report_with_thousands_of_findings_still_fits():
    """`analyze` reads reports written anywhere: 3,000 different findings are cut with a line that says so."""
    report = json.loads((REAL / "h100x1-20261123" / "full.json").read_text())
    report["findings"] = [{"code": f"X{i:04d}", "severity": "warning", "title": f"finding {i} " + "x" * 80,
                           "detail": "d" * 300, "subject": {"kind": "host"}, "check": "gpus.lost",
                           "remediation": {"text": f"fix {i}", "commands": [f"echo {i}"], "links": []}} for i in range(3000)]
    markdown = render_markdown(report, {0: [0]})
    assert len(markdown.encode("utf-8")) <= BUDGET
    assert re.search(r"\n- \d+ more finding\(s\) left out to fit an issue", markdown)
    assert markdown_report.embedded_facts(markdown) == report["facts"]
