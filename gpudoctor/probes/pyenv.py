"""The Python environment gpudoctor runs in: interpreter, virtualenv or conda, and the installed
distributions that decide what a framework loads (nvidia-*, torch*, tensorflow*, jax*, cupy*,
and the NVML bindings). Read from package metadata, never by importing the packages."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from importlib import metadata
from typing import Any

RELEVANT_PREFIXES = ("nvidia-", "torch", "tensorflow", "tf-", "tf_", "jax", "cupy", "keras", "triton")
RELEVANT_NAMES = {"pynvml", "nvidia-ml-py", "nvidia-ml-py3", "numba", "onnxruntime-gpu", "onnxruntime"}


def probe_python() -> dict[str, Any]:
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "virtualenv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "conda_prefix": os.environ.get("CONDA_PREFIX"),
        "distributions": _distributions(),
        "pynvml_module": _origin("pynvml"),
    }


def _distributions() -> list[dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in RELEVANT_NAMES or name.startswith(RELEVANT_PREFIXES):
            key = f"{name}@{dist.version}"
            found.setdefault(key, {"name": name, "version": dist.version, "location": str(dist.locate_file(""))})
    return sorted(found.values(), key=lambda d: (d["name"], d["version"]))


def _origin(module: str) -> Any:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec else None
