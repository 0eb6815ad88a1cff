# Shared by the device recording scripts (source it after setting $d, the folder the reports go to).
# chk NAME [VAR=VALUE ...] -- [check options]: one `check --format json` into $d/NAME.json with those
# variables set for gpudoctor only; its exit status, wall time and findings appended to $d/summary.txt.
chk() {
  local name=$1; shift
  local envs=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local t0=$EPOCHREALTIME
  env "${envs[@]}" python3 -m gpudoctor check --format json -o "$d/$name.json" "$@" 2> "$d/$name.err"
  local rc=$?
  echo "$name rc=$rc wall=$(awk "BEGIN{printf \"%.2f\", $EPOCHREALTIME - $t0}") s" | tee -a "$d/summary.txt"
  python3 -m gpudoctor analyze "$d/$name.json" --format text 2>/dev/null | grep -E '^\s+[✗!i] ' | sed "s/^/  $name: /" | tee -a "$d/summary.txt"
}
