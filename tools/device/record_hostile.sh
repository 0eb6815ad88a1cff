#!/usr/bin/env bash
# On a real GPU: the child handling (own channel, lifeline, process families, bounded programs) must leave
# a healthy machine all clear with the same figures; hostile programs and signals must leave no process
# behind. Also times check --quick (its target: 0.5 s) and records the Markdown report's sizes.
# Usage (device tool, repo root): bash tools/device/record_hostile.sh KIND   -> $OUT/hostile-KIND.tar.gz
# Reads only; never changes a GPU setting.
set -u
kind=${1:?kind}
d=$(mktemp -d)
. "$(dirname "$0")/lib.sh"  # chk
leftovers() {  # processes started from this tree that are still alive (by the child mark gpudoctor sets)
  sleep 1
  local n=0
  for p in /proc/[0-9]*; do
    # a child by its mark, or a forked copy of gpudoctor (procs/forking.py: no mark, gpudoctor's own command line)
    if { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -q '^GPUDOCTOR_CHILD=' \
       || { tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null | grep -q -- '-m gpudoctor check'; then n=$((n+1)); echo "  left: $(cat $p/cmdline | tr '\0' ' ' | cut -c1-120)" >> "$d/summary.txt"; fi
  done
  echo "$1 leftovers=$n" | tee -a "$d/summary.txt"
}
date -u +%FT%TZ > "$d/when.txt"
nvidia-smi -q > "$d/nvidia-smi-q.txt" 2>&1
nvidia-smi topo -m > "$d/topo-m.txt" 2>&1
chk full --
chk quick -- --quick
chk deep -- --deep
python3 -m gpudoctor check > "$d/full-text.txt" 2>&1
python3 -m gpudoctor check -v > "$d/full-verbose.txt" 2>&1
for f in full deep; do python3 -m gpudoctor analyze "$d/$f.json" -f markdown > "$d/$f.md" 2>/dev/null; echo "$f markdown chars=$(python3 -c "import sys;print(len(open(sys.argv[1],encoding='utf-8').read()))" "$d/$f.md")" | tee -a "$d/summary.txt"; done
python3 -m gpudoctor analyze "$d/full.md" -f json > "$d/full-md-rejudged.json" 2> "$d/full-md-rejudged.err"; echo "analyze full.md rc=$?" | tee -a "$d/summary.txt"
# --quick, five times, with a trace of the last
for i in 1 2 3 4 5; do t0=$EPOCHREALTIME; python3 -m gpudoctor check --quick > /dev/null 2>&1; echo "quick run $i wall=$(awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}") s" | tee -a "$d/summary.txt"; done
GPUDOCTOR_TRACE="$d/quick-trace.txt" python3 -m gpudoctor check --quick > /dev/null 2>&1
# a hanging nvcc first on PATH: --timeout 3 must end the run near 3 s and leave nothing
mkdir -p "$d/bin"; printf '#!/bin/sh\nsleep 300\n' > "$d/bin/nvcc"; chmod +x "$d/bin/nvcc"
t0=$EPOCHREALTIME; PATH="$d/bin:$PATH" python3 -m gpudoctor check --timeout 3 --format json -o "$d/nvcc-hang.json" 2> "$d/nvcc-hang.err"; rc=$?
echo "nvcc-hang --timeout 3 rc=$rc wall=$(awk "BEGIN{printf \"%.2f\", $EPOCHREALTIME - $t0}") s" | tee -a "$d/summary.txt"
leftovers nvcc-hang
# the same under --quick, whose cuda_stack probe runs in a forked copy of gpudoctor (procs/forking.py)
t0=$EPOCHREALTIME; PATH="$d/bin:$PATH" python3 -m gpudoctor check --quick --timeout 2 --format json -o "$d/nvcc-hang-quick.json" 2> "$d/nvcc-hang-quick.err"; rc=$?
echo "nvcc-hang --quick --timeout 2 rc=$rc wall=$(awk "BEGIN{printf \"%.2f\", $EPOCHREALTIME - $t0}") s" | tee -a "$d/summary.txt"
leftovers nvcc-hang-quick
# SIGTERM and SIGKILL of a --quick check while its forked copy waits on the hanging nvcc
for sig in TERM KILL; do
  PATH="$d/bin:$PATH" python3 -m gpudoctor check --quick > /dev/null 2> "$d/quick-sig-$sig.err" & pid=$!
  sleep 1.0; alive=$(ls /proc/$pid >/dev/null 2>&1 && echo yes || echo no)
  kill -$sig $pid; wait $pid; echo "SIG$sig during check --quick with a hanging nvcc (running when signalled: $alive) rc=$?" | tee -a "$d/summary.txt"
  leftovers "quick-SIG$sig"
done
# SIGTERM, SIGHUP and SIGKILL of gpudoctor while framework children run: nothing must be left
for sig in TERM HUP KILL; do
  python3 -m gpudoctor check --format json -o "$d/sig-$sig.json" 2> "$d/sig-$sig.err" & pid=$!
  sleep 1.5; alive=$(ls /proc/$pid >/dev/null 2>&1 && echo yes || echo no)
  kill -$sig $pid; wait $pid; echo "SIG$sig during check (running when signalled: $alive) rc=$?" | tee -a "$d/summary.txt"
  leftovers "SIG$sig"
done
PYTHONWARNINGS=error PYTHONDEVMODE=1 python3 -m gpudoctor check --format json -o "$d/devmode.json" 2> "$d/devmode.err"; echo "devmode rc=$? exception-ignored=$(grep -c 'Exception ignored\|ResourceWarning' "$d/devmode.err")" | tee -a "$d/summary.txt"
PYTHONWARNINGS=error PYTHONDEVMODE=1 python3 -m gpudoctor check --quick --format json -o "$d/devmode-quick.json" 2> "$d/devmode-quick.err"; echo "devmode --quick rc=$? exception-ignored=$(grep -c 'Exception ignored\|ResourceWarning\|Warning' "$d/devmode-quick.err")" | tee -a "$d/summary.txt"
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_live.py > "$d/pytest-gpu.txt" 2>&1; tail -1 "$d/pytest-gpu.txt" | tee -a "$d/summary.txt"
tar -C "$d" -czf "$OUT/hostile-$kind.tar.gz" .
cat "$d/summary.txt"
