#!/usr/bin/env bash
# Error counters and fabric state on a real machine: every reading gpudoctor takes (probes/nvml/counters.py)
# beside nvidia-smi's own answer for it, what it costs per GPU, `check --quick` timed (median of 10), and the
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

# gpudoctor's readings, and what they cost on top of the rest of the NVML worker
python3 - "$d" <<'PY' 2>&1 | tee -a "$d/summary.txt"
import json, sys, time
from gpudoctor.probes.nvml import _binding as nv
from gpudoctor.probes.nvml.counters import read_counters, read_fabric
from gpudoctor.probes.nvml.worker import _nvlinks
nv.call("nvmlInit")
out = []
for i in range(nv.call("nvmlDeviceGetCount")):
    h = nv.call("nvmlDeviceGetHandleByIndex", i)
    t0 = time.perf_counter(); links = _nvlinks(h); t1 = time.perf_counter()
    counters = read_counters(h, links); t2 = time.perf_counter()
    fabric = read_fabric(h); t3 = time.perf_counter()
    out.append({"index": i, "counters": counters, "fabric": fabric,
                "ms": {"link_states": round((t1 - t0) * 1e3, 2), "counters": round((t2 - t1) * 1e3, 2),
                       "fabric": round((t3 - t2) * 1e3, 2)}})
    print(f"GPU {i}: link states {out[-1]['ms']['link_states']} ms, counters {out[-1]['ms']['counters']} ms "
          f"(one thread per GPU in the worker), fabric {out[-1]['ms']['fabric']} ms; fabric {fabric}")
json.dump({"gpus": out, "missing_functions": sorted(nv.missing_functions)}, open(f"{sys.argv[1]}/readings.json", "w"), indent=1)
print("missing functions:", sorted(nv.missing_functions) or "none")
PY

# side by side: each GPU's counters as gpudoctor read them and as nvidia-smi printed them
python3 - "$d" <<'PY' > "$d/compare.txt" 2>&1
import json, re, sys
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
nvlink = per_gpu(f"{d}/nvidia-smi-nvlink-e.txt", r"Link (\d+): (.+?)\s*:\s*(\d+)")
for g in mine:
    i, c = g["index"], g["counters"]
    print(f"GPU {i}")
    print(f"  PCIe replay      gpudoctor {c['pcie_replay']!s:<12} nvidia-smi {replays[i] if i < len(replays) else 'n/a'}")
    print(f"  fabric           gpudoctor {g['fabric']}  nvidia-smi {fabric[i] if i < len(fabric) else 'n/a'}")
    links = c["nvlink_errors"]
    smi = {}
    for link, what, value in (nvlink[i] if i < len(nvlink) else []):
        smi.setdefault(int(link), []).append(f"{what}={value}")
    if isinstance(links, list):
        for e in links:
            print(f"  link {e['link']:>2}          gpudoctor replay={e['replay']} recovery={e['recovery']} "
                  f"crc_flit={e['crc_flit']} crc_data={e['crc_data']}  nvidia-smi {' '.join(smi.get(e['link'], ['n/a']))}")
    else:
        print(f"  NVLink counters  gpudoctor {links}  nvidia-smi {len(smi)} link(s) listed")
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
python3 benchmarks/quick_start.py 10 2>&1 | grep -E 'runs of|median' | tee -a "$d/summary.txt"
python3 -m gpudoctor analyze "$d/quick-1.json" -f text > "$d/quick-1.txt" 2>&1
tar czf "$out/$name.tar.gz" -C "$out" "$name"
cat "$d/summary.txt"
