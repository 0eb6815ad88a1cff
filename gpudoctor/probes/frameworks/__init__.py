"""Framework probes: each installed framework is imported in its own child process, all at once,
each with its own time limit, so the whole probe takes as long as the slowest import and a
framework that hangs, segfaults or floods stderr costs only its own facts."""

from __future__ import annotations

import importlib.util
import threading
from typing import Any, Callable, Optional

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


#: Where a framework's facts come from instead of this probe's own child: (framework, seconds to wait)
#: -> the child that printed them, or None to start this probe's own (see workload.framework_facts).
FactsFrom = Callable[[str, float], Optional[ChildResult]]


def probe_frameworks(timeout_s: float = 90.0, facts_from: Optional[FactsFrom] = None) -> dict[str, Any]:
    results: dict[str, Any] = {}
    threads = []
    for name in FRAMEWORKS:
        if not installed(name):
            results[name] = {"installed": False}
            continue
        thread = threading.Thread(target=_run, args=(name, timeout_s, results, facts_from), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return {"frameworks": {name: results[name] for name in FRAMEWORKS}}


def _run(name: str, timeout_s: float, results: dict[str, Any], facts_from: Optional[FactsFrom] = None) -> None:
    child = facts_from(name, timeout_s) if facts_from else None
    if child is None:
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


def probe_frameworks_metadata() -> dict[str, Any]:
    """`check --quick`: what each installed framework is, read from its package metadata, importing
    nothing. It cannot say what the framework sees or loads (status "metadata"); the CPU-only-build
    and driver verdicts still apply."""
    from importlib import metadata

    dists: dict[str, Any] = {}
    for dist in metadata.distributions():
        dists.setdefault((dist.metadata["Name"] or "").lower().replace("_", "-"), dist)
    out: dict[str, Any] = {}
    for name in FRAMEWORKS:
        if not installed(name):
            out[name] = {"installed": False}
            continue
        info = _metadata_info(name, dists)
        info["source"] = "package metadata (check --quick imports no framework)"
        out[name] = {"installed": True, "status": "metadata", "info": info}
    return {"frameworks": out}


def _metadata_info(name: str, dists: dict[str, Any]) -> dict[str, Any]:
    import re

    if name == "torch" and "torch" in dists:
        version = dists["torch"].version
        local = version.partition("+")[2]
        runtime = next((r for r in dists["torch"].requires or [] if r.startswith("nvidia-cuda-runtime")), None)
        cuda = re.match(r"cu(\d+?)(\d)$", local) if local.startswith("cu") else None
        built = f"{cuda.group(1)}.{cuda.group(2)}" if cuda else _runtime_version(runtime)
        return {"version": version, "built_cuda": built, "cpu_only_build": local == "cpu" or (not local and runtime is None)}
    if name == "tensorflow":
        cpu = "tensorflow-cpu" in dists
        dist = dists.get("tensorflow-cpu") or dists.get("tensorflow")
        return {"version": dist.version if dist else None, "built_cuda": None, "cpu_only_build": cpu}
    if name == "jax":
        plugins = sorted(n for n in dists if n.startswith("jax-cuda") and n.endswith("plugin"))
        return {"version": dists["jax"].version if "jax" in dists else None, "plugins": plugins, "cpu_only_build": not plugins}
    cupy = next((d for n, d in dists.items() if n.startswith("cupy-cuda") or n == "cupy"), None)
    return {"version": cupy.version if cupy else None, "cpu_only_build": False}


def _runtime_version(requirement: Any) -> Any:
    """'nvidia-cuda-runtime-cu12==12.4.127; platform_system == "Linux"' -> '12.4'."""
    import re

    match = re.search(r"==\s*(\d+)\.(\d+)", requirement or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None
