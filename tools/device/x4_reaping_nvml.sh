#!/usr/bin/env bash
# On a multi-GPU machine: (1) the NVML worker reading GPUs one after the other (OLD_WORKER) against at
# once (this tree), alone and as `check --quick`, alternating; (2) a full check under a child subreaper
# (tests/reaper.py): nothing may come to the harness, and what final reaping costs (GPUDOCTOR_WARDEN=0
# against the default, alternating); (3) SIGKILL of a full check mid-run under the harness; (4) --deep on
# all GPUs and on the first two, for the all-reduce reference figures. Reads only; changes no GPU setting.
# Usage (device tool, repo root): bash tools/device/x4_reaping_nvml.sh OLD_WORKER [N]
set -u
old_worker=$1; n=${2:-7}
d=${OUT:-/tmp}/x4; mkdir -p "$d"
nvidia-smi -L | tee "$d/gpus.txt"; nvidia-smi topo -m > "$d/topo.txt" 2>&1
python3 -m compileall -q gpudoctor > /dev/null
rm -rf /tmp/old && mkdir /tmp/old && cp -r gpudoctor compat_matrix /tmp/old/ && cp "$old_worker" /tmp/old/gpudoctor/probes/nvml/worker.py
python3 -m compileall -q /tmp/old/gpudoctor > /dev/null
echo "== NVML worker alone, $n alternating runs (s)" | tee -a "$d/summary.txt"
for i in $(seq "$n"); do
  for tree in /tmp/old .; do
    t0=$EPOCHREALTIME; (cd "$tree" && python3 -m gpudoctor.probes.nvml.worker > /dev/null 2>&1)
    echo "$tree $(awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}")"
  done
done | awk '{a[$1]=a[$1]" "$2} END{for (k in a) print k":"a[k]}' | tee -a "$d/summary.txt"
echo "== check --quick, $n alternating runs" | tee -a "$d/summary.txt"
python3 benchmarks/quick_start.py "$n" --tree /tmp/old --tree . 2>&1 | grep -E 'runs of|median' | tee -a "$d/summary.txt"
nvidia-smi -q > "$d/nvidia-smi-q.txt"; t0=$EPOCHREALTIME; nvidia-smi -q > /dev/null; echo "nvidia-smi -q $(awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}") s" | tee -a "$d/summary.txt"
python3 -m gpudoctor check --quick --format json -o "$d/quick.json" > /dev/null 2>&1; echo "quick rc=$?" | tee -a "$d/summary.txt"
echo "== full check under a subreaper, then GPUDOCTOR_WARDEN=0 against the default" | tee -a "$d/summary.txt"
py=$(command -v python3)
for i in 1 2 3; do
  for w in 0 1; do
    t0=$EPOCHREALTIME
    python3 tests/reaper.py "{\"argv\": [\"$py\", \"-m\", \"gpudoctor\", \"check\", \"--format\", \"json\", \"-o\", \"$d/full-$w-$i.json\"], \"env\": {\"GPUDOCTOR_WARDEN\": \"$w\"}}" > "$d/reap-$w-$i.json"
    echo "warden=$w round $i wall $(awk "BEGIN{printf \"%.2f\", $EPOCHREALTIME - $t0}") $(python3 -c "import json,sys; r=json.load(open('$d/reap-$w-$i.json')); print('rc', r['rc'], 'at_exit', len(r['at_exit']), [p['cmd'][:60]+' '+p['state'] for p in r['at_exit']][:4], 'alive', len(r['alive']))")" | tee -a "$d/summary.txt"
  done
done
echo "== SIGKILL of a full check at 2.5 s, under a subreaper" | tee -a "$d/summary.txt"
python3 tests/reaper.py "{\"argv\": [\"$py\", \"-m\", \"gpudoctor\", \"check\"], \"kill_after\": 2.5, \"settle\": 5}" > "$d/kill.json"
python3 -c "import json; r=json.load(open('$d/kill.json')); print('rc', r['rc'], 'alive after 5 s:', r['alive'])" | tee -a "$d/summary.txt"
echo "== --deep, all GPUs and GPUs 0,1" | tee -a "$d/summary.txt"
t0=$EPOCHREALTIME; python3 -m gpudoctor check --deep --format json -o "$d/deep-all.json" > /dev/null 2>&1; echo "deep all rc=$? wall $(awk "BEGIN{printf \"%.2f\", $EPOCHREALTIME - $t0}")" | tee -a "$d/summary.txt"
t0=$EPOCHREALTIME; CUDA_VISIBLE_DEVICES=0,1 python3 -m gpudoctor check --deep --format json -o "$d/deep-01.json" > /dev/null 2>&1; echo "deep 0,1 rc=$? wall $(awk "BEGIN{printf \"%.2f\", $EPOCHREALTIME - $t0}")" | tee -a "$d/summary.txt"
for f in "$d"/deep-all.json "$d"/deep-01.json "$d"/full-1-3.json; do
  python3 -c "
import json,sys; r=json.load(open('$f')); m=r['facts'].get('multigpu') or {}
print('$f'.split('/')[-1], 'findings', [x['code'] for x in r['findings']], 'allreduce', (m.get('allreduce') or {}).get('busbw_gbs'), 'gpus', len(r['facts'].get('gpus') or []))" | tee -a "$d/summary.txt"
done
