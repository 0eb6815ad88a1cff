"""What starting CUDA and ending costs, in one process on every GPU against one process per GPU pinned to it
(CUDA_VISIBLE_DEVICES=UUID), and both at once: through the driver alone (cuInit, every visible GPU's primary
context) and through PyTorch (its import, its CUDA start, a tensor on each GPU). Prints, per setup and 3
rounds, the time until every process is ready and until every one has exited (its contexts torn down).

Usage (on a GPU machine, from the repo root): python3 tools/device/pinned_cost.py
Reads only; creates contexts, and they end with their processes.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from cuda_start_cost import START

DRIVER = START + r"""
print(json.dumps({"n": n.value, "init": t1 - t0, "ctx": t2 - t1}), flush=True)
sys.stdin.readline()
os._exit(0)
"""
TORCH = r"""
import time, json, sys, os
t0 = time.monotonic()
import torch
t1 = time.monotonic()
torch.cuda.init()
t2 = time.monotonic()
n = torch.cuda.device_count()
for i in range(n):
    torch.ones(1, device=f"cuda:{i}").sum().item()
t3 = time.monotonic()
print(json.dumps({"n": n, "import": t1 - t0, "init": t2 - t1, "ctx": t3 - t2}), flush=True)
sys.stdin.readline()
os._exit(0)
"""


def launch(code: str, visibles: list[str | None]) -> tuple[float, float, list[dict]]:
    """Start one process per entry of ``visibles`` (its CUDA_VISIBLE_DEVICES; None: every GPU) at once: the
    seconds until all are ready, the seconds from telling them to exit until all have, and what each said."""
    start = time.monotonic()
    procs = []
    for vis in visibles:
        env = dict(os.environ)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        if vis is not None:
            env["CUDA_VISIBLE_DEVICES"] = vis
        procs.append(subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env, text=True))
    said = [json.loads(p.stdout.readline()) for p in procs]
    ready = time.monotonic() - start
    begun = time.monotonic()
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
    for p in procs:
        p.wait()
    return ready, time.monotonic() - begun, said


def main() -> None:
    uuids = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                           text=True).stdout.split()
    setups: dict[str, list[str | None]] = {
        "one process, GPU 0": [uuids[0]],
        "one process, every GPU": [None],
        "a process per GPU, pinned": list(uuids),
        "every GPU + a process per GPU": [None, *uuids],
    }
    for label, code in (("driver", DRIVER), ("torch", TORCH)):
        for name, visibles in setups.items():
            rounds = [launch(code, visibles) for _ in range(3)]
            keys = ["init", "ctx"] + (["import"] if label == "torch" else [])
            per = ", ".join(f"{k} " + "/".join(f"{statistics.median(r[2][i][k] for r in rounds):.2f}" for i in range(len(visibles)))
                            for k in keys)
            print(f"{label:6} {name:32} ready {' '.join(f'{r[0]:.2f}' for r in rounds)} s; "
                  f"exit {' '.join(f'{r[1]:.2f}' for r in rounds)} s; per process medians {per}", flush=True)


if __name__ == "__main__":
    main()
