#!/usr/bin/env bash
# On a real GPU: the stock stack in every mode, and each fault a trust check must tell, as reports.
# Usage (through the device tool, from the repo root): bash tools/device/record_trust.sh KIND
# Writes $OUT/trust-KIND.tar.gz; reads only; never changes a GPU setting.
set -u
kind=${1:?kind}
d=$(mktemp -d)
. "$(dirname "$0")/lib.sh"  # chk
nvidia-smi -q > "$d/nvidia-smi-q.txt" 2>&1
date -u +%FT%TZ > "$d/when.txt"
python3 -m pip show -f torch 2>/dev/null | grep -E "^(Name|Version|Requires)|libtorch_cuda|libcudart" > "$d/torch-show.txt"
python3 - > "$d/metadata.txt" 2>&1 <<'PY'
from importlib import metadata
for n in ("torch", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "cupy-cuda13x", "cuda-toolkit"):
    try:
        d = metadata.distribution(n)
    except Exception as e:
        print(n, "missing", e); continue
    print("==", n, d.version)
    for r in d.requires or []:
        print("  Requires-Dist:", r)
    files = [str(f) for f in d.files or [] if "cuda" in str(f) and str(f).endswith((".so", ".so.13", ".so.12")) ]
    print("  files:", files[:12])
PY
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_arch_list(), torch.backends.cudnn.version())" > "$d/torch-facts.txt" 2>&1
PYTORCH_CUDA_ALLOC_CONF=bogus_option:1 python3 -c "import torch; print(torch.cuda.is_available()); torch.ones(1, device='cuda')" > "$d/bogus-direct.txt" 2>&1; echo "rc=$?" >> "$d/bogus-direct.txt"
PYTORCH_CUDA_ALLOC_CONF=bogus_option:1 python3 -m gpudoctor.probes.frameworks.worker torch > "$d/bogus-worker.txt" 2>&1; echo "rc=$?" >> "$d/bogus-worker.txt"
chk full --
chk quick -- --quick
chk deep -- --deep
chk bogus_alloc PYTORCH_CUDA_ALLOC_CONF=bogus_option:1 --
chk jax_cpu JAX_PLATFORMS=cpu --
chk launch_blocking CUDA_LAUNCH_BLOCKING=1 --
# a second process loading the GPU for the whole check
python3 "$(dirname "$0")/load_gpu.py" 0 40 > "$d/load.txt" 2>&1 &
loader=$!
sleep 6
chk shared_gpu --
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$d/apps-during-load.txt" 2>&1
kill $loader 2>/dev/null; wait $loader 2>/dev/null
# installed apart from the project, as pipx does: a venv with gpudoctor's dependencies and no framework
repo=$(pwd)
python3 -m venv --without-pip /tmp/tool && mkdir -p /tmp/tooldeps
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for n in click pynvml.py packaging psutil; do ln -sf "$site/$n" /tmp/tooldeps/; done
ln -sf "$repo/gpudoctor" "$repo/compat_matrix" /tmp/tooldeps/
echo /tmp/tooldeps > "$(ls -d /tmp/tool/lib/python3*/site-packages)/deps.pth"
(cd /tmp && VIRTUAL_ENV="$(python3 -c 'import sys; print(sys.prefix)')" /tmp/tool/bin/python -m gpudoctor check --format json -o "$d/tool_venv.json" 2> "$d/tool_venv.err"; echo "tool_venv rc=$?" | tee -a "$d/summary.txt")
(cd /tmp && /tmp/tool/bin/python -m gpudoctor check --quick --python "$(python3 -c 'import sys; print(sys.executable)')" --format json -o "$d/tool_venv_quick.json" 2>> "$d/tool_venv.err"; echo "tool_venv_quick rc=$?" | tee -a "$d/summary.txt")
python3 -m gpudoctor check 2>&1 | tail -25 > "$d/full-text.txt"
PYTHONUNBUFFERED=1 python3 -m pytest -q -m gpu tests/test_gpu_live.py -p no:cacheprovider > "$d/pytest-gpu.txt" 2>&1; tail -2 "$d/pytest-gpu.txt" | tee -a "$d/summary.txt"
tar czf "$OUT/trust-$kind.tar.gz" -C "$d" .
cat "$d/summary.txt" "$d/full-text.txt"; tail -5 "$d/bogus-worker.txt"
