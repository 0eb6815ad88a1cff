"""What the environment variables that steer frameworks really do, measured on a GPU machine.

For each case, a child process with only that variable changed imports one framework and does
the least GPU work (PyTorch: a 2x2 product on cuda:0; JAX: jax.devices("gpu"), the default
backend and a 2x2 product), and prints what happened: the devices seen, the result, or the
exception and the last lines of stderr. One JSON line per case. Never changes a GPU setting.

    python3 tools/device/env_steering.py [torch|jax ...] > env-steering.jsonl
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

TORCH = r"""
import json, warnings
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch
    out["version"] = torch.__version__
    out["cuda_available"] = torch.cuda.is_available()
    out["device_count"] = torch.cuda.device_count()
    try:
        x = torch.ones(2, 2, device="cuda")
        out["smoke"] = float((x @ x).sum())
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:600]
out["warnings"] = [str(w.message)[:300] for w in caught]
print(json.dumps(out))
"""

JAX = r"""
import json, warnings
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import jax
    out["version"] = jax.__version__
    try:
        out["gpus"] = [d.device_kind for d in jax.devices("gpu")]
    except Exception as exc:
        out["gpus"] = []
        out["devices_error"] = f"{type(exc).__name__}: {exc}"[:600]
    try:
        out["default_backend"] = jax.default_backend()
        import jax.numpy as jnp
        y = jnp.ones((2, 2)) @ jnp.ones((2, 2))
        out["smoke"] = float(y.sum())
        out["smoke_device"] = str(list(y.devices())[0])
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:600]
out["warnings"] = [str(w.message)[:300] for w in caught]
print(json.dumps(out))
"""

CASES = {
    "torch": [
        {},
        {"PYTORCH_CUDA_ALLOC_CONF": "bogus_option:1"},
        {"PYTORCH_ALLOC_CONF": "bogus_option:1"},
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments"},
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:true"},
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        {"PYTORCH_ALLOC_CONF": "expandable_segments:True"},
        {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128,garbage_collection_threshold:0.6"},
        {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb=128"},
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,"},
        {"PYTORCH_CUDA_ALLOC_CONF": " expandable_segments : True , max_split_size_mb : 128 "},
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True garbage_collection_threshold:0.6"},
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True;max_split_size_mb:128"},
        {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
        {"PYTORCH_CUDA_ALLOC_CONF": "backend:bogus"},
        {"PYTORCH_CUDA_ALLOC_CONF": "roundup_bypass_threshold_mb:64"},
        {"PYTORCH_CUDA_ALLOC_CONF": "roundup_power2_divisions:[256:1,512:2,>:4]"},
        {"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:1.5"},
        {"PYTORCH_CUDA_ALLOC_CONF": ""},
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "PYTORCH_ALLOC_CONF": "bogus_option:1"},
        {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
        {"CUDA_LAUNCH_BLOCKING": "1"},
        {"CUDA_MODULE_LOADING": "EAGER"},
        {"CUDA_MODULE_LOADING": "bogus"},
    ],
    "jax": [
        {},
        {"JAX_PLATFORMS": "cpu"},
        {"JAX_PLATFORMS": "cuda,cpu"},
        {"JAX_PLATFORMS": "cpu,cuda"},
        {"JAX_PLATFORMS": "gpu"},
        {"JAX_PLATFORMS": "CUDA"},
        {"JAX_PLATFORMS": ""},
        {"JAX_PLATFORMS": "rocm"},
        {"JAX_PLATFORMS": "tpu"},
        {"JAX_PLATFORM_NAME": "cpu"},
        {"JAX_PLATFORM_NAME": "gpu"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "1"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95"},
        {"XLA_CLIENT_MEM_FRACTION": "1.5"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "1.5"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "1.5", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "-0.5"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "-0.5", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION": "75%"},
        {"XLA_CLIENT_MEM_FRACTION": ".5", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"},
        {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"},
        {"XLA_PYTHON_CLIENT_ALLOCATOR": "bogus"},
        {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        {"XLA_FLAGS": "--xla_gpu_bogus_flag=true"},
        {"XLA_FLAGS": "--xla_gpu_autotune_level=0"},
        {"CUDA_LAUNCH_BLOCKING": "1"},
    ],
}
CHILDREN = {"torch": TORCH, "jax": JAX}
#: Variables cleared in every child, so that each case changes one thing.
CLEARED = sorted({k for cases in CASES.values() for case in cases for k in case}
                 | {"XLA_CLIENT_MEM_FRACTION", "PYTORCH_HIP_ALLOC_CONF"})


def run(framework: str, case: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(case)
    try:
        res = subprocess.run([sys.executable, "-c", CHILDREN[framework]], env=env, capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        return {"framework": framework, "env": case, "timed_out": True}
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    out = {"framework": framework, "env": case, "returncode": res.returncode}
    out["result"] = json.loads(lines[-1]) if lines else None
    if res.returncode or not lines:
        out["stderr_head"] = res.stderr[:1500]
        out["stderr_tail"] = res.stderr[-1500:]
    elif res.stderr.strip():
        out["stderr_tail"] = res.stderr[-400:]
    return out


def main(argv: list[str]) -> int:
    names = argv or list(CASES)
    jobs = [(name, case) for name in names for case in CASES[name]]
    for job in jobs:
        print(json.dumps(run(*job)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
