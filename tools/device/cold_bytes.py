"""What each command reads from a cold disk: wall time, the blocks its process tree read (ru_inblock of the
reaped children, in 512-byte units) and how much the page cache grew. Page caches are dropped before each
(root only). Settles whether a full check can match collect_env cold: both are bound by what they read.
Usage (through the device tool, from the repo root): python3 tools/device/cold_bytes.py ROUNDS
Reads only; changes no GPU setting."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

COMMANDS = {
    "collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
    "check": [sys.executable, "-m", "gpudoctor", "check", "--format", "json", "-o", "/tmp/cold-check.json"],
    "check without the library reads": [sys.executable, "-m", "gpudoctor", "check", "--skip", "compat,libraries,toolkit",
                                        "--format", "json", "-o", "/tmp/cold-check2.json"],
    "import torch, is_available": [sys.executable, "-c", "import torch; torch.cuda.is_available()"],
    "import jax, devices": [sys.executable, "-c", "import jax; jax.devices()"],
    "import cupy, a sum": [sys.executable, "-c", "import cupy; cupy.arange(3).sum()"],
}


def cached_kib() -> int:
    with open("/proc/meminfo") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("Cached:"))


def cold(cmd: list[str]) -> tuple[float, float, float]:
    subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)
    before_blocks = resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock
    before_cache = cached_kib()
    t0 = time.monotonic()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    wall = time.monotonic() - t0
    read_mb = (resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock - before_blocks) * 512 / 1e6
    return wall, read_mb, (cached_kib() - before_cache) / 1e3


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    for i in range(1, rounds + 1):
        for name, cmd in COMMANDS.items():
            wall, read_mb, cache_mb = cold(cmd)
            print(f"round {i} {name}: {wall:.2f} s, read {read_mb:.0f} MB, page cache +{cache_mb:.0f} MB "
                  f"({read_mb / wall:.0f} MB/s)", flush=True)
    os.remove("/tmp/cold-check.json")


if __name__ == "__main__":
    main()
