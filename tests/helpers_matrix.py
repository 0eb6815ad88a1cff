"""What the `gpudoctor matrix` tests share: `matrix check --json` run in-process."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gpudoctor.cli import cli


def matrix_check(*args: str) -> tuple[int, dict]:
    """(exit status, the JSON verdict) of `matrix check --json ARGS`; no JSON for a usage error (exit 2)."""
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", *args])
    assert "Traceback" not in result.output
    return result.exit_code, (json.loads(result.stdout) if result.exit_code in (0, 1) else {})
