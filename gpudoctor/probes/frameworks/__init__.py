"""Framework probes: each installed framework is imported in its own child process, all at once,
each with its own time limit, so the whole probe takes as long as the slowest import and a
framework that hangs, segfaults or floods stderr costs only its own facts."""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

from gpudoctor.probes.child import ChildResult, child_env, run_module

WORKER = "gpudoctor.probes.frameworks.worker"
FRAMEWORKS = ("torch", "tensorflow", "jax", "cupy")
#: Keep frameworks from grabbing the GPU's memory for a two-by-two product.
CHILD_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}


def installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def probe_frameworks(timeout_s: float = 90.0) -> dict[str, Any]:
    results: dict[str, Any] = {}
    threads = []
    for name in FRAMEWORKS:
        if not installed(name):
            results[name] = {"installed": False}
            continue
        thread = threading.Thread(target=_run, args=(name, timeout_s, results), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return {"frameworks": {name: results[name] for name in FRAMEWORKS}}


def _run(name: str, timeout_s: float, results: dict[str, Any]) -> None:
    child = run_module(WORKER, [name], timeout_s=timeout_s, env=child_env(CHILD_ENV))
    results[name] = summarise(child, timeout_s)


def summarise(child: ChildResult, timeout_s: float) -> dict[str, Any]:
    data = child.section("framework")
    out: dict[str, Any] = {"installed": True, "duration_s": round(child.duration_s, 3)}
    if child.timed_out:
        out.update(status="timeout", error=f"no answer within {timeout_s:g} s")
    elif data is None:
        how = child.signal_name or f"exit status {child.returncode}"
        out.update(status="crashed", error=child.start_error or f"the import crashed ({how})")
    elif data.get("import_error"):
        out.update(status="import_error", error=data["import_error"])
    else:
        out["status"] = "ok"
    if data is not None:
        out["info"] = data
    if out["status"] != "ok" or child.stderr_tail.strip():
        out["stderr_tail"] = child.stderr_tail[-2000:]
    return out
