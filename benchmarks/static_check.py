"""Wall time and memory of `gpudoctor check --quick` (no GPU work, frameworks read from package
metadata without importing them) and of the static check with real framework imports
(`check --skip acceleration`), next to `python -m torch.utils.collect_env`.

Prints a table; run on the machine you want figures for:  python3 benchmarks/static_check.py [RUNS]
The main process's peak RSS is measured in-process (the framework children are separate
processes and are not counted: the main process must never import a framework itself).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 5
RSS_SNIPPET = ("import resource, sys; from gpudoctor import pipeline; r = pipeline.check(pipeline.RunOptions(quick=True)); "
               "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "
               "'torch' in sys.modules, 'tensorflow' in sys.modules)")


def wall(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds, and the largest peak RSS (MiB) of the command or any child it waited for (os.wait4)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return time.monotonic() - start, usage.ru_maxrss // 1024


def median_wall(cmd: list[str]) -> tuple[float, list[float], int]:
    runs = [wall(cmd) for _ in range(RUNS)]
    times = [r[0] for r in runs]
    return statistics.median(times), times, max(r[1] for r in runs)


def main() -> None:
    rows = []
    gd, gd_all, gd_peak = median_wall([sys.executable, "-m", "gpudoctor", "check", "--quick", "--format", "json"])
    rows.append(("gpudoctor check --quick", gd, gd_all, gd_peak))
    st, st_all, st_peak = median_wall([sys.executable, "-m", "gpudoctor", "check", "--skip", "acceleration", "--format", "json"])
    rows.append(("gpudoctor check --skip acceleration", st, st_all, st_peak))
    if shutil.which("nvidia-smi"):
        smi, smi_all, smi_peak = median_wall(["nvidia-smi", "-q"])
        rows.append(("nvidia-smi -q", smi, smi_all, smi_peak))
    if "--full" in sys.argv:
        full, full_all, full_peak = median_wall([sys.executable, "-m", "gpudoctor", "check", "--format", "json"])
        rows.append(("gpudoctor check (full, GPU work)", full, full_all, full_peak))
    have_torch = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
    if have_torch:
        ce, ce_all, ce_peak = median_wall([sys.executable, "-m", "torch.utils.collect_env"])
        rows.append(("python -m torch.utils.collect_env", ce, ce_all, ce_peak))
        imp, imp_all, imp_peak = median_wall([sys.executable, "-c", "import torch"])
        rows.append(("python -c 'import torch'", imp, imp_all, imp_peak))
    out = subprocess.run([sys.executable, "-c", RSS_SNIPPET], capture_output=True, text=True).stdout.split()
    report = json.loads(subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--skip", "acceleration", "--format", "json"],
                                       capture_output=True, text=True).stdout)
    print(f"{'command':<38} {'median s':>9} {'peak MiB':>9}  runs")
    for name, med, runs, peak in rows:
        print(f"{name:<38} {med:>9.2f} {peak:>9}  {', '.join(f'{t:.2f}' for t in runs)}")
    print("(peak MiB: the largest single process of the command, its framework children included)")
    if have_torch:
        ce_row = next(r for r in rows if r[0].startswith("python -m torch"))
        print(f"ratio --quick / collect_env: {gd / ce_row[1]:.2f}; static check with imports / collect_env: {st / ce_row[1]:.2f}")
    print(f"main-process peak RSS: {out[0] if out else '?'} MiB; torch imported in main: {out[1] if out else '?'}; "
          f"tensorflow imported in main: {out[2] if out else '?'}")
    for name, fw in report["facts"].get("frameworks", {}).items():
        if fw.get("installed"):
            print(f"framework probe {name}: {fw.get('duration_s')} s ({fw.get('status')})")
    for name, probe in report["facts"]["probes"].items():
        print(f"probe {name}: {probe['duration_s']} s")


if __name__ == "__main__":
    main()
