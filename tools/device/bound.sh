#!/usr/bin/env bash
# The bound of #5: a default full `check` on every GPU within 1.3x of the same check on one GPU.
# Runs, on one machine, a warm-up check, then ROUNDS x (GPU 0 alone, every GPU) alternately, and
# prints each wall time and where the time went (tools/device/breakdown.py).
# Usage (through the device tool, from the repo root): bash tools/device/bound.sh KIND [ROUNDS]
# Writes $OUT/bound-KIND.txt and the last round's two reports; reads only; changes no GPU setting.
set -u
kind=${1:?kind}
rounds=${2:-3}
d=$(mktemp -d)
echo "cpus=$(nproc) $(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)" | tee "$d/bound.txt"
python3 -m gpudoctor check --format json -o "$d/warm.json" > /dev/null 2>&1  # fills the file caches
for i in $(seq 1 "$rounds"); do
  for mode in one all; do
    start=$(date +%s.%N)
    if [ "$mode" = one ]; then
      CUDA_VISIBLE_DEVICES=0 python3 -m gpudoctor check --format json -o "$d/$mode-$i.json" > /dev/null 2>&1
    else
      python3 -m gpudoctor check --format json -o "$d/$mode-$i.json" > /dev/null 2>&1
    fi
    rc=$?
    end=$(date +%s.%N)
    echo "$mode round $i: exit $rc, wall $(python3 -c "print(f'{$end - $start:.2f}')") s" | tee -a "$d/bound.txt"
  done
done
python3 tools/device/breakdown.py "$d"/one-*.json "$d"/all-*.json | tee -a "$d/bound.txt"
cp "$d/bound.txt" "$OUT/bound-$kind.txt"
cp "$d/one-$rounds.json" "$OUT/one-gpu-$kind.json"
cp "$d/all-$rounds.json" "$OUT/all-gpus-$kind.json"
