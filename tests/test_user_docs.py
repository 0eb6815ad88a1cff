"""The README is for users: short, its links lead somewhere, and neither it nor the guides under docs/
tell how gpudoctor was developed. docs/architecture.md names files a contributor edits; they exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Pages written by hand for readers of the product (docs/findings.md is generated from the catalogue).
GUIDES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "findings.md")
#: Phrases of a lab notebook, not of a product's documentation.
HISTORY = re.compile(r"\bsession \d|\bthis session\b|\bthe session's\b|\bissue \d+|\bcommit before\b", re.I)


def test_readme_fits_in_12_kb():
    assert len(README.read_bytes()) <= 12_000


@pytest.mark.parametrize("page", [README, *GUIDES], ids=lambda p: p.name)
def test_no_development_history(page: Path):
    hits = [line for line in page.read_text(encoding="utf-8").splitlines() if HISTORY.search(line)]
    assert hits == []


@pytest.mark.parametrize("page", [README, *GUIDES], ids=lambda p: p.name)
def test_relative_links_lead_to_files_and_sections(page: Path):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:\s]*)(?:#([^)\s]*))?\)", text):
        path, anchor = target
        where = (page.parent / path) if path else page
        assert where.exists(), f"{page.name} links to {path}, which does not exist"
        if anchor and where.suffix == ".md":
            headings = re.findall(r"^#{1,6} (.+)$", where.read_text(encoding="utf-8"), flags=re.M)
            anchors = {"-".join(re.sub(r"[^\w\- ]", "", h.strip().lower()).split(" ")) for h in headings}
            assert anchor in anchors, f"{page.name} links to {path or page.name}#{anchor}, which has no such section"


def test_the_files_the_recipes_name_exist():
    """Every repository path in docs/architecture.md exists, but for the placeholders a recipe asks you to
    fill in (AREA, NAME)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:gpudoctor|tests|tools|compat_matrix|docs)/[\w./*-]+)`", text))
    assert len(paths) > 15
    missing = sorted(p for p in paths if not re.search(r"AREA|NAME|\*", p) and not (ROOT / p).exists())
    assert missing == []
