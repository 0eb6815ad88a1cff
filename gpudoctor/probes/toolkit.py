"""The CUDA toolkit: nvcc on PATH, CUDA_HOME / CUDA_PATH, and every toolkit install found.

A toolkit is what builds CUDA code (nvcc, headers, static libraries). It is not what runs a
framework wheel: wheels bring their own runtime. Its version is read from the install itself
(version.json, version.txt, or CUDA_VERSION in include/cuda.h) so a wrapper script or a
toolkit assembled from pip packages is still dated correctly.

``nvcc --version`` runs through processes.run_bounded: an nvcc that hangs, floods its output or
leaves a background process holding its stdout costs at most NVCC_TIMEOUT_S and NVCC_MAX_BYTES, is
killed at the run's deadline, and leaves nothing behind.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Optional

from gpudoctor import versions
from gpudoctor.procs.processes import NotStarted, run_bounded
from gpudoctor.snapshot import unavailable

SEARCH = ("/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda", "/opt/nvidia/cuda*", "/usr/lib/cuda")
NVCC_TIMEOUT_S = 5.0  # `nvcc --version` answers in well under a second; a hung one must not hold a health gate
#: A real ``nvcc --version`` prints about 250 bytes; past this the rest is not read.
NVCC_MAX_BYTES = 64 << 10


def probe_toolkit() -> dict[str, Any]:
    roots = _candidate_roots()
    installs = [_install(root) for root in roots]
    return {
        "nvcc": _nvcc(),
        "env": {var: _env_root(var) for var in ("CUDA_HOME", "CUDA_PATH")},
        "installs": installs,
    }


def _candidate_roots() -> list[str]:
    found: dict[str, None] = {}
    for pattern in SEARCH:
        for path in sorted(glob.glob(pattern)):
            if os.path.isdir(path) and os.path.exists(os.path.join(path, "include", "cuda.h")):
                found.setdefault(path, None)
    for var in ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX"):
        value = os.environ.get(var)
        if value and os.path.exists(os.path.join(value, "include", "cuda.h")):
            found.setdefault(value, None)
    return list(found)


def _install(root: str) -> dict[str, Any]:
    version, source = toolkit_version(root)
    return {
        "path": root,
        "real_path": os.path.realpath(root),
        "version": version,
        "version_source": source,
        "has_nvcc": os.access(os.path.join(root, "bin", "nvcc"), os.X_OK),
    }


def toolkit_version(root: str) -> tuple[Any, Optional[str]]:
    path = Path(root)
    try:
        data = json.loads((path / "version.json").read_text())
        return str(data["cuda"]["version"]), "version.json"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        match = re.search(r"CUDA Version (\d+\.\d+(?:\.\d+)?)", (path / "version.txt").read_text())
        if match:
            return match.group(1), "version.txt"
    except OSError:
        pass
    try:
        match = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", (path / "include" / "cuda.h").read_text(errors="replace"))
        if match:
            decoded = versions.cuda(int(match.group(1)))
            if decoded:
                return decoded, "include/cuda.h"
    except OSError:
        pass
    return unavailable("not_found"), None


def _nvcc() -> dict[str, Any]:
    path = shutil.which("nvcc")
    if not path:
        return {"found": False}
    out: dict[str, Any] = {"found": True, "path": path, "real_path": os.path.realpath(path)}
    try:
        res = run_bounded([path, "--version"], NVCC_TIMEOUT_S, NVCC_MAX_BYTES)
    except OSError as exc:
        out["version"] = unavailable("timeout" if isinstance(exc, NotStarted) else "unknown")
    else:
        match = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", res.stdout)
        if match:
            out["version"], out["release"] = match.group(2), match.group(1)
        else:
            why = "timeout" if res.timed_out else "unknown"
            out["version"], out["release"] = unavailable(why), unavailable(why)
    out["toolkit_root"] = _nvcc_root(out["real_path"])
    return out


def _nvcc_root(real_path: str) -> Optional[str]:
    """The toolkit an nvcc belongs to: its bin/ parent, or the target of a one-line wrapper script."""
    root = os.path.dirname(os.path.dirname(real_path))
    if os.path.exists(os.path.join(root, "include", "cuda.h")):
        return root
    try:
        with open(real_path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    match = re.search(rb"exec\s+(\S+/bin/nvcc)\b", head) if head.startswith(b"#!") else None
    if match:
        target = os.path.dirname(os.path.dirname(match.group(1).decode(errors="replace")))
        return target if os.path.exists(os.path.join(target, "include", "cuda.h")) else None
    return None


def _env_root(var: str) -> Any:
    value = os.environ.get(var)
    if value is None:
        return None
    version, _ = toolkit_version(value) if os.path.isdir(value) else (unavailable("not_found"), None)
    return {"path": value, "exists": os.path.isdir(value), "real_path": os.path.realpath(value), "version": version}
