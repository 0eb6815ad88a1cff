"""Every recorded report re-judged, as JSON findings: the before/after proof of a change that must not
change behaviour. Usage: python tools/findings_snapshot.py OUT.json; compare two with cmp."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from gpudoctor.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def main(out: str) -> None:
    found = {}
    for path in sorted((ROOT / "tests/fixtures/real").rglob("*.json")):
        text = path.read_text(encoding="utf-8")
        if '"schema_version"' not in text or '"facts"' not in text:
            continue
        result = CliRunner().invoke(cli, ["analyze", str(path), "-f", "json"])
        try:
            report = json.loads(result.stdout)
        except ValueError:
            found[str(path.relative_to(ROOT))] = {"exit": result.exit_code, "output": result.output[-300:]}
            continue
        found[str(path.relative_to(ROOT))] = {"exit": result.exit_code, "findings": report.get("findings"),
                                              "summary": report.get("summary")}
    Path(out).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    print(f"{len(found)} reports -> {out}")


if __name__ == "__main__":
    main(sys.argv[1])
