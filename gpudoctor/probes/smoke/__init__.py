"""The framework-free smoke kernel on every GPU CUDA enumerates: from PyTorch's workload child where the
workloads run too (it starts CUDA on every GPU anyway), else one child process per GPU, all at once."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from gpudoctor.procs.child import ChildResult, child_env, pinned, run_module
from gpudoctor.procs.scope import RunScope
from gpudoctor.trace import mark

WORKER = "gpudoctor.probes.smoke.worker"
#: Where ``smoke.count`` came from: a CUDA child's count, or NVML's facts and the mask (listing.py).
CUDA_SOURCE = "cuda"
NVML_SOURCE = "nvml+visibility"


COUNT_TIMEOUT_S = 30.0
#: How long the list waits for this run's NVML facts (0.3 s on 4 GPUs, started before the checks are
#: imported); past it, CUDA's count costs no more than waiting longer would. With a smoke child's limit and
#: CUDA's count after it, the probe stays within its own limit (runner: twice the smoke limit and 5 s).
NVML_WAIT_S = 3.0


def count_gpus(scope: RunScope) -> ChildResult:
    """The GPUs CUDA enumerates (ordinal, name, UUID), as a ``count`` section, once in the run ``scope`` for
    this probe and the workloads: told from the run's NVML facts without starting CUDA where that is sure
    (listing.py), else counted by CUDA in a child of its own."""
    return scope.once("gpu count", lambda: _count(scope))


def _count(scope: RunScope) -> ChildResult:
    # here, not above: every smoke and workload child imports this package, and needs neither
    from gpudoctor.probes.nvml import published_facts
    from gpudoctor.probes.smoke.listing import cuda_list

    begun = time.monotonic()
    facts = published_facts(scope, NVML_WAIT_S)
    listed, why = cuda_list(facts, os.environ) if facts is not None else (None, "no NVML facts in this run")
    if listed is not None:
        mark(f"gpu count: {len(listed['devices'])} from NVML")
        return ChildResult(lines=[{"section": "count", "data": listed}], returncode=0,
                           duration_s=time.monotonic() - begun)
    mark(f"gpu count: CUDA counts ({why})")
    return cuda_count(scope)


def cuda_count(scope: RunScope) -> ChildResult:
    """CUDA's own count, from a child that starts CUDA with every GPU visible, once in the run ``scope``."""
    return scope.once("cuda count", _cuda_count)


def _cuda_count() -> ChildResult:
    counted = run_module(WORKER, ["count"], timeout_s=COUNT_TIMEOUT_S)
    count = counted.section("count")
    if not isinstance(count, dict):
        return counted
    lines = [{**line, "data": {**count, "source": CUDA_SOURCE}} if line.get("section") == "count" else line
             for line in counted.lines]
    return ChildResult(lines=lines, timed_out=counted.timed_out, returncode=counted.returncode,
                       stderr_tail=counted.stderr_tail, duration_s=counted.duration_s, start_error=counted.start_error)


def pin_uuids(devices: list[dict[str, Any]]) -> dict[str, Any]:
    """Ordinal -> the UUID a one-GPU child is pinned by (child.pinned). None for MIG instances: their UUID
    needs CUDA's MIG- form, which the count may not give; their children see what CUDA numbers."""
    if any("MIG" in str(d.get("name", "")).split() or str(d.get("uuid", "")).upper().startswith("MIG-") for d in devices):
        return {}
    return {str(d["ordinal"]): d.get("uuid") for d in devices}


#: A host of the kernel (workload.hosted_smoke): the CUDA ordinals to run on and how long to wait, to the
#: runs it printed, by ordinal.
Host = Callable[[list[str], float], dict[str, dict[str, Any]]]


def probe_smoke(scope: RunScope, timeout_s: float = 30.0, host: Optional[Host] = None) -> dict[str, Any]:
    """The kernel on every GPU the run ``scope`` counted: from ``host``'s process where it runs on them all
    the same, else (and for any GPU whose hosted run did not pass) from a child of its own per GPU, so a
    failure is always told by a process that runs nothing else."""
    begun = time.monotonic()
    counted = count_gpus(scope)
    count = counted.section("count")
    if count is None:
        return {"smoke": {"count": _failure(counted, COUNT_TIMEOUT_S), "runs": []}}
    devices = count["devices"]
    hosted = _passed(host([str(d["ordinal"]) for d in devices], max(0.0, timeout_s - (time.monotonic() - begun)))
                     if host and devices else {})
    own = [d for d in devices if str(d["ordinal"]) not in hosted]
    children = dict(zip((str(d["ordinal"]) for d in own), _run_all(own, timeout_s)))
    runs = [_merged(d, hosted[str(d["ordinal"])]) if str(d["ordinal"]) in hosted
            else _record(d, children[str(d["ordinal"])], timeout_s) for d in devices]
    if count.get("source") == NVML_SOURCE and any("error" in run for run in runs):
        return _as_cuda_counts(scope, {str(d["uuid"]): children[str(d["ordinal"])] for d in own}, timeout_s)
    return {"smoke": {"count": count, "runs": runs}}


def _passed(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The hosted runs that passed: any other is run again in a child of its own, which says exactly what
    the driver and the GPU do without a framework's process around them."""
    return {o: r for o, r in runs.items() if r.get("ok") is True and "error" not in r}


def _as_cuda_counts(scope: RunScope, children: dict[str, ChildResult], timeout_s: float) -> dict[str, Any]:
    """A smoke child failed where the list came from NVML: the report says what CUDA saw with every GPU
    visible, as it would had CUDA counted them (its cuInit may fail, or leave a GPU out). The children
    already run, each pinned to its GPU's UUID as CUDA's count would pin it, stand for that GPU."""
    counted = cuda_count(scope)
    count = counted.section("count")
    if count is None:
        return {"smoke": {"count": _failure(counted, COUNT_TIMEOUT_S), "runs": []}}
    devices = count["devices"]
    missing = [d for d in devices if str(d.get("uuid")) not in children]
    children = {**children, **{str(d.get("uuid")): c for d, c in zip(missing, _run_all(missing, timeout_s))}}
    return {"smoke": {"count": count, "runs": [_record(d, children[str(d.get("uuid"))], timeout_s) for d in devices]}}


def _run_all(devices: list[dict[str, Any]], timeout_s: float) -> list[ChildResult]:
    """A smoke child per GPU, all at once: each starts CUDA on its GPU alone."""
    pins = pin_uuids(devices)
    with ThreadPoolExecutor(max_workers=max(1, len(devices))) as pool:
        return list(pool.map(lambda d: run_module(WORKER, ["run", str(d["ordinal"])], timeout_s=timeout_s,
                                                  env=pinned(child_env(), pins.get(str(d["ordinal"])))),
                             devices))


def _record(device: dict[str, Any], child: ChildResult, timeout_s: float) -> dict[str, Any]:
    result = child.section("run")
    if result is None:
        return {**device, "ok": False, "error": _failure(child, timeout_s)}
    return _merged(device, result)


def _merged(device: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """A GPU of the count with its kernel's result, under the count's ordinal (a pinned child calls it 0)."""
    return {**device, **result, "ordinal": device["ordinal"]}


def _failure(child: ChildResult, timeout_s: float) -> dict[str, Any]:
    error = child.section("error")
    if error is not None:
        return error
    if child.timed_out:
        return {"step": "running", "code": None, "name": "timeout", "message": f"no answer within {timeout_s:g} s"}
    return {"step": "running", "code": None, "name": "crashed",
            "message": f"the worker died ({child.signal_name or child.returncode}): {child.stderr_tail[-500:]}"}
