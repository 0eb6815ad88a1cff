#!/usr/bin/env bash
# Environment variables that steer frameworks, set one case at a time in the environment of the gpudoctor
# process only (no GPU setting changes): each case is a full `check --format json`. Then what the frameworks
# themselves do with each value (tools/device/env_steering.py). Usage: bash tools/device/record_env_faults.sh KIND
# Writes $OUT/env-faults-KIND.tar.gz: CASE.json per case, env-steering.jsonl, cases.txt (the variables and exit
# status of each case), CASE.stderr where the check printed anything.
set -u
kind=${1:?kind}
d=$(mktemp -d)
run() {  # run NAME VAR=VALUE...
  name=$1; shift
  echo "$name: $*" >> "$d/cases.txt"
  env "$@" python3 -m gpudoctor check --format json -o "$d/$name.json" 2> "$d/$name.stderr"
  echo "$name exit=$?" >> "$d/cases.txt"
}
run jax-platforms-cpu JAX_PLATFORMS=cpu
run torch-alloc-unknown-key PYTORCH_CUDA_ALLOC_CONF=bogus_option:1
run torch-alloc-malformed PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb=128
run xla-allocator-unknown XLA_PYTHON_CLIENT_ALLOCATOR=bogus
run xla-flags-unknown XLA_FLAGS=--xla_gpu_bogus_flag=true
run slowing CUDA_LAUNCH_BLOCKING=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUDA_MODULE_LOADING=EAGER
run healthy-values PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True XLA_PYTHON_CLIENT_PREALLOCATE=false \
  XLA_PYTHON_CLIENT_MEM_FRACTION=.5 TF_FORCE_GPU_ALLOW_GROWTH=true NCCL_DEBUG=INFO JAX_PLATFORMS=cuda,cpu \
  CUDA_MODULE_LOADING=LAZY
python3 tools/device/env_steering.py > "$d/env-steering.jsonl" 2> "$d/env-steering.stderr"
find "$d" -name "*.stderr" -size 0 -delete
tar czf "$OUT/env-faults-$kind.tar.gz" -C "$d" .
cat "$d/cases.txt"
for f in "$d"/*.json; do
  echo "== $(basename "$f")"
  python3 -m gpudoctor analyze "$f" | grep -E "^    [✗!i] (FWK|RUN)"
done
