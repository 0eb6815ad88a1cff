"""Hostile tickets stay bounded and truthful. Each case starts from a
real recording of 1 x H100 (tests/fixtures/real/h100x1-20261123/final: the Markdown report, collect_env and
nvidia-smi of one healthy machine) changed one fact at a time, and is judged through `gpudoctor analyze`."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor import report as rep
from gpudoctor.cli import cli
from gpudoctor.pastes import markdown_report, nvidia_smi
from gpudoctor.pastes.detect import find_pastes

FINAL = Path(__file__).parent / "fixtures" / "real" / "h100x1-20261123" / "final"
MARKDOWN = (FINAL / "full.md").read_text(encoding="utf-8")
COLLECT_ENV = (FINAL / "collect_env.txt").read_text(encoding="utf-8")
GPUS_CELL = "| GPUs | ✅ pass | 1: 1 x NVIDIA H100 80GB HBM3 (81559 MiB) |"


def _analyze(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "ticket.md"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", *args, str(path)])
    return result.exit_code, result.stdout, result.stderr


def _codes(out: str) -> set[str]:
    return {f["code"] for f in json.loads(out)["findings"]}


def _shown_only(markdown: str) -> str:
    """The Markdown without its facts block: what a ticket cut short keeps, read from its words."""
    return markdown[:markdown.index("<details><summary>All facts")]


def test_a_claimed_gpu_count_is_bounded_by_what_was_pasted(tmp_path: Path) -> None:
    assert GPUS_CELL in MARKDOWN
    for claim in (3_000_000, 100_000_000):
        text = _shown_only(MARKDOWN).replace(GPUS_CELL, GPUS_CELL.replace("1: 1 x", f"1: {claim} x"))
        start = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        code, out, err = _analyze(tmp_path, text, "--format", "json")
        assert time.monotonic() - start < 10
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB
        assert code in (rep.EXIT_OK, rep.EXIT_FINDINGS)
        assert len(json.loads(out)["facts"]["gpus"]) == markdown_report.MAX_GPUS
        assert f"claims {claim} GPUs" in err


def test_a_markdown_report_cut_at_6000_characters_is_judged_without_a_crash(tmp_path: Path) -> None:
    whole = _analyze(tmp_path, MARKDOWN, "--format", "json")
    cut = _analyze(tmp_path, MARKDOWN[:6000], "--format", "json")
    assert whole[0] == cut[0] == rep.EXIT_OK
    assert not {c for c in _codes(cut[1]) if c.startswith(("INT", "CMP"))}  # CuPy's CUDA 13.2 is its runtime's


def test_nvidia_smi_no_devices_is_drv012_as_in_a_saved_report(tmp_path: Path) -> None:
    code, out, _ = _analyze(tmp_path, "nvidia-smi says:\n\n```\n$ nvidia-smi\nNo devices were found\n```\n",
                            "--format", "json")
    assert code == rep.EXIT_FINDINGS and "DRV012" in _codes(out)


def test_superscript_digits_do_not_throw_away_a_valid_q_paste() -> None:
    text = ("==============NVSMI LOG==============\n\nDriver Version                            : 580.159.04\n"
            "CUDA Version                              : 13.0\n\nAttached GPUs                             : ¹\n"
            "GPU 00000000:00:06.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n")
    parsed = nvidia_smi.parse_q(text)
    assert parsed["driver_version"] == "580.159.04" and parsed["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert "attached" not in parsed


def test_zero_width_spaces_in_collect_env_keys_read_as_the_keys() -> None:
    hidden = COLLECT_ENV.replace("PyTorch version:", "PyTorch\u200b version:").replace(
        "Nvidia driver version:", "Nvidia\u200c driver\u2060 version:").replace("GPU models", "GPU\ufeff models")
    plain, tricked = (next(p for p in find_pastes(t) if p.kind == "collect_env").parsed for t in (COLLECT_ENV, hidden))
    for key in ("torch_version", "driver_version", "gpus", "cuda_build"):
        assert tricked[key] == plain[key]


def test_a_collect_env_cut_short_gets_a_note(tmp_path: Path) -> None:
    whole = _analyze(tmp_path, COLLECT_ENV)
    cut = _analyze(tmp_path, COLLECT_ENV[:COLLECT_ENV.index("cuDNN version:")])
    assert "cut short" not in whole[2]
    assert "collect_env: cut short after 'Nvidia driver version: 580.159.04'" in cut[2]
    assert whole[0] == cut[0] == rep.EXIT_OK


@pytest.mark.parametrize("digit", ["²", "٣", "³"])
def test_non_ascii_digits_anywhere_in_a_q_paste_never_crash(tmp_path: Path, digit: str) -> None:
    text = ("Driver Version : 580.159.04\nAttached GPUs : " + digit + "\nGPU 00000000:00:06.0\n"
            "    Product Name : NVIDIA H100 80GB HBM3\n")
    code, _, err = _analyze(tmp_path, text)
    assert code in (rep.EXIT_OK, rep.EXIT_FINDINGS) and "could not be judged" not in err


def _rtx5090_cu126() -> str:
    """The recorded collect_env, one machine's GPU and build changed: an RTX 5090 (cc 12.0) under a cu126 wheel."""
    return (COLLECT_ENV.replace("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 5090").replace("2.11.0+cu130", "2.6.0+cu126")
            .replace("CUDA used to build PyTorch: 13.0", "CUDA used to build PyTorch: 12.6"))


def test_a_gpudoctor_report_heading_does_not_swallow_the_other_pastes(tmp_path: Path) -> None:
    body = f"## gpudoctor report: ok\n\nIt says ok, yet:\n\n```\n{_rtx5090_cu126()}\n```\n"
    code, out, _ = _analyze(tmp_path, body, "--format", "json")
    assert code == rep.EXIT_FINDINGS and "CMP003" in _codes(out)


def test_other_pastes_beside_a_whole_report_are_named(tmp_path: Path) -> None:
    body = f"{MARKDOWN}\n\nAnd in my other environment:\n\n```\n{_rtx5090_cu126()}\n```\n"
    code, _, err = _analyze(tmp_path, body)
    assert code == rep.EXIT_OK  # the report is judged alone, as documented ...
    assert "1 other paste(s) not judged with it: collect_env" in err  # ... and the other paste is named


def test_facts_left_out_to_fit_are_not_judged_as_absent(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_markdown_budget import _many_nodes

    from gpudoctor import pipeline
    from gpudoctor.render.markdown import render_markdown

    report = _many_nodes(60)
    judged = pipeline.judge(report["facts"], created=report.get("created"))
    markdown = render_markdown(judged, {0: [0], 1: [1]})
    assert markdown_report.facts_left_out(markdown)
    code, out, err = _analyze(tmp_path, markdown, "--format", "json")
    again = json.loads(out)
    assert code == rep.exit_code(rep.findings_of(judged))
    assert "RUN032" not in _codes(out)  # the nodes' reports were left out, not missing
    skipped = {c["id"]: c.get("reason", "") for c in again["checks"] if c["status"] == "skip"}
    assert "left out the other nodes' own reports" in skipped["acceleration.cluster_nodes"]
    assert "check(s) not judged" in err


def test_an_error_in_the_facts_left_out_keeps_the_reports_verdict(tmp_path: Path) -> None:
    """A node's own error sits in the part left out to fit: the Markdown's re-judgement carries the report's own
    finding for it (quoted as shown), so its title says error, never "no problems found"."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_markdown_budget import _many_nodes

    from gpudoctor import pipeline
    from gpudoctor.render.markdown import render_markdown

    report = _many_nodes(60)
    report["facts"]["cluster"]["nodes"][5]["report"]["findings"] = [
        {"code": "DRV003", "severity": "error", "title": "driver/library version mismatch"}]
    judged = pipeline.judge(report["facts"], created=report.get("created"))
    assert judged["summary"]["verdict"] == "error" and "RUN032" in {f["code"] for f in judged["findings"]}
    markdown = render_markdown(judged, {0: [0], 1: [1]})
    assert markdown_report.facts_left_out(markdown)
    code, out, _ = _analyze(tmp_path, markdown, "--format", "markdown")
    assert code == rep.EXIT_FINDINGS
    assert out.startswith("## gpudoctor report: error") and "No problems found" not in out and "**RUN032** (error)" in out
    code, out, _ = _analyze(tmp_path, markdown, "--format", "json")
    carried = next(f for f in json.loads(out)["findings"] if f["code"] == "RUN032")
    assert code == rep.EXIT_FINDINGS and "node rank 5" in carried["title"] and "as the Markdown report showed it" in carried["detail"]


def test_every_part_a_report_may_leave_out_names_the_checks_that_read_it() -> None:
    import re

    from gpudoctor.render.markdown import DROP_ORDER

    for words, _ in DROP_ORDER:
        assert re.search(r"\(([^()]+)\)\s*$", words).group(1) in markdown_report.CHECKS_READING


def test_long_gpu_names_keep_the_markdown_within_its_budget(tmp_path: Path) -> None:
    from gpudoctor import pipeline
    from gpudoctor.render.markdown import BUDGET, render_markdown

    saved = json.loads((FINAL.parent.parent / "h200x4-20261121" / "report.json").read_text(encoding="utf-8"))
    for i, gpu in enumerate(saved["facts"]["gpus"]):
        gpu["name"] = f"NVIDIA H200 {i} <b>|" + "X" * 40_000
    markdown = render_markdown(pipeline.judge(saved["facts"]), {i: [i] for i in range(len(saved["facts"]["gpus"]))})
    assert len(markdown.encode("utf-8")) <= BUDGET
    assert "<b>" not in markdown and "cut to fit an issue" in markdown
    code, _, _ = _analyze(tmp_path, markdown)
    assert code in (rep.EXIT_OK, rep.EXIT_FINDINGS)


def test_many_claims_in_one_cell_are_bounded_together() -> None:
    cell = ", ".join(f"99999999 x NVIDIA H100 {i}" for i in range(5000))
    text = _shown_only(MARKDOWN).replace(GPUS_CELL, f"| GPUs | ✅ pass | 1: {cell} |")
    start = time.monotonic()
    parsed = markdown_report.parse_shown(text)
    assert time.monotonic() - start < 2
    assert len(parsed["gpus"]) == markdown_report.MAX_GPUS and len(parsed["notes"]) <= 10
