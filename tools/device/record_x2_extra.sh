#!/usr/bin/env bash
# What tests/test_real_reports.py needs of a multi-GPU recording beside record_hostile.sh's reports, and
# the multi-GPU cases that fit 2 GPUs: nvidia-smi -q -x and topo -p2p r; CUDA_VISIBLE_DEVICES masks
# against libcuda (cuda_visible.py); a full check with only GPU 1 visible, and with GPU 1 named by its
# UUID; a full check while another process runs bf16 matmuls on GPU 1 alone (only GPU 1 may be called
# shared). Reads only; never changes a GPU setting. Usage: bash tools/device/record_x2_extra.sh -> $OUT/x2/
set -u
d=${OUT:-/tmp}/x2; mkdir -p "$d"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. "$(dirname "$0")/lib.sh"  # chk
date -u +%FT%TZ > "$d/when.txt"
nvidia-smi -q -x > "$d/nvidia-smi-q.xml" 2>&1
nvidia-smi topo -m > "$d/topo-m.txt" 2>&1
nvidia-smi topo -p2p r > "$d/topo-p2p-r.txt" 2>&1
PYTHONPATH=. python3 tools/device/cuda_visible.py > "$d/cuda-visible.jsonl" 2> "$d/cuda-visible.err"; tail -1 "$d/cuda-visible.jsonl"
uuid1=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 1)
chk report -- --no-redact  # as the other real_dir reports: UUIDs and serials kept, to compare with nvidia-smi
chk mask-1 CUDA_VISIBLE_DEVICES=1 --
chk mask-uuid1 CUDA_VISIBLE_DEVICES="$uuid1" --
python3 "$(dirname "$0")/load_gpu.py" 1 45 > "$d/load.txt" 2>&1 &
loader=$!
sleep 6
chk shared-gpu1 --
nvidia-smi --query-compute-apps=pid,gpu_uuid,process_name,used_memory --format=csv > "$d/apps-during-load.txt" 2>&1
kill $loader 2>/dev/null; wait $loader 2>/dev/null
cat "$d/summary.txt"; cat "$d/apps-during-load.txt"
tar -C "$d" -czf "${OUT:-/tmp}/x2.tar.gz" . && rm -rf "$d"
