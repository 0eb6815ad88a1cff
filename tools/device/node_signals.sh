#!/usr/bin/env bash
# The kernel log on a real machine, as gpudoctor's probe kernel_log reads it (probes/driver_events.py): who may
# read it (dmesg_restrict, /dev/kmsg, journalctl, syslog files, capabilities, container), every NVRM line since
# boot beside what the probe made of them, the probe's cost in-process and inside `check --quick` (A/B with
# --skip gpus.xid, alternated), the verdict of gpus.xid, and what an unprivileged user gets ("not checked").
# Usage (device tool, repo root, as root): bash tools/device/node_signals.sh NAME
#   -> $OUT/NAME-summary.txt and $OUT/NAME.tar.gz (everything, summary.txt first).
# Reads only: the kernel log and NVML getters; no GPU setting is changed, nothing is written to /dev/kmsg.
set -u
name=${1:?name}
out=${OUT:-/tmp}
d=$(mktemp -d)/$name; mkdir -p "$d"
s=$d/summary.txt
date -u +%FT%TZ > "$d/when.txt"
python3 -m compileall -q gpudoctor > /dev/null

# who may read the kernel log here
{
  echo "uid=$(id -u) container=$([ -e /.dockerenv ] && echo yes || echo no) driver=$(head -1 /proc/driver/nvidia/version 2>/dev/null)"
  echo "kernel.dmesg_restrict=$(cat /proc/sys/kernel/dmesg_restrict 2>&1) uptime_s=$(cut -d' ' -f1 /proc/uptime)"
  echo "capabilities: $(grep -E '^Cap(Eff|Bnd)' /proc/self/status | tr '\n' ' ')"
  echo "/dev/kmsg: $(ls -l /dev/kmsg 2>&1)"
  echo "journalctl: $(command -v journalctl || echo none); syslog files: $(ls /var/log/kern.log /var/log/messages 2>&1 | tr '\n' ' ')"
  echo "dmesg: $(timeout 5 dmesg 2>&1 | wc -l) lines, $(timeout 5 dmesg 2>/dev/null | grep -c 'NVRM') NVRM, $(timeout 5 dmesg 2>/dev/null | grep -c 'NVRM: Xid') Xid"
} | tee "$s"
timeout 5 dmesg 2>&1 | grep -E 'NVRM|Xid|nvidia' | tail -300 > "$d/nvrm-lines.txt"
if command -v journalctl > /dev/null; then
  timeout 10 journalctl -k -b --no-pager -o short-monotonic -q 2>&1 | grep -E 'NVRM' | tail -100 > "$d/journal-nvrm.txt"
fi

# the probe in-process: what it read, and its cost (full bound, then --quick's bound)
python3 - "$d" <<'PY' 2>&1 | tee -a "$s"
import json, os, statistics, sys, time
from gpudoctor.checks.base import NotApplicable
from gpudoctor.checks.xid_events import check_xid_events, not_read_reason
from gpudoctor.probes.driver_events import BUDGET_S, QUICK_BUDGET_S, probe_driver_events
from gpudoctor.procs import processes  # noqa: F401 - imported while root may still read every module
d = sys.argv[1]
for budget in (BUDGET_S, QUICK_BUDGET_S):
    times = []
    for _ in range(10):
        t0 = time.perf_counter(); log = probe_driver_events(budget); times.append(time.perf_counter() - t0)
    print(f"probe (bound {budget} s): median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms; "
          f"read={log['read']} source={log.get('source')} records={log.get('records')} complete={log.get('complete')} "
          f"first_s={log.get('first_s')} nvrm_lines={log.get('nvrm_lines')} xids={log.get('xid_count')} errors={log.get('error_count')}")
json.dump(log, open(f"{d}/probe.json", "w"), indent=1)
for e in log.get("events", []) + log.get("errors", []):
    print("  event:", e.get("xid", e.get("kind")), e.get("bus_id"), e.get("time_s"), e.get("text", "")[:160])
# the same probe as an unprivileged user (imports done as root, then the ids dropped): the check must say why
# it could not read, never pass
pid = os.fork()
if pid == 0:
    try:
        os.setgroups([]); os.setgid(65534); os.setuid(65534)
        log = probe_driver_events(QUICK_BUDGET_S)
        facts = {"kernel_log": log, "host": {"container": {"detected": os.path.exists("/.dockerenv")}}}
        try:
            found = list(check_xid_events(facts))
            print(f"as uid 65534: read={log['read']} source={log.get('source')} findings={[f.code for f in found]}")
        except NotApplicable as exc:
            print(f"as uid 65534: not checked: {exc}")
    except Exception as exc:  # noqa: BLE001 - said, not hidden by the child's exit
        print(f"as uid 65534: the probe failed: {type(exc).__name__}: {exc}")
    finally:
        sys.stdout.flush(); os._exit(0)
os.waitpid(pid, 0)
PY

# check --quick with the probe (default) and without it (--skip gpus.xid), alternated, and the full check
for i in $(seq 10); do
  for mode in with without; do
    extra=(); [ "$mode" = without ] && extra=(--skip gpus.xid)
    t0=$EPOCHREALTIME
    python3 -m gpudoctor check --quick -f json --no-redact -o "$d/quick-$mode-$i.json" "${extra[@]}" 2> "$d/quick-$mode-$i.err"
    echo "$mode $? $(awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}")"
  done
done > "$d/quick-times.txt"
python3 -m gpudoctor check -f json --no-redact -o "$d/full.json" 2> "$d/full.err"; echo "full check rc=$?" >> "$s"
python3 - "$d" <<'PY' 2>&1 | tee -a "$s"
import glob, json, os, statistics, sys
d = sys.argv[1]
rows = [line.split() for line in open(f"{d}/quick-times.txt")]
for mode in ("with", "without"):
    times = sorted(float(t) for m, _, t in rows if m == mode)
    print(f"check --quick ({mode} the kernel log): median {statistics.median(times):.3f} s, max {times[-1]:.3f} s over "
          f"{len(times)} runs; exit codes {sorted({r for m, r, _ in rows if m == mode})}")
reports = [json.load(open(p)) for p in sorted(glob.glob(f"{d}/quick-with-*.json"))]
probe = [r["facts"]["probes"]["kernel_log"]["duration_s"] for r in reports if "kernel_log" in r["facts"].get("probes", {})]
if probe:
    print(f"kernel_log probe inside check --quick: median {statistics.median(probe) * 1e3:.1f} ms, max {max(probe) * 1e3:.1f} ms")
for name in ("quick-with-1", "full"):
    if not os.path.exists(f"{d}/{name}.json"):
        print(f"{name}: no report (see {name}.err)")
        continue
    report = json.load(open(f"{d}/{name}.json"))
    xid = next(c for c in report["checks"] if c["id"] == "gpus.xid")
    print(f"{name}: gpus.xid {xid['status']} {xid.get('reason', '')}; verdict {report['summary']['verdict']}; findings "
          f"{[(f['code'], f['severity'], f['title']) for f in report['findings']] or 'none'}")
PY
python3 benchmarks/quick_start.py 10 2>&1 | grep -E 'runs of|median' | tee -a "$s"
tar czf "$out/$name.tar.gz" -C "$(dirname "$d")" "$name"
cp "$s" "$out/$name-summary.txt"
cat "$s"
