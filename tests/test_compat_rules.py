"""The compatibility verdicts on the famous traps, through `gpudoctor matrix check --json` (the
same rules `check` applies). Each case cites the source its expectation comes from; the matrix
entries it relies on cite theirs in compat_matrix/*.json.

Sources:
  MVC      docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html (11.x >= 450.80.02,
           12.x >= 525.60.13, 13.x >= 580; no JIT of newer PTX)
  TABLE3   CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions"
  RELEASE  github.com/pytorch/pytorch RELEASE.md release compatibility matrix, and
           pytorch/test-infra generate_binary_build_matrix.py (variants, architectures)
  GUIDE    CUDA C++ Programming Guide, "Binary Compatibility" / "PTX Compatibility"
  CUDA-GPUS developer.nvidia.com/cuda-gpus (RTX 5090 = 12.0, L4 = 8.9, H100 = 9.0, GTX 1080 = 6.1, V100 = 7.0)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.compat import rules
from gpudoctor.compat.data import BUNDLED



def judge(*args: str) -> tuple[int, str, set[str]]:
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", *args])
    if result.exit_code == 2:
        return 2, "", set()
    data = json.loads(result.stdout)
    return result.exit_code, data["verdict"], {f["code"] for f in data["findings"]}


CASES = [
    # (args, exit, verdict, codes, source)
    # CUDA 12.x wheels on drivers 525-575: minor-version compatibility, a warning, never the "critical conflict"
    # a float comparison gives (MVC; TABLE3: 12.4 needs 550.54.14 for full support)
    (["--driver", "535.104.05", "--torch", "2.5.1+cu124"], 0, "warning", {"CMP002"}, "MVC"),
    (["--driver", "525.60.13", "--torch", "2.4.1+cu124"], 0, "warning", {"CMP002"}, "MVC floor for 12.x"),
    (["--driver", "575.57.08", "--torch", "2.7.1+cu128"], 0, "ok", set(), "TABLE3: 575.x supports CUDA 12.9, so 12.8 fully"),
    (["--driver", "520.61.05", "--torch", "2.4.1+cu124"], 1, "error", {"CMP001"}, "MVC: below the 12.x floor"),
    (["--driver", "550.54.14", "--torch", "2.5.1+cu124"], 0, "ok", set(), "TABLE3: 12.4 GA driver"),
    # CUDA 13 wheels on drivers older than 580 will not run (MVC 13.x >= 580)
    (["--driver", "575.57.08", "--torch", "2.11.0"], 1, "error", {"CMP001"}, "MVC; RELEASE: 2.11 PyPI default is cu130"),
    (["--driver", "580.65.06", "--torch", "2.11.0"], 0, "ok", set(), "TABLE3: 13.0 GA driver"),
    # CUDA 10.2 wheels predate minor-version compatibility (MVC applies from 11.0): they need a 10.2 driver
    (["--driver", "418.87.00", "--torch", "1.12.1+cu102"], 1, "error", {"CMP001"}, "MVC since 11.0; TABLE3 10.2 >= 440.33"),
    (["--driver", "440.33.01", "--torch", "1.12.1+cu102"], 0, "ok", set(), "TABLE3"),
    # RTX 5090 (12.0) with torch < 2.7: no sm_120 code, no PTX -> no kernel image (RELEASE; GUIDE)
    (["--gpu", "NVIDIA GeForce RTX 5090", "--torch", "2.6.0+cu126"], 1, "error", {"CMP003"}, "RELEASE 2.6 cu126 tops at sm_90"),
    (["--gpu", "NVIDIA GeForce RTX 5090", "--torch", "2.7.0+cu128"], 0, "ok", set(), "RELEASE 2.7 cu128 adds sm_120"),
    # Pascal and Volta with cu128 / cu13x wheels (RELEASE: 2.11 cu128 and cu130 start at sm_75)
    (["--gpu", "NVIDIA GeForce GTX 1080", "--torch", "2.8.0+cu128"], 1, "error", {"CMP003"}, "RELEASE 2.8 cu128 starts at sm_70"),
    (["--gpu", "Tesla V100-SXM2-32GB", "--torch", "2.11.0+cu130"], 1, "error", {"CMP003"}, "RELEASE 2.11 cu130 starts at sm_75"),
    (["--gpu", "Tesla V100-SXM2-32GB", "--torch", "2.8.0+cu128"], 0, "ok", set(), "RELEASE 2.8 cu128 keeps sm_70"),
    (["--gpu", "Tesla V100-SXM2-32GB", "--torch", "2.11.0+cu126"], 0, "ok", set(), "RELEASE: cu126 keeps sm_50-sm_90"),
    # H100 (9.0) with CUDA 11.7 builds: no sm_90 (it arrived with CUDA 11.8), and nvcc 11.7 cannot target it
    (["--gpu", "NVIDIA H100 80GB HBM3", "--torch", "1.13.1+cu117"], 1, "error", {"CMP003"}, "RELEASE 1.13 cu117 tops at sm_86"),
    (["--gpu", "NVIDIA H100 80GB HBM3", "--torch", "2.0.1+cu118"], 0, "ok", set(), "RELEASE 2.0 cu118 adds sm_90"),
    (["--cc", "9.0", "--cuda", "11.7"], 0, "warning", {"CMP005"}, "CUDA 11.8 first targets sm_90"),
    # L4 (8.9) runs sm_86 machine code: same major, higher minor (GUIDE)
    (["--gpu", "NVIDIA L4", "--torch", "1.13.1+cu117"], 0, "ok", set(), "GUIDE; CUDA-GPUS L4 = 8.9"),
    # Python outside the release's range (RELEASE: 2.11 supports >=3.10,<3.15)
    # no wheel for that Python: pip finds nothing to install, an error (an installed build outside the range is a warning)
    (["--python", "3.9", "--torch", "2.11.0+cu130"], 1, "error", {"CMP007"}, "RELEASE"),
    # beyond the matrix: unknown, never an error
    (["--driver", "580.65.06", "--torch", "9.1.0+cu190"], 0, "unknown", {"CMP008"}, "unknown release"),
    (["--gpu", "NVIDIA Fictional X9000", "--torch", "2.11.0"], 0, "unknown", {"CMP008"}, "unknown GPU"),
    # ...but a CUDA major newer than the driver's is known not to run, matrix or not (MVC stays within a major): an error
    (["--driver", "580.65.06", "--cuda", "19.0"], 1, "error", {"CMP006", "CMP008"}, "unknown CUDA, newer major"),
    # PyTorch 2.5 cu121 carries sm_50..sm_90 and no PTX, so an RTX 5090 (12.0) cannot run it
    # (https://github.com/pytorch/pytorch/issues/150733: 'sm_120 is not compatible with the current PyTorch installation')
    (["--gpu", "NVIDIA GeForce RTX 5090", "--torch", "2.5.0+cu121"], 1, "error", {"CMP003"}, "RELEASE; pytorch#150733"),
    # toolkits whose CUDA major the driver lacks are errors, not warnings (MVC: 12.x >= 525.60.13, 13.x >= 580)
    (["--driver", "520.61.05", "--cuda", "12.1"], 1, "error", {"CMP006"}, "MVC 12.x floor"),
    (["--driver", "575.57.08", "--cuda", "13.0"], 1, "error", {"CMP006"}, "MVC 13.x floor"),
    (["--driver", "535.104.05", "--cuda", "12.4"], 0, "warning", {"CMP006"}, "MVC: same major above the floor"),
]


@pytest.mark.parametrize("args,exit_code,verdict,codes,source", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_trap(args, exit_code, verdict, codes, source):
    got_exit, got_verdict, got_codes = judge(*args)
    assert (got_exit, got_verdict, got_codes) == (exit_code, verdict, codes), source


def test_cmp001_names_the_driver_and_the_build_to_install():
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", "--driver", "575.57.08", "--torch", "2.11.0", "--python", "3.12"])
    (f,) = json.loads(result.stdout)["findings"]
    assert "580.65.06" in f["remediation"]["text"]  # TABLE3: 13.0 GA driver
    assert any("torch==2.11.*" in c and "/whl/cu128" in c for c in f["remediation"]["commands"])


@pytest.mark.parametrize("args", [["--driver", "abc"], ["--cc", "nine"], ["--torch", "banana"], ["--python", "nope"],
                                  ["--cc", "abc"], ["--driver-cuda", "x"], ["--jax", "banana"], ["--os", "beos", "--cc", "9.0"], []])
def test_bad_input_exits_2(args):
    result = CliRunner().invoke(cli, ["matrix", "check", *args])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_matrix_overlay_extends_the_data(tmp_path):
    overlay = tmp_path / "mine.json"
    overlay.write_text(json.dumps({
        "topic": "gpus", "as_of": "2026-11-21", "sources": {"ME": "our lab's own board"},
        "entries": [{"model": "X9000", "match": ["Fictional X9000"], "compute_capability": "9.0",
                     "architecture": "hopper", "segment": "datacenter", "source": "ME"}]}))
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", "--matrix", str(overlay),
                                      "--gpu", "NVIDIA Fictional X9000", "--torch", "2.11.0"])
    assert json.loads(result.stdout)["verdict"] == "ok"


@pytest.mark.parametrize("content,needle", [("{not json", "not valid JSON"), ('{"topic": "gpus"}', "missing"),
                                            ('{"topic": "gpus", "as_of": "x", "sources": {}, "entries": [{"source": "NOPE"}]}',
                                             "does not cite")])
def test_malformed_matrix_is_one_line_exit_2(tmp_path, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result = CliRunner().invoke(cli, ["matrix", "check", "--driver", "580.65.06", "--matrix", str(bad)])
    assert result.exit_code == 2
    assert str(bad) in result.stderr and needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_suggest_gives_install_commands_and_the_driver_to_unlock_newer():
    result = CliRunner().invoke(cli, ["matrix", "suggest", "--driver", "535.104.05", "--gpu", "NVIDIA L4", "--python", "3.11"])
    assert result.exit_code == 0
    assert "--index-url https://download.pytorch.org/whl/cu12" in result.stdout
    assert "tensorflow[and-cuda]" in result.stdout
    assert "unlocks builds for CUDA" in result.stdout


def test_show_prints_entries_with_sources():
    result = CliRunner().invoke(cli, ["matrix", "show", "cuda_toolkits"])
    assert result.exit_code == 0
    assert "12.4" in result.stdout and "sources:" in result.stdout
    header, rule, first = result.stdout.splitlines()[1:4]
    assert header.split()[:3] == ["version", "min_driver_linux", "min_driver_windows"]  # a table, not key=value lines
    assert set(rule.strip()) == {"-", " "} and first.split()[:3] == ["8.0", "367.48", "369.30"]  # TABLE3 (8.0.44 GA1)
    assert "version=" not in result.stdout
    assert CliRunner().invoke(cli, ["matrix", "show", "nope"]).exit_code == 2


def test_tensorflow_after_2_10_on_native_windows_is_known_bad():
    """TensorFlow's install guide: 2.10 was the last release supporting GPU on native Windows."""
    from gpudoctor.checks.compat import check_known_bad

    def facts(os_name, version, gpu=True):
        gpus = {"nvml": {"init": {"ok": True}, "device_count": 1},
                "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9"}]} if gpu else {}
        return {"host": {"os": os_name}, **gpus, "frameworks": {"tensorflow": {"installed": True, "status": "ok",
                                                                                "info": {"version": version}}}}

    assert [f.code for f in check_known_bad(facts("Windows", "2.16.1"), BUNDLED)] == ["CMP009"]
    assert list(check_known_bad(facts("Windows", "2.16.1", gpu=False), BUNDLED)) == []  # no GPU left unused
    assert list(check_known_bad(facts("Windows", "2.10.1"), BUNDLED)) == []
    assert list(check_known_bad(facts("Linux", "2.16.1"), BUNDLED)) == []


def _matrix_ranges() -> set[str]:
    """Every version range the bundled matrix holds (Python, compute capability, version and cuDNN ranges)."""
    import glob
    import re

    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and re.fullmatch(r"[<>=!~][<>=!~0-9., *]*", node):
            found.add(node)

    for path in glob.glob(str(Path(__file__).resolve().parents[1] / "compat_matrix" / "*.json")):
        walk(json.loads(Path(path).read_text(encoding="utf-8")))
    return found


OTHER_RANGES = ("", ">=3.9,", " >= 3.9 , < 3.14 ", "==3.10", "!=3.11", ">3.9", "<=3.12", "==3.*", "~=3.10", ">=\uff12.0", ">=3.\u0661\u0660",
                ">=3.10.0", "==3.10.0", "<3.13.1", ">=3.9,<3.14,!=3.12", ">=3.9;<3.14", "bogus", ">=abc", "===3.10")


@pytest.mark.parametrize("spec", sorted(_matrix_ranges()) + list(OTHER_RANGES))
def test_in_range_answers_as_packaging_does(spec: str) -> None:
    """rules.in_range answers from Version's ordering to keep packaging.specifiers out of `check --quick`:
    on every range in the matrix and on forms it leaves to packaging, it must agree with SpecifierSet."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    assert len(_matrix_ranges()) >= 15  # the matrix's Python and compute capability ranges are all here
    for text in [f"{a}.{b}" for a in range(2, 14) for b in range(0, 16)]:
        value = Version(text)
        try:
            expected: object = value in SpecifierSet(spec)
        except InvalidSpecifier:
            expected = None
        assert rules.in_range(value, spec) == expected, (spec, text)


def test_matrix_ranges_need_no_packaging_specifiers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of in_range: judging the bundled matrix's ranges imports no packaging.specifiers."""
    import sys

    from packaging.version import Version

    monkeypatch.setitem(sys.modules, "packaging.specifiers", None)  # any import of it now raises ImportError
    answers = {spec: rules.in_range(Version("3.12"), spec) for spec in _matrix_ranges()}
    assert answers[">=3.10,<3.14"] is True and answers[">=3.6,<3.10"] is False and answers[">=12.0,<13.0"] is False
