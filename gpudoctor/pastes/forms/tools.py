"""Tool outputs and package lists pasted into tickets: ``nvcc --version``, ``/proc/driver/nvidia/version``,
``lspci | grep -i nvidia``, ``ldconfig -p | grep cu``, and ``pip list``, ``pip freeze`` or ``conda list``
lines for the GPU frameworks and NVIDIA's wheels.

A package line is read only in the shapes those tools print (``torch==2.1.0+cu118``, ``torch  2.1.0``,
``pytorch  2.0.1  py3.10_cuda11.8_cudnn8.7.0_0  pytorch``) and only for the packages named here, so
a requirements file in prose adds nothing else.
"""

from __future__ import annotations

import re
from typing import Any, Optional

PACKAGES = ("torch", "pytorch", "tensorflow", "tensorflow-gpu", "tensorflow-cpu", "jax", "jaxlib", "cupy",
            "pytorch-cuda", "cudatoolkit", "nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu11",
            "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13", "vllm")
_NVCC = re.compile(r"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+\.\d+)", re.I)
_PROC = re.compile(r"NVRM version: NVIDIA UNIX(?: Open)? [\w-]{1,20} Kernel Module(?: for [\w-]{1,20})?\s+(\d{3}\.\d{1,3}(?:\.\d{1,3})?)", re.I)
_LSPCI = re.compile(r"^([0-9a-f]{2,4}:[0-9a-f]{2}\.\d|[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)\s+(?:VGA compatible controller|3D controller|Display controller): NVIDIA Corporation (.{1,120}?)\s*(?:\(rev [0-9a-f]{2}\))?\s*$", re.I)
_LDCONFIG = re.compile(r"^\s*(lib(?:cudart|cudnn|cublas|cuda|nvrtc|nccl)[\w.]{0,40}\.so[\d.]{0,20})\s+\(.{1,40}\)\s+=>\s+(\S{1,300})")
_PIP = re.compile(r"^\s{0,4}([A-Za-z][\w.-]{0,60})\s{0,4}(?:==\s{0,4}|\s{2,40})(\d[\w.+!-]{0,40})(?:\s{1,40}(\S{1,80}))?(?:\s{1,40}(\S{1,40}))?\s*$")


def read(lines: list[str]) -> Optional[dict[str, Any]]:
    """The tool outputs in ``lines``; None when none is there."""
    out: dict[str, Any] = {"notes": [], "packages": [], "lspci": [], "ldconfig": [], "lines": {}}
    done: set[str] = set()
    for number, line in enumerate(lines, 1):
        if line in done:
            continue  # a line seen before adds nothing: each value is its first occurrence
        done.add(line)
        if "compilation tools" in line and "nvcc" not in out:
            m = _NVCC.search(line)
            if m:
                out["nvcc"], out["nvcc_full"], out["lines"]["nvcc"] = m.group(1), m.group(2), number
        elif "NVRM version" in line and "kernel_module" not in out:
            m = _PROC.search(line)
            if m:
                out["kernel_module"], out["lines"]["kernel_module"] = m.group(1), number
                out["open_kernel_module"] = " Open " in line
        elif "NVIDIA Corporation" in line:
            m = _LSPCI.match(line.strip())
            if m:
                out["lspci"].append({"bus_id": m.group(1), "name": m.group(2), "line": number})
        elif "microsoft-standard" in line or "/usr/lib/wsl/" in line:
            if "wsl" not in out:  # a WSL 2 kernel (uname -r, collect_env) or the Windows driver's folder
                out["wsl"], out["lines"]["wsl"] = True, number
        elif ".so" in line and "=>" in line:
            m = _LDCONFIG.match(line)
            if m:
                out["ldconfig"].append({"library": m.group(1), "path": m.group(2), "line": number})
        else:
            _package(out, line, number)
    if not (out.get("nvcc") or out.get("kernel_module") or out["packages"] or out["lspci"] or out["ldconfig"] or out.get("wsl")):
        return None
    return out


def _package(out: dict[str, Any], line: str, number: int) -> None:
    if len(line) > 200:
        return
    first = line.split("=", 1)[0].split(None, 1)
    name = first[0].lower().replace("_", "-") if first else ""
    if not (name in PACKAGES or name.startswith("cupy-cuda")) or any(p["name"] == name for p in out["packages"]):
        return  # only the named packages, the first line of each
    m = _PIP.match(line)
    if not m:
        return
    name = m.group(1).lower().replace("_", "-")
    if name not in PACKAGES and not name.startswith("cupy-cuda"):
        return
    if any(p["name"] == name for p in out["packages"]):
        return
    entry: dict[str, Any] = {"name": name, "version": m.group(2), "line": number}
    build = m.group(3)
    if build and "==" not in line:
        cuda = re.search(r"cuda(\d+\.\d+)", build)  # conda: py3.10_cuda11.8_cudnn8.7.0_0
        if cuda:
            entry["cuda"] = cuda.group(1)
        if "cpu" in build.split("_"):
            entry["cpu"] = True
    out["packages"].append(entry)
