"""Untrusted text never reaches a terminal, XML or Markdown raw.

Every string in a report's facts is data from somewhere else: NVML's GPU name and driver version, a
framework's error, the host name, and (for ``merge``) the file names. The reports here are the real
recordings of tests/fixtures/real/h100x1-20261123 (see its README.md) with hostile strings put into those
facts, then run through the command line as a user would: ``analyze`` (text, ``-v``, markdown, junit),
``merge`` (text, markdown) and ``devices --report``.

What a hostile string does, with its public source:

- ``ESC [ 2 J`` clears the screen, ``ESC ] 0 ; text BEL`` sets the window title (OSC 0), and the single
  byte 0x9B is CSI in C1 form: https://invisible-island.net/xterm/ctlseqs/ctlseqs.html
- ``ESC ] 8 ; ; URL ESC \\`` makes the text after it a hyperlink (OSC 8):
  https://gist.github.com/egmontkob/eb114294efbcd5adb1944c9f3cb5feda
- U+202E reorders what a line shows ("Trojan Source", CVE-2021-42574): https://trojansource.codes/
- XML 1.0 allows no C0 control but tab, newline and carriage return (production [2] Char):
  https://www.w3.org/TR/xml/#charsets
- GitHub notifies ``@name`` mentions:
  https://docs.github.com/en/get-started/writing-on-github/getting-started-with-writing-and-formatting-on-github/basic-writing-and-formatting-syntax#mentioning-people-and-teams
  and renders raw HTML such as ``<img>`` and ``</details>``:
  https://docs.github.com/en/get-started/writing-on-github/working-with-advanced-formatting/organizing-information-with-collapsed-sections
- A code block ends at a fence at least as long as the one that opened it, a code span at a backtick
  run of the same length (https://spec.commonmark.org/0.31.2/#fenced-code-blocks,
  https://spec.commonmark.org/0.31.2/#code-spans); a pipe splits a table cell unless escaped, inside
  code spans too (https://github.github.com/gfm/#tables-extension-).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.pastes import markdown_report
from gpudoctor.render import facts_text as ft
from gpudoctor.render.markdown import render_markdown
from gpudoctor.render.quiet import render_quiet
from gpudoctor.render.safe import (code_span, fence, indented, json_text, markdown_inline, markdown_lines, printable,
                                   terminal, xml, xml_text)
from gpudoctor.render.text import COLOURS, render_text
from gpudoctor.compat.data import BUNDLED
from helpers_faults import HOST_ENV

RECORDED = Path(__file__).parent / "fixtures" / "real" / "h100x1-20261123"

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
C1_CSI = "\x9b2J"
BIDI = "\u202e"
MARKDOWN = "</details><img src=x onerror=alert(1)> <!-- @everyone [x](https://evil.example/) &#64;everyone"
HOSTILE_NAME = (f"NVIDIA H100 80GB HBM3{CLEAR}{TITLE}{LINK}{C1_CSI}\x7f\r{BIDI} | {MARKDOWN}\n# heading\n"
                "```\n[✓] Forged: looks fine\t`tick")
HOSTILE_DRIVER = f"580.159.04{TITLE}\n[✓] Driver: forged"
HOSTILE_ERROR = ("\x1b[1;31mValueError\x1b[0m: Unrecognized key 'bogus_option' in CUDA allocator config."
                 f"{C1_CSI}\n</details>\n# heading @everyone")
HOSTILE_HOST = f"node{CLEAR}\n[✓] forged-host | {MARKDOWN}"
HOSTILE_TITLE = f"retired check{TITLE}\n  new: FORGED fake"
#: Our own headings and HTML in the Markdown report; nothing else may start a heading or close a <details>.
OUR_HEADINGS = re.compile(r"^(## gpudoctor (report|merge): .*|### (Findings|Findings \(errors and warnings\)|Drift|Outliers"
                          r"|Proof of acceleration))$")


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    """No CUDA/NVIDIA variables and no NO_COLOR from the caller's shell (as tests/test_cli.py)."""
    for name in HOST_ENV + ("PYTHONPATH", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def hostile(source: str = "bogus_alloc.json", name: str = HOSTILE_NAME) -> dict[str, Any]:
    """A real recorded report (PyTorch refusing PYTORCH_CUDA_ALLOC_CONF=bogus_option:1 on 1 x H100, so
    FWK002/FWK103 quote PyTorch's error) with hostile strings in its GPU name, driver version, framework
    error, host name, date and a saved finding's title."""
    report = json.loads((RECORDED / source).read_text())
    facts = report["facts"]
    facts["gpus"][0]["name"] = name
    facts["nvml"]["driver_version"] = HOSTILE_DRIVER
    facts["host"]["hostname"] = HOSTILE_HOST
    torch = facts["frameworks"]["torch"]["info"]
    if "init_error" in torch:
        torch["init_error"] = HOSTILE_ERROR
    report["created"] = f"2026-11-23T15:19:34Z{CLEAR}"
    report["findings"].append({"code": f"OLD001{CLEAR}", "severity": "warning", "title": HOSTILE_TITLE,
                               "subject": {"kind": "host"}})
    return report


def save(report: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(report))
    return path


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit), \
        result.output
    assert result.exit_code in (0, 1), result.output
    return result


def assert_terminal_safe(text: str, tabs: bool = True) -> None:
    """No control character a terminal acts on: C0 but newline (and tab where the renderer lays out data
    over lines), DEL, C1 (0x9B is CSI), bidirectional overrides."""
    allowed = "\n\t" if tabs else "\n"
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    bad = sorted({f"U+{ord(c):04X}" for c in text
                  if (ord(c) < 0x20 and c not in allowed) or 0x7F <= ord(c) <= 0x9F or c in bidi})
    assert not bad, bad
    raw = text.encode("utf-8")
    assert b"\x1b" not in raw and b"\x07" not in raw and b"\xc2\x9b" not in raw


def outside_code(markdown: str) -> tuple[str, list[tuple[str, str]]]:
    """The Markdown outside fenced code blocks, and each block as (info string, content), read as
    CommonMark does: a block closes at a line of at least as many backticks as opened it."""
    text, blocks, opened, body = [], [], None, []
    for line in markdown.split("\n"):
        stripped = line.strip()
        run = len(stripped) - len(stripped.lstrip("`"))
        if opened is None and run >= 3:
            opened, info, body = run, stripped[run:], []
        elif opened is not None and run >= opened and stripped == "`" * run:
            blocks.append((info, "\n".join(body)))
            opened = None
        elif opened is not None:
            body.append(line)
        else:
            text.append(line)
    assert opened is None, "a code block is left open"
    return "\n".join(text), blocks


def assert_markdown_safe(markdown: str) -> tuple[str, list[tuple[str, str]]]:
    text, blocks = outside_code(markdown)
    assert "<img" not in text and "<!--" not in text
    assert text.count("</details>") == text.count("<details>")  # only our own, each closing ours
    assert "@everyone" not in text  # GitHub does not look for mentions in code blocks
    assert not re.search(r"(?<!\\)\[[^\]\n]*\]\(https://evil", text)  # no link or image: its [ is escaped
    for line in text.split("\n"):
        assert not re.match(r"\s{0,3}#", line) or OUR_HEADINGS.match(line), line
        assert not line.lstrip().startswith("```"), line
    assert "\x1b" not in markdown and "\x9b" not in markdown
    return text, blocks


# The command line ---------------------------------------------------------------------------------

def test_analyze_text_shows_hostile_strings_as_escapes(tmp_path):
    path = save(hostile(), tmp_path / "report.json")
    result = invoke("analyze", str(path), "--no-redact")
    assert_terminal_safe(result.stdout)
    assert_terminal_safe(result.stderr)
    out = result.stdout
    # shown, not dropped: the reader sees what the data held
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in out and "\\x9b2J" in out and "\\u202e" in out
    assert "580.159.04\\x1b]0;pwned\\x07\\n[✓] Driver: forged" in out
    assert not any(line.startswith("[✓] Forged") or line.startswith("[✓] Driver: forged") for line in out.splitlines())
    # the area lines are exactly the report's areas, one line each
    areas = [line for line in out.splitlines() if line.startswith("[")]
    report = json.loads(invoke("analyze", str(path), "--no-redact", "--format", "json").stdout)
    shown = [a for a, s in report["summary"]["areas"].items() if a != "doctor" or s not in ("pass", "skip")]
    assert len(areas) == len(shown)
    # the framework's coloured error is quoted, its colour codes visible
    assert "\\x1b[1;31mValueError\\x1b[0m: Unrecognized key 'bogus_option'" in out
    # analyze's "gone:" line on stderr: the saved finding's code and title on one line
    gone = [line for line in result.stderr.splitlines() if line.startswith("  gone:")]
    assert gone == ["  gone: OLD001\\x1b[2J retired check\\x1b]0;pwned\\x07\\n  new: FORGED fake"]
    assert not any(line.startswith("  new: FORGED") for line in result.stderr.splitlines())


def test_analyze_verbose_facts_are_shown_escaped_in_place(tmp_path):
    """-v prints the facts as sections of `Key : value` lines (render/facts_view.py): each hostile string
    is shown with its controls as escapes, a one-line fact on its one line, a multi-line error's lines
    under its value column; no line of data starts at the margin; the exact strings stay in --format json."""
    path = save(hostile(), tmp_path / "report.json")
    result = invoke("analyze", str(path), "--no-redact", "-v")
    assert_terminal_safe(result.stdout)
    facts = result.stdout.split("\nFacts\n-----\n", 1)[1].splitlines()
    assert any(line.endswith(" : " + terminal(HOSTILE_NAME)) for line in facts)
    assert any(line.endswith(" : " + terminal(HOSTILE_DRIVER)) for line in facts)
    first, *rest = HOSTILE_ERROR.split("\n")
    at = next(i for i, line in enumerate(facts) if line.endswith(" : " + terminal(first)))
    column = len(facts[at]) - len(terminal(first))
    assert [line[column:] for line in facts[at + 1:at + 1 + len(rest)]] == [terminal(r) for r in rest]
    assert all(not line[:column].strip() for line in facts[at + 1:at + 1 + len(rest)])
    titles = ("Host", "Driver", "GPU ", "Topology", "CUDA toolkit", "CUDA libraries", "Python", "Framework: ",
              "Smoke", "Workloads", "Multi-GPU", "Cluster", "Options", "Paste", "Probes")
    assert all(line.startswith(titles) for line in facts if line and not line.startswith(" "))
    report = json.loads(invoke("analyze", str(path), "--no-redact", "--format", "json").stdout)
    assert report["facts"]["gpus"][0]["name"] == HOSTILE_NAME
    # every check line of -v is one line: a reason holding data cannot add one
    listed = [line for line in result.stdout.split("\nFacts\n")[0].splitlines()
              if re.match(r"      (pass|warn|fail|skip|timeout) ", line)]
    assert len(listed) == len(report["checks"])

def test_analyze_json_is_untouched(tmp_path):
    """The JSON format is the data: the hostile strings come back exactly (json escapes the controls)."""
    path = save(hostile(), tmp_path / "report.json")
    report = json.loads(invoke("analyze", str(path), "--no-redact", "--format", "json").stdout)
    assert report["facts"]["gpus"][0]["name"] == HOSTILE_NAME
    assert report["facts"]["host"]["hostname"] == HOSTILE_HOST


def test_analyze_junit_is_well_formed_with_the_error_text(tmp_path):
    """A framework error in ANSI colours is exactly when CI reads the JUnit file: it parses, and holds the
    error with its escape characters shown."""
    path = save(hostile(), tmp_path / "report.json")
    result = invoke("analyze", str(path), "--no-redact", "--format", "junit")
    root = ET.fromstring(result.stdout.split("\n", 1)[1])
    failures = {case.get("name"): case.find("failure") for case in root.iter("testcase")}
    texts = [f.text or "" for f in failures.values() if f is not None]
    assert any("\\x1b[1;31mValueError\\x1b[0m: Unrecognized key 'bogus_option'" in t for t in texts), texts
    assert any("</details>" in t for t in texts)  # markup is escaped by XML, read back as text
    assert "\x1b" not in result.stdout and "\x9b" not in result.stdout
    for element in root.iter():
        for value in [element.text or "", *element.attrib.values()]:
            assert_terminal_safe(value)


def test_analyze_markdown_holds_no_markup_from_data(tmp_path):
    path = save(hostile(), tmp_path / "report.json")
    markdown = invoke("analyze", str(path), "--no-redact", "--format", "markdown").stdout
    text, blocks = assert_markdown_safe(markdown)
    # the data is there, as text
    assert "&lt;/details>&lt;img src=x onerror=alert(1)>" in text
    assert "@\u2060everyone" in text
    assert "&amp;#64;everyone" in text
    # every code block closed where the renderer closed it: the compressed facts read back whole and exact
    (packed,) = [body for info, body in blocks if info == "gpudoctor-facts"]
    assert re.fullmatch(r"zlib\+base64 json v1\n[A-Za-z0-9+/=\n]+", packed)  # inert to GitHub: base64 only
    facts = markdown_report.embedded_facts(markdown)
    assert facts is not None and facts == json.loads(path.read_text())["facts"]
    assert facts["gpus"][0]["name"] == HOSTILE_NAME and facts["host"]["hostname"] == HOSTILE_HOST
    (devices,) = [body for info, body in blocks if info == ""]
    assert len(devices.splitlines()) == 2  # the header and the one GPU: the name did not add rows
    # the area table: one row per area, each with its three cells
    rows = [line for line in text.split("\n") if line.startswith("| ") and "|---" not in line]
    areas = json.loads(invoke("analyze", str(path), "--no-redact", "--format", "json").stdout)["summary"]["areas"]
    area_rows = rows[1:1 + len(areas)]
    assert [len(re.split(r"(?<!\\)\|", r)) for r in area_rows] == [5] * len(areas)


def test_devices_of_a_hostile_report(tmp_path):
    path = save(hostile(), tmp_path / "report.json")
    result = invoke("devices", "--report", str(path))
    assert_terminal_safe(result.stdout, tabs=False)
    lines = result.stdout.splitlines()
    assert len(lines) == 3, lines  # the driver line, the header, one GPU
    assert lines[0].startswith("NVIDIA driver: 580.159.04\\x1b]0;pwned\\x07\\n[✓] Driver: forged")
    assert "\\x1b[2J" in lines[2] and "\\n# heading\\n```\\n" in lines[2]


@pytest.mark.parametrize("no_redact", [False, True], ids=["file-names", "host-names"])
def test_merge_text_and_markdown(tmp_path, no_redact):
    """Nodes are named by host name (--no-redact) or by file name: a newline in either cannot add a row."""
    paths = [save(hostile(), tmp_path / "a\nforged-row | x.json"),
             save(hostile("quick.json", name=f"NVIDIA H100 80GB HBM3{CLEAR}\nforged"), tmp_path / f"b{TITLE}.json")]
    extra = ["--no-redact"] if no_redact else []
    result = invoke("merge", *map(str, paths), *extra, "--fail-on", "never")
    assert_terminal_safe(result.stdout, tabs=False)
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("node "))
    table = lines[header + 1:lines.index("", header)]
    assert len(table) == 2, table
    assert not any(line.startswith("forged") for line in lines)
    assert any("\\n" in line for line in table)  # the newline shown, in its cell
    markdown = invoke("merge", *map(str, paths), *extra, "--fail-on", "never", "--format", "markdown").stdout
    text, _ = assert_markdown_safe(markdown)
    rows = [line for line in text.split("\n") if line.startswith("| ")]
    node_rows = rows[1:3]  # after the header (the "|---|" line does not start with "| ")
    cells = len(re.split(r"(?<!\\)\|", rows[0]))
    assert [len(re.split(r"(?<!\\)\|", r)) for r in node_rows] == [cells, cells], node_rows
    assert not any(line.startswith("forged") for line in text.split("\n"))


def test_merge_output_message_is_one_line(tmp_path):
    path = save(hostile(), tmp_path / "report.json")
    out = tmp_path / f"merged{CLEAR}\nx.txt"
    result = invoke("merge", str(path), "-o", str(out))
    assert_terminal_safe(result.stderr, tabs=False)
    assert len(result.stderr.splitlines()) == 1 and out.exists()


# The renderers ------------------------------------------------------------------------------------

def test_text_renderer_keeps_its_own_colours_only():
    """With colour on, the only escape sequences are the renderer's own SGR codes."""
    report = hostile()
    out = render_text(report, verbose=True, colour=True)
    ours = {f"\x1b[{code}m" for code in COLOURS.values()} | {"\x1b[0m"}
    found = set(re.findall(r"\x1b\[[0-9;]*m", out))
    assert found and found <= ours
    assert_terminal_safe(re.sub(r"\x1b\[[0-9;]*m", "", out))


def test_quiet_is_one_line_per_problem():
    report = hostile()
    report["findings"].append({"code": "FWK002", "severity": "error", "title": f"x{CLEAR}\nforged",
                               "subject": {"kind": "gpu", "gpu_index": 0}})
    out = render_quiet(report)
    assert_terminal_safe(out, tabs=False)
    problems = [f for f in report["findings"] if f["severity"] != "info"]
    assert len(out.splitlines()) == len(problems)
    assert all(line.startswith("gpudoctor: ") for line in out.splitlines())


def test_multi_line_detail_stays_indented():
    """A traceback in a finding's detail keeps its lines, each under the finding: none at the margin."""
    report = hostile()
    out = render_text(report, verbose=True)
    body = out.split("\nFacts\n")[0].splitlines()
    assert all(line.startswith(("[", "    ", "gpudoctor ")) or line in ("", body[-1]) for line in body), body


@pytest.mark.parametrize("name", ["full.json", "quick.json", "deep.json", "tool_venv.json"])
def test_recorded_reports_are_unchanged_by_cleaning(name):
    """Where nothing is hostile nothing changes: cleaning is the identity on the real recordings, the
    JSON shown in -v and in Markdown is json.dumps' own, and every Markdown table cell is the phrase."""
    report = json.loads((RECORDED / name).read_text())
    assert printable(report) == report
    facts = report["facts"]
    assert json_text(facts) == json.dumps(facts, indent=2, ensure_ascii=False)
    assert json_text(facts, markdown=True) == json.dumps(facts, indent=2, ensure_ascii=False)
    for area in report["summary"]["areas"]:
        phrase = ft.area_headline(area, facts, BUNDLED, report["findings"])
        assert markdown_inline(phrase) == phrase.replace("|", "\\|")
    markdown = render_markdown(report, {0: [0]})
    assert "\n```gpudoctor-facts\n" in markdown and "\n```\n" in markdown  # three backticks, as before
    assert markdown_report.embedded_facts(markdown) == facts  # the facts as recorded, exactly


def test_text_matches_what_the_machine_printed():
    """full-text.txt is `gpudoctor check` as printed on the H100 (tools/device/record_trust.sh), a minute
    after full.json was recorded there: the text renderer, cleaning included, prints the same lines."""
    report = json.loads((RECORDED / "full.json").read_text())
    printed = (RECORDED / "full-text.txt").read_text().splitlines()
    rendered = render_text(report).splitlines()
    # the first line is the date of each run (and now the verdict); since that recording the Compatibility line
    # says its result, and the Acceleration line is followed by the proof table (indented, tests/test_proof_table.py)
    changed = ("[✓] Compatibility: ", "[✓] Acceleration: ", "    ")
    assert [line for line in rendered[1:] if not line.startswith(changed)] == \
           [line for line in printed[1:] if not line.startswith(changed)]
    accel = next(line for line in printed if line.startswith("[✓] Acceleration: "))
    assert next(line for line in rendered if line.startswith("[✓] Acceleration: ")).startswith(accel)


# The functions ------------------------------------------------------------------------------------

def test_terminal():
    assert terminal(f"a{CLEAR}b") == "a\\x1b[2Jb"
    assert terminal("a\nb\tc") == "a\\nb\\tc"
    assert terminal("a\nb\tc", newlines=True) == "a\nb\tc"
    assert terminal(f"{C1_CSI}\x7f\r{BIDI}\u2028\ud800") == "\\x9b2J\\x7f\\x0d\\u202e\\u2028\\ud800"
    assert terminal("NVIDIA H100 80GB HBM3 ✓ é 中") == "NVIDIA H100 80GB HBM3 ✓ é 中"
    assert terminal(terminal(HOSTILE_NAME)) == terminal(HOSTILE_NAME)
    assert terminal(None) == "None" and terminal(3) == "3"


def test_printable_cleans_every_string_once():
    data = {"k\x1b": [f"v{CLEAR}", ("t\x07", 1, None, True)], "n": 2.5, "m": "a\nb"}
    clean = printable(data)
    assert clean == {"k\\x1b": ["v\\x1b[2J", ("t\\x07", 1, None, True)], "n": 2.5, "m": "a\nb"}
    assert printable(clean) == clean
    assert printable(data, newlines=False)["m"] == "a\\nb"
    assert data["k\x1b"][0] == f"v{CLEAR}"  # a copy: the report itself is not changed


def test_indented():
    assert indented("a\n\nb\x1b", "  ") == "a\n\n  b\\x1b"


def test_xml_accepts_every_character():
    everything = "".join(chr(c) for c in range(0x3000)) + "\ud800\udfff\ufffe\uffff\U0001F600"
    element = ET.fromstring(f'<a b="{xml(everything)}">{xml(everything)}</a>')
    assert element.get("b") == xml_text(everything).replace("\n", " ").replace("\t", " ")
    assert element.text == xml_text(everything)
    assert "\\x1b" in element.text and "<" in element.text and "\U0001F600" in element.text


def test_markdown_inline():
    assert markdown_inline("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3"
    assert markdown_inline("</details><img src=x>") == "&lt;/details>&lt;img src=x>"
    assert markdown_inline("<!-- x") == "&lt;!-- x"
    assert markdown_inline("hi @everyone and @org/team, a@b") == "hi @\u2060everyone and @\u2060org/team, a@b"
    assert markdown_inline("# x") == "\\# x" and markdown_inline("> q") == "\\> q" and markdown_inline("- l") == "\\- l"
    assert markdown_inline("a|b") == "a\\|b" and markdown_inline("a\\|b") == "a\\\\\\|b"
    assert markdown_inline("a\nb") == "a b"
    assert markdown_inline("```sh") == "\\`\\`\\`sh"
    assert markdown_inline("![i](https://e/x.png)") == "!\\[i](https://e/x.png)"
    assert markdown_inline("&#64;x &lt; & b") == "&amp;#64;x &amp;lt; & b"
    # a code span of its own is kept (gpudoctor writes `check --deep`); its pipes escaped in a table only
    assert markdown_inline("run `check --deep` now") == "run `check --deep` now"
    assert markdown_inline("`a|b`") == "`a\\|b`" and markdown_inline("`a|b`", table=False) == "`a|b`"
    assert markdown_inline("`<img>` and `x") == "`<img>` and \\`x"
    # what would start a block if the string began a line
    assert markdown_inline("~~~") == "\\~~~" and markdown_inline("___") == "\\___"
    assert markdown_inline("1. x") == "1\\. x" and markdown_inline("13.0 GB") == "13.0 GB"


def test_markdown_lines_start_no_block():
    """A traceback's lines under a list item: each literal, blank lines left blank (no trailing spaces)."""
    text = "Traceback:\n\n  File \"<frozen runpy>\"\n~~~\n# x\n1. y\n</details>"
    assert markdown_lines(text, "  ") == ("Traceback:\n\n    File \"&lt;frozen runpy>\"\n  \\~~~\n  \\# x\n  1\\. y\n"
                                          "  &lt;/details>")


def test_code_span_and_fence():
    assert code_span("acceleration.p2p") == "`acceleration.p2p`"
    assert code_span("a`b") == "``a`b``" and code_span("`x") == "`` `x ``"
    assert fence("plain") == ("```", "```")
    assert fence("x\n````\ny", "json") == ("`````json", "`````")


def test_json_output_escapes_what_a_terminal_acts_on_and_parses_back_the_same():
    """json.dumps(ensure_ascii=False) leaves C1 controls, DEL and bidi overrides raw; report.to_json escapes them."""
    import json as _json

    from gpudoctor import report as rep

    data = {"gpu": "NVIDIA H100\x9b2J\u202egnp.exe\x7f \u2028 é ✅", "n": 1.5}
    text = rep.to_json(data)
    assert not any(ch in text for ch in "\x9b\u202e\x7f\u2028")
    assert "é ✅" in text and _json.loads(text) == data


def test_a_one_line_error_escapes_the_file_name(tmp_path):
    from click.testing import CliRunner

    from gpudoctor.cli import cli

    name = tmp_path / "evil\x1b]0;pwned\x07\nname.json"
    result = CliRunner().invoke(cli, ["analyze", str(name)])
    assert result.exit_code == 2
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert len(result.output.strip().splitlines()) == 1
