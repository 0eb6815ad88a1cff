#!/usr/bin/env bash
# `gpudoctor check --deep` under torchrun on one real multi-GPU machine, without touching any GPU setting:
#   1 node x N GPUs; 2 "nodes" x N/2 GPUs (two torchrun agents, CUDA_VISIBLE_DEVICES splitting the GPUs,
#   a static rendezvous on 127.0.0.1); and two faults: NCCL told to use a network interface that does not
#   exist (the collective must fail with RUN031), and a node with more ranks than GPUs (RUN035).
# Usage: bash tools/device/record_cluster.sh KIND [jobs]   (files under $OUT/cluster-KIND/; "jobs": no faults)
set -u
kind=${1:?kind}
d="$OUT/cluster-$kind"; mkdir -p "$d"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
n=$(nvidia-smi -L | wc -l); half=$((n / 2))
first=$(seq -s, 0 $((half - 1))); second=$(seq -s, $half $((n - 1)))
run="python3 -m torch.distributed.run"
stamp() { date +%s.%N; }
took() { python3 -c "print(f'{$2 - $1:.1f}')"; }

t0=$(stamp)
$run --nnodes 1 --nproc-per-node "$n" --master-port 29500 -m gpudoctor check --deep --format json \
  --output "$d/job-1x$n.json" > "$d/job-1x$n.log" 2>&1
echo "1 node x $n GPUs: rc=$? $(took "$t0" "$(stamp)") s"

two_nodes() {  # NAME PORT NPROC1 MASK1 [ENV...]: node 0 on the first half, node 1 on MASK1
  local name=$1 port=$2 nproc1=$3 mask1=$4; shift 4
  local t0; t0=$(stamp)
  env "$@" CUDA_VISIBLE_DEVICES="$first" $run --nnodes 2 --node-rank 0 --nproc-per-node "$half" --master-addr 127.0.0.1 \
    --master-port "$port" -m gpudoctor check --deep --format json --output "$d/$name.json" > "$d/$name-node0.log" 2>&1 &
  local p0=$!
  env "$@" CUDA_VISIBLE_DEVICES="$mask1" $run --nnodes 2 --node-rank 1 --nproc-per-node "$nproc1" --master-addr 127.0.0.1 \
    --master-port "$port" -m gpudoctor check --deep --format json --output "$d/$name-node1-unused.json" > "$d/$name-node1.log" 2>&1 &
  local p1=$!
  wait $p0; local r0=$?; wait $p1; local r1=$?
  echo "$name: node0 rc=$r0 node1 rc=$r1 $(took "$t0" "$(stamp)") s"
}
two_nodes "job-2x$half" 29510 "$half" "$second"
if [ "${2:-}" != jobs ]; then
two_nodes "fault-no-such-interface" 29520 "$half" "$second" NCCL_SOCKET_IFNAME=nosuchif0
two_nodes "fault-more-ranks-than-gpus" 29530 $((half + 1)) "$second"
fi

for f in "$d"/*.json; do
  echo "== $(basename "$f")"
  python3 -m gpudoctor analyze "$f" 2>/dev/null | grep -E "^\[✗|^\[!|Acceleration|^    [✗!i] RUN0(2|3)"
done
python3 - "$d" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(sys.argv[1] + "/job-*.json")):
    c = json.load(open(path))["facts"]["cluster"]
    a = c["allreduce"]
    print(path.rsplit("/", 1)[1], {k: a.get(k) for k in ("ok", "busbw_gbs", "networks", "transports", "nccl_versions", "error", "skipped")})
    print("  ranks:", [(r["rank"], r["node_rank"], r.get("device"), r.get("median_s"), r.get("nccl_network")) for r in c["ranks"]])
PY
nvidia-smi --query-gpu=index,uuid,memory.used --format=csv > "$d/nvidia-smi-after.csv"
