"""The documentation and the code agree: docs/findings.md, the code catalogue, the checks' declared
codes, the examples in tests/docexamples.py, and the CLI's help.

The generator, tools/docgen.py, is not in the package; it is loaded here from its file, and imports
docexamples by the name this test does (tests/ is on pytest's path), so both see one EXAMPLES."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import docexamples
from gpudoctor.checks import registry
from gpudoctor.cli import cli
from gpudoctor.codes import CATALOGUE
from gpudoctor.findings import SEVERITIES

ROOT = Path(__file__).resolve().parents[1]
DOCGEN_PATH = ROOT / "tools" / "docgen.py"


def _load_docgen():
    """tools/docgen.py as the module ``docgen`` (once: a second load would be a second module)."""
    if "docgen" in sys.modules:
        return sys.modules["docgen"]
    spec = importlib.util.spec_from_file_location("docgen", DOCGEN_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docgen"] = module
    spec.loader.exec_module(module)
    return module


docgen = _load_docgen()

LIVE_CODES = sorted(code for code, entry in CATALOGUE.items() if not entry.removed_in)
CHECK_IDS = [c.id for c in registry.CHECKS]
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)+$")
CODE = re.compile(r"^(DRV|GPU|TOPO|VIS|CTR|CUDA|LIB|PY|FWK|CMP|RUN|INT)\d{3}$")


def _run(check, code_or_facts):
    facts = docexamples.EXAMPLES[code_or_facts] if isinstance(code_or_facts, str) else code_or_facts
    return registry.run_check(check, copy.deepcopy(facts))


# (a) docs/findings.md is what the generator writes --------------------------------------------------

def test_findings_doc_is_up_to_date():
    reason = docgen.stale()
    assert reason is None, reason


def test_docgen_and_these_tests_share_one_examples_module():
    """The no-mutation test below would prove nothing if docgen read a second copy of the examples."""
    assert docgen.docexamples is docexamples
    assert Path(docexamples.__file__).resolve() == ROOT / "tests" / "docexamples.py"


def test_docgen_check_exits_1_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "findings.md"
    stale.write_text(docgen.generate().replace("## DRV002", "## DRV00two"), encoding="utf-8")
    assert docgen.main(["--check", "--path", str(stale)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "python tools/docgen.py" in err
    assert docgen.main(["--check", "--path", str(tmp_path / "missing.md")]) == 1


def test_docgen_script_runs_from_the_command_line(tmp_path):
    """`python tools/docgen.py` as the docs say: a fresh interpreter whose path holds tools/ only must
    find gpudoctor and tests/docexamples.py, write the page, and accept it with --check."""
    target = tmp_path / "findings.md"
    wrote = subprocess.run([sys.executable, str(DOCGEN_PATH), "--path", str(target)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert wrote.returncode == 0, wrote.stderr
    assert target.read_text(encoding="utf-8") == docgen.generate()
    checked = subprocess.run([sys.executable, str(DOCGEN_PATH), "--check", "--path", str(target)], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr


def test_docgen_writes_what_check_accepts(tmp_path):
    target = tmp_path / "docs" / "findings.md"
    assert docgen.main(["--path", str(target)]) == 0
    assert docgen.main(["--check", "--path", str(target)]) == 0


def test_findings_doc_has_every_code_with_fixed_headings():
    text = docgen.generate()
    for code, entry in CATALOGUE.items():
        section = text.split(f"\n## {code}: {entry.slug}\n", 1)
        assert len(section) == 2, f"{code} has no section"
        body = section[1].split("\n## ", 1)[0]
        headings = re.findall(r"^### (.+)$", body, re.M)
        assert headings[:5] == ["What it means", "Why it matters", "How to fix", "Example", "Added in"], code
        assert f"| [{code}](#" in text, f"{code} is missing from the table"


# (b) declared codes and the catalogue ----------------------------------------------------------------

def test_every_declared_code_is_in_the_catalogue():
    declared = {code for check in registry.CHECKS for code in check.codes}
    assert declared - set(CATALOGUE) == set()
    assert set(registry.codes_of()) == declared


def test_every_live_code_is_declared_by_exactly_one_check():
    counts = Counter(code for check in registry.CHECKS for code in set(check.codes))
    expected = {code: 0 if code in docgen.EMITTED_BY_MERGE else 1 for code in LIVE_CODES}
    assert {code: counts[code] for code in LIVE_CODES if counts[code] != expected[code]} == {}


def test_no_check_declares_a_removed_code():
    removed = {code for code, entry in CATALOGUE.items() if entry.removed_in}
    assert {code for check in registry.CHECKS for code in check.codes} & removed == set()


def test_check_ids_are_unique():
    assert [i for i, n in Counter(CHECK_IDS).items() if n > 1] == []


# (c) every code has an example, and the owning check really emits it ---------------------------------

def test_every_code_has_an_example_and_no_example_is_orphaned():
    assert set(LIVE_CODES) - set(docexamples.EXAMPLES) == set()
    assert set(docexamples.EXAMPLES) - set(CATALOGUE) == set()
    assert set(docexamples.COMPANIONS) <= set(docexamples.EXAMPLES)


@pytest.mark.parametrize("code", LIVE_CODES)
def test_owning_check_emits_the_code_on_its_example(code):
    if code in docgen.EMITTED_BY_MERGE:  # not a check's: merge's row for a file that is not a readable report
        row = docgen.merge_example(code)
        assert row["verdict"] == "refused" and row["failing"] and [f["code"] for f in row["findings"]] == [code]
        return
    if code in docgen.EMITTED_BY_REGISTRY:
        check = docexamples.CRASHING_CHECK
    else:
        check = next(c for c in registry.CHECKS if code in c.codes)
    result = _run(check, code)
    emitted = {f.code for f in result.findings}
    assert code in emitted, f"{check.id} on the {code} example: {result.status} {result.reason} {sorted(emitted)}"
    # the example is minimal: it triggers that code, plus only the companions the check always adds
    assert emitted == {code, *docexamples.COMPANIONS.get(code, ())}
    for f in result.findings:
        assert f.check == check.id
        assert f.title and "\n" not in f.title
        assert f.severity in SEVERITIES


def test_registry_declares_the_code_it_emits_for_a_crash():
    assert set(docgen.EMITTED_BY_REGISTRY) <= set(registry.codes_of())


def test_the_crash_example_is_reported_not_raised():
    result = _run(docexamples.CRASHING_CHECK, "INT003")
    assert [f.code for f in result.findings] == ["INT003"]
    assert "TypeError" in result.findings[0].title


# (d) no check emits a code it did not declare ---------------------------------------------------------

@pytest.mark.parametrize("check_id", CHECK_IDS)
def test_check_emits_only_declared_codes_on_every_example(check_id):
    check = next(c for c in registry.CHECKS if c.id == check_id)
    allowed = set(check.codes) | set(docgen.EMITTED_BY_REGISTRY)
    for code in docexamples.EXAMPLES:
        emitted = {f.code for f in _run(check, code).findings}
        assert emitted <= allowed, f"{check_id} on the {code} example emitted {sorted(emitted - allowed)}"


@pytest.mark.parametrize("check_id", CHECK_IDS)
def test_no_check_crashes_on_any_example(check_id):
    """Stricter than (d): INT003 is allowed there, but a check that crashes on well-formed facts is a bug."""
    check = next(c for c in registry.CHECKS if c.id == check_id)
    for code in docexamples.EXAMPLES:
        crashed = [f.title for f in _run(check, code).findings if f.code == "INT003"]
        assert crashed == [], f"{check_id} on the {code} example: {crashed}"


def test_checks_emit_only_declared_codes_on_real_reports(real_dir):
    """The same rule on the reports recorded on real GPU machines (tests/fixtures/real)."""
    facts = json.loads((real_dir / "report.json").read_text())["facts"]
    for check in registry.CHECKS:
        result = registry.run_check(check, copy.deepcopy(facts))
        emitted = {f.code for f in result.findings}
        assert emitted <= set(check.codes), f"{check.id} on {real_dir.name} emitted {sorted(emitted - set(check.codes))}"


def test_examples_are_not_changed_by_running_checks():
    before = copy.deepcopy(docexamples.EXAMPLES)
    for check in registry.CHECKS:
        for facts in docexamples.EXAMPLES.values():
            registry.run_check(check, facts)
    assert docexamples.EXAMPLES == before


# (e) every catalogue entry is documented ---------------------------------------------------------------

@pytest.mark.parametrize("code", sorted(CATALOGUE))
def test_catalogue_entry_is_complete(code):
    entry = CATALOGUE[code]
    assert entry.code == code and CODE.match(code), code
    assert entry.severity in SEVERITIES
    for field in ("means", "why", "fix"):
        text = getattr(entry, field)
        assert text.strip(), f"{code}.{field} is empty"
        assert "\n" not in text, f"{code}.{field} must be one paragraph on one line"
    assert SLUG.match(entry.slug), f"{code} slug {entry.slug!r} is not kebab-case of two or more words"
    assert not re.search(r"\d{3}", entry.slug), f"{code} slug should name the condition, not the number"
    assert re.match(r"^\d+\.\d+\.\d+$", entry.added_in)


def test_slugs_are_unique():
    assert [s for s, n in Counter(e.slug for e in CATALOGUE.values()).items() if n > 1] == []


# (f) every CLI command has help text -------------------------------------------------------------------

def test_top_level_help():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_has_help(name):
    command = cli.commands[name]
    assert (command.help or "").strip(), f"command {name} has no docstring"
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    first_paragraph = " ".join(command.help.split("\n\n")[0].split())
    assert first_paragraph in " ".join(result.output.split())
    for param in command.params:
        if param.param_type_name == "option" and not getattr(param, "hidden", False):
            assert (param.help or "").strip(), f"{name} option {param.opts} has no help"


# docs/report-format.md covers what the report really contains ------------------------------------

REPORT_FORMAT = Path(__file__).resolve().parents[1] / "docs" / "report-format.md"


def _documented() -> set[str]:
    text = re.sub(r"^```.*?^```", "", REPORT_FORMAT.read_text(encoding="utf-8"), flags=re.M | re.S)
    return set(re.findall(r"`([^`\n]+)`", text))


def test_report_format_names_every_reason_and_envelope_key():
    from gpudoctor import report
    from gpudoctor.findings import Finding, Subject
    from gpudoctor.probes.nvml import _binding
    from gpudoctor.snapshot import REASONS

    documented = _documented()
    wanted = set(report.TOP_LEVEL_KEYS) | set(REASONS) | set(_binding._REASONS_BY_CODE.values())
    wanted |= set(Finding("X", "info", "t").to_dict()) | set(Subject.__dataclass_fields__)
    wanted |= {"text", "commands", "links", "id", "area", "status", "duration_s", "reason", "finding_codes"}
    wanted |= {"verdict", "counts", "areas", "checks"}
    assert sorted(wanted - documented) == []


def test_report_format_names_every_fact_of_the_real_reports(real_dir):
    facts = json.loads((real_dir / "report.json").read_text())["facts"]
    keys: set[str] = set(facts)
    for section in ("probes", "host", "driver", "nvml"):
        node = facts.get(section) or {}
        keys |= set(node)
        for value in node.values():
            if isinstance(value, dict) and section != "probes" and not set(value) <= {"unavailable"}:
                keys |= {k for k in value if not k.startswith("/")}  # device_nodes are keyed by path
    for record in (facts.get("probes") or {}).values():
        keys |= set(record)
    for gpu in facts.get("gpus") or []:
        keys |= set(gpu)
        for value in gpu.values():
            if isinstance(value, dict) and "unavailable" not in value:
                keys |= set(value)
    for pair in (facts.get("topology") or {}).get("pairs") or []:
        keys |= set(pair) | set(pair.get("p2p") or {})
    keys -= set((facts.get("host") or {}).get("env") or {})  # variable names are listed, checked below
    keys -= set((facts.get("probes") or {}))
    documented = _documented()
    assert sorted(k for k in keys if k not in documented) == []
    for name in (facts.get("host") or {}).get("env") or {}:
        assert f"`{name}`" in REPORT_FORMAT.read_text(encoding="utf-8")
