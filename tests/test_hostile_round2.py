"""Hostile environments, round 2: inputs that look like versions but are not, and untrusted text from an
overlay, an argument or a report reaching the terminal."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.compat import data
from gpudoctor.frameworks_table import NAMES

VERSION_OPTIONS = {"--cc": "8.6", "--driver": "535.104.05", "--driver-cuda": "12.2", "--torch": "2.5.1+cu124",
                   "--tensorflow": "2.15.0", "--jax": "0.4.30", "--cupy": "13.0.0", "--cuda": "12.4",
                   "--cudnn": "8.9.7", "--python": "3.12"}
#: ASCII digit -> a digit of another script that Python's \d and str.isdigit() also accept.
FOREIGN_DIGITS = {"arabic-indic": 0x0660, "full-width": 0xFF10, "devanagari": 0x0966}
ESCAPES = re.compile("[\x1b\x07\x9b]")



def _foreign(text: str, zero: int) -> str:
    return "".join(chr(zero + int(c)) if c.isdigit() else c for c in text)


@pytest.mark.parametrize("script", FOREIGN_DIGITS)
@pytest.mark.parametrize("option", VERSION_OPTIONS)
def test_non_ascii_digits_are_a_usage_error_in_check(option, script):
    """`--cc ٩.٠` was judged (exit 0, "unknown" or even "ok") while `--cc abc` is exit 2."""
    value = _foreign(VERSION_OPTIONS[option], FOREIGN_DIGITS[script])
    result = CliRunner().invoke(cli, ["matrix", "check", option, value])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [f"Error: {option}: {value!r} is not a version: use ASCII digits (0-9)"]
    ascii_result = CliRunner().invoke(cli, ["matrix", "check", option, VERSION_OPTIONS[option]])
    assert ascii_result.exit_code in (0, 1), ascii_result.output


@pytest.mark.parametrize("option", ["--driver", "--driver-cuda", "--cc", "--python"])
def test_non_ascii_digits_are_a_usage_error_in_suggest(option):
    args = {"--driver": "580.65.06", "--cc": "9.0"}
    args[option] = _foreign(VERSION_OPTIONS[option] if option not in args else args[option], 0x0660)
    result = CliRunner().invoke(cli, ["matrix", "suggest", *[x for kv in args.items() for x in kv]])
    assert result.exit_code == 2 and "ASCII digits" in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_cuda_api_number_in_foreign_digits_is_no_driver_cuda():
    from gpudoctor.compat.rules import parse_driver_cuda

    assert parse_driver_cuda("12020") == "12.2"
    assert parse_driver_cuda(_foreign("12020", 0x0660)) is None


HOSTILE = "Evil \x1b[2J \x1b]0;pwned\x07 \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \x9b31m"


def _overlay(tmp_path: Path) -> Path:
    path = tmp_path / "ov.json"
    path.write_text(json.dumps({
        "topic": "gpus", "title": HOSTILE, "as_of": "2026-11-24", "sources": {"S" + HOSTILE: "https://x.example/" + HOSTILE},
        "entries": [{"model": HOSTILE, "match": ["Hostile GPU"], "compute_capability": "9.0", "source": "S" + HOSTILE}]}))
    return path


@pytest.mark.parametrize("args", [["matrix", "show"], ["matrix", "show", "gpus"],
                                  ["matrix", "check", "--gpu", "Hostile GPU", "--torch", "2.5.1+cu124"],
                                  ["matrix", "check", "--json", "--gpu", "Hostile GPU", "--torch", "2.5.1+cu124"],
                                  ["matrix", "check", "--gpu", HOSTILE], ["matrix", "check", "--json", "--gpu", HOSTILE],
                                  ["matrix", "suggest", "--driver", "580.65.06", "--gpu", "Hostile GPU"]])
def test_no_escape_from_an_overlay_or_argument_reaches_the_terminal(tmp_path, args):
    result = CliRunner().invoke(cli, [*args, "--matrix", str(_overlay(tmp_path))])
    assert result.exit_code in (0, 1), result.output
    assert not ESCAPES.search(result.output), result.output
    if args[1] == "show":
        assert "Evil \\x1b[2J \\x1b]0;pwned\\x07" in result.stdout  # shown for what it is, not dropped


@pytest.mark.parametrize("args", [["checks"], ["explain", "GPU103"]])
def test_catalogue_output_goes_through_safe(monkeypatch, args):
    """The catalogue is gpudoctor's own text; a control character put into it still reaches no terminal."""
    from gpudoctor import codes
    from gpudoctor.checks import registry

    monkeypatch.setitem(codes.CATALOGUE, "GPU103", dataclasses.replace(codes.CATALOGUE["GPU103"], means=HOSTILE))
    monkeypatch.setattr(registry, "CHECKS", (dataclasses.replace(registry.CHECKS[0], title=HOSTILE), *registry.CHECKS[1:]))
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0 and not ESCAPES.search(result.output), result.output
    assert "\\x1b[2J" in result.output


def test_a_gpu_and_a_cc_that_disagree_are_refused():
    """--gpu used to be judged next to a contradicting --cc (check) or lose to it (suggest), silently."""
    for command in (["matrix", "check"], ["matrix", "suggest", "--driver", "580.65.06"]):
        result = CliRunner().invoke(cli, [*command, "--gpu", "Tesla K80", "--cc", "8.6"])
        assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
        assert "compute capability 3.7" in result.stderr and "--cc says 8.6" in result.stderr


def test_a_gpu_and_its_own_cc_are_one_gpu():
    args = ["matrix", "check", "--json", "--torch", "2.5.1+cu124"]
    both = json.loads(CliRunner().invoke(cli, [*args, "--gpu", "NVIDIA L4", "--cc", "8.9"]).stdout)
    alone = json.loads(CliRunner().invoke(cli, [*args, "--gpu", "NVIDIA L4"]).stdout)
    assert both["stack"]["gpus"] == alone["stack"]["gpus"] and len(both["stack"]["gpus"]) == 1
    assert both["verdict"] == alone["verdict"] == "ok"


def test_cc_gives_the_capability_of_a_gpu_the_matrix_lacks():
    out = json.loads(CliRunner().invoke(cli, ["matrix", "check", "--json", "--gpu", "Future GPU 9000", "--cc", "8.6",
                                              "--torch", "2.5.1+cu124"]).stdout)
    assert out["verdict"] == "ok" and out["stack"]["unknown"] == []
    assert out["stack"]["gpus"] == [{"label": "Future GPU 9000 (compute capability 8.6, from --cc)", "compute_capability": "8.6"}]


def test_driver_cuda_that_disagrees_with_driver_is_named():
    args = ["matrix", "check", "--driver", "535.104.05", "--driver-cuda", "11.4", "--torch", "2.4.1+cu121"]
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 1
    assert text.stdout.splitlines()[1] == ("note: judged with --driver-cuda 11.4; gpudoctor's matrix gives driver "
                                           "535.104.05 CUDA 12.2, so check what nvidia-smi prints as 'CUDA Version'")
    data_out = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    assert data_out["stack"]["driver_cuda"] == "11.4" and data_out["notes"] == [text.stdout.splitlines()[1]]
    suggest = CliRunner().invoke(cli, ["matrix", "suggest", "--driver", "535.104.05", "--driver-cuda", "11.4", "--cc", "8.6"])
    assert suggest.stdout.startswith("note: judged with --driver-cuda 11.4")


def test_driver_cuda_that_agrees_with_driver_adds_nothing():
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", "--driver", "515.105.01", "--driver-cuda", "11.7"])
    assert "notes" not in json.loads(result.stdout) and "note:" not in result.output


def _with_closed_stdout(*args: str) -> tuple[int, str]:
    """Run gpudoctor with its standard output's reader gone before it writes, as `| head` ends up."""
    proc = subprocess.Popen([sys.executable, "-m", "gpudoctor", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=60), err


@pytest.mark.parametrize("args", [["checks"], ["explain", "GPU103"], ["matrix", "show"]])
def test_a_listing_read_by_head_exits_quietly(args):
    assert _with_closed_stdout(*args) == (0, "")


def test_a_verdict_read_by_no_one_is_still_a_failed_delivery():
    code, err = _with_closed_stdout("matrix", "check", "--cc", "8.6")
    assert code == 3 and "not delivered" in err


def test_analyze_of_closed_standard_input_is_a_real_message():
    proc = subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", "-"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, preexec_fn=lambda: os.close(0))
    assert proc.returncode == 2
    assert proc.stderr.strip() == "Error: cannot read standard input (-): it is closed; give a file instead"


#: Each block names its own driver (550.10.14 ... 550.34.14), so no block repeats another (a repeated
#: block is read once).
NVIDIA_SMI_HEADER = ("```\n+" + "-" * 89 + "+\n| NVIDIA-SMI 550.{0}.14              Driver Version: 550.{0}.14      "
                     "CUDA Version: 12.4     |\n+" + "-" * 89 + "+\n```\n\nprose {0}\n\n")


def test_analyze_names_ten_pastes_and_counts_the_rest(tmp_path):
    paste = tmp_path / "issue.md"
    paste.write_text("".join(NVIDIA_SMI_HEADER.format(i) for i in range(10, 35)))
    result = CliRunner().invoke(cli, ["analyze", str(paste)])
    summary = [line for line in result.stderr.splitlines() if "judged from what was pasted" in line]
    assert len(summary) == 1 and summary[0].count("nvidia-smi (") == 10 and " and 15 more. " in summary[0]
    notes = [line for line in result.stderr.splitlines() if line.startswith("gpudoctor: note:")]
    assert len(notes) == len(set(notes)) >= 1


def test_listed_keeps_a_short_list_whole():
    from gpudoctor.cli.reports import listed

    assert listed(["a", "b"]) == "a, b"
    assert listed([str(i) for i in range(12)], limit=3) == "0, 1, 2 and 9 more"


@pytest.mark.parametrize("status, error, said", [("timeout", "no answer within 20 s", "NVML did not answer (no answer within 20 s)"),
                                                 ("error", "RuntimeError: boom", "NVML failed (RuntimeError: boom)")])
def test_devices_with_an_nvml_that_did_not_answer_says_so(monkeypatch, status, error, said):
    """A hung NVML was shown as "driver not available", exit 0: a diagnosis the facts do not hold."""
    from gpudoctor import runner

    facts = {"probes": {"nvml": {"status": status, "error": error, "title": "NVML"}, "host": {"status": "ok"}}}
    monkeypatch.setattr(runner, "run_probes", lambda *a, **k: facts)
    result = CliRunner().invoke(cli, ["devices"])
    assert result.exit_code == 3
    assert result.stdout == f"NVIDIA driver: unknown: {said}\n" and "not available" not in result.output
    assert result.stderr == f"gpudoctor: no device listed: {said}; `gpudoctor check` says why\n"
    assert CliRunner().invoke(cli, ["devices", "--json"]).exit_code == 3


def test_devices_without_a_driver_lists_nothing_and_exits_1(monkeypatch):
    """NVML answered that there is no driver: a true listing of no GPU, which a script gating on it must not
    take for success (exit 1, as `check` fails there); a hung NVML stays exit 3 (above)."""
    from gpudoctor import runner

    facts = {"probes": {"nvml": {"status": "ok"}}, "nvml": {"init": {"ok": False, "error": "driver_not_loaded"}}}
    monkeypatch.setattr(runner, "run_probes", lambda *a, **k: facts)
    result = CliRunner().invoke(cli, ["devices"])
    assert result.exit_code == 1 and result.stdout.startswith("NVIDIA driver: not available")
    assert result.stderr == "gpudoctor: no GPU listed (NVIDIA driver: not available); `gpudoctor check` says why\n"


def test_devices_of_pasted_facts_shows_no_gen_n_a():
    from gpudoctor.render.devices import render_devices

    facts = {"gpus": [{"index": 0, "name": "NVIDIA A100", "pcie": {}},
                      {"index": 1, "name": "NVIDIA A100", "pcie": {"gen_current": 4, "width_current": 16, "gen_max": 4}}]}
    out = render_devices(facts, {0: [0], 1: [1]})
    assert "Genn/a" not in out and "xn/a" not in out
    rows = out.splitlines()
    assert " n/a / n/a " in rows[1] and "Gen4 x16 / Gen4 " in rows[2]


# --- frameworks: versions, other vendors' builds, the headline ------------------------------------

def _site_torch(site: Path, version: str, metadata: Optional[bytes] = None) -> None:
    """A fake site-packages torch: its package folder and one dist-info (METADATA as given)."""
    (site / "torch").mkdir(parents=True, exist_ok=True)
    (site / "torch" / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    info = site / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(metadata or f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n".encode())


def _quick_report(site: Path) -> dict:
    from gpudoctor import pipeline
    from gpudoctor.probes.frameworks import probe_frameworks_metadata
    from test_quick import h200_facts_with

    return pipeline.judge(h200_facts_with(probe_frameworks_metadata([str(site)])["frameworks"]))


@pytest.mark.parametrize("version, vendor", [("2.5.1+rocm6.2", "ROCm"), ("2.7.0+xpu", "Intel XPU")])
def test_quick_says_another_vendors_torch_is_not_a_cuda_build(tmp_path, version, vendor):
    """--quick passed a +rocm6.2 or +xpu torch on NVIDIA GPUs: no finding at all."""
    _site_torch(tmp_path, version)
    report = _quick_report(tmp_path)
    fwk001 = [f for f in report["findings"] if f["code"] == "FWK001"]
    assert len(fwk001) == 1 and fwk001[0]["severity"] == "error"
    assert fwk001[0]["title"] == f"PyTorch {version} is a {vendor} build, not a CUDA build, on a machine with 2 NVIDIA GPU(s)"
    assert f"local version tag +{version.split('+')[1]}" in fwk001[0]["detail"]


def test_an_imported_rocm_torch_is_not_a_cuda_build():
    from gpudoctor import pipeline
    from test_quick import h200_facts_with

    fw = {"torch": {"installed": True, "status": "ok", "info": {"version": "2.5.1+rocm6.2", "built_cuda": None,
                                                               "built_hip": "6.2.41133", "cpu_only_build": False,
                                                               "devices": []}}}
    codes = [(f["code"], f["title"]) for f in pipeline.judge(h200_facts_with(fw))["findings"] if f["code"].startswith("FWK")]
    assert codes == [("FWK001", "PyTorch 2.5.1+rocm6.2 is a ROCm build, not a CUDA build, on a machine with 2 NVIDIA GPU(s)")]


def test_two_torch_dist_infos_say_what_is_ambiguous(tmp_path):
    from gpudoctor.render.facts_text import frameworks_line

    _site_torch(tmp_path, "2.4.0+cpu")
    info = tmp_path / "torch-2.5.1+cpu.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+cpu\n")
    report = _quick_report(tmp_path)
    line = frameworks_line(report["facts"])
    assert "None" not in line and line.startswith("torch (version unknown: several distributions install torch here "
                                                  "(torch 2.4.0+cpu, torch 2.5.1+cpu)")
    titles = [f["title"] for f in report["findings"] if f["code"] == "FWK001"]
    assert titles and all("None" not in t and "version unknown" in t for t in titles)


def test_a_metadata_that_is_not_utf8_is_named_as_the_reason(tmp_path):
    """importlib skips a METADATA that is not UTF-8 (and so does gpudoctor, to agree with it): the version
    is then unknown, and the line says which file and why, never "torch None"."""
    from gpudoctor.render.facts_text import frameworks_line

    _site_torch(tmp_path, "2.5.1+cpu", b"Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+cpu\nSummary: caf\xe9\n")
    report = _quick_report(tmp_path)
    torch = report["facts"]["frameworks"]["torch"]["info"]
    assert torch["version"] is None
    bad = str(tmp_path / "torch-2.5.1+cpu.dist-info" / "METADATA")
    assert torch["version_unknown"] == f"{bad} is not UTF-8 text, so neither gpudoctor nor importlib reads its version"
    assert frameworks_line(report["facts"]).startswith(f"torch (version unknown: {bad} is not UTF-8 text")


@pytest.mark.parametrize("facts, said", [
    ({"probes": {"frameworks": {"status": "timeout", "error": "no answer within 95 s"}}},
     "unknown: the framework probe did not finish (no answer within 95 s)"),
    ({"probes": {"frameworks": {"status": "ok"}}, "frameworks": {"torch": {"installed": False}},
      "python": {"unavailable": "unknown", "executable": "/venv/bin/python", "error": "PermissionError: denied"}},
     "unknown: the Python it would run under (/venv/bin/python) could not be read (PermissionError: denied)"),
    ({"probes": {"frameworks": {"status": "ok"}}, "frameworks": {"torch": {"installed": False}}, "python": {"version": "3.12.3"}},
     f"none of {', '.join(NAMES.values())} installed"),  # PyTorch, TensorFlow, JAX, CuPy and any other the table holds
])
def test_frameworks_headline_says_unknown_when_nothing_was_looked_for(facts, said):
    from gpudoctor.render.facts_text import frameworks_line

    assert frameworks_line(facts) == said


# --- a $VIRTUAL_ENV without a python --------------------------------------------------------------

def test_a_broken_virtual_env_is_said_not_skipped_silently(tmp_path, monkeypatch):
    from gpudoctor.probes import interpreter

    broken = tmp_path / "venv"
    (broken / "bin").mkdir(parents=True)  # a deleted or half-built venv: its folder, no python
    monkeypatch.setattr(interpreter, "holds_frameworks", lambda path: False)
    target = interpreter.choose(None, {"VIRTUAL_ENV": str(broken), "PATH": ""})
    assert target.own
    assert target.reason == f"gpudoctor's own interpreter ($VIRTUAL_ENV={broken} was skipped: {interpreter.NO_PYTHON})"
    listed = [e for e in interpreter.environments({"VIRTUAL_ENV": str(broken), "PATH": ""}) if e.get("problem")]
    assert listed == [{"prefix": str(broken), "executable": None, "as": ["$VIRTUAL_ENV"], "frameworks": [],
                       "problem": interpreter.NO_PYTHON}]


def test_the_python_line_names_a_broken_environment():
    from gpudoctor.render.facts_text import python_line

    py = {"version": "3.12.3", "executable": "/usr/bin/python3", "diagnosed": {"own": True},
          "environments": [{"prefix": "/srv/venv", "executable": None, "as": ["$VIRTUAL_ENV"], "frameworks": [],
                            "problem": "it holds no bin/python (nor bin/python3) gpudoctor can run"}]}
    assert python_line({"python": py}) == ("3.12.3 (system) at /usr/bin/python3; $VIRTUAL_ENV /srv/venv skipped: "
                                           "it holds no bin/python (nor bin/python3) gpudoctor can run")


# --- an overlay leaves a trace --------------------------------------------------------------------

H200X2 = Path(__file__).parent / "fixtures/real/h200x2-20261121/report.json"


def _check_with_overlay(monkeypatch, tmp_path: Path) -> tuple[Path, dict]:
    """`check --matrix ov.json` on a recorded machine's facts (the probes replaced by what they read there)."""
    from gpudoctor import pipeline

    overlay = _overlay(tmp_path)
    facts = json.loads(H200X2.read_text())["facts"]
    facts.pop("options", None)
    monkeypatch.setattr(pipeline, "run_probes", lambda *a, **k: json.loads(json.dumps(facts)))
    return overlay, pipeline.check(pipeline.RunOptions(matrix=data.Matrix((data.read_overlay(str(overlay)),))))


def test_a_report_records_the_overlay_it_was_judged_with(monkeypatch, tmp_path):
    import hashlib

    overlay, report = _check_with_overlay(monkeypatch, tmp_path)
    assert report["facts"]["options"]["matrix_overlays"] == [
        {"path": str(overlay), "sha256": hashlib.sha256(overlay.read_bytes()).hexdigest(), "topics": ["gpus"]}]


def test_analyze_without_the_overlay_says_so(monkeypatch, tmp_path):
    from gpudoctor import report as rep

    overlay, report = _check_with_overlay(monkeypatch, tmp_path)
    saved = tmp_path / "report.json"
    saved.write_text(rep.to_json(report))
    digest = report["facts"]["options"]["matrix_overlays"][0]["sha256"]
    without = CliRunner().invoke(cli, ["analyze", str(saved), "--no-redact"])
    notes = [line for line in without.stderr.splitlines() if "--matrix" in line]
    assert notes == [f"gpudoctor: note: {saved} was judged with --matrix {overlay} (sha256 {digest[:16]}, topics gpus), "
                     "which is not given now: verdicts that rested on it may differ; pass the same file with --matrix "
                     "to judge as it did"]
    same = CliRunner().invoke(cli, ["analyze", str(saved), "--matrix", str(overlay)])
    assert "--matrix" not in same.stderr
    overlay.write_text(overlay.read_text().replace("9.0", "8.9"))  # the same path, other contents: not the same overlay
    changed = CliRunner().invoke(cli, ["analyze", str(saved), "--matrix", str(overlay)])
    assert "was judged with --matrix" in changed.stderr


def test_a_report_without_an_overlay_records_none(monkeypatch):
    from gpudoctor import pipeline

    facts = json.loads(H200X2.read_text())["facts"]
    facts.pop("options", None)
    monkeypatch.setattr(pipeline, "run_probes", lambda *a, **k: facts)
    assert "options" not in pipeline.check(pipeline.RunOptions())["facts"]
