"""Whether two reports of one machine hold the same framework facts, timings aside: each framework's
info, the placement, and which steps each workload run passed.

Usage: python3 tools/device/facts_same.py BEFORE.json AFTER.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

VARIES = ("duration", "pid", "rss", "tflops", "gbps", "speedup", "sharing", "loss_", "memory", "bandwidth")


def steady(value: Any) -> Any:
    """``value`` without what differs from run to run (timings, figures, process ids)."""
    if isinstance(value, dict):
        out = {k: steady(v) for k, v in value.items() if not k.endswith(("_s", "_ms"))
               and not any(part in k for part in VARIES)}
        if isinstance(out.get("loaded_libraries"), list):  # in the order the process mapped them, which may vary
            out["loaded_libraries"] = sorted(out["loaded_libraries"], key=lambda lib: json.dumps(lib, sort_keys=True))
        return out
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def runs(report: dict) -> dict:
    """(framework, device) -> the steps of that workload run that passed."""
    return {(x.get("framework"), x.get("device")): sorted(k for k, v in x.items() if isinstance(v, dict) and v.get("ok"))
            for x in report["facts"]["workload"]["runs"]}


def codes(report: dict) -> list[str]:
    return sorted(f["code"] for f in report["findings"])


def compare(before: dict, after: dict) -> list[str]:
    diffs = []
    for name in sorted(set(before["facts"]["frameworks"]) | set(after["facts"]["frameworks"])):
        a, b = (steady((r["facts"]["frameworks"].get(name) or {}).get("info")) for r in (before, after))
        if a != b:
            diffs.append(f"frameworks.{name}.info: {json.dumps(a)[:400]} != {json.dumps(b)[:400]}")
    if runs(before) != runs(after):
        diffs.append(f"workload steps passed: {runs(before)} != {runs(after)}")
    if before["facts"]["workload"].get("placement") != after["facts"]["workload"].get("placement"):
        diffs.append("workload.placement differs")
    if codes(before) != codes(after):
        diffs.append(f"findings {codes(before)} != {codes(after)}")
    return diffs


if __name__ == "__main__":
    found = compare(*(json.load(open(p)) for p in sys.argv[1:3]))
    print("\n".join(found) if found else "same facts, timings aside")
    sys.exit(1 if found else 0)
