"""The Python environment diagnosed (interpreter.py): interpreter, virtualenv or conda, the installed
distributions that decide what a framework loads (nvidia-*, torch*, tensorflow*, jax*, cupy*, and
the NVML bindings), and the other environments in view. Read from package metadata on the diagnosed
interpreter's own search path, never by importing the packages."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from gpudoctor.frameworks_table import KEYS
from gpudoctor.probes import interpreter
from gpudoctor.probes.interpreter import Target

#: The distributions python.distributions lists: the frameworks' (each framework's key begins their names)
#: and the NVIDIA, CUDA and deep-learning packages around them.
RELEVANT_PREFIXES = ("nvidia-", *KEYS, "tf-", "tf_", "keras", "triton", "cuda-")
RELEVANT_NAMES = {"pynvml", "nvidia-ml-py", "nvidia-ml-py3", "numba", "onnxruntime-gpu", "onnxruntime"}


def probe_python(target: Target) -> dict[str, Any]:
    """``target``, the interpreter the run diagnoses, with its packages and the other environments in view."""
    facts = interpreter.target_facts(target)
    diagnosed = {"executable": target.executable, "own": target.own, "reason": target.reason,
                 "gpudoctor_executable": sys.executable}
    base: dict[str, Any] = {"diagnosed": diagnosed, "environments": interpreter.environments(),
                            "pynvml_module": _origin("pynvml")}
    if "unavailable" in facts:
        return {**base, "unavailable": facts["unavailable"], "error": facts.get("error"), "executable": target.executable}
    return {
        "version": facts.get("version"),
        "implementation": facts.get("implementation"),
        "executable": facts.get("executable") or target.executable,
        "prefix": facts.get("prefix"),
        "virtualenv": bool(facts.get("virtualenv")),
        "conda_prefix": os.environ.get("CONDA_PREFIX"),
        "distributions": _distributions(list(facts.get("path") or [])),
        **base,
    }


def _distributions(path: list[str]) -> list[dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    from importlib import metadata  # here, not at the top: the runner imports this module on every start

    from gpudoctor.probes.frameworks.metadata import dist_version, header

    for dist in metadata.distributions(path=path):
        name = (header(dist, "Name") or "").lower().replace("_", "-")
        if name in RELEVANT_NAMES or name.startswith(RELEVANT_PREFIXES):
            version = dist_version(dist)
            found.setdefault(f"{name}@{version}", {"name": name, "version": version, "location": str(dist.locate_file(""))})
    return sorted(found.values(), key=lambda d: (d["name"], d["version"]))


def _origin(module: str) -> Any:
    """Where gpudoctor's own process finds ``module`` (the NVML bindings it reads the driver with)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec else None
