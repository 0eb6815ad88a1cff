"""What the `gpudoctor matrix` tests share: no --matrix overlay carried from one test to the next (import
``no_overlay`` into a test module to apply it there), and `matrix check --json` run in-process."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.compat import data


def clear_overlays() -> None:
    """Hold that no --matrix overlay is in force here: each command reads the matrix with its own, in a
    context of its own, so none reaches the next test."""
    assert data.in_force() == ()


@pytest.fixture(autouse=True)
def no_overlay():
    clear_overlays()
    yield
    clear_overlays()


def matrix_check(*args: str) -> tuple[int, dict]:
    """(exit status, the JSON verdict) of `matrix check --json ARGS`; no JSON for a usage error (exit 2)."""
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", *args])
    assert "Traceback" not in result.output
    return result.exit_code, (json.loads(result.stdout) if result.exit_code in (0, 1) else {})
