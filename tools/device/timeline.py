"""A check's events from every process on one clock: the trace that GPUDOCTOR_TRACE=FILE makes
(gpudoctor/trace.py), each line as seconds since the first event, process and thread, and what.

Usage: GPUDOCTOR_TRACE=/tmp/t python3 -m gpudoctor check ...; python3 tools/device/timeline.py /tmp/t
"""

from __future__ import annotations

import sys


def timeline(path: str) -> list[str]:
    events = []
    with open(path) as fh:
        for line in fh:
            stamp, pid, thread, what = line.rstrip("\n").split(" ", 3)
            events.append((float(stamp), pid, thread, what))
    events.sort(key=lambda e: e[0])
    start = events[0][0] if events else 0.0
    return [f"{t - start:7.3f}  {pid:>7} {thread:<16.16} {what}" for t, pid, thread, what in events]


if __name__ == "__main__":
    for trace in sys.argv[1:]:
        print("\n".join(timeline(trace)))
