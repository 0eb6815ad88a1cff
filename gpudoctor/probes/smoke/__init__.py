"""The framework-free smoke kernel on every GPU CUDA enumerates, one child process per GPU, all at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpudoctor.probes.child import ChildResult, child_env, pinned, run_module, shared

WORKER = "gpudoctor.probes.smoke.worker"


COUNT_TIMEOUT_S = 30.0


def count_gpus() -> ChildResult:
    """The GPUs CUDA enumerates (ordinal, name, UUID), counted once per run for this probe and the
    workloads (child.shared)."""
    return shared("gpu count", lambda: run_module(WORKER, ["count"], timeout_s=COUNT_TIMEOUT_S))


def pin_uuids(devices: list[dict[str, Any]]) -> dict[str, Any]:
    """Ordinal -> the UUID a one-GPU child is pinned by (child.pinned). None for MIG instances: their UUID
    needs CUDA's MIG- form, which the count may not give; their children see what CUDA numbers."""
    if any("MIG" in str(d.get("name", "")).split() or str(d.get("uuid", "")).upper().startswith("MIG-") for d in devices):
        return {}
    return {str(d["ordinal"]): d.get("uuid") for d in devices}


def probe_smoke(timeout_s: float = 30.0) -> dict[str, Any]:
    counted = count_gpus()
    count = counted.section("count")
    if count is None:
        return {"smoke": {"count": _failure(counted, COUNT_TIMEOUT_S), "runs": []}}
    devices, pins = count["devices"], pin_uuids(count["devices"])
    with ThreadPoolExecutor(max_workers=max(1, len(devices))) as pool:  # each child starts CUDA on its GPU alone
        children = list(pool.map(lambda d: run_module(WORKER, ["run", str(d["ordinal"])], timeout_s=timeout_s,
                                                      env=pinned(child_env(), pins.get(str(d["ordinal"])))),
                                 devices))
    runs = []
    for device, child in zip(count["devices"], children):
        result = child.section("run")
        runs.append({**device, **(result if result is not None else {"ok": False, "error": _failure(child, timeout_s)})})
    return {"smoke": {"count": count, "runs": runs}}


def _failure(child: ChildResult, timeout_s: float) -> dict[str, Any]:
    error = child.section("error")
    if error is not None:
        return error
    if child.timed_out:
        return {"step": "running", "code": None, "name": "timeout", "message": f"no answer within {timeout_s:g} s"}
    return {"step": "running", "code": None, "name": "crashed",
            "message": f"the worker died ({child.signal_name or child.returncode}): {child.stderr_tail[-500:]}"}
