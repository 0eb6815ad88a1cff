"""Framework workloads on every GPU CUDA enumerates: correctness, a training step, throughput.

One child per (framework, GPU), all started together; they take a per-GPU lock around GPU work
so timings never overlap (see worker._lock). With no GPU, PyTorch and TensorFlow still run the
training step on the CPU, so the code path is proven even where acceleration cannot be shown.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpudoctor.probes.child import child_env, gpu_lock_dir, run_module
from gpudoctor.probes.frameworks import CHILD_ENV, FRAMEWORKS, installed

WORKER = "gpudoctor.probes.workload.worker"
SMOKE = "gpudoctor.probes.smoke.worker"
CPU_CAPABLE = ("torch", "tensorflow")


def pinned(env: dict[str, str], uuid: Any) -> dict[str, str]:
    """``env`` for a child that works on one GPU: only that GPU visible (by its UUID, which names the same
    GPU whatever CUDA_VISIBLE_DEVICES said), so its framework starts on that GPU alone. On 4 x H200 a
    child that saw all four initialised all four (JAX especially), for 12 children at once."""
    if not isinstance(uuid, str) or not uuid.upper().startswith(("GPU-", "MIG-")):
        return env
    return {**env, "CUDA_VISIBLE_DEVICES": uuid, "GPUDOCTOR_PINNED_GPU": "1"}


def probe_workload(timeout_s: float = 90.0, deep: bool = False) -> dict[str, Any]:
    counted = run_module(SMOKE, ["count"], timeout_s=30.0)
    count = counted.section("count")
    devices = (count or {}).get("devices", [])
    ordinals = [str(d["ordinal"]) for d in devices]
    # MIG instances are left as CUDA numbers them: their UUID needs CUDA's MIG- form, which the count may not give
    mig = any("MIG" in str(d.get("name", "")).split() or str(d.get("uuid", "")).upper().startswith("MIG-")
              for d in devices)
    uuids = {} if mig else {str(d["ordinal"]): d.get("uuid") for d in devices}
    frameworks = [f for f in FRAMEWORKS if installed(f)]
    jobs = [(f, o) for f in frameworks for o in ordinals] or [(f, "cpu") for f in frameworks if f in CPU_CAPABLE]
    threads = str(max(2, (os.cpu_count() or 2) // max(1, len(jobs))))
    # children share the CPU: each gets its slice of the cores for its CPU references and BLAS pools
    env = child_env({**CHILD_ENV, "GPUDOCTOR_LOCK_DIR": gpu_lock_dir(), "GPUDOCTOR_CPU_THREADS": threads,
                     "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})
    args = ["--deep"] if deep else []
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        children = list(pool.map(lambda job: run_module(WORKER, [job[0], job[1], *args], timeout_s=timeout_s,
                                                        env=pinned(env, uuids.get(job[1]))), jobs))
    runs = []
    for (framework, device), child in zip(jobs, children):
        data = child.section("workload")
        if data is None:
            why = "timeout" if child.timed_out else f"crashed ({child.signal_name or child.returncode})"
            data = {"framework": framework, "device": device, "error": f"the workload {why}",
                    "stderr_tail": child.stderr_tail[-1500:]}
        runs.append(data)
    return {"workload": {"devices": ordinals, "gpu": bool(ordinals), "deep": deep, "runs": runs}}
