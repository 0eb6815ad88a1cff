#!/usr/bin/env bash
# Real faults injected on a real GPU machine, without touching any GPU setting: only the
# environment of the gpudoctor process changes. Usage: bash tools/device/record_faults.sh KIND
set -u
kind=${1:?kind}
d=$(mktemp -d)
stub=$(ls /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/targets/*/lib/stubs/libcuda.so 2>/dev/null | head -1)
if [ -n "$stub" ]; then
  mkdir -p /tmp/stubdir && ln -sf "$stub" /tmp/stubdir/libcuda.so.1
  LD_LIBRARY_PATH=/tmp/stubdir:$LD_LIBRARY_PATH python3 -m gpudoctor check --format json -o "$d/stub-libcuda-first.json" 2>/dev/null
  LD_LIBRARY_PATH=/tmp/stubdir:$LD_LIBRARY_PATH python3 -c "import torch; print('torch with stub first:', torch.cuda.is_available(), torch.cuda.device_count())" > "$d/torch-stub.txt" 2>&1
fi
CUDA_VISIBLE_DEVICES=GPU-ffffffff python3 -m gpudoctor check --format json -o "$d/cvd-no-such-gpu.json" 2>/dev/null
TIMEFORMAT="%R"
for i in 1 2 3; do { time python3 -m gpudoctor check --format json -o /dev/null 2>/dev/null; } 2>> "$d/time-full.txt"; done
for i in 1 2 3; do { time python3 -m gpudoctor check --quick --format json -o /dev/null 2>/dev/null; } 2>> "$d/time-quick.txt"; done
python3 -m gpudoctor check --format json -o "$d/report-with-smoke.json" 2>/dev/null
tar czf "$OUT/faults-$kind.tar.gz" -C "$d" .
echo "stub: $stub"; cat "$d/torch-stub.txt" 2>/dev/null
for r in stub-libcuda-first cvd-no-such-gpu report-with-smoke; do
  [ -f "$d/$r.json" ] && { echo "== $r"; python3 -m gpudoctor analyze "$d/$r.json" | grep -E "^\[|^    [✗!i]"; }
done
echo "full check s: $(tr '\n' ' ' < "$d/time-full.txt")"; echo "quick check s: $(tr '\n' ' ' < "$d/time-quick.txt")"
python3 -c "
import json; r=json.load(open('$d/report-with-smoke.json'))['facts']['smoke']; print(json.dumps(r)[:1500])"
