#!/usr/bin/env bash
# Issue-3 evidence on a real GPU machine: gpudoctor's framework/library facts beside the
# frameworks' own answers and the loader's. Usage: bash tools/device/record_stack.sh KIND
set -u
kind=${1:?kind}
d=$(mktemp -d)
bash tools/device/record.sh "$kind" > "$d/record.log" 2>&1; cp "$OUT/record-$kind.tar.gz" "$d/"
python3 - > "$d/torch-truth.json" 2>&1 <<'PY'
import json, torch
torch.backends.cudnn.version(); x = torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if any(k in l for k in ("libcudnn", "libcublas", "libnccl", "libcudart", "libcuda.so", "libnvJitLink"))})
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                  "nccl": torch.cuda.nccl.version(), "devices": torch.cuda.device_count(), "arch": torch.cuda.get_arch_list(), "maps": maps}))
PY
LD_DEBUG=libs python3 -c "import torch; torch.backends.cudnn.version()" 2>&1 | grep -E "calling init: .*(libcudnn|libnccl|libcublas)" > "$d/ld-debug-torch.txt"
ls -l /usr/lib/x86_64-linux-gnu/libcudnn* > "$d/system-cudnn.txt" 2>&1
python3 -m pip list 2>/dev/null | grep -i -E "cudnn|nccl|torch|jax|cupy|nvidia" > "$d/pip-list.txt"
python3 benchmarks/static_check.py 3 > "$d/bench.txt" 2>&1
# Real faults on real hardware: a selection that hides GPU 0, and the system cuDNN put first on the loader path.
CUDA_VISIBLE_DEVICES=1 python3 -m gpudoctor check --format json -o "$d/report-cvd1.json" 2> /dev/null
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH python3 -m gpudoctor check --format json -o "$d/report-ldpath-cudnn.json" 2> /dev/null
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH python3 -c "import torch; print('torch cudnn with system dir first:', torch.backends.cudnn.version())" > "$d/torch-truth-ldpath.txt" 2>&1
for r in report-cvd1 report-ldpath-cudnn; do echo "== $r"; python3 -m gpudoctor analyze "$d/$r.json" | grep -E "^\[|^    [✗!i]"; done
cat "$d/torch-truth-ldpath.txt"
python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_live.py > "$d/pytest-gpu.txt" 2>&1
tar czf "$OUT/stack-$kind.tar.gz" -C "$d" .
rm -f "$OUT/record-$kind.tar.gz"
tail -3 "$d/pytest-gpu.txt"; cat "$d/torch-truth.json"; cat "$d/ld-debug-torch.txt" | head; cat "$d/system-cudnn.txt" | head -4; cat "$d/bench.txt"
python3 -m gpudoctor check 2>&1 | tail -14
