#!/usr/bin/env bash
# The GPU list told from NVML's facts (probes/smoke/listing.py) against CUDA's count, on one GPU machine:
#  1. which list a full check used, and when: one traced check on every GPU (smoke.count.source, the
#     list's seconds, each smoke child's, the findings, the trace's "gpu count" line and CUDA starts);
#  2. the list against CUDA's own count for every CUDA_VISIBLE_DEVICES mask of cuda_visible.py under each
#     CUDA_DEVICE_ORDER (tools/device/count_list.py: a DIFFER is a wrong list), and the resolver against
#     libcuda (tools/device/cuda_visible.py);
#  3. the bound, this tree against BASE (a source tree of the commit before, such as a `git worktree`):
#     benchmarks/gpu_scale.sh sections 1 (ROUNDS alternating rounds, GPU 0 alone and every GPU, each tree's
#     findings per run), 5 (peak host memory of the children) and 6 (where the time went).
# Reads only; changes no GPU setting. Everything printed is also in $OUT (count_ab.txt, count_ab_bound.txt).
# BASE: a folder holding the base commit's gpudoctor/ (made here with, for example,
#   mkdir -p count_base && git archive COMMIT gpudoctor | tar -x -C count_base
# and carried to the device), or a commit, where the device's copy has git.
# COUNT_AB_SECTIONS="1 2" runs only those sections (default: all three; about 6 minutes on 4 GPUs).
# Usage, from the repo root on the GPU machine: bash tools/device/count_ab.sh BASE [ROUNDS]
set -u
base=${1:?usage: bash tools/device/count_ab.sh BASE [ROUNDS]}
rounds=${2:-3}
sections=${COUNT_AB_SECTIONS:-1 2 3}
on() { case " $sections " in *" $1 "*) return 0;; esac; return 1; }
out=${OUT:-$(mktemp -d)}
log="$out/count_ab.txt"
: > "$log"
say() { echo "$*" | tee -a "$log"; }
if [ ! -d "$base/gpudoctor" ] && git rev-parse --verify -q "$base^{commit}" > /dev/null 2>&1; then
  tree=$(mktemp -d)
  git archive "$base" gpudoctor | tar -x -C "$tree" && base=$tree
fi
[ -d "$base/gpudoctor" ] || { echo "count_ab: $base is neither a gpudoctor source tree nor a commit" >&2; exit 2; }
say "count_ab $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, this tree $(git rev-parse --short HEAD 2>/dev/null), base $base"
nvidia-smi -L | tee -a "$log"

if on 1; then
say "== 1. one full check on every GPU, traced"
python3 -m compileall -q gpudoctor > /dev/null 2>&1
python3 -m gpudoctor check --format json -o "$out/warm.json" > /dev/null 2>&1  # fills the file caches
t0=$EPOCHREALTIME
GPUDOCTOR_TRACE="$out/trace.txt" python3 -m gpudoctor check --format json -o "$out/full.json" > /dev/null 2>&1
rc=$?
say "full check: exit $rc, wall $(awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}") s"
python3 - "$out/full.json" <<'PY' | tee -a "$log"
import json, sys
facts = (r := json.load(open(sys.argv[1])))["facts"]
smoke, work = facts.get("smoke") or {}, facts.get("workload") or {}
count = smoke.get("count") or {}
print("smoke.count.source:", count.get("source"), "| devices:", [(d["ordinal"], d["uuid"][:12]) for d in count.get("devices", [])]
      or count, "| list took (workload.count_s):", work.get("count_s"), "s")
for run in smoke.get("runs") or []:
    print(f"  smoke cuda:{run.get('ordinal')} ok={run.get('ok')} total_s={run.get('total_s')} context_s={run.get('context_s')}"
          + (f" error={run['error']}" if "error" in run else ""))
print("probe seconds:", {k: v.get("duration_s") for k, v in (facts.get("probes") or {}).items()})
print("findings:", [(f["code"], f["title"]) for f in r["findings"]] or "none")
PY
python3 tools/device/timeline.py "$out/trace.txt" > "$out/timeline.txt" 2>&1
grep -E "gpu count|cuInit done|count: |probe (nvml|smoke|workload) (begins|ends)" "$out/timeline.txt" | tee -a "$log"

fi
if on 2; then
say "== 2. the list against CUDA's count, every mask and order; the resolver against libcuda"
PYTHONPATH=$PWD python3 tools/device/count_list.py > "$out/count-list.jsonl" 2>&1
say "count_list exit $?: $(tail -1 "$out/count-list.jsonl")"
grep '"DIFFER"' "$out/count-list.jsonl" | head -5 | tee -a "$log"
PYTHONPATH=$PWD python3 tools/device/cuda_visible.py > "$out/cuda-visible.jsonl" 2>&1
say "$(tail -1 "$out/cuda-visible.jsonl")"

fi
if on 3; then
say "== 3. the bound: this tree against $base, $rounds alternating rounds"
GPU_SCALE_SECTIONS="1 5 6" GPU_SCALE_RECORD=0 GPU_SCALE_LOG=count_ab_bound.txt OUT="$out" \
  bash benchmarks/gpu_scale.sh "$rounds" "$base" 2>&1 | tee -a "$log"
fi
echo "written: $out"
