#!/usr/bin/env bash
# Record, on a real GPU machine, what gpudoctor says next to what NVIDIA's own tools say.
# Usage (through the device tool, from the repo root): bash tools/device/record.sh KIND
# Writes $OUT/record-KIND.tar.gz; reads only; never changes a GPU setting.
set -u
kind=${1:?kind}
d=$(mktemp -d)
nvidia-smi -q -x > "$d/nvidia-smi-q.xml" 2>&1
nvidia-smi -q > "$d/nvidia-smi-q.txt" 2>&1
nvidia-smi topo -m > "$d/topo-m.txt" 2>&1
nvidia-smi topo -p2p r > "$d/topo-p2p-r.txt" 2>&1
nvidia-smi nvlink -s > "$d/nvlink-s.txt" 2>&1
nvidia-smi -L > "$d/nvidia-smi-L.txt" 2>&1
cat /proc/driver/nvidia/version > "$d/proc-driver-nvidia-version.txt" 2>&1
ls -l /dev/nvidia* > "$d/dev-nodes.txt" 2>&1
TIMEFORMAT="wall %R s"
{ time python3 -m gpudoctor check --format json -o "$d/report.json"; echo "exit=$?"; } > "$d/check-time.txt" 2>&1
{ time python3 -m gpudoctor check --format json -o "$d/report2.json"; } >> "$d/check-time.txt" 2>&1
python3 -m gpudoctor check -v > "$d/check-v.txt" 2>&1; echo "exit=$?" >> "$d/check-v.txt"
python3 -m gpudoctor check --format markdown > "$d/check.md" 2>&1
python3 -m gpudoctor devices > "$d/devices.txt" 2>&1
PYTHONPATH=. python3 tools/device/cuda_visible.py > "$d/cuda-visible.jsonl" 2>&1
tar czf "$OUT/record-$kind.tar.gz" -C "$d" .
sed -n '1,40p' "$d/check-v.txt"; cat "$d/devices.txt"; cat "$d/topo-m.txt"; tail -3 "$d/check-time.txt"
tail -1 "$d/cuda-visible.jsonl"
grep '"agree": false' "$d/cuda-visible.jsonl"
