"""`analyze --format markdown` on a paste: the reply a maintainer posts back (render/reply.py). From the
recorded collect_env of 1 x H100 (tests/fixtures/real/h100x1-20261123/final), one fact changed at a time."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gpudoctor import report as rep
from gpudoctor.cli import cli

COLLECT_ENV = (Path(__file__).parent / "fixtures" / "real" / "h100x1-20261123" / "final" / "collect_env.txt").read_text(
    encoding="utf-8")
WINDOWS = "OS: Microsoft Windows 11 Pro (10.0.22631 64-bit)"


def _rtx5090_cu126(text: str = COLLECT_ENV) -> str:
    return (text.replace("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 5090").replace("2.11.0+cu130", "2.6.0+cu126")
            .replace("CUDA used to build PyTorch: 13.0", "CUDA used to build PyTorch: 12.6"))


def _reply(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "ticket.md"
    path.write_text(f"It fails, here is collect_env:\n\n```\n{text}\n```\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", "--format", "markdown", str(path)])
    return result.exit_code, result.stdout


def test_a_linux_reply_reads_verdict_cause_fix_and_what_settles_the_rest(tmp_path: Path) -> None:
    code, reply = _reply(tmp_path, _rtx5090_cu126())
    assert code == rep.EXIT_FINDINGS
    assert reply.startswith("### gpudoctor on this ticket\n\n**Read:** collect_env (")
    assert "(system: Linux)" in reply and "**Verdict: 1 problem(s) to fix.**" in reply
    assert "**CMP003** PyTorch 2.6.0+cu126 has no code for GPU 0" in reply
    assert "python3 -m pip install" in reply
    assert reply.rstrip().endswith("pipx run gpudoctor check --format markdown\n```")
    assert "| Area |" not in reply and len(reply) < 4000  # a comment, not the whole report


def test_a_windows_reply_types_pip_as_windows_does(tmp_path: Path) -> None:
    text = _rtx5090_cu126(COLLECT_ENV.replace("OS: Ubuntu 24.04.3 LTS (x86_64)", WINDOWS)).replace(
        "CUDA runtime version: 13.0.88", "CUDA runtime version: N/A")
    code, reply = _reply(tmp_path, text)
    assert code == rep.EXIT_FINDINGS and "(system: Windows)" in reply
    assert "py -m pip install" in reply and "python3" not in reply and "'" not in reply.split("```powershell")[1]
    assert 'py -c "import torch' in reply and "pipx" not in reply


def test_a_windows_reply_leaves_out_linux_only_commands(tmp_path: Path) -> None:
    """The framework's "no NVIDIA driver" on Windows: nvidia-smi is there, the kernel log read with sudo is not."""
    path = tmp_path / "ticket.md"
    path.write_text("Windows 11, RTX 3060\n\nRuntimeError: Found no NVIDIA driver on your system. Please check that you "
                    "have an NVIDIA GPU and installed a driver\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", "--format", "markdown", str(path)])
    assert result.exit_code == rep.EXIT_FINDINGS and "(system: Windows)" in result.stdout and "**FWK203**" in result.stdout
    assert "```powershell\n  nvidia-smi\n  ```" in result.stdout
    assert "sudo" not in result.stdout and "dmesg" not in result.stdout


def test_a_macos_reply_asks_for_mps_not_cuda(tmp_path: Path) -> None:
    text = (COLLECT_ENV.replace("OS: Ubuntu 24.04.3 LTS (x86_64)", "OS: macOS 14.5 (arm64)")
            .replace("2.11.0+cu130", "2.5.1").replace("CUDA used to build PyTorch: 13.0", "CUDA used to build PyTorch: None")
            .replace("GPU models and configuration: GPU 0: NVIDIA H100 80GB HBM3", "GPU models and configuration: No CUDA")
            .replace("Nvidia driver version: 580.159.04", "Nvidia driver version: No CUDA")
            .replace("Is CUDA available: True", "Is CUDA available: False"))
    code, reply = _reply(tmp_path, text)
    assert code == rep.EXIT_OK and "(system: macOS)" in reply
    assert "torch.backends.mps.is_available()" in reply and "pipx" not in reply
    assert "That is not a clean bill of health" in reply


def test_the_reply_holds_no_markup_from_the_ticket(tmp_path: Path) -> None:
    code, reply = _reply(tmp_path, _rtx5090_cu126().replace("NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090 <img src=x>`|"))
    assert "<img" not in reply and "RTX 5090 &lt;img src=x>" in reply


def test_a_cuda_build_on_macos_is_judged_as_macos_not_as_linux_cuda(tmp_path: Path) -> None:
    text = _rtx5090_cu126(COLLECT_ENV.replace("OS: Ubuntu 24.04.3 LTS (x86_64)", "OS: macOS 14.5 (arm64)"))
    path = tmp_path / "ticket.md"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", str(path)])
    codes = {f["code"] for f in json.loads(result.stdout)["findings"]}
    assert result.exit_code == rep.EXIT_FINDINGS
    assert "CMP009" in codes and "CMP003" not in codes  # macOS has no CUDA: no sm_120 question to ask
