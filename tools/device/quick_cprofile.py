"""Where the CPU time of one `check --quick` goes, every thread of gpudoctor's own process included:
Python's profiler runs in the main thread and in each probe thread (their stats merged), from the CLI's
import to the report written. The process's wall and CPU seconds are printed beside it, so what the
profile cannot see (the children) shows as the difference. Reads only; never changes a GPU setting.
Usage (device tool, repo root): python3 tools/device/quick_cprofile.py [N_LINES] > OUT
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
PROFILES: list[cProfile.Profile] = []


def _profiled_run(run):  # type: ignore[no-untyped-def]
    """Thread.run under a profiler of its own (cProfile sees one thread only)."""

    def wrapped(self):  # type: ignore[no-untyped-def]
        profile = cProfile.Profile()
        try:
            profile.enable()
        except ValueError:  # Python 3.12 on: the main thread's profiler already sees every thread
            return run(self)
        PROFILES.append(profile)
        try:
            run(self)
        finally:
            profile.disable()

    return wrapped


def main() -> None:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    threading.Thread.run = _profiled_run(threading.Thread.run)  # type: ignore[method-assign]
    wall, cpu = time.perf_counter(), time.process_time()
    profile = cProfile.Profile()
    PROFILES.append(profile)
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")  # the report itself is not what is measured
    profile.enable()
    try:
        from gpudoctor.cli import cli

        cli.main(["check", "--quick"], prog_name="gpudoctor", standalone_mode=False)
    except SystemExit:
        pass
    finally:
        profile.disable()
        sys.stdout = out
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"check --quick in-process: wall {wall * 1000:.0f} ms, this process's CPU {cpu * 1000:.0f} ms, "
          f"{len(PROFILES)} profiled threads")
    stats = pstats.Stats(*PROFILES, stream=io.StringIO())
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        stats.stream = text
        stats.sort_stats(key).print_stats(lines)
        print(f"== by {key}")
        print("\n".join(line for line in text.getvalue().splitlines()[4:] if line.strip()))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
