"""Framework probes: each installed framework is imported in its own child process, all at once,
each with its own time limit, so the whole probe takes as long as the slowest import and a
framework that hangs, segfaults or floods stderr costs only its own facts."""

from __future__ import annotations

import re
import threading
from typing import Any, Callable, Optional

from gpudoctor import frameworks_table
from gpudoctor.frameworks_table import KEYS
from gpudoctor.probes import interpreter
from gpudoctor.probes.interpreter import Target
from gpudoctor.procs.child import ChildResult, child_env, run_module

WORKER = "gpudoctor.probes.frameworks.worker"
#: The frameworks probed, in the order the reports list them.
FRAMEWORKS = KEYS
#: Keep frameworks from grabbing the GPU's memory for a two-by-two product.
CHILD_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}


def installed(name: str, target: Target) -> bool:
    """The ``import`` of framework ``name`` (its key) would find it in ``target``, the diagnosed interpreter
    (interpreter.py)."""
    return interpreter.installed(frameworks_table.module(name), interpreter.target_path(target))


#: Where a framework's facts come from instead of this probe's own child: (framework, seconds to wait,
#: the diagnosed interpreter) -> the child that printed them, or None to start this probe's own (see
#: workload.framework_facts).
FactsFrom = Callable[[str, float, Target], Optional[ChildResult]]


def probe_frameworks(target: Target, timeout_s: float = 90.0, facts_from: Optional[FactsFrom] = None) -> dict[str, Any]:
    """Each framework ``target`` (the diagnosed interpreter) holds, imported in a child under it."""
    results: dict[str, Any] = {}
    threads = []
    for name in FRAMEWORKS:
        if not installed(name, target):
            results[name] = {"installed": False}
            continue
        thread = threading.Thread(target=_run, args=(name, target, timeout_s, results, facts_from), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return {"frameworks": {name: results[name] for name in FRAMEWORKS}}


def _run(name: str, target: Target, timeout_s: float, results: dict[str, Any],
         facts_from: Optional[FactsFrom] = None) -> None:
    child = facts_from(name, timeout_s, target) if facts_from else None
    if child is None:
        child = run_module(WORKER, [name], timeout_s=timeout_s, env=child_env(CHILD_ENV), python=target.executable)
    results[name] = summarise(child, timeout_s)


#: Where a framework child was when it failed (asking.STAGES), as a sentence ends.
STAGE_WORDS = {"import": "while importing it", "cuda_init": "while starting CUDA", "devices": "while listing its GPUs",
               "first_kernel": "at its first computation on a GPU", "libraries": "while listing the libraries it loaded"}


def summarise(child: ChildResult, timeout_s: float) -> dict[str, Any]:
    """The framework's record: its facts, or how its child failed and at which step (``stage``), with
    the last error line it printed itself (``last_error``), never a cause it did not show."""
    data = child.section("framework")
    stages = child.sections("stage")
    reached = stages[-1] if stages and isinstance(stages[-1], str) else None
    out: dict[str, Any] = {"installed": True, "duration_s": round(child.duration_s, 3)}
    if child.timed_out:
        out.update(status="timeout", error=f"no answer within {timeout_s:g} s", stage=reached)
    elif data is None:
        how = f"killed by {child.signal_name}" if child.signal_name else f"exit status {child.returncode}"
        where = STAGE_WORDS.get(reached or "", "before it said anything")
        out.update(status="crashed", stage=reached, signal=child.signal_name or None,
                   error=child.start_error or f"its process ended ({how}) {where}")
        if not child.sections("started"):
            out["started"] = False  # it ended before its first line: gpudoctor's start there failed, not the framework
    elif data.get("import_error"):
        out.update(status="import_error", error=data["import_error"], stage=data.get("stage") or reached or "import")
    else:
        out["status"] = "ok"
    if data is not None:
        out["info"] = data
    if out["status"] != "ok" or child.stderr_tail.strip():
        out["stderr_tail"] = child.stderr_tail[-2000:]
    last = last_error_line(child.stderr_tail) or last_error_line(str((data or {}).get("traceback_tail") or ""))
    if out["status"] != "ok" and last:
        out["last_error"] = last
    return out


_ERROR_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure)\b.*"
                         r"|what\(\):\s+.+|[EF]\d{4} [\d:.]+\s+\d+ \S+\] .+|CUDA error: .+)$")


def last_error_line(text: str) -> str:
    """The last line of ``text`` that states an error as the framework printed it: a Python exception
    line, a C++ exception's ``what():``, an absl ``E``/``F`` log line. Not faulthandler's "Fatal Python
    error: Segmentation fault": the signal is reported as such, and the line before it says more."""
    for line in reversed(text.splitlines()):
        if _ERROR_LINE.match(line):
            return line.strip()[:500]
    return ""


def probe_frameworks_metadata(path: Optional[list[str]] = None) -> dict[str, Any]:
    """`check --quick`: what each installed framework is, read from its package (metadata.py), importing
    nothing. ``path`` is the diagnosed interpreter's sys.path (None: this process's). It cannot say what
    the framework sees or loads (status "metadata"). ``info`` holds what the package says:
    ``cuda_build`` and ``cpu_only_build`` true, false or null (null: the package does not say, and no
    verdict rests on it), ``cuda_major``, ``built_cuda`` (only where it says the major.minor exactly),
    and the ``evidence`` each rests on."""
    from gpudoctor.probes.frameworks.metadata import read_builds

    builds = read_builds(path)
    out: dict[str, Any] = {}
    for name in FRAMEWORKS:
        build = dict(builds.get(name) or {})
        if not build.pop("installed", False):
            out[name] = {"installed": False}
            continue
        out[name] = {"installed": True, "status": "metadata", "info": build}
    return {"frameworks": out}
