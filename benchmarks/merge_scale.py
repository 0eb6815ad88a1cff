"""How `gpudoctor merge` grows with the number of reports (issue 17: 1,000 single-GPU nodes in 10 s or less).

Makes N copies of a real single-GPU report recorded on an H100 (tests/fixtures/real/h100x1-20261123/full.json),
each with its own host name and a slightly different bf16 figure, writes them to a temporary folder,
then runs `python -m gpudoctor merge --format json` on them in a child process and prints the wall time
and the child's peak memory (ru_maxrss). Usage: python benchmarks/merge_scale.py [N ...] (default 10 100 1000).
"""

from __future__ import annotations

import json
import resource
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


def measure(count: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_reports(Path(tmp), count)
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "gpudoctor", "merge", "--format", "json", "--no-redact", *paths],
                              capture_output=True, cwd=ROOT)
        wall = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        return wall, max(peak, before) / 1024, done.returncode


def main() -> None:
    counts = [int(a) for a in sys.argv[1:]] or [10, 100, 1000]
    print(f"{'reports':>8} {'wall s':>8} {'peak MiB':>9} {'exit':>5}")
    for count in counts:
        wall, peak, code = measure(count)
        print(f"{count:>8} {wall:>8.2f} {peak:>9.0f} {code:>5}")


if __name__ == "__main__":
    main()
