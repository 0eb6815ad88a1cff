"""The docs say what the output really holds: this fails when they drift apart.

- docs/report-format.md has a section (`### \\`key\\``) for every top-level facts key of every real
  recording (tests/fixtures/real, see its README.md), of what the probes write when run here, and of
  what `analyze` writes for each kind of paste (tests/fixtures/pastes, each with its source link in
  index.json); each such section names every key of its section in those reports.
- It lists every area of gpudoctor/areas.py (the areas' one home, which the registry, the renderers and
  docs/findings.md take them from) in its Areas table, in order, with the title the text and Markdown
  reports print for it and its code prefix, and every code prefix of gpudoctor/codes.py.
- The README's "Findings" paragraph names every code prefix.
- The `-v` view's section titles are the ones report-format.md lists.

docs/findings.md is generated (`python tools/docgen.py`, tests/test_docs.py); report-format.md and
the README are written by hand, which is why they need this test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

import pytest
from click.testing import CliRunner

from gpudoctor import areas
from gpudoctor.checks import registry
from gpudoctor.checks.registry import CHECKS
from gpudoctor.cli import cli
from gpudoctor.codes import CATALOGUE
from gpudoctor.render import facts_view
from gpudoctor.render.markdown import render_markdown
from gpudoctor.render.text import render_text
from gpudoctor.run_options import RunOptions
from gpudoctor.runner import PROBES, run_probes, select_probes
from helpers_faults import HOST_ENV

ROOT = Path(__file__).resolve().parents[1]
REPORT_FORMAT = (ROOT / "docs" / "report-format.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
REAL = sorted(p for p in (ROOT / "tests" / "fixtures" / "real").rglob("*.json") if "truth" not in p.name)
PASTES = ROOT / "tests" / "fixtures" / "pastes"
#: Sections keyed by data, not by fixed names: their keys are probe names, framework names, variables.
KEYED_BY_DATA = {"probes", "frameworks"}


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    for name in HOST_ENV + ("PYTHONPATH", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def doc_sections() -> dict[str, str]:
    """``### `key` `` sections of report-format.md: key -> its text, up to the next heading."""
    found = {}
    for match in re.finditer(r"^### `([a-z_]+)`\n(.*?)(?=^#{2,3} |\Z)", REPORT_FORMAT, flags=re.M | re.S):
        found[match.group(1)] = match.group(2)
    return found


def second_level(facts: dict[str, Any]) -> dict[str, set[str]]:
    """Each section's own keys (for a list section such as gpus, its entries' keys)."""
    out: dict[str, set[str]] = {}
    for key, value in facts.items():
        entries = value if isinstance(value, list) else [value]
        for entry in entries:
            if isinstance(entry, dict) and set(entry) != {"unavailable"}:
                out.setdefault(key, set()).update(entry)
    return out


def assert_documented(facts_list: Iterable[dict[str, Any]], where: str) -> None:
    sections = doc_sections()
    missing = []
    for facts in facts_list:
        for key in facts:
            if key not in sections:
                missing.append(f"facts.{key} (from {where}) has no section")
        for key, subkeys in second_level(facts).items():
            if key in sections and key not in KEYED_BY_DATA:
                missing += [f"facts.{key}.{k} (from {where}) is not in its section" for k in sorted(subkeys)
                            if f"`{k}`" not in sections[key]]
    assert sorted(set(missing)) == []


def test_every_facts_section_of_the_real_recordings_is_documented():
    reports = [json.loads(p.read_text()) for p in REAL]
    assert len(reports) > 40
    assert_documented([r["facts"] for r in reports], "tests/fixtures/real")
    # and the recordings hold the sections of a full and a deep run, and a torchrun job
    keys = set().union(*(r["facts"] for r in reports))
    assert {"smoke", "workload", "multigpu", "cluster"} <= keys


def test_every_probe_of_the_runner_is_documented():
    """Each probe the runner can make is in the probe table with its time limit, and is a key of
    `probes` the docs name."""
    table = REPORT_FORMAT.split("| Probe | Sections | Time limit |", 1)[1].split("\n\n", 1)[0]
    rows = {re.match(r"\| `([a-z_]+)` \|", line).group(1): line for line in table.splitlines()[2:]}
    assert list(rows) == [p.name for p in PROBES]
    for probe in PROBES:
        assert f"{probe.timeout_s:g} s" in rows[probe.name], probe.name
        assert f"`{probe.name}`" in doc_sections()["probes"]


@pytest.fixture(scope="module")
def probed() -> dict[str, Any]:
    """What the probes write on this machine (no GPU here): every probe of a full run, and the deep-only
    multi-GPU probe on its own."""
    facts = run_probes(select_probes([p.name for p in PROBES]), RunOptions())
    facts.update(run_probes(select_probes(["multigpu"], deep=True), RunOptions()))
    return facts


def test_what_the_probes_write_here_is_documented(probed):
    assert set(probed) >= {p for p in ("host", "driver", "nvml", "gpus", "topology", "toolkit", "libraries", "python",
                                       "frameworks", "smoke", "workload", "multigpu")}
    assert_documented([probed], "the probes run here")
    table = REPORT_FORMAT.split("| Probe | Sections | Time limit |", 1)[1].split("\n\n", 1)[0]
    for line in table.splitlines()[2:]:  # every section the table names is a section the probes wrote
        for section in re.findall(r"`([a-z_]+)`", line.split("|")[2]):
            assert section in probed, line


def test_the_selection_and_the_paste_sections_are_documented(tmp_path):
    """`options` (check --only/--skip/--require-gpus) and what `analyze` writes for a paste of each kind."""
    saved = json.loads((ROOT / "tests" / "fixtures" / "real" / "h100x1-20261123" / "full.json").read_text())
    saved["facts"]["options"] = {"only": ["gpus"], "skip": ["gpus.throttling"], "require_gpus": 1}
    path = tmp_path / "selected.json"
    path.write_text(json.dumps(saved))
    judged = [json.loads(CliRunner().invoke(cli, ["analyze", str(path), "--format", "json"]).stdout)["facts"]]
    index = json.loads((PASTES / "index.json").read_text())
    assert len({str(entry.get("format")) for entry in index}) >= 3
    for entry in index:  # every paste of the corpus (about a second for all)
        result = CliRunner().invoke(cli, ["analyze", str(PASTES / entry["file"]), "--format", "json"])
        if result.exit_code == 2:  # a file that holds no paste gpudoctor reads: nothing is written
            continue
        assert result.exit_code in (0, 1), (entry["file"], result.output)
        judged.append(json.loads(result.stdout)["facts"])
    assert len(judged) > 20
    assert {"options", "paste", "pastes"} <= set().union(*judged)
    assert_documented(judged, "analyze")


def test_every_area_is_documented_with_the_title_the_report_prints():
    table = REPORT_FORMAT.split("## Areas", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    listed = [re.match(r"\| `([a-z]+)` \| ([^|]+) \|.*\| `([A-Z]+)` \|$", row).groups() for row in rows]
    assert [(name, title.strip(), prefix) for name, title, prefix in listed] == [(a.name, a.title, a.prefix)
                                                                                 for a in areas.AREAS]
    assert registry.AREAS == areas.NAMES  # the registry's areas are the home's, in its order
    assert {c.area for c in CHECKS} == set(areas.NAMES)  # every area has checks, and no check another area
    check_row = next(line for line in REPORT_FORMAT.splitlines() if line.startswith("| `area` | string |"))
    assert all(f"`{a}`" in check_row for a in areas.NAMES)


def test_the_reports_print_each_area_under_its_documented_title():
    """The text and Markdown reports print each area's line under the title the docs list for it."""
    table = REPORT_FORMAT.split("## Areas", 1)[1].split("\n## ", 1)[0]
    titles = [re.match(r"\| `[a-z]+` \| ([^|]+) \|", line).group(1).strip()
              for line in table.splitlines() if line.startswith("| `")]
    report = {"tool": {"version": "0"}, "created": "now", "findings": [], "checks": [], "facts": {},
              "summary": {"verdict": "ok", "counts": {}, "areas": {name: "pass" for name in areas.NAMES}}}
    text = render_text(report, verbose=True, unicode=False)
    markdown = render_markdown(report, {})
    assert [re.match(r"\[OK\] ([^:]+):", line).group(1) for line in text.splitlines() if line.startswith("[OK] ")] == titles
    assert [line.split(" | ")[0][2:] for line in markdown.splitlines() if line.endswith(" |") and "✅ pass" in line] == titles


def prefixes() -> set[str]:
    return {re.match(r"[A-Z]+", code).group() for code in CATALOGUE}


def test_every_code_prefix_is_in_the_readme_and_the_areas_table():
    assert prefixes() == {a.prefix for a in areas.AREAS}  # each prefix is one area's (docs/findings.md lists them)
    findings = README.split("## Findings", 1)[1].split("\n## ", 1)[0]
    assert sorted(p for p in prefixes() if f"`{p}`" not in findings) == []
    table = REPORT_FORMAT.split("## Areas", 1)[1].split("\n## ", 1)[0]
    assert sorted(p for p in prefixes() if f"`{p}`" not in table) == []
    # each area's prefix is the one its checks' codes use
    for row in (line for line in table.splitlines() if line.startswith("| `")):
        area, prefix = re.match(r"\| `([a-z]+)` \|.*\| `([A-Z]+)` \|$", row).groups()
        codes = {code for c in CHECKS if c.area == area for code in c.codes}
        assert any(code.startswith(prefix) for code in codes), (area, prefix)


def test_the_verbose_sections_are_the_documented_ones():
    other = REPORT_FORMAT.split("## Other formats", 1)[1]
    titles = set(facts_view.TITLES.values()) | {"Driver", "GPU N", "Framework: NAME"}
    assert sorted(t for t in titles if t not in ("Pastes",) and f"`{t}`" not in other) == []
