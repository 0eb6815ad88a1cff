#!/usr/bin/env bash
# The full check's GPU figures on one GPU machine, every one printed (and written to $OUT/gpu_scale.txt):
#  1. the bound: a default full `check` on every GPU against the same check on GPU 0 alone
#     (CUDA_VISIBLE_DEVICES=0), ROUNDS alternating rounds, medians and their ratio; with BASE trees
#     (source trees of earlier commits) their checks alternate with this tree's, on the same machine;
#  2. the full check against `python -m torch.utils.collect_env`, warm and cold (page caches dropped
#     before each run: root only), on GPU 0 and on every GPU, side by side in each round;
#  3. `check --quick` on every GPU (each tree) against `nvidia-smi -q`, 10 alternating runs;
#  4. `check --deep` on every GPU: wall time and the NCCL all-reduce;
#  5. the peak host memory of a full check's children together (benchmarks/tree_rss.py);
#  6. where the time of the last round's checks went (tools/device/breakdown.py).
# Also keeps, in $OUT, what tests/test_real_reports.py needs beside a recorded report: an unredacted
# full check (report.json), cuda-visible.jsonl, topo-m.txt, topo-p2p-r.txt, nvidia-smi-q.xml.
# Reads only; changes no GPU setting. Source trees are compiled to bytecode first, as `pip install` does
# (the GPU image sets PYTHONDONTWRITEBYTECODE).
# GPU_SCALE_SECTIONS="1 3" runs only those sections (default: all six); GPU_SCALE_LOG names the log file.
# Usage, from the repo root on the GPU machine: bash benchmarks/gpu_scale.sh [ROUNDS] [BASE ...]
set -u
rounds=${1:-3}
shift
here=$(pwd)
sections=${GPU_SCALE_SECTIONS:-1 2 3 4 5 6}
on() { case " $sections " in *" $1 "*) return 0;; esac; return 1; }
out=${OUT:-$(mktemp -d)}
d=$(mktemp -d)
log="$out/${GPU_SCALE_LOG:-gpu_scale.txt}"
. "$(dirname "$0")/trees.sh"  # take_trees say drop name median
take_trees "$@"
secs() { awk "BEGIN{printf \"%.3f\", $2 - $1}"; }
check() {  # check TREE FILE MASK [options]: one check, prints its wall time
  local tree=$1 file=$2 mask=$3; shift 3
  local t0=$EPOCHREALTIME
  if [ "$mask" = all ]; then (cd "$tree" && python3 -m gpudoctor check --format json -o "$file" "$@") > /dev/null 2>&1
  else (cd "$tree" && CUDA_VISIBLE_DEVICES=$mask python3 -m gpudoctor check --format json -o "$file" "$@") > /dev/null 2>&1; fi
  local rc=$?
  echo "$(secs "$t0" "$EPOCHREALTIME") rc=$rc"
}
collect_env() {  # collect_env MASK: its wall time
  local t0=$EPOCHREALTIME
  if [ "$1" = all ]; then python3 -m torch.utils.collect_env > /dev/null 2>&1
  else CUDA_VISIBLE_DEVICES=$1 python3 -m torch.utils.collect_env > /dev/null 2>&1; fi
  secs "$t0" "$EPOCHREALTIME"
}
findings() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join(f["code"] for f in r["findings"]) or "none")' "$1"; }

: > "$log"
say "gpu_scale $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, rounds $rounds, trees: ${trees[*]}"
nvidia-smi -L | tee -a "$log"
nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1 | sed 's/^/driver /' | tee -a "$log"
for t in "${trees[@]}"; do python3 -m compileall -q "$t/gpudoctor" > /dev/null 2>&1; done
if [ "${GPU_SCALE_RECORD:-1}" = 1 ]; then  # GPU_SCALE_RECORD=0: figures only
  nvidia-smi -q -x > "$out/nvidia-smi-q.xml" 2>&1
  nvidia-smi topo -m > "$out/topo-m.txt" 2>&1
  nvidia-smi topo -p2p r > "$out/topo-p2p-r.txt" 2>&1
  PYTHONPATH=$here python3 tools/device/cuda_visible.py > "$out/cuda-visible.jsonl" 2>&1
  (cd "$here" && python3 -m gpudoctor check --format json --no-redact -o "$out/report.json") > /dev/null 2>&1
  say "report.json (this tree, --no-redact, every GPU): findings $(findings "$out/report.json")"
fi
for t in "${trees[@]}"; do check "$t" "$d/warm.json" all > /dev/null; done  # fills the file caches

if on 1; then
say "== 1. bound: full check, GPU 0 alone (one) and every GPU (all), alternating"
declare -A walls
for i in $(seq 1 "$rounds"); do
  for t in "${trees[@]}"; do
    for mask in 0 all; do
      r=$(check "$t" "$d/$(name "$t")-$mask-$i.json" "$mask")
      walls["$(name "$t")-$mask"]+="${r%% *} "
      say "$(name "$t") $([ "$mask" = 0 ] && echo one || echo all) round $i: ${r#* } wall ${r%% *} s, findings $(findings "$d/$(name "$t")-$mask-$i.json")"
    done
  done
done
for t in "${trees[@]}"; do
  n=$(name "$t"); one=$(median ${walls[$n-0]}); all=$(median ${walls[$n-all]})
  say "$n: median one $one s, all $all s, ratio $(awk "BEGIN{printf \"%.2f\", $all / $one}") (rounds: one ${walls[$n-0]}| all ${walls[$n-all]})"
done

fi
if on 2; then
say "== 2. full check (this tree) against torch.utils.collect_env, warm and cold, side by side"
declare -A ce
for i in $(seq 1 "$rounds"); do
  for mask in 0 all; do
    for cache in warm cold; do
      [ "$cache" = cold ] && drop
      c=$(collect_env "$mask")
      [ "$cache" = cold ] && drop
      r=$(check "$here" "$d/ce-$mask-$cache-$i.json" "$mask")
      ce["$mask-$cache-env"]+="$c "; ce["$mask-$cache-chk"]+="${r%% *} "
      say "round $i GPUs $mask $cache: collect_env $c s, check ${r%% *} s (${r#* })"
    done
  done
done
for mask in 0 all; do
  for cache in warm cold; do
    c=$(median ${ce[$mask-$cache-env]}); k=$(median ${ce[$mask-$cache-chk]})
    say "GPUs $mask $cache: median collect_env $c s, check $k s, check/collect_env $(awk "BEGIN{printf \"%.2f\", $k / $c}")"
  done
done

fi
if on 3; then
say "== 3. check --quick (every GPU) against nvidia-smi -q, 10 alternating runs"
declare -A q
s=""
for i in $(seq 1 10); do
  for t in "${trees[@]}"; do
    t0=$EPOCHREALTIME; (cd "$t" && python3 -m gpudoctor check --quick > /dev/null 2>&1); q[$(name "$t")]+="$(secs "$t0" "$EPOCHREALTIME") "
  done
  t0=$EPOCHREALTIME; nvidia-smi -q > /dev/null 2>&1; s+="$(secs "$t0" "$EPOCHREALTIME") "
done
for t in "${trees[@]}"; do say "$(name "$t") check --quick: median $(median ${q[$(name "$t")]}) s (${q[$(name "$t")]})"; done
say "nvidia-smi -q: median $(median $s) s ($s)"
fi

if on 4; then
say "== 4. check --deep, every GPU"
r=$(check "$here" "$out/deep.json" all --deep)
say "deep: wall ${r%% *} s (${r#* }), findings $(findings "$out/deep.json"), all-reduce $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["facts"].get("multigpu") or {}; a=m.get("allreduce") or {}; print(a.get("busbw_gbs") or a.get("bus_gbs") or {k: v for k, v in a.items() if "gbs" in k})' "$out/deep.json")"

fi
if on 5; then
say "== 5. peak host memory of a full check on every GPU"
for t in "${trees[@]}"; do
  say "$(name "$t"): $(cd "$t" && python3 "$here/benchmarks/tree_rss.py" python3 -m gpudoctor check --format json -o "$d/rss.json" 2> /dev/null)"
done

fi
if on 1 && on 6; then
say "== 6. where the time went, last round"
for t in "${trees[@]}"; do
  python3 tools/device/breakdown.py "$d/$(name "$t")-0-$rounds.json" "$d/$(name "$t")-all-$rounds.json" | tee -a "$log"
done
cp "$d/this-0-$rounds.json" "$out/one-gpu.json"
fi
echo "written: $out"
