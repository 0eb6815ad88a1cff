"""Framework workloads on every GPU CUDA enumerates: correctness, a training step, throughput.

One child per framework drives every GPU, a thread per GPU (THREADED), so four GPUs cost
one framework import and one CUDA start-up, not four: on 4 x H200 a child per (framework, GPU)
started 12 framework imports at once and took 1.5x as long as one GPU. TensorFlow keeps one child
per GPU, pinned to it. Children take a per-GPU lock around GPU work so timings never overlap (see
worker._lock). With no GPU, PyTorch and TensorFlow still run the training step on the CPU, so the
code path is proven even where acceleration cannot be shown.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from gpudoctor.probes.child import ChildResult, child_env, gpu_lock_dir, run_module
from gpudoctor.probes.frameworks import CHILD_ENV, FRAMEWORKS, installed
WORKER = "gpudoctor.probes.workload.worker"
SMOKE = "gpudoctor.probes.smoke.worker"
CPU_CAPABLE = ("torch", "tensorflow")
#: Frameworks whose child drives every GPU, a thread per GPU. Not TensorFlow: Keras's seed is process-wide,
#: and its multi-GPU threading could not be proven on a GPU here (no TensorFlow on the GPU machines), so
#: it keeps one child per GPU, pinned to it.
THREADED = ("torch", "jax", "cupy")


class Job(NamedTuple):
    framework: str
    devices: list[str]  # CUDA ordinals, or ["cpu"]
    uuid: Any = None  # the one GPU a one-GPU child is pinned to


def pinned(env: dict[str, str], uuid: Any) -> dict[str, str]:
    """``env`` for a child that works on one GPU: only that GPU visible (by its UUID, which names the same
    GPU whatever CUDA_VISIBLE_DEVICES said), so its framework starts on that GPU alone."""
    if not isinstance(uuid, str) or not uuid.upper().startswith(("GPU-", "MIG-")):
        return env
    return {**env, "CUDA_VISIBLE_DEVICES": uuid, "GPUDOCTOR_PINNED_GPU": "1"}


def plan(frameworks: list[str], ordinals: list[str], uuids: dict[str, Any]) -> list[Job]:
    """The children to start: one per threaded framework for all GPUs, one per GPU for the others, and
    on a machine without a GPU one CPU run per framework that can train on the CPU."""
    if not ordinals:
        return [Job(f, ["cpu"]) for f in frameworks if f in CPU_CAPABLE]
    jobs = []
    for f in frameworks:
        if f in THREADED:
            jobs.append(Job(f, list(ordinals)))
        else:
            jobs.extend(Job(f, [o], uuids.get(o)) for o in ordinals)
    return jobs


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
    jobs = plan(frameworks, ordinals, uuids)
    threads = str(max(2, (os.cpu_count() or 2) // max(1, len(jobs))))
    # children share the CPU: each gets its slice of the cores for its CPU references and BLAS pools
    env = child_env({**CHILD_ENV, "GPUDOCTOR_LOCK_DIR": gpu_lock_dir(), "GPUDOCTOR_CPU_THREADS": threads,
                     "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})
    args = ["--deep"] if deep else []
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        children = list(pool.map(lambda job: run_module(WORKER, [job.framework, ",".join(job.devices), *args],
                                                        timeout_s=timeout_s, env=pinned(env, job.uuid)), jobs))
    runs = [run for job, child in zip(jobs, children) for run in _runs(job, child, timeout_s)]
    return {"workload": {"devices": ordinals, "gpu": bool(ordinals), "deep": deep, "runs": runs,
                         "count_s": round(counted.duration_s, 3)}}


def _runs(job: Job, child: ChildResult, timeout_s: float) -> list[dict[str, Any]]:
    """Each of the job's devices' results, in the job's order; a device the child printed nothing for
    (it hung or crashed before that GPU was done) gets the child's failure."""
    printed = {str(d.get("device")): d for d in child.sections("workload") if isinstance(d, dict)}
    what = "the workload" if len(job.devices) == 1 else f"the {job.framework} workload (one process for GPUs {', '.join(job.devices)})"
    runs = []
    for device in job.devices:
        if device in printed:
            runs.append(printed[device])
            continue
        failure = child.failure(what, timeout_s)
        runs.append({"framework": job.framework, "device": device, "error": failure["error"],
                     "stderr_tail": failure["stderr_tail"]})
    return runs
