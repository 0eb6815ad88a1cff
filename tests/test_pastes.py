"""`gpudoctor analyze` on what users paste: real collect_env and nvidia-smi output from public tickets
(tests/fixtures/pastes/, each with its source link and what its thread established in index.json),
plus malformed, truncated and hostile inputs, standard input, and several files at once.

The corpus is judged twice: the facts read must be what the paste says (spot-checked per format), and
the verdict must agree with the thread: never an error where the environment was healthy, and the error
wherever the paste itself shows the cause.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.pastes import collect_env, nvidia_smi
from gpudoctor.pastes.detect import find_pastes

PASTES = Path(__file__).parent / "fixtures" / "pastes"
INDEX = json.loads((PASTES / "index.json").read_text(encoding="utf-8"))
REAL = Path(__file__).parent / "fixtures" / "real"


def analyze(*args: str, stdin: Any = None) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", *args], input=stdin)
    assert result.exit_code != 3, result.output
    report = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, report, result.stderr


def codes(report: dict[str, Any]) -> set[str]:
    return {f["code"] for f in report.get("findings", [])}


# --- the corpus ---------------------------------------------------------------------------------------

def test_the_corpus_is_real_and_balanced() -> None:
    assert len(INDEX) >= 30
    files = {p.name for p in PASTES.iterdir()} - {"index.json"}
    assert files == {row["file"] for row in INDEX}
    assert all(row["source"].startswith("https://github.com/") for row in INDEX)
    errors = sum(row["expected"] == "error" for row in INDEX)
    assert 0.4 <= errors / len(INDEX) <= 0.6


@pytest.mark.parametrize("row", INDEX, ids=[r["file"] for r in INDEX])
def test_corpus_verdict_agrees_with_the_thread(row: dict[str, Any]) -> None:
    code, report, stderr = analyze(str(PASTES / row["file"]))
    assert code in (0, 1), stderr
    verdict = report["summary"]["verdict"]
    if row["expected"] == "not_error":
        assert verdict != "error", (row["file"], report["findings"])  # never a false alarm
    elif row["paste_shows_cause"]:
        assert verdict == "error" and code == 1, (row["file"], report["findings"])
    else:  # the paste cannot show the cause: reported as not checked, never as a pass of what it cannot tell
        assert verdict != "error"
        assert report["summary"]["areas"]["acceleration"] == "skip"
        assert report["summary"]["areas"]["gpus"] == "skip"
    assert "Not checked, as a paste cannot tell" in stderr


def test_corpus_agreement_counts() -> None:
    """The closing-note figure: how many threads the verdict agrees with (all, by the test above)."""
    agree = 0
    for row in INDEX:
        _, report, _ = analyze(str(PASTES / row["file"]))
        is_error = report["summary"]["verdict"] == "error"
        agree += is_error == (row["expected"] == "error") or (not row["paste_shows_cause"] and not is_error)
    assert agree == len(INDEX)


# --- facts equal what the paste says, per format ------------------------------------------------------

def test_collect_env_facts() -> None:
    _, report, _ = analyze(str(PASTES / "pytorch-150733.txt"))
    facts = report["facts"]
    torch = facts["frameworks"]["torch"]
    assert torch["source"] == "collect_env"
    assert torch["info"]["version"] == "2.6.0+cu126" and torch["info"]["built_cuda"] == "12.6"
    assert facts["nvml"]["driver_version"] == "570.124.04" and facts["nvml"]["source"] == "collect_env"
    assert facts["gpus"][0]["name"] == "NVIDIA GeForce RTX 5090 D"
    assert facts["gpus"][0]["compute_capability"] == "12.0"
    assert facts["python"]["version"] == "3.12.9" and facts["host"]["os"] == "Linux"
    assert "CMP003" in codes(report)  # sm_120 is not in the cu126 wheel's architectures
    assert "sm_120" not in torch["info"]["arch_list"]


def test_collect_env_old_format_full_width_colons_and_cuda_unavailable() -> None:
    values = collect_env.parse((PASTES / "pytorch-37320.md").read_text(encoding="utf-8"))
    assert values["torch_version"] == "1.5.0" and values["cuda_build"] == "10.2"
    assert values["cuda_available"] is False and values["driver_version"] == "410.104"
    assert [g["name"] for g in values["gpus"]] == ["Tesla P100-PCIE-16GB"] * 4
    assert values["cudnn"] == ["7.6.5"] and values["cuda_runtime"] == "10.0.130"
    assert {"name": "torch", "version": "1.5.0"} in values["pip"]
    _, report, _ = analyze(str(PASTES / "pytorch-37320.md"))
    assert {"CMP001", "FWK002"} <= codes(report)  # driver 410 is older than CUDA 10.2 needs; torch sees no GPU


def test_vllm_collect_env_layout() -> None:
    values = collect_env.parse((PASTES / "vllm-25539.md").read_text(encoding="utf-8"))
    assert values["torch_version"] == "2.8.0+cu128" and values["cuda_build"] == "12.8"
    assert values["cuda_available"] is True and values["python_version"] == "3.10.12"
    assert len(values["gpus"]) == 5  # the stored thread ends at "GPU" after five


def test_quoted_windows_collect_env() -> None:
    _, report, _ = analyze(str(PASTES / "pytorch-40682.md"))
    facts = report["facts"]
    assert facts["host"]["os"] == "Windows"
    assert facts["frameworks"]["torch"]["info"]["version"] == "1.5.0+cu101"
    assert [g["name"] for g in facts["gpus"]] == ["TITAN RTX", "TITAN RTX"]


def test_cpu_only_build_on_a_gpu_machine() -> None:
    _, report, _ = analyze(str(PASTES / "apex-1545.txt"))
    assert "FWK001" in codes(report)
    assert report["facts"]["frameworks"]["torch"]["info"]["cpu_only_build"] is True


def test_nvidia_smi_table_facts() -> None:
    _, report, _ = analyze(str(PASTES / "vllm-41519.md"))
    facts = report["facts"]
    assert facts["nvml"] == {"init": {"ok": True}, "driver_version": "550.54.15", "cuda_driver_version": 12040,
                             "source": "nvidia-smi", "device_count": 2}
    gpu = facts["gpus"][1]
    assert gpu["name"] == "NVIDIA A800 80GB PCIe" and gpu["pci"]["bus_id"] == "00000000:50:00.0"
    assert gpu["memory"] == {"total_bytes": 81920 * 1024**2, "used_bytes": 77207 * 1024**2}


def test_truncated_names_in_the_old_table() -> None:
    parsed = nvidia_smi.parse_table((PASTES / "peerread-40.txt").read_text(encoding="utf-8"))
    assert [g["name"] for g in parsed["gpus"]] == ["NVIDIA A100-SXM..."] * 3
    _, report, _ = analyze(str(PASTES / "peerread-40.txt"))
    assert report["facts"]["gpus"][0]["compute_capability"] == "8.0"  # A100, by the recognisable part of the name


def test_nvidia_smi_q_facts() -> None:
    parsed = nvidia_smi.parse_q((PASTES / "fastfetch-1029.md").read_text(encoding="utf-8"))
    assert parsed["driver_version"] == "555.99" and parsed["cuda_version"] == "12.5"
    assert parsed["gpus"][0]["name"] == "NVIDIA GeForce RTX 3070 Ti Laptop GPU"
    assert parsed["gpus"][0]["uuid"] == "GPU-317b1ee1-938f-259c-21e3-3bac71f77dd3"


def test_nvidia_smi_xml_real_recording_and_truncated_post() -> None:
    _, report, _ = analyze(str(REAL / "h100x1-20261121" / "nvidia-smi-q.xml"))
    facts = report["facts"]
    assert facts["nvml"]["driver_version"] == "580.159.04" and facts["nvml"]["cuda_driver_version"] == 13000
    assert facts["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3" and facts["gpus"][0]["compute_capability"] == "9.0"
    code, report, stderr = analyze(str(PASTES / "1panel-9504.md"))
    assert code == 0 and report["facts"]["nvml"]["driver_version"] == "390.157"
    assert "cut short" in stderr


def test_nvidia_smi_failures() -> None:
    _, report, _ = analyze(str(PASTES / "nvidia-docker-365.md"))
    assert codes(report) == {"DRV002"}
    _, report, stderr = analyze(str(PASTES / "nvidia-docker-1671.md"))
    assert codes(report) == {"DRV006"} and "the failure is judged" in stderr


def test_prose_that_mentions_an_error_is_not_taken_for_it() -> None:
    assert nvidia_smi.failure("I do not get 'Failed to initialize NVML: Driver/library version mismatch' any more") is None
    assert nvidia_smi.failure("Failed to initialize NVML: Driver/library version mismatch")[0] == "driver_library_mismatch"


# --- a paste says nothing of what it cannot tell --------------------------------------------------------

def test_what_a_paste_cannot_tell_is_skipped_not_passed() -> None:
    _, report, _ = analyze(str(PASTES / "dcgm-232.md"))
    by_id = {c["id"]: c for c in report["checks"]}
    assert by_id["driver.nvml"]["status"] == "pass"
    for check in ("gpus.memory_errors", "libraries.stub_libcuda", "acceleration.smoke", "frameworks.cudnn",
                  "container.capabilities", "doctor.probes"):
        assert by_id[check]["status"] == "skip" and by_id[check]["reason"], check
    areas = report["summary"]["areas"]
    assert {a for a, s in areas.items() if s == "pass"} == {"driver"}
    assert report["facts"]["paste"]["not_checked"]["acceleration"].startswith("nothing ran on a GPU")


# --- several pastes, several files, standard input ------------------------------------------------------

def test_issue_body_with_several_pastes_is_read_together() -> None:
    pastes = find_pastes((PASTES / "pytorch-43058.md").read_text(encoding="utf-8"), "body")
    assert {p.kind for p in pastes} == {"collect_env", "nvidia-smi"}
    _, report, _ = analyze(str(PASTES / "pytorch-43058.md"))
    assert {"CMP001", "FWK002"} <= codes(report)


def test_several_files_and_standard_input() -> None:
    text = (PASTES / "pytorch-51858-comment.txt").read_text(encoding="utf-8")
    code, report, stderr = analyze("-", stdin=text)
    assert code == 0 and report["facts"]["frameworks"]["torch"]["info"]["version"] == "2.0.1+cu117"
    code, report, stderr = analyze(str(PASTES / "pytorch-150733.txt"), "-", stdin=text)
    assert code == 1 and "collect_env (-)" in stderr and "the collect_env pastes disagree" in stderr


def test_json_report_on_stdin_and_file_unchanged() -> None:
    path = REAL / "h100x1-20261123" / "quick.json"
    by_file = CliRunner().invoke(cli, ["analyze", "--format", "json", str(path)])
    by_stdin = CliRunner().invoke(cli, ["analyze", "--format", "json", "-"], input=path.read_text(encoding="utf-8"))
    strip = lambda r: {k: v for k, v in json.loads(r.stdout).items() if k != "checks"}  # noqa: E731 - durations vary
    assert by_file.exit_code == by_stdin.exit_code == 0 and strip(by_file) == strip(by_stdin)
    assert "compared with the verdict saved" in by_file.stderr


def test_markdown_report_with_and_without_its_facts(tmp_path: Path) -> None:
    md = CliRunner().invoke(cli, ["analyze", "--format", "markdown", str(REAL / "h100x1-20261123" / "quick.json")])
    full = tmp_path / "report.md"
    full.write_text(md.stdout, encoding="utf-8")
    code, report, _ = analyze(str(full))
    assert code == 0 and report["facts"]["nvml"]["driver_version"] == "580.159.04"
    assert report["summary"]["areas"]["gpus"] == "pass"  # its own facts: judged like the JSON report
    cut = tmp_path / "cut.md"
    cut.write_text(md.stdout.split("<details><summary>All facts")[0], encoding="utf-8")
    code, report, stderr = analyze(str(cut))
    assert code == 0 and report["facts"]["nvml"]["driver_version"] == "580.159.04"
    assert report["facts"]["frameworks"]["torch"]["info"]["version"] == "2.11.0+cu130"
    assert report["summary"]["areas"]["gpus"] == "skip"


# --- malformed, truncated, hostile ----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "",
    "just some prose about my model\n",
    "PyTorch version: N/A\nIs debug build: N/A\n",
    "<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'aaaa'><!ENTITY b '&a;&a;&a;'>]><nvidia_smi_log>&b;</nvidia_smi_log>",
    "<nvidia_smi_log><driver_version>5",
])
def test_unreadable_inputs_are_one_line_errors(text: str, tmp_path: Path) -> None:
    path = tmp_path / "paste.txt"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", str(path)])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_binary_and_missing_files(tmp_path: Path) -> None:
    binary = tmp_path / "core"
    binary.write_bytes(b"\x7fELF\x00\x01\x02" * 10)
    result = CliRunner().invoke(cli, ["analyze", str(binary)])
    assert result.exit_code == 2 and "is not text" in result.stderr
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path / "nope.txt")])
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_truncated_pastes_give_what_they_can(tmp_path: Path) -> None:
    text = (PASTES / "dcgm-exporter-250.md").read_text(encoding="utf-8")
    for cut in range(120, len(text), 97):
        path = tmp_path / "cut.md"
        path.write_text(text[:cut], encoding="utf-8")
        result = CliRunner().invoke(cli, ["analyze", "--format", "json", str(path)])
        assert result.exit_code in (0, 2), result.output  # read, or nothing readable yet: never a crash
        if result.exit_code == 0:
            assert json.loads(result.stdout)["facts"]["nvml"]["driver_version"] == "535.129.03"


def test_utf16_file_from_powershell(tmp_path: Path) -> None:
    path = tmp_path / "env.txt"
    path.write_bytes((PASTES / "apex-1545.txt").read_text(encoding="utf-8").encode("utf-16"))
    code, report, _ = analyze(str(path))
    assert code == 1 and "FWK001" in codes(report)


def test_oversized_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.pastes import read

    monkeypatch.setattr(read, "MAX_REPORT_BYTES", 100)
    path = tmp_path / "big.txt"
    path.write_text("x" * 200, encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", str(path)])
    assert result.exit_code == 2 and "too large" in result.stderr
