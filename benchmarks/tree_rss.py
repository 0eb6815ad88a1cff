"""Peak host memory of a command and every process under it, sampled while it runs.

Prints one line: the peak of the summed RSS (resident pages, shared libraries counted in each process)
and of the summed PSS (each shared page divided among the processes that map it: what they cost the
machine together), of the children alone and with the command's own process, and how many processes
ran at the peak. gpudoctor is a child subreaper, so its grandchildren stay under it and are counted.
Usage: python3 benchmarks/tree_rss.py COMMAND [ARG ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

INTERVAL_S = 0.02


def children_of(pid: int) -> list[int]:
    """Every descendant of ``pid``, from /proc/PID/task/*/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of ``pid`` in KiB; (0, 0) once it is gone."""
    kib = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if value.strip().endswith("kB"):
                    kib[key] = int(value.split()[0])
    except (OSError, ValueError):
        return 0, 0
    return kib.get("Rss", 0), kib.get("Pss", 0)


def main(argv: list[str]) -> int:
    proc = subprocess.Popen(argv)
    peak = {"rss_children": 0, "pss_children": 0, "rss_all": 0, "pss_all": 0, "processes": 0}
    while proc.poll() is None:
        kids = children_of(proc.pid)
        own = memory_kib(proc.pid)
        sums = [memory_kib(k) for k in kids]
        rss, pss = sum(s[0] for s in sums), sum(s[1] for s in sums)
        if pss > peak["pss_children"]:
            peak["processes"] = len(kids)
        for key, value in (("rss_children", rss), ("pss_children", pss), ("rss_all", rss + own[0]), ("pss_all", pss + own[1])):
            peak[key] = max(peak[key], value)
        time.sleep(INTERVAL_S)
    print(f"peak host memory, MiB: children RSS {peak['rss_children'] / 1024:.0f}, PSS {peak['pss_children'] / 1024:.0f} "
          f"({peak['processes']} processes at the peak); with gpudoctor itself RSS {peak['rss_all'] / 1024:.0f}, "
          f"PSS {peak['pss_all'] / 1024:.0f}; exit {proc.returncode}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
