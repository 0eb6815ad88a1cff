"""`gpudoctor explain CODE` names where the code's full entry is: a link to its own section of
docs/findings.md, whose anchor is the one GitHub gives that section's heading."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.codes import CATALOGUE

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "findings.md"


def github_anchors(markdown: str) -> Counter:
    """Anchors of every heading, computed as GitHub does (lower case, punctuation dropped, spaces to
    hyphens), written here apart from gpudoctor's own so that a slip in either is caught."""
    anchors: Counter = Counter()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.M):
        anchors["-".join(re.sub(r"[^\w\- ]", "", heading.strip().lower()).split(" "))] += 1
    return anchors


ANCHORS = github_anchors(PAGE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("code", sorted(CATALOGUE))
def test_explain_links_to_the_codes_own_section(code: str):
    result = CliRunner().invoke(cli, ["explain", code.lower()])
    assert result.exit_code == 0, result.output
    last = result.stdout.rstrip("\n").splitlines()[-1]
    prefix = "More, with an example: docs/findings.md#"
    assert last.startswith(prefix), last
    anchor = last[len(prefix):]
    assert anchor.startswith(code.lower() + "-")
    assert ANCHORS[anchor] == 1  # the page has that section, once: no "-1" suffix from a duplicate heading


def test_the_linked_page_is_where_the_link_says():
    assert PAGE.is_file()
    sections = re.findall(r"^## ([A-Z]+[0-9]{3}): ", PAGE.read_text(encoding="utf-8"), flags=re.M)
    assert sorted(sections) == sorted(CATALOGUE)  # one section per code, none without a code
