"""Compare the list of GPUs gpudoctor tells from NVML's facts (probes/smoke/listing.py) with CUDA's own count.

Run on a GPU machine: NVML's facts are read once; then for each CUDA_VISIBLE_DEVICES mask of
cuda_visible.py, under each CUDA_DEVICE_ORDER (unset, FASTEST_FIRST, PCI_BUS_ID), the smoke worker's
count (cuInit with that environment) is set against the list wherever the list gives one. Each line says
"agree", "unsure" (the list leaves it to CUDA's count, and why) or "DIFFER"; a DIFFER is a wrong list. Never changes a GPU setting.
Usage, from the repo root: python3 tools/device/count_list.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

ORDERS = (None, "FASTEST_FIRST", "PCI_BUS_ID")


def cuda_counts(mask: Optional[str], order: Optional[str]) -> Any:
    """The smoke worker's count in this environment: its ``count`` section, or its error."""
    from gpudoctor.procs.child import child_env, run_module

    env = child_env()
    for name, value in (("CUDA_VISIBLE_DEVICES", mask), ("CUDA_DEVICE_ORDER", order)):
        env.pop(name, None)
        if value is not None:
            env[name] = value
    child = run_module("gpudoctor.probes.smoke.worker", ["count"], timeout_s=60.0, env=env)
    return child.section("count") or {"error": child.section("error") or child.stderr_tail[-300:]}


def main() -> int:
    from cuda_visible import masks_for

    from gpudoctor.probes.nvml import probe_nvml
    from gpudoctor.probes.smoke.listing import cuda_list

    facts = probe_nvml()
    if not facts["gpus"]:
        print(f"count list: NVML lists no GPU here ({facts['nvml'].get('init')})")
        return 2
    tally = {"agree": 0, "unsure": 0, "DIFFER": 0}
    for order in ORDERS:
        for mask in masks_for([str(g.get("uuid")) for g in facts["gpus"]]):
            env = {k: v for k, v in (("CUDA_VISIBLE_DEVICES", mask), ("CUDA_DEVICE_ORDER", order)) if v is not None}
            listed, why = cuda_list(facts, env)
            counted = cuda_counts(mask, order) if listed is not None else None  # CUDA counts there anyway
            if listed is None or counted is None:
                verdict = "unsure"
            elif (listed["devices"], listed["driver_cuda"]) == (counted.get("devices"), counted.get("driver_cuda")):
                verdict = "agree"
            else:
                verdict = "DIFFER"
            tally[verdict] += 1
            print(json.dumps({"order": order, "mask": mask, "verdict": verdict, "why": why,
                              "listed": listed and listed["devices"], "cuda": counted}))
    print(f"count list: {tally['agree']} agree, {tally['unsure']} left to CUDA's count, {tally['DIFFER']} DIFFER "
          f"({len(ORDERS)} orders x masks, {os.cpu_count()} CPUs)")
    return 1 if tally["DIFFER"] else 0


if __name__ == "__main__":
    sys.exit(main())
