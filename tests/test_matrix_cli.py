"""`gpudoctor matrix check / suggest / show` on cases from real tickets, and the one-judge property: the
check on real facts and `matrix check` call the same function and agree.

Sources (each case's expectation):
  TF-99592   https://github.com/tensorflow/tensorflow/issues/99592 (TF 2.20, RTX 50: CUDA_ERROR_INVALID_PTX)
  TF-101746  https://github.com/tensorflow/tensorflow/issues/101746 (TF 2.16.2 and 2.20.0, RTX 5080: the same)
  TF-WIN     https://www.tensorflow.org/install/pip#windows-native (2.10 was the last with GPU on native Windows)
  TF-CUDNN   https://github.com/tensorflow/tensorflow/issues/60913 and https://github.com/bmaltais/kohya_ss/issues/2787
             ('CuDNN library needs to have matching major version and equal or higher minor version'; TF 2.15
             was compiled with cuDNN 8.9.4), https://www.tensorflow.org/install/source#gpu (2.15: cuDNN 8.9)
  MVC        https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
  PT-11040   https://github.com/pytorch/pytorch/issues/ (PyTorch's 'The NVIDIA driver on your system is too old
             (found version 11040)': cudaDriverGetVersion's 1000 * major + 10 * minor)
  JAX        https://docs.jax.dev/en/latest/installation.html (CUDA 13 wheels: driver >= 580, SM >= 7.5; no
             NVIDIA GPU wheels on native Windows)
  CUDA-10.2  https://docs.nvidia.com/cuda/archive/10.2/cuda-toolkit-release-notes/index.html (last for macOS)
  TARGETS    compat_matrix/cuda_targets.json (CUDA 12.0 dropped sm_35/sm_37)
"""

from __future__ import annotations

import json
import pytest
from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor.checks import compat as compat_check
from gpudoctor.compat import stack as judge
from gpudoctor.cli import cli
from gpudoctor.compat.data import BUNDLED

from conftest import REAL
from helpers_matrix import matrix_check

RTX5090 = "NVIDIA GeForce RTX 5090"




check = matrix_check


def codes(data: dict) -> set[str]:
    return {f["code"] for f in data["findings"]}


CASES = [
    # (args, verdict, codes, source)
    (["--gpu", RTX5090, "--tensorflow", "2.16.1"], "error", {"CMP009"}, "TF-101746"),
    (["--gpu", RTX5090, "--tensorflow", "2.20.0", "--driver", "580.95.05"], "error", {"CMP009"}, "TF-99592"),
    (["--gpu", "NVIDIA GeForce RTX 5080 Laptop GPU", "--tensorflow", "2.20"], "error", {"CMP009"}, "TF-101746"),
    (["--os", "windows", "--tensorflow", "2.15.0"], "error", {"CMP009"}, "TF-WIN"),
    (["--os", "windows", "--tensorflow", "2.10.1"], "ok", set(), "TF-WIN"),
    (["--os", "wsl", "--tensorflow", "2.15.0"], "ok", set(), "TF-WIN: WSL2 is the supported way"),
    (["--tensorflow", "2.15.0", "--cudnn", "8.8"], "error", {"FWK007"}, "TF-CUDNN"),
    (["--tensorflow", "2.15.0", "--cudnn", "8.9.7"], "ok", set(), "TF-CUDNN"),
    (["--tensorflow", "2.15.0", "--cudnn", "9.3.0"], "error", {"FWK006"}, "TF-CUDNN: another major"),
    (["--torch", "2.5.1+cu124", "--cudnn", "8.8"], "ok", set(), "PyTorch wheels bring their own cuDNN"),
    (["--driver-cuda", "12.2", "--torch", "2.5.1+cu124"], "warning", {"CMP002"}, "MVC: a 12.2 driver is above the 12.x floor"),
    (["--driver-cuda", "11040", "--torch", "2.4.1+cu121"], "error", {"CMP001"}, "PT-11040; MVC never crosses a major"),
    (["--driver-cuda", "11.4", "--torch", "2.4.1+cu121"], "error", {"CMP001"}, "PT-11040"),
    (["--driver", "550.54.14", "--jax", "0.11.2"], "error", {"CMP001"}, "JAX: jax[cuda13] needs >= 580"),
    (["--driver", "550.54.14", "--jax", "0.11.2+cuda12"], "ok", set(), "JAX: jax[cuda12] needs >= 525"),
    (["--gpu", "Tesla V100-SXM2-32GB", "--jax", "0.11.2"], "error", {"CMP003"}, "JAX: CUDA 13 wheels need SM >= 7.5"),
    (["--os", "windows", "--jax", "0.11.2"], "error", {"CMP009"}, "JAX: no Windows GPU wheels"),
    (["--gpu", "Tesla K80", "--cupy", "14.2.0+cuda12x"], "error", {"CMP003"}, "TARGETS: CUDA 12 cannot target 3.7"),
    (["--driver", "580.65.06", "--gpu", "NVIDIA H100 80GB HBM3", "--cupy", "14.2.0"], "ok", set(), "recorded H100 stack"),
    (["--os", "macos", "--torch", "2.5.1+cu124"], "error", {"CMP009"}, "CUDA-10.2"),
    (["--gpu", "NVIDIA GeForce RTX 4090", "--torch", "2.11.0+cpu"], "error", {"FWK001"}, "a CPU-only build"),
    (["--os", "windows", "--gpu", "NVIDIA GeForce RTX 4090", "--torch", "2.5.1"], "error", {"FWK001"},
     "pytorch.json: the PyPI wheel is CPU-only on Windows"),
]


@pytest.mark.parametrize("args,verdict,want,source", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_case(args, verdict, want, source):
    exit_code, data = check(*args)
    assert (data["verdict"], codes(data)) == (verdict, want), source
    assert exit_code == (1 if verdict == "error" else 0)


def test_the_headline_case_says_why_and_what_to_install():
    """RTX 5090 with PyTorch 2.5.0+cu121 must not be ok: that build has no sm_120 kernel and no PTX."""
    exit_code, data = check("--gpu", RTX5090, "--torch", "2.5.0+cu121")
    assert (exit_code, data["verdict"]) == (1, "error")
    (f,) = data["findings"]
    assert "sm_120 is not compatible" in f["detail"] and "no kernel image" in f["detail"]
    (cmd,) = f["remediation"]["commands"]
    assert "--index-url https://download.pytorch.org/whl/cu1" in cmd
    build = data["stack"]["builds"][0]
    assert build["ptx"] == [] and "sm_90" in build["sass"] and "sm_120" not in build["sass"]


def test_a_known_bad_error_replaces_the_unknown_architecture():
    _, data = check("--gpu", RTX5090, "--tensorflow", "2.16.1")
    (f,) = data["findings"]
    assert f["code"] == "CMP009" and "CUDA_ERROR_INVALID_PTX" in f["title"]
    assert "https://github.com/tensorflow/tensorflow/issues/99592" in f["remediation"]["links"]


def test_unknown_architecture_list_is_unknown_never_ok(tmp_path):
    """A release whose variant has no arch_list: unknown with the reason, never a silent ok."""
    overlay = tmp_path / "pt.json"
    overlay.write_text(json.dumps({"topic": "pytorch", "as_of": "2026-11-24", "sources": {"ME": "a test"},
                                   "entries": [{"version": "9.9", "python": ">=3.10", "default_pypi_variant": "cu130",
                                                "source": "ME", "variants": [{"name": "cu130", "cuda": "13.0"}]}]}))
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", "--matrix", str(overlay), "--gpu", RTX5090, "--torch", "9.9.0"])
    data = json.loads(result.stdout)
    assert data["verdict"] == "unknown" and codes(data) == {"CMP008"}
    assert "not known" in data["findings"][0]["detail"]


def test_sass_without_known_ptx_is_unknown_not_fail():
    from gpudoctor.compat import rules as compat

    assert compat.build_runs_on("12.0", ["sm_80", "sm_90"], None).status == compat.UNKNOWN
    assert compat.build_runs_on("12.0", ["sm_80", "sm_90"], []).status == compat.FAIL
    assert compat.build_runs_on("8.6", ["sm_80"], None).status == compat.OK  # SASS decides without the PTX list
    assert compat.build_runs_on("9.0", ["sm_80"], ["compute_90a"]).status == compat.LIMITED
    assert compat.build_runs_on("10.0", ["sm_80"], ["compute_90a"]).status == compat.FAIL  # 'a' PTX: exactly 9.0


@pytest.mark.parametrize("text,want", [("12.2", "12.2"), ("11040", "11.4"), ("12080", "12.8"), ("13000", "13.0"),
                                       ("13.0.1", "13.0"), ("abc", None), ("", None), ("12.2rc1", None)])
def test_driver_cuda_forms(text, want):
    from gpudoctor.compat import rules as compat

    assert compat.parse_driver_cuda(text) == want


def test_text_output_shows_the_remediation():
    result = CliRunner().invoke(cli, ["matrix", "check", "--driver", "575.57.08", "--torch", "2.11.0", "--python", "3.12"])
    assert result.exit_code == 1
    assert "fix: Install NVIDIA driver 580.65.06 or newer" in result.stdout  # MVC / Table 3: 13.0 GA driver
    assert "$ python3 -m pip install --force-reinstall 'torch==2.11.*' --index-url https://download.pytorch.org/whl/cu128" in result.stdout


def test_text_output_is_each_finding_of_the_json_in_order():
    """`matrix check`'s text prints each finding of its --json output, in order: the severity, code and title,
    then why (the detail), fix (the remediation's text), each command and each link (render/finding.py)."""
    args = ["matrix", "check", "--driver", "575.57.08", "--torch", "2.11.0", "--python", "3.12", "--gpu", RTX5090,
            "--tensorflow", "2.20.0"]  # MVC, TF-99592
    text = CliRunner().invoke(cli, args).stdout
    data = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    want = [f"verdict: {data['verdict']}"]
    for f in data["findings"]:
        rem = f["remediation"]
        want.append(f"  {f['severity']:<7} {f['code']} {f['title']}")
        want += [f"          why: {f['detail']}"] if f["detail"] else []
        want += [f"          fix: {rem['text']}"] if rem["text"] else []
        want += [f"          $ {c}" for c in rem["commands"]] + [f"          see {u}" for u in rem["links"]]
    assert len(data["findings"]) >= 2 and any(f["remediation"]["links"] for f in data["findings"])
    assert text == "\n".join(want) + "\n"


@pytest.mark.parametrize("command", ["check", "suggest"])
@pytest.mark.parametrize("args", [["--driver", "abc"], ["--cc", "abc"], ["--python", "nope"], ["--driver-cuda", "banana"]])
def test_not_a_version_is_a_one_line_usage_error(command, args):
    base = ["--driver", "580.65.06", "--cc", "9.0"] if command == "suggest" else []
    merged = dict(zip(base[::2], base[1::2]))
    merged.update(dict(zip(args[::2], args[1::2])))
    result = CliRunner().invoke(cli, ["matrix", command, *[x for kv in merged.items() for x in kv]])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_suggest_offers_no_driver_that_cannot_help_an_old_gpu():
    """Tesla K80 (3.7): CUDA 12 and 13 cannot target it (TARGETS), and R470 is the last driver branch that
    drives it (driver_branches.json), so no newer driver 'unlocks' anything: CUDA 11.8 runs on R470 under
    minor-version compatibility, and that is the ceiling."""
    result = CliRunner().invoke(cli, ["matrix", "suggest", "--driver", "470.57.02", "--gpu", "Tesla K80"])
    assert result.exit_code == 0
    assert "CUDA 13" not in result.stdout and "CUDA 12" not in result.stdout
    assert "unlocks" not in result.stdout
    assert "R470" in result.stdout and "CUDA 11.8 is the newest CUDA" in result.stdout  # the last toolkit for 3.7
    pytorch = [line for line in result.stdout.splitlines() if line.startswith("PyTorch")]
    assert pytorch and "cu1" in pytorch[0]


def test_overlay_is_capped_and_its_shapes_validated(tmp_path):
    result = CliRunner().invoke(cli, ["matrix", "show", "--matrix", "/dev/zero"])
    assert result.exit_code == 2 and "16 MiB" in result.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"topic": "gpus", "as_of": "2026-11-24", "sources": {"X": "x"},
                               "entries": [{"model": "X", "match": ["X"], "compute_capability": "9.0", "source": ["X"]}]}))
    result = CliRunner().invoke(cli, ["matrix", "show", "--matrix", str(bad)])
    assert result.exit_code == 2 and "does not cite" in result.stderr
    bad.write_text(json.dumps({"topic": "gpus", "as_of": "2026-11-24", "sources": {"X": "x"},
                               "entries": [{"model": "X", "match": "X", "compute_capability": 9.0, "source": "X"}]}))
    result = CliRunner().invoke(cli, ["matrix", "check", "--matrix", str(bad), "--gpu", "X"])
    assert result.exit_code == 2 and "'match' must be a list of strings" in result.stderr


# --- one judge -------------------------------------------------------------------------------------

def test_matrix_check_and_check_on_facts_call_the_same_judge(monkeypatch):
    """Both entry points go through compat.stack.judge_stack's parts; a spy on them sees both."""
    from gpudoctor.compat import queries

    seen = []
    real = judge.judge_versions

    def spy(stack, *a, **k):
        seen.append(stack)
        return real(stack, *a, **k)

    monkeypatch.setattr(judge, "judge_versions", spy)
    CliRunner().invoke(cli, ["matrix", "check", "--driver", "580.65.06", "--torch", "2.11.0+cu130"])
    facts = json.loads((REAL / "h100x1-20261123" / "quick.json").read_text())["facts"]
    pipeline.judge(facts)
    assert len(seen) == 2
    assert queries.judge_stack is judge.judge_stack


def test_the_recorded_stack_gets_the_same_verdict_from_both_entry_points():
    """The H100 recording (driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130, JAX 0.11.2, CuPy 14.2.0, nvcc 13.0):
    `check` found nothing; `matrix check` with the same stack says ok."""
    facts = json.loads((REAL / "h100x1-20261123" / "quick.json").read_text())["facts"]
    assert list(compat_check.check_compat(facts, BUNDLED)) == []
    exit_code, data = check("--driver", "580.159.04", "--gpu", "NVIDIA H100 80GB HBM3", "--torch", "2.11.0+cu130",
                            "--jax", "0.11.2", "--cupy", "14.2.0", "--cuda", "13.0", "--python", "3.12")
    assert (exit_code, data["verdict"], data["findings"]) == (0, "ok", [])


def test_quick_facts_take_the_architectures_from_the_matrix():
    """torch known only from its metadata (no get_arch_list()): the matrix's cu130 list is judged, so a
    Volta GPU put in place of the H100 gets CMP003, as `matrix check` says."""
    facts = json.loads((REAL / "h100x1-20261123" / "quick.json").read_text())["facts"]
    facts["gpus"][0]["compute_capability"] = "7.0"
    got = {f.code for f in compat_check.check_compat(facts, BUNDLED)}
    assert "CMP003" in got
    _, data = check("--cc", "7.0", "--torch", "2.11.0+cu130")
    assert "CMP003" in codes(data)


def test_known_bad_on_facts_tensorflow_on_blackwell():
    facts = json.loads((REAL / "h100x1-20261123" / "full.json").read_text())["facts"]
    facts["gpus"][0]["compute_capability"] = "12.0"
    facts["frameworks"]["tensorflow"] = {"installed": True, "status": "ok",
                                         "info": {"version": "2.20.0", "built_cuda": "12.5.1", "cpu_only_build": False,
                                                  "arch_list": ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]}}
    found = {f.code for f in compat_check.check_known_bad(facts, BUNDLED)}
    assert found == {"CMP009"}
    stack_codes = {f.code for f in compat_check.check_compat(facts, BUNDLED)}
    # the known-bad error disproves "runs through PTX JIT" (CMP004); the recorded PyTorch cu130 has sm_120
    assert stack_codes == set()

