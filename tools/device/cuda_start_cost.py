"""How long starting CUDA takes a process, alone and with others starting at once: cuInit, then each
visible GPU's primary context. Prints one line per (processes at once, GPUs visible).

Usage (on a GPU machine, from the repo root): python3 tools/device/cuda_start_cost.py
Reads only; creates contexts and releases them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

#: A child's CUDA start through the driver alone: cuInit, then every visible GPU's primary context; t0, t1
#: and t2 mark its start, cuInit's end and the contexts' end (pinned_cost.py starts its children with it too).
START = r"""
import ctypes, json, os, sys, time
t0 = time.monotonic()
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
t1 = time.monotonic()
n = ctypes.c_int(); cuda.cuDeviceGetCount(ctypes.byref(n))
devs = []
for i in range(n.value):
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    cuda.cuDeviceGet(ctypes.byref(dev), i)
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    devs.append(dev)
t2 = time.monotonic()
"""
CHILD = START + r"""
for dev in devs:
    cuda.cuDevicePrimaryCtxRelease_v2(dev)
print(json.dumps({"init": t1 - t0, "contexts": t2 - t1}))
"""


def measure(processes: int, visible: str | None) -> tuple[float, float, float]:
    env = dict(os.environ)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, env=env, text=True)
             for _ in range(processes)]
    results = [__import__("json").loads(p.communicate()[0]) for p in procs]
    wall = time.monotonic() - start
    return (statistics.median(r["init"] for r in results), statistics.median(r["contexts"] for r in results), wall)


if __name__ == "__main__":
    for visible in ("0", None):
        for processes in (1, 4, 8, 16):
            init, contexts, wall = measure(processes, visible)
            print(f"{processes:>2} processes at once, GPUs visible {visible or 'all'}: cuInit {init:.2f} s, "
                  f"contexts {contexts:.2f} s (median per process), all done in {wall:.2f} s")
