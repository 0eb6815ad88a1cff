"""Framework worker: imports ONE framework in this child process and prints what it found as one
JSON line. Run as ``python -m gpudoctor.probes.frameworks.worker KEY``, KEY a framework's key in
gpudoctor/frameworks_table.py (torch).

Its module (children.py) asks the framework the question the framework itself answers (built-for
CUDA/cuDNN, compiled architectures, devices seen, the exact error when it sees none) and does the
least work that makes it load its CUDA libraries (a 2x2 product on one GPU); this worker then reads
/proc/self/maps: the libraries listed there are the ones this framework really runs with, not a guess
from the loader cache.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
import traceback
from typing import Any, Callable

from gpudoctor import frameworks_table
from gpudoctor.procs import protocol
from gpudoctor.procs.ending import end_child
from gpudoctor.probes.frameworks import children
from gpudoctor.probes.frameworks.asking import reached, stage
from gpudoctor.probes.libnames import describe, mapped_libraries
from gpudoctor.trace import mark


def import_failure(exc: BaseException, name: str = "") -> dict[str, Any]:
    """The facts of a framework whose import (or the asking after it) raised ``exc``: called in its handler;
    with ``name`` (its key), also where its ``import`` found the framework (origin)."""
    return {"import_error": f"{type(exc).__name__}: {exc}"[:800], "traceback_tail": traceback.format_exc()[-2000:],
            "stage": reached(), **(origin(frameworks_table.module(name)) if name else {})}


def origin(name: str) -> dict[str, Any]:
    """Where ``import name`` found the framework (``module_file``), and the PYTHONPATH entry that file lies
    under (``pythonpath_entry``): a stray copy there is imported before the installed one, and the
    variable, not the installation, is then what fails. Absolute entries only: a relative one is the
    user's working directory's, which this process does not run in."""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        try:
            spec = importlib.util.find_spec(name)
            path = spec.origin if spec is not None else None
        except (ImportError, ValueError, AttributeError):
            path = None
    out: dict[str, Any] = {"module_file": path if isinstance(path, str) else None}
    if isinstance(path, str):
        real = os.path.realpath(path)
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            if os.path.isabs(entry) and real.startswith(os.path.realpath(entry).rstrip("/") + "/"):
                out["pythonpath_entry"] = entry
                break
    return out


def report(name: str, imported: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Import the framework, ask it, and print the "started" and "framework" lines; returns the facts.
    Also the first thing a workload child does when it is the framework probe's child too
    (workload.FrameworkChild), so a framework is imported once per check. ``imported`` runs between the
    import and the first question, before CUDA starts: a workload child learns there which GPU to pin
    itself to (it must not raise)."""
    start = time.monotonic()
    mark(f"{name} facts: begin")
    protocol.emit("started", name)
    stage("import")
    try:
        importlib.import_module(frameworks_table.module(name))
        imported()
        info = children.probe(name)()
    except BaseException as exc:  # noqa: BLE001 - an import that raises is the finding
        info = import_failure(exc, name)
    if os.environ.get("GPUDOCTOR_PINNED_GPU") and os.environ.get("CUDA_VISIBLE_DEVICES"):
        info["pinned"] = {"uuid": os.environ["CUDA_VISIBLE_DEVICES"]}  # it was given this one GPU, by placement
    info["import_and_probe_s"] = round(time.monotonic() - start, 3)
    stage("libraries")
    info["loaded_libraries"] = _loaded()
    protocol.emit("framework", info, default=str)
    mark(f"{name} facts: printed")
    return info


def main(name: str) -> int:
    report(name)
    return 0


def _loaded() -> list[dict[str, Any]]:
    try:
        with open("/proc/self/maps") as fh:
            paths = mapped_libraries(fh.read())
    except OSError:
        return []
    return [describe(p, read_version=True) for p in paths]


if __name__ == "__main__":
    end_child(main(sys.argv[1]))
