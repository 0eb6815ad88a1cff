#!/usr/bin/env bash
# Python's own import-time tables (-X importtime) for `check --quick` and for the NVML child, on a real GPU
# machine: which module's import the start-up time goes to. The wall times and per-phase traces are
# benchmarks/quick_start.py's, whole-process import costs tools/device/import_costs.sh's.
# Reads only; never changes a GPU setting. Usage (device tool, repo root): bash tools/device/quick_profile.sh -> $OUT/quick/
set -u
d=${OUT:-/tmp}/quick; mkdir -p "$d"
python3 -m gpudoctor check --quick > /dev/null 2>&1  # warm the page cache and the .pyc files once
python3 -X importtime -m gpudoctor check --quick > /dev/null 2> "$d/importtime.txt"
sort -t'|' -k2 -n -r "$d/importtime.txt" | head -40 > "$d/importtime-top.txt"
python3 -X importtime -m gpudoctor.probes.nvml.worker --help > /dev/null 2> "$d/importtime-nvml-worker.txt" || true
cat "$d/importtime-top.txt"
