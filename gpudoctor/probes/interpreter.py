"""Which Python is diagnosed: the one whose frameworks, libraries and packages the user means.

gpudoctor is often installed apart from the project it diagnoses (``pipx install gpudoctor``, or one
venv for tools and another for work). Its own interpreter then holds no framework, and diagnosing it
would report "no framework installed" beside a venv full of them. The rule, in order:

1. ``--python PATH`` (an interpreter, or a venv/conda folder holding ``bin/python``);
2. gpudoctor's own interpreter, if it holds a framework;
3. the active environment: ``$VIRTUAL_ENV``, then ``$CONDA_PREFIX``, then ``python3`` on ``PATH``;
4. gpudoctor's own interpreter.

Framework and workload children then run under that interpreter (childpath.py), and its packages
are read from its own search path. Other environments found are reported as facts, never errors.
"""

from __future__ import annotations

import glob
import importlib.machinery
import json
import os
import shutil
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from gpudoctor.frameworks_table import MODULES

#: Why an environment variable's folder is not diagnosed (choose) and how environments() lists it.
NO_PYTHON = "it holds no bin/python (nor bin/python3) gpudoctor can run"
#: How long the diagnosed interpreter gets to say what it is (a cold start on a network file system).
FACTS_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Target:
    """The interpreter a run diagnoses, chosen once by ``choose`` and passed to every probe that reads it."""

    executable: str
    own: bool
    reason: str  # why this interpreter, for the report
    #: What it said of itself (target_facts), read once for the run that chose it: several probes ask at once.
    said: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)


class BadPython(ValueError):
    """``--python`` names no usable interpreter; the message is one line for the user."""


#: Guards each Target's ``said``: the probes that ask run in threads of their own.
_lock = threading.Lock()


def own() -> Target:
    return Target(sys.executable, True, "gpudoctor's own interpreter")


def choose(python: Optional[str] = None, environ: Optional[dict[str, str]] = None) -> Target:
    """The interpreter to diagnose, by the rule in this module's docstring; BadPython for a bad ``--python``."""
    env = os.environ if environ is None else environ
    if python:
        exe = _executable(python)
        if exe is None:
            raise BadPython(f"--python {python}: not a Python interpreter (nor a folder with bin/python)")
        return Target(exe, _same(exe, sys.executable), "--python names it")
    if holds_frameworks(sys.path):
        return Target(sys.executable, True, "gpudoctor's own interpreter, which holds a framework")
    skipped = ""
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        exe = _executable(env.get(var) or "")
        if exe and not _same(exe, sys.executable):
            return Target(exe, False, f"${var} names it, the active environment" + skipped)
        if env.get(var) and exe is None:  # the active environment the user meant: never passed over unsaid
            skipped += f" (${var}={env[var]} was skipped: {NO_PYTHON})"
    found = shutil.which("python3", path=env.get("PATH"))
    if found and not _same(found, sys.executable) and _prefix_holds_frameworks(_prefix_of(found)):
        return Target(os.path.abspath(found), False, "it is python3 on PATH, and holds a framework" + skipped)
    return Target(sys.executable, True, "gpudoctor's own interpreter" + skipped)


def _executable(path: str) -> Optional[str]:
    """``path`` if it is an executable file, else ``path/bin/python`` (a venv or conda folder)."""
    if not path:
        return None
    for candidate in (path, os.path.join(path, "bin", "python"), os.path.join(path, "bin", "python3")):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None


def _same(a: str, b: str) -> bool:
    """Two interpreter paths are the same environment: a venv's python is a symlink to the base one, so
    compare the paths themselves first, then the environment folder each sits in."""
    if os.path.abspath(a) == os.path.abspath(b):
        return True
    return _prefix_of(a) == _prefix_of(b) and os.path.realpath(a) == os.path.realpath(b)


def _prefix_of(exe: str) -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(exe)))


def holds_frameworks(path: list[str]) -> bool:
    return any(installed(name, path) for name in MODULES)


def installed(name: str, path: list[str]) -> bool:
    """``import name`` would find something on ``path`` (the diagnosed interpreter's: target_path)."""
    search = [p for p in path if p]
    try:
        return importlib.machinery.PathFinder.find_spec(name, search) is not None
    except (ImportError, ValueError, OSError):
        return False


def _prefix_holds_frameworks(prefix: str) -> bool:
    """A cheap look, without starting the interpreter: a framework folder in its site-packages."""
    return any(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", name)) for name in MODULES)


def target_path(target: Target) -> list[str]:
    """The search path ``import`` uses in ``target``, as its user would run it."""
    return list(target_facts(target).get("path") or [])


def target_facts(target: Target) -> dict[str, Any]:
    """What ``target`` says of itself (version, prefixes, the search path the user's import would use),
    read once per run (per Target). For gpudoctor's own, read in this process; for another, from a child
    started under it; ``{"unavailable": ...}`` with the error if it would not start."""
    key = (os.environ.get("PYTHONPATH"), os.environ.get("PYTHONNOUSERSITE"), _cwd())
    with _lock:  # what decides the path: a run in the same process (tests) may change it
        if key not in target.said:
            target.said[key] = _own_facts() if target.own else _child_facts(target)
        return target.said[key]


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return "/"


def _own_facts() -> dict[str, Any]:
    from gpudoctor.procs.childpath import user_path

    facts = describe()
    facts["path"] = [p for p in user_path(_cwd()) if p != _cwd()]
    return facts


def describe() -> dict[str, Any]:
    """This interpreter, as the python probe reports it (also printed by a child under another one)."""
    import platform

    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "virtualenv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
    }


#: Printed by the diagnosed interpreter: what it is and the path its user's imports search.
_FACTS_CODE = ("import json,os,sys\nfrom gpudoctor.procs import childpath\nfrom gpudoctor.probes import interpreter\n"
               "f=interpreter.describe(); f['path']=childpath.user_path(os.environ.get('GPUDOCTOR_CWD') or '/')\n"
               "print(json.dumps(f))\n")


def _child_facts(target: Target) -> dict[str, Any]:
    from gpudoctor.procs.child import PACKAGE_ROOT
    from gpudoctor.procs.childpath import BOOT

    boot = BOOT.replace("childpath.start(c,sys.argv[2],sys.argv[3:])\n", _FACTS_CODE)
    cmd = [target.executable, "-I", "-c", boot, json.dumps({"root": PACKAGE_ROOT})]
    env = {**os.environ, "GPUDOCTOR_CWD": _cwd()}
    from gpudoctor.procs.processes import run_bounded

    try:  # bounded like every program gpudoctor runs: its output capped, it and what it starts killed at the end
        ran = run_bounded(cmd, FACTS_TIMEOUT_S, 4 << 20, env=env, cwd="/")
    except OSError as exc:
        return {"unavailable": "unknown", "executable": target.executable, "error": f"{type(exc).__name__}: {exc}"}
    if ran.timed_out:
        return {"unavailable": "timeout", "executable": target.executable, "error": "timeout"}
    lines = ran.stdout.strip().splitlines()
    try:
        facts = json.loads(lines[-1]) if lines else None
    except (ValueError, RecursionError):
        facts = None
    if not isinstance(facts, dict):
        err = ran.stderr.strip().splitlines()
        return {"unavailable": "unknown", "executable": target.executable,
                "error": (err[-1] if err else f"exit status {ran.rc}")[:500]}
    return facts


def environments(environ: Optional[dict[str, str]] = None) -> list[dict[str, Any]]:
    """The Python environments in view (gpudoctor's own, the active venv and conda env, conda's base,
    ``python3`` on PATH) and whether each holds a framework: facts for the report, never a verdict."""
    env = os.environ if environ is None else environ
    seen: dict[str, dict[str, Any]] = {}

    def add(what: str, exe: Optional[str]) -> None:
        if not exe:
            return
        prefix = _prefix_of(exe)
        entry = seen.setdefault(prefix, {"prefix": prefix, "executable": exe, "as": [], "frameworks": []})
        entry["as"].append(what)
        if not entry["frameworks"]:
            entry["frameworks"] = [n for n in MODULES
                                   if glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", n))]

    add("gpudoctor's own", sys.executable)
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        exe = _executable(env.get(var) or "")
        if env.get(var) and exe is None:
            seen.setdefault(env[var], {"prefix": env[var], "executable": None, "as": [f"${var}"], "frameworks": [],
                                       "problem": NO_PYTHON})
        add(f"${var}", exe)
    conda_exe = env.get("CONDA_EXE") or ""
    if conda_exe:
        add("conda base", _executable(os.path.dirname(os.path.dirname(conda_exe))))
    add("python3 on PATH", shutil.which("python3", path=env.get("PATH")))
    return list(seen.values())
