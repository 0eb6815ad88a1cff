#!/usr/bin/env bash
# The workload worker of two source trees on one GPU machine (for a change to probes/workload/ that must
# not change its answers): the same commands in each, JSON lines kept, then their keys, verdicts and mixed precision
# compared (timings and throughput differ run to run). Reads only; never changes a GPU setting.
# Usage (device tool, repo root): bash tools/device/worker_compare.sh OLD_TREE NEW_TREE  -> $OUT/workers/
set -u
old=${1:?old tree}; new=${2:?new tree}
d=${OUT:-/tmp}/workers; mkdir -p "$d/old" "$d/new"
for side in old new; do
  tree=$old; [ "$side" = new ] && tree=$new
  (cd "$tree" && {
    python3 -m gpudoctor.probes.workload.worker torch 0 > "$d/$side/torch0.jsonl" 2> "$d/$side/torch0.err"
    python3 -m gpudoctor.probes.workload.worker torch 0 --deep > "$d/$side/torch0-deep.jsonl" 2> "$d/$side/torch0-deep.err"
    echo 0 | python3 -m gpudoctor.probes.workload.worker torch - --facts > "$d/$side/torch-facts.jsonl" 2> "$d/$side/torch-facts.err"
    python3 -m gpudoctor.probes.workload.worker jax 0 > "$d/$side/jax0.jsonl" 2> "$d/$side/jax0.err"
    python3 -m gpudoctor.probes.workload.worker cupy 0 > "$d/$side/cupy0.jsonl" 2> "$d/$side/cupy0.err"
  })
done
python3 - "$d" <<'PY'
import json, sys
from pathlib import Path
d = Path(sys.argv[1])
def shape(node):
    if isinstance(node, dict):
        return {k: shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [shape(v) for v in node[:1]]
    return type(node).__name__
def verdicts(node, out, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("ok", "passed", "mixed_precision", "moved", "error", "xla_autotuning", "framework", "device", "skipped"):
                out[f"{path}.{k}"] = v
            verdicts(v, out, f"{path}.{k}")
    return out
for f in sorted((d / "old").glob("*.jsonl")):
    old = [json.loads(l) for l in f.read_text().splitlines() if l.strip().startswith("{")]
    new = [json.loads(l) for l in (d / "new" / f.name).read_text().splitlines() if l.strip().startswith("{")]
    same_shape = [shape(x) for x in old] == [shape(x) for x in new]
    vo, vn = [verdicts(x, {}) for x in old], [verdicts(x, {}) for x in new]
    print(f"{f.name}: {len(old)} vs {len(new)} lines, same keys={same_shape}, same verdicts={vo == vn}")
    if vo != vn:
        print("   old", vo, "\n   new", vn)
    if not same_shape:
        print("   old", [shape(x) for x in old], "\n   new", [shape(x) for x in new])
PY
