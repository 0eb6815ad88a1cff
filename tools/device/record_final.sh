#!/usr/bin/env bash
# A recording of one GPU machine, every command at once: what gpudoctor says (check, --quick, --deep, -v,
# Markdown) beside NVIDIA's own tools, CUDA_VISIBLE_DEVICES masks against libcuda, check --quick timed
# (benchmarks/quick_start.py), a full check under a child subreaper (nothing left behind), SIGKILL
# mid-check, the live GPU tests, and what the kernel log and NVML's error counters look like there.
# Usage (device tool, repo root): bash tools/device/record_final.sh NAME  -> $OUT/NAME.tar.gz (the files a
# fixture folder keeps, summary.txt among them). Reads only; never changes a GPU setting.
set -u
name=${1:?name}
d=$(mktemp -d)/$name; mkdir -p "$d"
. "$(dirname "$0")/lib.sh"  # chk
date -u +%FT%TZ > "$d/when.txt"
nvidia-smi -q -x > "$d/nvidia-smi-q.xml" 2>&1
nvidia-smi topo -m > "$d/topo-m.txt" 2>&1
nvidia-smi topo -p2p r > "$d/topo-p2p-r.txt" 2>&1
cat /proc/driver/nvidia/version > "$d/proc-driver-nvidia-version.txt" 2>&1
python3 -m compileall -q gpudoctor > /dev/null
chk report --
chk quick -- --quick
chk deep -- --deep
python3 -m gpudoctor check -v > "$d/check-v.txt" 2>&1; echo "check -v exit=$?" >> "$d/summary.txt"
python3 -m gpudoctor analyze "$d/report.json" -f markdown > "$d/report.md" 2>/dev/null
python3 -m gpudoctor analyze "$d/report.md" -f json > /dev/null 2>&1; echo "analyze report.md rc=$?" | tee -a "$d/summary.txt"
python3 -m gpudoctor devices > "$d/devices.txt" 2>&1; echo "devices rc=$?" | tee -a "$d/summary.txt"
PYTHONPATH=. python3 tools/device/cuda_visible.py > "$d/cuda-visible.jsonl" 2>&1
tail -1 "$d/cuda-visible.jsonl" | tee -a "$d/summary.txt"; grep '"agree": false' "$d/cuda-visible.jsonl" | tee -a "$d/summary.txt"
python3 benchmarks/quick_start.py 10 2>&1 | grep -E 'runs of|median' | tee -a "$d/summary.txt"
py=$(command -v python3)
python3 tests/reaper.py "{\"argv\": [\"$py\", \"-m\", \"gpudoctor\", \"check\", \"--format\", \"json\"]}" > "$d/reap.json"
python3 -c "import json; r=json.load(open('$d/reap.json')); print('full check under a subreaper: rc', r['rc'], 'at_exit', r['at_exit'], 'alive', r['alive'])" | tee -a "$d/summary.txt"
python3 tests/reaper.py "{\"argv\": [\"$py\", \"-m\", \"gpudoctor\", \"check\"], \"kill_after\": 2.0, \"settle\": 5}" > "$d/kill.json"
python3 -c "import json; r=json.load(open('$d/kill.json')); print('SIGKILL at 2 s: rc', r['rc'], 'alive after 5 s', r['alive'])" | tee -a "$d/summary.txt"
python3 -m pytest -m gpu tests/test_gpu_live.py -q -p no:cacheprovider 2>&1 | tail -1 | sed 's/^/live GPU tests: /' | tee -a "$d/summary.txt"
{
  echo "dmesg_restrict=$(cat /proc/sys/kernel/dmesg_restrict 2>&1) uid=$(id -u)"
  echo "journalctl: $(command -v journalctl || echo none); kern.log: $(ls /var/log/kern.log /var/log/messages 2>&1 | tr '\n' ' ')"
  timeout 5 dmesg 2>&1 | grep -E 'NVRM|Xid' | tail -20
  python3 - <<'PY'
import pynvml as n
n.nvmlInit()
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    def q(f, *a):
        try:
            return f(h, *a)
        except Exception as e:  # noqa: BLE001
            return type(e).__name__ + ": " + str(e)[:60]
    print(f"GPU {i}: pcie replay", q(n.nvmlDeviceGetPcieReplayCounter))
    try:
        info = n.c_nvmlGpuFabricInfo_t() if hasattr(n, "c_nvmlGpuFabricInfo_t") else None
        print("  fabric", q(n.nvmlDeviceGetGpuFabricInfo, info) if info is not None else "no struct", getattr(info, "state", None), getattr(info, "status", None))
    except Exception as e:  # noqa: BLE001
        print("  fabric", type(e).__name__, e)
    errs = {}
    for link in range(18):
        for c, nm in ((0, "replay"), (1, "recovery"), (2, "crc_flit"), (3, "crc_data")):
            v = q(n.nvmlDeviceGetNvLinkErrorCounter, link, c)
            if isinstance(v, int) and v:
                errs.setdefault(nm, []).append((link, v))
    print("  nvlink error counters (non-zero):", errs or "none")
PY
} > "$d/node-signals.txt" 2>&1
head -40 "$d/node-signals.txt"
cat "$d/summary.txt"
tar czf "${OUT:-/tmp}/$name.tar.gz" -C "$(dirname "$d")" "$name"
