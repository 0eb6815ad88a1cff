"""The framework-free smoke kernel on every GPU CUDA enumerates, one child process per GPU, all at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpudoctor.probes.child import ChildResult, run_module

WORKER = "gpudoctor.probes.smoke.worker"


def probe_smoke(timeout_s: float = 30.0) -> dict[str, Any]:
    counted = run_module(WORKER, ["count"], timeout_s=timeout_s)
    count = counted.section("count")
    if count is None:
        return {"smoke": {"count": _failure(counted, timeout_s), "runs": []}}
    ordinals = [d["ordinal"] for d in count["devices"]]
    with ThreadPoolExecutor(max_workers=max(1, len(ordinals))) as pool:
        children = list(pool.map(lambda o: run_module(WORKER, ["run", str(o)], timeout_s=timeout_s), ordinals))
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
