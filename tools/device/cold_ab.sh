#!/usr/bin/env bash
# A cold-disk A/B: full checks of BASE trees and this tree against torch.utils.collect_env, page caches
# dropped before every run (root only), alternating within each round, on GPU 0 alone and on every GPU.
# Also prints the disk's I/O scheduler and what loading the toolkit's own cuBLAS costs cold, alone.
# Usage (through the device tool, from the repo root): bash tools/device/cold_ab.sh ROUNDS [BASE ...]
# Writes $OUT/cold_ab.txt, and GPUDOCTOR_TRACE traces of the last round; reads only; changes no GPU setting.
set -u
rounds=${1:-3}
shift
here=$(pwd)
out=${OUT:-$(mktemp -d)}
d=$(mktemp -d)
log="$out/cold_ab.txt"
. "$here/benchmarks/trees.sh"  # take_trees say drop name median
take_trees "$@"
timed() { local t0=$EPOCHREALTIME; "$@" > /dev/null 2>&1; awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}"; }
masked() { local mask=$1; shift; if [ "$mask" = all ]; then "$@"; else CUDA_VISIBLE_DEVICES=$mask "$@"; fi; }

: > "$log"
say "cold_ab $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, rounds $rounds, trees: ${trees[*]}"
nvidia-smi -L | tee -a "$log"
say "root: $(findmnt -no SOURCE,FSTYPE / | xargs); python: $(python3 -c 'import torch,os; print(os.path.dirname(torch.__file__))')"
for q in /sys/block/*/queue/scheduler; do say "$q: $(cat "$q")"; done
for t in "${trees[@]}"; do python3 -m compileall -q "$t/gpudoctor" > /dev/null 2>&1; done
lt=$(ls /usr/local/cuda/lib64/libcublasLt.so.* 2>/dev/null | head -1)
if [ -n "$lt" ]; then
  drop; say "load $lt alone, cold: $(timed python3 -c "import ctypes; ctypes.CDLL('$lt')") s (file $(du -Lh "$lt" | cut -f1))"
  say "  again, warm: $(timed python3 -c "import ctypes; ctypes.CDLL('$lt')") s"
fi
drop; say "import torch alone, cold: $(timed python3 -c 'import torch') s"
declare -A w
for i in $(seq 1 "$rounds"); do
  for mask in 0 all; do
    drop; c=$(timed masked "$mask" python3 -m torch.utils.collect_env); w["env-$mask"]+="$c "
    line="round $i GPUs $mask: collect_env $c s"
    for t in "${trees[@]}"; do
      n=$(name "$t")
      drop
      if [ "$i" = "$rounds" ]; then
        k=$(cd "$t" && GPUDOCTOR_TRACE="$d/trace-$n-$mask.txt" timed masked "$mask" python3 -m gpudoctor check --format json -o "$d/$n-$mask.json")
      else
        k=$(cd "$t" && timed masked "$mask" python3 -m gpudoctor check --format json -o "$d/$n-$mask.json")
      fi
      w["$n-$mask"]+="$k "
      line+=", $n $k s ($(python3 -c 'import json,sys; print(" ".join(f["code"] for f in json.load(open(sys.argv[1]))["findings"]) or "no finding")' "$d/$n-$mask.json"))"
    done
    say "$line"
  done
done
for mask in 0 all; do
  c=$(median ${w[env-$mask]}); line="GPUs $mask cold: collect_env median $c s"
  for t in "${trees[@]}"; do
    n=$(name "$t"); k=$(median ${w[$n-$mask]})
    line+="; $n $k s ($(awk "BEGIN{printf \"%.2f\", $k / $c}") x)"
  done
  say "$line"
done
cp "$d"/trace-*.txt "$out/" 2>/dev/null
echo "written: $out"
