"""What every framework's workload uses: the CPU references, the verdicts, the steps and their locks.

Every result is checked against a float64 CPU reference with a tolerance fit for the precision
(float32 ~1e-5, tf32 and bf16 ~1e-2; NaN never passes), computed once per process for all GPUs
(reference). A step runs holding its GPU's lock as its timing needs (_step; locks._lock says the
rule), and a failing step is recorded as the finding while the others still run. The training step
of every framework is judged by one rule (training_verdict) and timed by the host clock (host_timed).

Runs in the workload child under the diagnosed interpreter: standard library only (numpy is imported
where a reference is computed, once the framework, which brings it, has been).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import threading
import time
import traceback
from concurrent.futures import Future
from typing import Any, Callable, Optional

from gpudoctor.probes.workload import sharing
from gpudoctor.probes.workload.locks import _HOST_TIMED, gpu_lock
from gpudoctor.trace import mark

MEMORY_SHARE = 0.25  # never take more than this share of the GPU's free memory
BUSY_USED_SHARE = 0.5  # a GPU with more than half its memory in use is someone else's: skip the heavy work

_references: dict[str, list[Any]] = {}
_references_lock = threading.Lock()


def cuda_index(device: str) -> int:
    """The index a framework in this child gives the GPU that ``device`` (a CUDA ordinal in gpudoctor's
    environment) names. The parent may start a one-GPU child with only that GPU visible
    (GPUDOCTOR_PINNED_GPU, CUDA_VISIBLE_DEVICES set to its UUID), so that the framework initialises that
    GPU alone: the GPU is then 0 in here. Reports and locks keep the ordinal."""
    return 0 if os.environ.get("GPUDOCTOR_PINNED_GPU") else int(device)


def reference(key: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, once per process: every GPU is checked against the same float64 CPU reference
    (the same seeds), so with one thread per GPU the CPU works it out once, not once per GPU. A
    failed computation is not kept; the next GPU tries again."""
    with _references_lock:
        entry = _references.setdefault(key, [threading.Lock(), None, False])
    with entry[0]:
        if not entry[2]:
            entry[1], entry[2] = compute(), True
        return entry[1]


_uuids: dict[str, Optional[str]] = {}


def _uuid(device: str) -> Optional[str]:
    """The UUID of the GPU ``device`` names, asked of CUDA once the framework has started it."""
    if _uuids.get(device) is None:
        _uuids[device] = sharing.cuda_uuid(cuda_index(device))
    return _uuids[device]


def _step(results: dict[str, Any], name: str, fn: Callable[[], dict[str, Any]], lock: str = "shared") -> None:
    """Run one step into ``results[name]`` holding its GPU's lock ``lock``: "alone" for a step timed with
    device events (throughput), "shared" for untimed work, "own" for a step that takes it itself (the
    training step, timed by the host clock: see host_timed)."""
    start = time.monotonic()
    device = results.get("device", "cpu")
    what = f"{results.get('framework')} {device} {name}"
    timed = lock != "shared" and device != "cpu"
    before: dict[str, Any] = {}
    try:
        mark(f"{what}: asks for the GPU ({lock})")
        with gpu_lock(device, shared=lock == "shared") if lock != "own" else contextlib.nullcontext():
            mark(f"{what}: has it")
            before = sharing.sample(_uuid(device)) if timed else {}
            results[name] = fn()
    except Exception as exc:  # noqa: BLE001 - a failing step is the finding, the others still run
        results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600],
                         "traceback_tail": traceback.format_exc()[-800:]}
    if timed and isinstance(results[name], dict):  # who else was on the GPU: a shared GPU is not a slow one
        results[name]["sharing"] = sharing.judged(before, sharing.sample(_uuid(device)))
    results[name]["duration_s"] = round(time.monotonic() - start, 3)  # waiting for locks included
    mark(f"{what}: done")


def in_background(fn: Callable[[], Any], name: str) -> Future:
    """``fn()`` in a thread of its own named ``name``, started at once; the Future's result() waits for it,
    and raises what ``fn`` raised, for the step that asks to report."""
    done: Future = Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the result
            done.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


def rel_err(got: Any, ref: Any) -> float:
    """||got - ref|| / ||ref|| in float64; NaN anywhere gives inf."""
    import numpy as np

    g, r = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(g)):
        return float("inf")
    return float(np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-300))


def training_verdict(losses: list[float], times: list[float], moved: bool, device: str, **extra: Any) -> dict[str, Any]:
    """One rule for every framework's training step: the loss falls below 0.7 of its start, the weights
    move, nothing is NaN or infinite; the step time is the median of the warm steps (the first five
    include compilation and allocation)."""
    finite = all(math.isfinite(x) for x in losses)
    return {"ok": finite and moved and losses[-1] < 0.7 * losses[0], "loss_first": losses[0], "loss_last": losses[-1],
            "steps": len(losses), "params_updated": moved, "finite": finite, "device": device,
            "warm_step_s": statistics.median(times[5:]), "first_step_s": times[0], "steps_s": sum(times), **extra}


def _check(name: str, err: float, tol: float) -> dict[str, Any]:
    return {"ok": err <= tol, "rel_error": err, "tolerance": tol, "what": name}


def host_timed(step: Callable[[], None], steps: int, device: str) -> None:
    """``steps`` calls of ``step``, each timed by the host clock: the first (compilation, allocation,
    library loading) shares the GPU with other untimed work; the rest hold the GPU's lock alone
    (``device``: an ordinal, or "cpu"), not interleaved with another GPU's timed loop of this process
    (_HOST_TIMED, taken after the GPU's lock: the rule in locks._lock)."""
    with gpu_lock(device, shared=True):
        mark(f"{device} first step: has the GPU (shared)")
        step()
    mark(f"{device} timed steps: ask for the GPU alone")
    with gpu_lock(device), _HOST_TIMED:
        mark(f"{device} timed steps: have it")
        for _ in range(steps - 1):
            step()


# --- NumPy inputs and float64 references, shared by TensorFlow, JAX and CuPy ---------------------------

def _rand(np: Any, seed: int, *shape: int) -> Any:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _np_elementwise(np: Any) -> tuple[Any, Any, Any]:
    x, y = _rand(np, 1, 1 << 20), _rand(np, 2, 1 << 20)
    return x, y, np.sin(2.5 * x.astype(np.float64) + y)


def _np_matmul(np: Any) -> tuple[Any, Any, Any]:
    a, b = _rand(np, 3, 1024, 1024), _rand(np, 4, 1024, 1024)
    return a, b, a.astype(np.float64) @ b
