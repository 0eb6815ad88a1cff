#!/usr/bin/env bash
# One default `check` traced across its processes (GPUDOCTOR_TRACE), its wall time and timeline.
# Usage (through the device tool, from the repo root): bash tools/device/trace.sh NAME [VISIBLE [ARGS...]]
#   VISIBLE: CUDA_VISIBLE_DEVICES for the check ("" or none: every GPU); ARGS: more `check` options.
#   Other variables pass through.
# Writes $OUT/trace-NAME.txt (wall time, then the timeline); reads only; changes no GPU setting.
set -u
name=${1:?name}
d=$(mktemp -d)
start=$(date +%s.%N)
visible=${2:-}
shift $(( $# < 2 ? $# : 2 ))
if [ -n "$visible" ]; then export CUDA_VISIBLE_DEVICES=$visible; fi
GPUDOCTOR_TRACE=$d/trace python3 -m gpudoctor check --format json -o "$d/report.json" "$@" > /dev/null 2>&1
rc=$?
end=$(date +%s.%N)
{
  echo "$name: exit $rc, wall $(python3 -c "print(f'{$end - $start:.2f}')") s"
  python3 tools/device/breakdown.py "$d/report.json"
  python3 tools/device/timeline.py "$d/trace"
} > "$OUT/trace-$name.txt"
head -1 "$OUT/trace-$name.txt"
