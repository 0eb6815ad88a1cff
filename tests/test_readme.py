"""The README's two set-up commands are the ones that work, and CI runs the same test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    section = ROOT.joinpath("README.md").read_text().split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


def test_readme_has_exactly_two_setup_commands():
    commands = _setup_commands()
    assert len(commands) == 2
    assert commands[0].rstrip().endswith("gpudoctor check")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = ROOT.joinpath(".ci", "run").read_text().splitlines()
    assert _setup_commands()[1] in ci


def test_readme_documents_every_exit_code():
    readme = ROOT.joinpath("README.md").read_text()
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |"):
        assert code in readme
