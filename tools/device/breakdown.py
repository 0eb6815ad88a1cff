"""Where a check's time went: each probe's duration, and each workload run's import, own work and steps.

Usage: python3 tools/device/breakdown.py REPORT.json [...]   (reports from `check --format json`)
"""

from __future__ import annotations

import json
import sys

STEPS = ("elementwise", "matmul", "conv", "training", "throughput")


def describe(path: str) -> list[str]:
    facts = json.load(open(path))["facts"]
    probes = facts.get("probes") or {}
    count_s = (facts.get("workload") or {}).get("count_s")
    lines = [f"{path}: " + ", ".join(f"{name} {p.get('duration_s', 0):.2f}" for name, p in probes.items())
             + (f" (workload's GPU count {count_s:.2f})" if count_s is not None else "")]
    for run in (facts.get("workload") or {}).get("runs") or []:
        steps = " ".join(f"{s} {run[s].get('duration_s', 0):.2f}" for s in STEPS if isinstance(run.get(s), dict))
        training = run.get("training") or {}
        if "first_step_s" in training:
            steps += (f" (training: first step {training['first_step_s']:.2f}, all steps {training.get('steps_s', 0):.2f}"
                      f", CPU comparison {training.get('cpu_compare_s', 0):.2f})")
        if "cuda_start_s" in run:
            steps = f"CUDA start {run['cuda_start_s']:.2f} | " + steps
        lines.append(f"  {run.get('framework'):<10} {run.get('device'):>3}: import {run.get('import_s', 0):.2f}"
                     f" work {run.get('work_s', 0):.2f} total {run.get('duration_s', 0):.2f} | {steps}"
                     + (f" | error {run['error'][:80]}" if run.get("error") else ""))
    return lines


if __name__ == "__main__":
    for report in sys.argv[1:]:
        print("\n".join(describe(report)))
