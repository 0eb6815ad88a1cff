"""Multi-GPU tests, run by ``check --deep`` only: P2P access and copy bandwidth between every pair
of GPUs, then an NCCL all-reduce across all of them, through PyTorch in child processes (worker.py).

Skipped, with the reason, where PyTorch is missing or fewer than two GPUs are visible. While they
measure, the children hold the locks of the GPUs they use (the folder the framework workloads lock
in), so neither times work while the other loads the same GPU; their time limits leave room for
that wait.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.procs.child import ChildResult, child_env, gpu_lock_dir, run_module
from gpudoctor.procs.scope import RunScope
from gpudoctor.probes.frameworks import installed
from gpudoctor.probes.interpreter import Target
from gpudoctor.probes.smoke import COUNT_TIMEOUT_S, count_gpus

#: NVLink multicast (NVLS) off: forced into the environment of every process the multi-GPU tests start,
#: never unset. A program that uses multicast can put a shared host's GPUs out of service.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
WORKER = "gpudoctor.probes.multigpu.worker"
P2P_TIMEOUT_S = 120.0
ALLREDUCE_TIMEOUT_S = 150.0
#: The launcher's own deadline for its ranks, inside the limit its parent kills it at.
ALLREDUCE_BUDGET_S = ALLREDUCE_TIMEOUT_S - 15.0
TIMEOUT_S = COUNT_TIMEOUT_S + P2P_TIMEOUT_S + ALLREDUCE_TIMEOUT_S + 10.0


def probe_multigpu(target: Target, scope: RunScope) -> dict[str, Any]:
    """The tests between GPUs, run by the PyTorch of ``target``, the diagnosed interpreter, on the GPUs the run
    ``scope`` counted for the smoke kernel and the workloads: one count per run, so every probe names the
    same GPUs, and no process of its own starting CUDA on every GPU only to count them again."""
    out: dict[str, Any] = {}
    if not installed("torch", target):
        out["skipped"] = "PyTorch is not installed; the multi-GPU tests run through it"
        return {"multigpu": out}
    env = child_env({**SAFE_ENV, "GPUDOCTOR_LOCK_DIR": gpu_lock_dir()})
    counted = count_gpus(scope)
    count = counted.section("count")
    if not isinstance(count, dict):
        out["devices"] = []
        out["skipped"] = f"CUDA could not count the GPUs here: {count_failure(counted)}"
        return {"multigpu": out}
    out["devices"] = [{k: d.get(k) for k in ("ordinal", "name", "uuid")} for d in count.get("devices") or []]
    if len(out["devices"]) < 2:
        out["skipped"] = f"CUDA enumerates {len(out['devices'])} GPU(s); the multi-GPU tests need two or more"
        return {"multigpu": out}
    child = run_module(WORKER, ["p2p"], timeout_s=P2P_TIMEOUT_S, env=env, python=target.executable)
    p2p = child.section("p2p") or child.failure("the P2P test", P2P_TIMEOUT_S)
    if p2p.get("skipped"):
        out["skipped"] = p2p["skipped"]
        return {"multigpu": out}
    out["p2p"] = p2p
    world = p2p.get("device_count") or len(out["devices"])
    child = run_module(WORKER, ["allreduce", str(world), f"{ALLREDUCE_BUDGET_S:g}"], timeout_s=ALLREDUCE_TIMEOUT_S, env=env, python=target.executable)
    out["allreduce"] = child.section("allreduce") or child.failure("the all-reduce", ALLREDUCE_TIMEOUT_S)
    return {"multigpu": out}


def count_failure(counted: ChildResult) -> str:
    """Why the count gave no GPUs at all: CUDA's own error where the driver answered with one (no driver,
    a stub libcuda, a driver that fails cuInit), else the child's end. Not "fewer than two GPUs": the
    machine may have eight, and the multi-GPU tests were not run for another reason."""
    error = counted.section("error")
    if isinstance(error, dict):
        return f"{error.get('step')} returned {error.get('name')}" + (f" ({error['code']})" if error.get("code") is not None else "")
    return str(counted.failure("the count", COUNT_TIMEOUT_S)["error"])
