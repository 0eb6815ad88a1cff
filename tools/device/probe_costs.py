"""What each `--quick` probe costs on its own, run one after another in this process: wall and CPU
seconds, and the functions its CPU time goes to (cProfile). Run from the repo root on a device machine:
python3 tools/device/probe_costs.py. Reads only."""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpudoctor import runner  # noqa: E402
from gpudoctor.probes import interpreter  # noqa: E402
from gpudoctor.procs.scope import RunScope  # noqa: E402


def main() -> None:
    target = interpreter.choose(None)
    scope = RunScope()
    probes = runner.select_probes([p.name for p in runner.PROBES], quick=True)
    for probe in probes:
        profile = cProfile.Profile()
        wall, cpu = time.perf_counter(), time.process_time()
        profile.enable()
        probe.run(target, scope)
        profile.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"== {probe.name}: wall {wall * 1000:.1f} ms, cpu {cpu * 1000:.1f} ms")
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(14)
        print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))


if __name__ == "__main__":
    main()
