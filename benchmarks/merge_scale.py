"""How `gpudoctor merge` grows with the number of reports: 1,000 single-GPU nodes with the default flags
in 5 s or less on two cores, 10 s or less on one.

Makes N copies of a real single-GPU report recorded on an H100 (tests/fixtures/real/h100x1-20261123/full.json),
each with its own host name and a slightly different bf16 figure, writes them to a temporary folder,
then runs `python -m gpudoctor merge` on them in a child process, once with the default flags (text,
redacted) and once with `--format json --no-redact`, on all cores and pinned to one, and prints each
wall time, the CPU time of the merge and its workers together (on a machine shared with other work, the
one-core run's CPU time is what its wall time would be on an idle core) and the largest child's peak
memory so far (ru_maxrss). Usage: python benchmarks/merge_scale.py [N ...] (default 10 100 1000).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests/fixtures/real/h100x1-20261123/full.json"


def make_reports(folder: Path, count: int) -> list[str]:
    base = json.loads(SOURCE.read_text())
    paths = []
    for i in range(count):
        report = json.loads(json.dumps(base))
        report["facts"]["host"]["hostname"] = f"node-{i:05d}"
        for run in report["facts"].get("workload", {}).get("runs", []) or []:
            thr = run.get("throughput") or {}
            if isinstance(thr.get("matmul_bf16_tflops"), (int, float)):
                thr["matmul_bf16_tflops"] *= 1 + (i % 7) / 100
        path = folder / f"node-{i:05d}.json"
        path.write_text(json.dumps(report))
        paths.append(str(path))
    return paths


MODES = {"default": [], "json --no-redact": ["--format", "json", "--no-redact"]}


def measure(paths: list[str], flags: list[str], one_core: bool) -> tuple[float, float, float, int]:
    """(wall s, CPU s of the merge and its workers, peak MiB of the largest child so far, exit status)."""
    pin = ["taskset", "-c", "0"] if one_core and shutil.which("taskset") else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([*pin, sys.executable, "-m", "gpudoctor", "merge", *flags, *paths], capture_output=True, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024, done.returncode


def main() -> None:
    counts = [int(a) for a in sys.argv[1:]] or [10, 100, 1000]
    print(f"cpus={os.cpu_count()}")
    print(f"{'reports':>8} {'flags':>18} {'cores':>6} {'wall s':>8} {'CPU s':>7} {'peak MiB':>9} {'exit':>5}")
    for count in counts:
        with tempfile.TemporaryDirectory() as tmp:
            paths = make_reports(Path(tmp), count)
            for name, flags in MODES.items():
                for one_core in (False, True):
                    wall, cpu, peak, code = measure(paths, flags, one_core)
                    print(f"{count:>8} {name:>18} {'1' if one_core else 'all':>6} {wall:>8.2f} {cpu:>7.2f} {peak:>9.0f} "
                          f"{code:>5}")


if __name__ == "__main__":
    main()
