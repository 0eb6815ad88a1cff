#!/usr/bin/env bash
# What each step of `check --quick`'s start costs on this machine, measured as whole processes (N runs each,
# medians): a bare Python, Python without site, the CLI's import, then the runner's, then the checks'.
# Usage (device tool, repo root): bash tools/device/import_costs.sh [N]
set -u
n=${1:-10}
wall() { local t0=$EPOCHREALTIME; "$@" > /dev/null 2>&1; awk "BEGIN{printf \"%.4f\", $EPOCHREALTIME - $t0}"; }
med() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END{printf "%.1f ms", 1000*(NR%2?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2)}'; }
for code in "pass" "import gpudoctor.cli" "import gpudoctor.cli, gpudoctor.runner" "import gpudoctor.cli, gpudoctor.runner, gpudoctor.pipeline" \
            "import gpudoctor.cli, gpudoctor.runner, gpudoctor.pipeline, gpudoctor.redact, gpudoctor.render.text"; do
  runs=""; for i in $(seq "$n"); do runs="$runs $(wall python3 -c "$code")"; done
  echo "$(echo "$runs" | med)  python3 -c '$code'"
done
runs=""; for i in $(seq "$n"); do runs="$runs $(wall python3 -S -c pass)"; done; echo "$(echo "$runs" | med)  python3 -S -c pass"
runs=""; for i in $(seq "$n"); do runs="$runs $(wall python3 -I -c pass)"; done; echo "$(echo "$runs" | med)  python3 -I -c pass"
