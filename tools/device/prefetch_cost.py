"""Whether reading a framework's libraries ahead, whole and in parallel, makes its cold import faster: the
imports timed cold alone, beside threads that read every library file the import maps (whole, 4 MiB at a
time, 8 or 16 readers; or posix_fadvise(WILLNEED) from 8 threads), and the three frameworks' imports at once,
with and without the union of their files read ahead. The files are those a warm import of each maps.
Page caches are dropped before every timing (root only).

Usage (on a GPU machine, from the repo root): python3 tools/device/prefetch_cost.py [ROUNDS]
Reads only; changes no GPU setting."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

IMPORTS = {"torch": "import torch; torch.cuda.is_available()",
           "jax": "import jax; jax.devices()",
           "cupy": "import cupy; cupy.arange(3).sum()"}
MAPPED = ("\nprint('\\n'.join(sorted({l.split()[-1] for l in open('/proc/self/maps') "
          "if '.so' in l and l.split()[-1].startswith('/')})))")


def mapped_by(code: str) -> list[str]:
    """The shared libraries a warm run of ``code`` has mapped."""
    out = subprocess.run([sys.executable, "-c", code + MAPPED], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.startswith("/")]


def drop() -> None:
    os.system("sync; echo 3 > /proc/sys/vm/drop_caches")


def read_whole(path: str) -> None:
    try:
        with open(path, "rb", buffering=0) as fh:
            while fh.read(4 << 20):
                pass
    except OSError:
        pass


def will_need(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)
    except OSError:
        pass


def read_ahead(files: list[str], read: Callable[[str], None], readers: int) -> None:
    with ThreadPoolExecutor(readers) as pool:  # the largest first: they set the time
        list(pool.map(read, sorted(files, key=lambda p: -os.path.getsize(p))))


def timed(names: list[str], files: Optional[list[str]], read: Callable[[str], None], readers: int) -> str:
    """Start the imports (and the readers) together: when each import ended, and when the readers did."""
    start = time.monotonic()
    ahead: list[float] = []
    thread = None
    if files:
        def run() -> None:
            read_ahead(files, read, readers)
            ahead.append(time.monotonic() - start)
        thread = threading.Thread(target=run)
        thread.start()
    procs = {n: subprocess.Popen([sys.executable, "-c", IMPORTS[n]], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for n in names}
    ended = []
    for name, proc in procs.items():
        proc.wait()
        ended.append(f"{name} {time.monotonic() - start:.2f}")
    if thread:
        thread.join()
    return ", ".join(ended) + (f"; read ahead in {ahead[0]:.2f}" if ahead else "") + " s"


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    files = {n: mapped_by(c) for n, c in IMPORTS.items()}
    union = sorted(set().union(*files.values()))
    for name, paths in [*files.items(), ("all three", union)]:
        print(f"{name}: {len(paths)} files, {sum(os.path.getsize(p) for p in paths) / 1e6:.0f} MB whole")
    for r in range(1, rounds + 1):
        for label, names, ahead, read, readers in [
            ("torch alone", ["torch"], None, read_whole, 0),
            ("torch, its files read x8", ["torch"], files["torch"], read_whole, 8),
            ("torch, its files read x16", ["torch"], files["torch"], read_whole, 16),
            ("torch, its files WILLNEED x8", ["torch"], files["torch"], will_need, 8),
            ("three at once", list(IMPORTS), None, read_whole, 0),
            ("three, all files read x8", list(IMPORTS), union, read_whole, 8),
            ("three, all files read x16", list(IMPORTS), union, read_whole, 16),
        ]:
            drop()
            print(f"round {r} {label}: {timed(names, ahead, read, readers)}", flush=True)
        drop()
        start = time.monotonic()
        read_ahead(union, read_whole, 16)
        print(f"round {r} all files read x16, nothing else: {time.monotonic() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main()
