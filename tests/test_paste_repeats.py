"""A body that pastes the same block again (a reporter posting collect_env twice, or a thousand times) is
read once: the verdict is the one block's, a note names the blocks that repeat it, and the work does not
grow with the repeats (benchmarks/paste_scale.py times the 1 MB bodies)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.pastes import read_inputs
from gpudoctor.pastes.detect import find_pastes

PASTES = Path(__file__).parent / "fixtures" / "pastes"


def _fenced(text: str, times: int, between: str = "") -> str:
    return "".join(f"{between}```\n{text.strip()}\n```\n\n" for _ in range(times))


def _analyze(tmp_path: Path, body: str) -> tuple[int, dict, str]:
    path = tmp_path / "body.md"
    path.write_text(body)
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", str(path)])
    return result.exit_code, json.loads(result.stdout), result.stderr


def test_a_repeated_block_is_read_once_with_a_note(tmp_path: Path) -> None:
    text = (PASTES / "pytorch-37320-comment.txt").read_text()  # a too-old driver: an error
    once = read_inputs([("body", _fenced(text, 1))])
    many = read_inputs([("body", _fenced(text, 300))])
    assert [p.kind for p in many.pastes] == [p.kind for p in once.pastes] == ["collect_env"]
    assert many.pastes[0].where == "body, block 1"
    assert many.facts["gpus"] == once.facts["gpus"]
    assert "body, block 1: the same text is pasted again in blocks 2, 3, 4, 5, 6 and 294 more; read once" in many.notes
    code_once, report_once, _ = _analyze(tmp_path, _fenced(text, 1))
    code_many, report_many, stderr = _analyze(tmp_path, _fenced(text, 300))
    assert code_many == code_once == 1
    assert [(f["code"], f["title"]) for f in report_many["findings"]] == [(f["code"], f["title"]) for f in report_once["findings"]]
    assert stderr.count("the same text is pasted again") == 1


def test_blocks_that_differ_are_each_read(tmp_path: Path) -> None:
    """Only the very same text is read once: a collect_env and an nvidia-smi table, each twice, are two pastes."""
    env, smi = (PASTES / "pytorch-175855.txt").read_text(), (PASTES / "dcgm-232.md").read_text()
    found = find_pastes(_fenced(env, 2) + _fenced(smi, 2), "body")
    assert [(p.kind, p.where) for p in found] == [("collect_env", "body, block 1"), ("nvidia-smi", "body, block 3")]
    assert found[0].parsed["notes"][-1] == "body, block 1: the same text is pasted again in block 2; read once"
    assert found[1].parsed["notes"][-1] == "body, block 3: the same text is pasted again in block 4; read once"
