"""Where the time of `gpudoctor check --quick` goes (its target: 0.5 s or less on 1 x H100).

Runs `python3 -m gpudoctor check --quick` (text to /dev/null) N times with GPUDOCTOR_TRACE set and prints,
per run and as medians, the phases the trace marks: Python's start and the CLI import (start); what the
main thread does while the probes run, in the NVML child and in forked copies (import: the checks, the
matrix, the redaction patterns, the renderer); the wait for the probes still running after that
(probes; the last one to end is named); judging (judge), redaction and rendering (write), and the
process's end (exit).
With several source trees (--tree DIR ..., e.g. a checkout of an earlier commit) the runs alternate
between them on the same machine, which is the only fair comparison: run to run and host to host the
same tree varies by 0.1 s or more. A DIR holding bin/gpudoctor is an installed gpudoctor (a venv, as
pipx makes one: tools/device/tool_venv.sh) and runs that script. A source tree's modules are compiled to
bytecode first, as `pip install` does: where PYTHONDONTWRITEBYTECODE is set (the GPU machines' image sets
it) Python would otherwise compile every module from source on every run, up to half the time measured.
Usage: python3 benchmarks/quick_start.py [N] [--tree DIR ...]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("total", "start", "import", "probes", "judge", "write", "exit")


def command(tree: Path) -> list[str]:
    """How ``tree``'s gpudoctor is started: its installed script, or this Python's ``-m`` in a source tree."""
    script = tree / "bin" / "gpudoctor"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpudoctor"]


def one(tree: Path) -> dict[str, float | str]:
    """One traced run in ``tree``: each phase in seconds, and the probe that ended last."""
    with tempfile.NamedTemporaryFile("r", suffix=".trace") as trace:
        begun = time.time()
        subprocess.run([*command(tree), "check", "--quick"], cwd=tree, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env={**os.environ, "GPUDOCTOR_TRACE": trace.name})
        ended = time.time()
        events = [(float(parts[0]), parts[3]) for parts in (line.split(None, 3) for line in trace.read().splitlines())
                  if len(parts) == 4]
    at = {what: t for t, what in events}
    probes = [(t, what.split()[1]) for t, what in events if what.startswith("probe ") and what.endswith(" ends")]
    last_t, last = max(probes)
    if "cli: report written" not in at:  # a tree from before these marks (the commit before 2026-11-23's): total only
        return {"total": ended - begun, **{p: float("nan") for p in PHASES[1:]}, "last": last}
    ready = at.get("cli: output prepared", at["cli: checks imported"])  # the main thread's own work before it waits
    return {"total": ended - begun, "start": at["cli: check command starts"] - begun,
            "import": ready - at["cli: check command starts"],
            "probes": max(0.0, last_t - ready), "judge": at["cli: judged"] - max(last_t, ready),
            "write": at["cli: report written"] - at["cli: judged"], "exit": ended - at["cli: report written"], "last": last}


def main(argv: list[str]) -> None:
    runs = int(argv[0]) if argv and argv[0].isdigit() else 10
    trees = [Path(argv[i + 1]).resolve() for i, arg in enumerate(argv[:-1]) if arg == "--tree"] or [ROOT]
    for tree in trees:  # once each, unmeasured: the page cache; a source tree's bytecode as pip would write it
        if (tree / "gpudoctor").is_dir():
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "gpudoctor")], check=True)
        subprocess.run([*command(tree), "check", "--quick"], cwd=tree, capture_output=True)
    results: dict[Path, list[dict[str, float | str]]] = {tree: [] for tree in trees}
    for _ in range(runs):
        for tree in trees:
            results[tree].append(one(tree))
    for tree, rows in results.items():
        print(f"{tree}: {runs} runs of check --quick (ms)")
        print("  " + "  ".join(f"{p:>6}" for p in PHASES) + "  last probe")
        for row in rows:
            print("  " + "  ".join(f"{float(row[p]) * 1000:6.0f}" for p in PHASES) + f"  {row['last']}")
        medians = {p: statistics.median(float(r[p]) for r in rows) for p in PHASES}
        print("  " + "  ".join(f"{medians[p] * 1000:6.0f}" for p in PHASES) + "  medians")
        totals = sorted(float(r["total"]) for r in rows)
        print(f"  check --quick: median {medians['total']:.3f} s, min {totals[0]:.3f} s, max {totals[-1]:.3f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
