#!/usr/bin/env bash
# Where `check --quick` spends its time on a real GPU machine (issue 17's 0.5 s target): bare Python
# start, the CLI import, `--quick` wall times (N runs, text output to /dev/null), one trace with the shell's
# start and end marks, and Python's own import-time table. Reads only; never changes a GPU setting.
# Usage (device tool, repo root): bash tools/device/quick_profile.sh [N]   -> $OUT/quick/
set -u
n=${1:-10}
d=${OUT:-/tmp}/quick; mkdir -p "$d"
wall() { local t0=$EPOCHREALTIME; "$@" > /dev/null 2>&1; awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}"; }
python3 -m gpudoctor check --quick > /dev/null 2>&1  # warm the page cache once
echo "python -c pass: $(wall python3 -c pass) $(wall python3 -c pass) $(wall python3 -c pass)" | tee "$d/summary.txt"
echo "python -S -c pass: $(wall python3 -S -c pass)" | tee -a "$d/summary.txt"
echo "gpudoctor --version: $(wall python3 -m gpudoctor --version) $(wall python3 -m gpudoctor --version)" | tee -a "$d/summary.txt"
echo "import pynvml: $(wall python3 -c 'import pynvml')" | tee -a "$d/summary.txt"
runs=""; for i in $(seq "$n"); do runs="$runs $(wall python3 -m gpudoctor check --quick)"; done
echo "check --quick x$n:$runs" | tee -a "$d/summary.txt"
echo "$runs" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END{printf "quick median %.3f min %.3f max %.3f\n", (NR%2?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2), a[1], a[NR]}' | tee -a "$d/summary.txt"
for i in 1 2 3; do
  t=$d/trace-$i.txt; : > "$t"
  echo "$EPOCHREALTIME shell - launch" >> "$t"
  GPUDOCTOR_TRACE=$t python3 -m gpudoctor check --quick > /dev/null 2>&1
  echo "$EPOCHREALTIME shell - exited" >> "$t"
done
python3 -X importtime -m gpudoctor check --quick > /dev/null 2> "$d/importtime.txt"
sort -t'|' -k2 -n -r "$d/importtime.txt" | head -40 > "$d/importtime-top.txt"
python3 -X importtime -m gpudoctor.probes.nvml.worker --help > /dev/null 2> "$d/importtime-nvml-worker.txt" || true
