"""How the driver's own work grows with the GPUs one process starts: cuInit, each GPU's primary context, and
the end (the contexts torn down as the process exits), with 1, 2, ... N GPUs visible, in alternating rounds,
one process at a time and nothing else running. The per-GPU cost a full check cannot hide (every GPU needs a
context to be proven, and the driver makes and ends contexts one at a time, across processes too) comes from
these figures, and so does the estimate for more GPUs than a lent machine has.

Usage (on a GPU machine, from the repo root): python3 tools/device/scaling_cost.py [ROUNDS]
Reads only; creates contexts, which end with their processes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from cuda_start_cost import START

CHILD = START + r"""
print(json.dumps({"n": n.value, "init": t1 - t0, "contexts": t2 - t1}), flush=True)
sys.stdin.readline()
os._exit(0)
"""


def one(visible: str) -> dict[str, float]:
    """One process with ``visible`` as CUDA_VISIBLE_DEVICES: its cuInit and contexts, and the seconds from
    telling it to exit to its end."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible}
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            text=True)
    said = json.loads(proc.stdout.readline())
    begun = time.monotonic()
    proc.stdin.write("\n")
    proc.stdin.flush()
    proc.wait()
    return {**said, "exit": time.monotonic() - begun}


def main(rounds: int) -> None:
    gpus = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                          text=True).stdout.split()
    seen: dict[int, list[dict[str, float]]] = {n: [] for n in range(1, len(gpus) + 1)}
    for _ in range(rounds):
        for n in seen:
            seen[n].append(one(",".join(gpus[:n])))
    base = None
    for n, runs in seen.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("init", "contexts", "exit")}
        total = sum(med.values())
        base = base if base is not None else total
        spread = " ".join(f"{r['init']:.2f}" for r in runs)
        print(f"{n} GPU(s) visible ({rounds} rounds): cuInit {med['init']:.3f} s, contexts {med['contexts']:.3f} s, "
              f"exit {med['exit']:.3f} s, together {total:.3f} s, {total - base:+.3f} s against one GPU "
              f"(cuInit rounds {spread})", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
