"""Every recorded report rendered in every format, through every way a report leaves gpudoctor: the
before/after proof of a change to the renderers or to output that must not change what is printed.

For each report under tests/fixtures/real: ``analyze REPORT`` with each ``--format`` (and ``-v``), with
``-o FILE`` for each extension that picks a format, and ``check``'s own ways out (``--quiet`` text, colour
on a terminal) through ``emit``; then ``merge`` of all of them in each of its formats.

Usage: python tools/render_snapshot.py OUT.json; compare two with cmp (``diff`` shows which differ)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gpudoctor.cli import cli

ROOT = Path(__file__).resolve().parents[1]
#: The formats as ``check`` and ``analyze`` offered them before any was added: each new one is added by name.
FORMATS = ("text", "json", "markdown", "junit")
#: ``-o FILE`` extensions; ``.txt`` stands for any other, which writes text.
EXTENSIONS = (".json", ".md", ".markdown", ".xml", ".txt")
MERGE_FORMATS = ("text", "markdown", "json")


def reports() -> list[Path]:
    """The recorded reports: JSON files under tests/fixtures/real that hold facts."""
    found = []
    for path in sorted((ROOT / "tests/fixtures/real").rglob("*.json")):
        text = path.read_text(encoding="utf-8")
        if '"schema_version"' in text and '"facts"' in text:
            found.append(path)
    return found


def invoke(args: list[str], tmp: Path) -> dict[str, Any]:
    """What one command printed, its exit code, and the file it wrote (the temporary folder's name hidden)."""
    result = CliRunner().invoke(cli, args)
    out: dict[str, Any] = {"exit": result.exit_code, "out": result.stdout,
                           "err": result.stderr.replace(str(tmp), "<tmp>")}
    if "-o" in args:
        target = Path(args[args.index("-o") + 1])
        out["file"] = target.read_text(encoding="utf-8") if target.exists() else None
        target.unlink(missing_ok=True)
    return out


def emitted(report: dict[str, Any], quiet: bool, colour: bool) -> str:
    """``check``'s text as emit prints it, with no --matrix file: ``--quiet``, or on a colour terminal."""
    import os

    from gpudoctor.cli.output import emit
    from gpudoctor.compat.data import BUNDLED

    runner = CliRunner(env={"NO_COLOR": None, "TERM": "xterm"} if colour else None)
    with runner.isolation(color=colour) as (stdout, _stderr, *_):  # color: click would strip the codes
        if colour:
            sys.stdout.isatty = lambda: True  # type: ignore[method-assign]
            assert os.environ.get("TERM") == "xterm"
        emit(report, "text", None, verbose=False, quiet=quiet, matrix=BUNDLED)
        sys.stdout.flush()
        return stdout.getvalue().decode("utf-8")


def snapshot(path: Path, tmp: Path) -> dict[str, Any]:
    """Every rendering of one recorded report."""
    name = str(path)
    out: dict[str, Any] = {}
    for fmt in FORMATS:
        out[f"-f {fmt}"] = invoke(["analyze", name, "-f", fmt], tmp)
        out[f"-f {fmt} -v"] = invoke(["analyze", name, "-f", fmt, "-v"], tmp)
    out["-f junit --fail-on warning"] = invoke(["analyze", name, "-f", "junit", "--fail-on", "warning"], tmp)
    for ext in EXTENSIONS:
        out[f"-o report{ext}"] = invoke(["analyze", name, "-o", str(tmp / f"report{ext}")], tmp)
    try:
        judged = json.loads(out["-f json"]["out"])
    except ValueError:
        return out
    out["check --quiet"] = emitted(judged, quiet=True, colour=False)
    out["check on a colour terminal"] = emitted(judged, quiet=False, colour=True)
    return out


def without_timings() -> None:
    """Every check takes no time, so that the durations the verbose text, JSON and JUnit show are the same
    in every run, and two snapshots differ only where the rendering does."""
    import types

    from gpudoctor.checks import registry

    registry.time = types.SimpleNamespace(monotonic=lambda: 0.0)  # type: ignore[attr-defined]


def main(target: str) -> None:
    without_timings()
    found: dict[str, Any] = {}
    paths = reports()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for path in paths:
            found[str(path.relative_to(ROOT))] = snapshot(path, tmp)
        names = [str(p) for p in paths]
        for fmt in MERGE_FORMATS:
            found[f"merge -f {fmt}"] = invoke(["merge", *names, "-f", fmt], tmp)
    text = json.dumps(found, indent=1, sort_keys=True).replace(str(ROOT), "<root>")
    Path(target).write_text(text + "\n", encoding="utf-8")
    print(f"{len(paths)} reports -> {target}")


if __name__ == "__main__":
    main(sys.argv[1])
