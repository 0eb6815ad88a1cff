#!/usr/bin/env bash
# `check --quick` of two source trees side by side on one GPU machine, installed as users install it
# (tools/device/tool_venv.sh: a venv of its own, bytecode compiled) and run from the source tree (bytecode
# compiled first, as benchmarks/quick_start.py does), alternating runs; then whether this tree's forked
# --quick probes (procs/forking.py) give the facts and findings the threads give (GPUDOCTOR_FORK=0).
# Reads only. Usage (device tool, repo root): bash tools/device/quick_ab.sh OLD_TREE [N]
set -u
old=$1; n=${2:-15}
bash tools/device/tool_venv.sh /tmp/gd-new > /dev/null 2>&1 || echo "tool venv (this tree) failed"
(cd "$old" && bash "$OLDPWD/tools/device/tool_venv.sh" /tmp/gd-old > /dev/null 2>&1) || echo "tool venv ($old) failed"
python3 benchmarks/quick_start.py "$n" --tree /tmp/gd-old --tree /tmp/gd-new 2>&1 | grep -E 'runs of|medians|median '
python3 benchmarks/quick_start.py "$n" --tree "$old" --tree . 2>&1 | grep -E 'runs of|medians|median '
d=${OUT:-/tmp}/fork; mkdir -p "$d"
(cd /tmp && /tmp/gd-new/bin/gpudoctor check --quick --format json -o "$d/fork.json" 2> /dev/null
 GPUDOCTOR_FORK=0 /tmp/gd-new/bin/gpudoctor check --quick --format json -o "$d/thread.json" 2> /dev/null)
python3 - "$d/fork.json" "$d/thread.json" <<'PY'
import json, sys
def strip(n):
    if isinstance(n, dict):
        return {k: strip(v) for k, v in n.items() if k not in ("duration_s", "created")}
    return [strip(v) for v in n] if isinstance(n, list) else n
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("forked vs threads: facts equal:", strip(a["facts"]) == strip(b["facts"]), "| findings equal:",
      a["findings"] == b["findings"], "| findings:", [f["code"] for f in a["findings"]],
      "| differing sections:", [k for k in a["facts"] if strip(a["facts"][k]) != strip(b["facts"].get(k))])
PY
