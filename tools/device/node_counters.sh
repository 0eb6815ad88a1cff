#!/usr/bin/env bash
# Error counters and fabric state on a real machine: every reading gpudoctor takes (probes/nvml/counters.py)
# beside nvidia-smi's own answer for it (NVLink: `nvidia-smi nvlink -e` summed over each GPU's links, read
# before and after gpudoctor's, since the counts may rise in between), what it costs per GPU, `check --quick` timed (median of 10), and the
# findings of that check. Usage (device tool, repo root): bash tools/device/node_counters.sh NAME
#   -> $OUT/NAME/ and $OUT/NAME.tar.gz: summary.txt first (compare.txt: gpudoctor | nvidia-smi per GPU).
# Reads only: NVML getters and nvidia-smi queries; no counter is reset, no setting changed.
set -u
name=${1:?name}
out=${OUT:-/tmp}
d=$out/$name; mkdir -p "$d"
date -u +%FT%TZ > "$d/when.txt"
echo "uid=$(id -u) container=$([ -e /.dockerenv ] && echo yes || echo no) driver=$(cat /proc/driver/nvidia/version 2>/dev/null | head -1)" | tee "$d/summary.txt"
python3 -m compileall -q gpudoctor > /dev/null

# nvidia-smi's own answers
nvidia-smi nvlink -e > "$d/nvidia-smi-nvlink-e.txt" 2>&1; echo "nvidia-smi nvlink -e rc=$?" >> "$d/summary.txt"
nvidia-smi nvlink -s > "$d/nvidia-smi-nvlink-s.txt" 2>&1
nvidia-smi -q -d PCIE > "$d/nvidia-smi-q-pcie.txt" 2>&1
nvidia-smi -q -d PERFORMANCE > "$d/nvidia-smi-q-performance.txt" 2>&1
nvidia-smi -q > "$d/nvidia-smi-q.txt" 2>&1
grep -i fabric -A3 "$d/nvidia-smi-q.txt" > "$d/nvidia-smi-fabric.txt"
nvidia-smi -q -x > "$d/nvidia-smi-q.xml" 2>&1
systemctl is-active nvidia-fabricmanager > "$d/fabricmanager-active.txt" 2>&1 || true
ls /dev/nvidia-nvswitch* > "$d/nvswitch-devices.txt" 2>&1 || true

# gpudoctor's readings (the NVLink totals, PCIe replays and clock-event times in one field-values call; where
# the driver keeps no NVLink totals, the full check's per-link reads), what they cost on top of the rest of the
# NVML worker as --quick and as the full check read them, and the per-link getter's counts summed, which the
# totals must equal but for errors counted between the two reads (a healthy H200 counts CRC-data errors every second)
python3 - "$d" <<'PY' 2>&1 | tee -a "$d/summary.txt"
import json, sys, time
from gpudoctor.probes.nvml import _binding as nv
from gpudoctor.probes.nvml.counters import read_counters, read_fabric
from gpudoctor.probes.nvml.worker import _nvlinks
from gpudoctor.nvlink_totals import nvlink_totals
from gpudoctor.snapshot import is_unavailable
KINDS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}  # nvml.h nvmlNvLinkErrorCounter_t
nv.call("nvmlInit")
out = []
for i in range(nv.call("nvmlDeviceGetCount")):
    h = nv.call("nvmlDeviceGetHandleByIndex", i)
    t0 = time.perf_counter(); links = _nvlinks(h); t1 = time.perf_counter()
    quick = read_counters(h, links, quick=True); tq = time.perf_counter()
    counters = read_counters(h, links); t2 = time.perf_counter()
    fabric = read_fabric(h); t3 = time.perf_counter()
    active = [e["link"] for e in links.get("links", []) if e.get("active")] if not is_unavailable(links) else []
    per_link = {k: [nv.query("nvmlDeviceGetNvLinkErrorCounter", h, n, c) for n in active] for k, c in KINDS.items()}
    t4 = time.perf_counter()
    sums = {k: sum(v) if all(isinstance(x, int) for x in v) else v[:1] for k, v in per_link.items()}
    out.append({"index": i, "counters": counters, "quick_counters": quick, "fabric": fabric, "per_link_sums": sums,
                "active_links": len(active),
                "ms": {"link_states": round((t1 - t0) * 1e3, 2), "counters_quick": round((tq - t1) * 1e3, 2),
                       "counters": round((t2 - tq) * 1e3, 2),
                       "fabric": round((t3 - t2) * 1e3, 2), "per_link_getters": round((t4 - t3) * 1e3, 2)}})
    ms = out[-1]["ms"]
    shape = "per link" if isinstance(counters["nvlink_errors"], list) else "totals"
    print(f"GPU {i}: link states {ms['link_states']} ms, counters as --quick reads them {ms['counters_quick']} ms, "
          f"as the full check does {ms['counters']} ms ({shape}; the {4 * len(active)} per-link getter calls took "
          f"{ms['per_link_getters']} ms), fabric {ms['fabric']} ms; fabric {fabric}")
    print(f"  NVLink full check {nvlink_totals(counters['nvlink_errors'])} ({shape}); --quick "
          f"{quick['nvlink_errors']} unread={quick.get('nvlink_errors_unread')}; per-link getters summed just after {sums}")
json.dump({"gpus": out, "missing_functions": sorted(nv.missing_functions)}, open(f"{sys.argv[1]}/readings.json", "w"), indent=1)
print("missing functions:", sorted(nv.missing_functions) or "none")
PY
nvidia-smi nvlink -e > "$d/nvidia-smi-nvlink-e-after.txt" 2>&1

# side by side: each GPU's counters as gpudoctor read them and as nvidia-smi printed them
python3 - "$d" <<'PY' > "$d/compare.txt" 2>&1
import json, re, sys
from gpudoctor.nvlink_totals import nvlink_totals
d = sys.argv[1]
mine = json.load(open(f"{d}/readings.json"))["gpus"]

def per_gpu(path, pattern):
    """nvidia-smi's values of ``pattern`` in order, split per GPU at each 'GPU 0000...' or 'GPU N:' header."""
    blocks, cur = [], None
    for line in open(path, errors="replace"):
        if re.match(r"^GPU [0-9A-Fa-f:.]+\b", line):
            cur = []; blocks.append(cur)
        elif cur is not None:
            cur.append(line.rstrip())
    return [[m.groups() for line in b for m in [re.search(pattern, line)] if m] for b in blocks]

replays = per_gpu(f"{d}/nvidia-smi-q-pcie.txt", r"Replays Since Reset\s*:\s*(\S+)")
def fabric_blocks(path):
    """Each GPU's 'Fabric' block of nvidia-smi -q: the lines under the heading, as 'key: value'."""
    out, indent = [], None
    for line in open(path, errors="replace"):
        depth = len(line) - len(line.lstrip())
        if re.match(r"^GPU [0-9A-Fa-f:.]+\b", line):
            out.append([]); indent = None
        elif re.match(r"^\s+Fabric\s*$", line) and out:
            indent = depth
        elif indent is not None and (depth <= indent or ":" not in line):
            indent = None
        elif indent is not None:
            out[-1].append(" ".join(line.split()))
    return out

fabric = fabric_blocks(f"{d}/nvidia-smi-q.txt")
def kind(what):
    """nvidia-smi's name of a per-link counter -> ours (its names differ between drivers)."""
    w = what.lower()
    return ("replay" if "replay" in w else "recovery" if "recovery" in w else
            "crc_data" if "crc" in w and "data" in w else "crc_flit" if "crc" in w else None)

def smi_sums(path):
    """nvidia-smi nvlink -e per GPU: {kind: the sum over its links}, and the counter names it printed."""
    out = []
    for block in per_gpu(path, r"Link (\d+): (.+?)\s*:\s*(\d+)"):
        sums, names = {}, set()
        for _, what, value in block:
            names.add(what)
            if kind(what):
                sums[kind(what)] = sums.get(kind(what), 0) + int(value)
        out.append((sums, sorted(names)))
    return out

before, after = smi_sums(f"{d}/nvidia-smi-nvlink-e.txt"), smi_sums(f"{d}/nvidia-smi-nvlink-e-after.txt")
for g in mine:
    i, c = g["index"], g["counters"]
    print(f"GPU {i}")
    print(f"  PCIe replay      gpudoctor {c['pcie_replay']!s:<12} nvidia-smi {replays[i] if i < len(replays) else 'n/a'}")
    print(f"  fabric           gpudoctor {g['fabric']}  nvidia-smi {fabric[i] if i < len(fabric) else 'n/a'}")
    totals = nvlink_totals(c["nvlink_errors"]) or c["nvlink_errors"]  # the per-link reads summed, where so read
    lo, names = before[i] if i < len(before) else ({}, [])
    hi = after[i][0] if i < len(after) else {}
    print(f"  nvidia-smi counter names: {names}")
    for k in ("replay", "recovery", "crc_flit", "crc_data"):
        mine_k = totals.get(k) if isinstance(totals, dict) else totals
        verdict = ("ok" if isinstance(mine_k, int) and k in lo and k in hi and lo[k] <= mine_k <= hi[k]
                   else "n/a" if k not in lo else "DIFFERS")
        print(f"  NVLink {k:<9} gpudoctor {mine_k!s:<12} nvidia-smi summed over links, before {lo.get(k, 'n/a')} "
              f"after {hi.get(k, 'n/a')}; per-link getters {g['per_link_sums'].get(k)}  {verdict}")
    print(f"  held down (ns)   gpudoctor {c['violation_ns']}")
PY
head -60 "$d/compare.txt"

# check --quick with the new readings: median of 10, and its findings
for i in $(seq 10); do
  t0=$EPOCHREALTIME
  python3 -m gpudoctor check --quick -f json --no-redact -o "$d/quick-$i.json" 2> "$d/quick-$i.err"
  echo "$? $(awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}")"
done > "$d/quick-times.txt"
python3 - "$d" <<'PY' 2>&1 | tee -a "$d/summary.txt"
import json, statistics, sys
d = sys.argv[1]
rows = [line.split() for line in open(f"{d}/quick-times.txt")]
times = sorted(float(t) for _, t in rows)
print(f"check --quick -f json --no-redact: median {statistics.median(times):.3f} s over {len(times)} runs "
      f"(min {times[0]:.3f}, max {times[-1]:.3f}); exit codes {sorted({r for r, _ in rows})}")
report = json.load(open(f"{d}/quick-1.json"))
print("findings:", [(f["code"], f["severity"], f["title"]) for f in report["findings"]] or "none")
for c in report["checks"]:
    if c["id"] in ("gpus.nvlink_errors", "gpus.pcie_replays", "gpus.fabric"):
        print(f"  {c['id']}: {c['status']} {c.get('reason', '')}")
PY

# the full check once (it reads the links one by one where the driver keeps no totals): its time and verdicts
t0=$EPOCHREALTIME
python3 -m gpudoctor check -f json --no-redact -o "$d/full.json" 2> "$d/full.err"
echo "$? $(awk "BEGIN{printf \"%.3f\", $EPOCHREALTIME - $t0}")" > "$d/full-time.txt"
python3 - "$d" <<'PY' 2>&1 | tee -a "$d/summary.txt"
import json, sys
from gpudoctor.nvlink_totals import nvlink_totals
d = sys.argv[1]
rc, took = open(f"{d}/full-time.txt").read().split()
report = json.load(open(f"{d}/full.json"))
print(f"check (full) -f json --no-redact: {took} s, exit code {rc}")
print("findings:", [(f["code"], f["severity"], f["title"]) for f in report["findings"]] or "none")
for c in report["checks"]:
    if c["id"] in ("gpus.nvlink_errors", "gpus.pcie_replays", "gpus.fabric"):
        print(f"  {c['id']}: {c['status']} {c.get('reason', '')}")
for g in report["facts"]["gpus"]:
    value = g.get("counters", {}).get("nvlink_errors")
    print(f"  GPU {g.get('index')}: {'per link' if isinstance(value, list) else 'totals'} {nvlink_totals(value)}")
PY
python3 benchmarks/quick_start.py 10 2>&1 | grep -E 'runs of|median' | tee -a "$d/summary.txt"
python3 -m gpudoctor analyze "$d/quick-1.json" -f text > "$d/quick-1.txt" 2>&1
tar czf "$out/$name.tar.gz" -C "$out" "$name"
cat "$d/summary.txt"
