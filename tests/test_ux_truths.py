"""What a new user reads must be true: the small contradictions between one line of a report and the next."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor.cli import cli
from gpudoctor.render.facts_text import area_headline, libraries_line, python_line
from gpudoctor.render.facts_view import facts_view
from gpudoctor.render.markdown import render_markdown
from gpudoctor.render.text import render_text
from gpudoctor.status import SKIP
from gpudoctor.compat.data import BUNDLED

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "fixtures" / "real"


def _judged(facts: dict) -> dict:
    return pipeline.judge(facts, created="2026-11-27T00:00:00Z")


# a failed smoke kernel is never a pass -------------------------------------------------------------------

#: No GPU: libcuda cannot be loaded, so the smoke kernel fails before it counts a GPU, and the framework
#: workload trains on the CPU (RUN017), as `check` on a machine without a driver records it.
NO_GPU_FACTS = {
    "smoke": {"count": {"step": "load libcuda.so.1", "code": None, "name": "library_not_found",
                        "message": "libcuda.so.1: cannot open shared object file: No such file or directory"}, "runs": []},
    "workload": {"gpu": False, "runs": [{"framework": "torch", "device": "cpu",
                                         "training": {"ok": True, "loss_first": 0.696, "loss_last": 0.158, "steps": 30}}]},
}


def test_a_failed_smoke_kernel_beside_a_cpu_only_workload_is_not_a_passed_area():
    report = _judged(json.loads(json.dumps(NO_GPU_FACTS)))
    assert [f["code"] for f in report["findings"] if f["check"].startswith("acceleration.")] == ["RUN017"]
    assert report["summary"]["areas"]["acceleration"] == SKIP
    line = next(x for x in render_text(report).splitlines() if "Acceleration:" in x)
    assert line.startswith("[-] Acceleration: smoke kernel failed: load libcuda.so.1 returned library_not_found")
    row = next(x for x in render_markdown(report, {}).splitlines() if x.startswith("| Acceleration |"))
    assert "pass" not in row and "skipped" in row


def test_a_gpu_run_with_its_cpu_note_still_passes():
    """The note alone proves nothing; beside a smoke kernel correct on a GPU, the area passes as before."""
    report = _judged(json.loads((REAL / "h100x1-20261127" / "full.json").read_text())["facts"])
    assert report["summary"]["areas"]["acceleration"] == "pass"


# the headline counts what the table counts ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["h100x1-20261127/full.json", "h100x4-20261127/full.json",
                                  "h100x1-20261123/before/bogus_alloc.json"])
def test_the_acceleration_headline_counts_the_tables_results(name):
    facts = json.loads((REAL / name).read_text())["facts"]
    text = render_text(_judged(facts))
    cells = [tuple(map(int, m)) for m in re.findall(r"  (\d+) of (\d+) correct  ", text)]
    assert cells, "the table shows each run's comparisons"
    headline = area_headline("acceleration", facts, BUNDLED)
    assert f"results vs CPU correct in {sum(c for c, _ in cells)} of {sum(n for _, n in cells)}" in headline
    runs = [r for r in facts["workload"]["runs"] if r.get("device") != "cpu"]
    silent = len(runs) - len(cells)
    assert (f"({silent} of {len(runs)} framework run(s) gave none)" in headline) == (silent > 0)


# PY002: unknown, not absent, everywhere --------------------------------------------------------------------

def test_an_unreadable_python_leaves_its_frameworks_unknown_in_the_facts_view():
    facts = {"python": {"unavailable": "unknown", "executable": "/venv/bin/python", "error": "Python 2.7.18"},
             "frameworks": {name: {"installed": False} for name in ("torch", "tensorflow", "jax", "cupy")},
             "probes": {"frameworks": {"status": "ok"}}}
    view = facts_view(facts)
    installed = [line.split(":", 1)[1].strip() for line in view.splitlines() if line.strip().startswith("Installed")]
    assert len(installed) == 4
    assert all(x.startswith("unknown: the Python it would run under (/venv/bin/python) could not be read") for x in installed)


def test_a_read_python_without_frameworks_still_says_not_installed():
    facts = {"python": {"executable": "/venv/bin/python", "version": "3.12.3"},
             "frameworks": {"torch": {"installed": False}}, "probes": {"frameworks": {"status": "ok"}}}
    assert re.search(r"Installed\s+: no$", facts_view(facts), re.M)


# a version read from a file name -------------------------------------------------------------------------

def _copy(**fields: object) -> dict:
    return {"family": "libcudart", "path": "/usr/local/cuda-13.0/lib64/libcudart.so.13",
            "real_path": "/usr/local/cuda-13.0/lib/libcudart.so.13", "stub": False, "origins": ["toolkit"], **fields}


def test_a_bare_soname_is_not_shown_as_a_version():
    """--quick reads no library: libcudart.so.13's 13 is its interface number, where the full check reads 13.0."""
    quick = {"libraries": {"copies": [_copy(version_from_name="13")]}}
    full = {"libraries": {"copies": [_copy(version_from_name="13", version="13.0")]}}
    assert libraries_line(quick) == "libcudart.so.13 (toolkit)"
    assert libraries_line(full) == "libcudart 13.0 (toolkit)"


def test_a_full_version_in_the_file_name_is_shown_as_read():
    copy = _copy(version_from_name="13.0.96", real_path="/usr/local/cuda-13.0/lib/libcudart.so.13.0.96")
    assert libraries_line({"libraries": {"copies": [copy]}}) == "libcudart 13.0.96 (toolkit)"


# help ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("group", [[], ["matrix"]])
def test_command_lists_are_whole_sentences(group):
    """Click cuts a command's first sentence to fit the list; each command gives one that fits."""
    result = CliRunner().invoke(cli, [*group, "--help"], terminal_width=80)
    assert result.exit_code == 0
    listed = result.stdout.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert listed and all(line.rstrip().endswith(".") and not line.rstrip().endswith("...") for line in listed), listed


# which Python was diagnosed, beside an active one -----------------------------------------------------------

def _python(**diagnosed: object) -> dict:
    return {"version": "3.11.7", "executable": "/tools/venv/bin/python3", "prefix": "/tools/venv", "virtualenv": True,
            "diagnosed": {"executable": "/tools/venv/bin/python3", "own": True,
                          "reason": "gpudoctor's own interpreter, which holds a framework", **diagnosed},
            "environments": [
                {"prefix": "/tools/venv", "executable": "/tools/venv/bin/python3", "as": ["gpudoctor's own"],
                 "frameworks": ["torch"]},
                {"prefix": "/work/.venv", "executable": "/work/.venv/bin/python", "as": ["$VIRTUAL_ENV"],
                 "frameworks": []}]}


def test_the_headline_says_an_active_venv_was_not_diagnosed():
    line = python_line({"python": _python()})
    assert line == ("3.11.7 (virtualenv) at /tools/venv/bin/python3 (gpudoctor's own interpreter, which holds a "
                    "framework); not the active environment $VIRTUAL_ENV=/work/.venv (--python /work/.venv diagnoses it)")


def test_the_active_venv_that_is_diagnosed_gets_no_note():
    python = _python(reason="$VIRTUAL_ENV names it, the active environment", own=False)
    python["environments"][1]["prefix"] = python["prefix"] = "/work/.venv"
    assert "active environment" not in python_line({"python": python}).split(";", 1)[-1]
    conda_base = _python()
    conda_base["environments"][1]["as"] = ["$CONDA_PREFIX", "conda base"]
    assert python_line({"python": conda_base}) == "3.11.7 (virtualenv) at /tools/venv/bin/python3"


@pytest.mark.parametrize("command", ["check", "analyze", "merge"])
def test_the_format_option_states_its_default_once(command):
    result = CliRunner().invoke(cli, [command, "--help"], terminal_width=200, max_content_width=200)
    assert result.exit_code == 0
    option = result.stdout.split("-f, --format", 1)[1].split("\n  -", 1)[0]  # up to the next option
    assert option.count("default") == 1, option
