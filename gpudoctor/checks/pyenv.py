"""The Python environment: whether the diagnosed interpreter could be read at all, and installed
distributions that fight over the same module or libraries."""

from __future__ import annotations

from typing import Any, Iterator

from packaging.version import InvalidVersion, Version

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding
from gpudoctor.findings import Finding
from gpudoctor.snapshot import get


def _dists(facts: Facts) -> dict[str, list[dict[str, Any]]]:
    found = get(facts, "python.distributions")
    if not isinstance(found, list):
        raise NotApplicable("the Python environment was not probed")
    by_name: dict[str, list[dict[str, Any]]] = {}
    for d in found:
        by_name.setdefault(d["name"], []).append(d)
    return by_name


def check_conflicts(facts: Facts) -> Iterator[Finding]:
    dists = _dists(facts)
    py = str(get(facts, "python.executable") or "python3")
    if "tensorflow" in dists and "tensorflow-cpu" in dists:
        yield _conflict("tensorflow and tensorflow-cpu are both installed; they overwrite each other's files",
                        [f"{py} -m pip uninstall -y tensorflow tensorflow-cpu", f"{py} -m pip install 'tensorflow[and-cuda]'"])
    if "tensorflow-gpu" in dists:
        yield _conflict("tensorflow-gpu is installed: it is an empty, deprecated package since TensorFlow 2.12",
                        [f"{py} -m pip uninstall -y tensorflow-gpu", f"{py} -m pip install 'tensorflow[and-cuda]'"])
    cupys = sorted(n for n in dists if n.startswith("cupy-cuda") or n == "cupy")
    if len(cupys) > 1:
        yield _conflict(f"several CuPy packages are installed ({', '.join(cupys)}); they share the cupy module",
                        [f"{py} -m pip uninstall -y {' '.join(cupys)}", f"{py} -m pip install {cupys[-1]}"])
    for legacy in ("pynvml", "nvidia-ml-py3"):
        for d in dists.get(legacy, []):
            if legacy == "nvidia-ml-py3" or _older_than(d["version"], "12"):
                yield _conflict(f"{legacy} {d['version']} ships its own pynvml module, which can shadow nvidia-ml-py's",
                                [f"{py} -m pip uninstall -y {legacy}", f"{py} -m pip install --force-reinstall nvidia-ml-py"])
    for name, copies in sorted(dists.items()):
        if len(copies) > 1:
            places = "; ".join(f"{d['version']} in {d['location']}" for d in copies)
            yield _conflict(f"{name} is installed more than once ({places}); which one imports depends on sys.path",
                            [f"{py} -m pip list -v 2>/dev/null | grep -i '^{name} '"])


def _conflict(title: str, commands: list[str]) -> Finding:
    return finding("PY001", title, text="Keep one of them.", commands=commands)


def _older_than(version: str, floor: str) -> bool:
    try:
        return Version(version) < Version(floor)
    except InvalidVersion:
        return False


def check_readable(facts: Facts) -> Iterator[Finding]:
    """PY002: the diagnosed interpreter did not say what it is and where its packages are (too old for
    gpudoctor's reader, or not a working Python), so no framework of it was looked for: the report's
    "not installed" for its frameworks means "not known", which a clean report would hide."""
    python = facts.get("python")
    if not isinstance(python, dict):
        raise NotApplicable("the Python environment was not probed")
    if "unavailable" not in python:
        return
    exe = str(python.get("executable") or get(facts, "python.diagnosed.executable") or "python3")
    why = str(python.get("error") or python.get("unavailable"))
    yield finding("PY002", f"gpudoctor could not read the Python it diagnoses, {exe}: {why}",
                  text="Its packages were not looked at, so its frameworks are unknown, not absent. gpudoctor reads "
                       "interpreters of Python 3.9 and newer; run the command below to see what this one is.",
                  commands=[f"{exe} -c 'import sys; print(sys.version); print(sys.path)'"])


CHECKS = (
    Check("python.readable", "python", "the diagnosed Python could be read", ("PY002",), check_readable, ("python",)),
    Check("python.conflicts", "python", "no conflicting packages", ("PY001",), check_conflicts, ("python",)),
)
