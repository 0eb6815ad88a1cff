"""`python -m torch.utils.collect_env` output (and vLLM's copy of it), read into plain values.

The script has printed ``Key: value`` since 2017 and vLLM's copy ``Key   : value`` under ``=====``
section rules; older releases wrote ``Is CUDA available: Yes``, users' editors turn the colon into a
full-width one, and some values run over several lines (the GPU list, cuDNN's "Probably one of the
following", the pip and conda lists). So the reader goes line by line, knows the keys it wants, and
takes nothing it does not recognise: a value it cannot read is left out (unknown), never guessed.

What each line really measures matters (torch/utils/collect_env.py): "CUDA runtime version" is the
``nvcc`` on PATH, not the CUDA torch uses; "GPU models" and "Nvidia driver version" come from
``nvidia-smi``; "cuDNN version" lists the files the loader can find, not the cuDNN torch loaded.
"""

from __future__ import annotations

import re
from typing import Any, Optional

#: Lines that mark a paste as collect_env output; two of them must be present.
MARKERS = ("pytorch version", "is debug build", "cuda used to build pytorch", "is cuda available",
           "nvidia driver version", "cuda runtime version", "gpu models and configuration")
#: Values collect_env prints for "not known".
UNKNOWN = {"", "n/a", "na", "none", "could not collect", "no cuda", "unknown", "not set"}
KEYS = {  # normalised key -> field
    "pytorch version": "torch_version",
    "is debug build": "debug_build",
    "cuda used to build pytorch": "cuda_build",
    "rocm used to build pytorch": "rocm_build",
    "os": "os",
    "python version": "python_version",
    "python platform": "python_platform",
    "is cuda available": "cuda_available",
    "cuda runtime version": "cuda_runtime",
    "gpu models and configuration": "gpus",
    "nvidia driver version": "driver_version",
    "cudnn version": "cudnn",
    "vllm version": "vllm_version",
    "versions of relevant libraries": "libraries",
    "version of relevant libraries": "libraries",
    "cpu": "cpu",
    "hip runtime version": "hip_runtime",
    "libc version": "libc",
}
MULTILINE = {"gpus", "cudnn", "libraries", "cpu"}
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 _()/.\-]*?)\s*[:：]\s*(.*?)\s*$")
_OLD_TORCH = re.compile(r"^\s*PyTorch version\s+(\S+)\s*$", re.I)  # 2020: "PyTorch version 1.5.0"
_VERSION = re.compile(r"\d+(?:\.\d+)+")
_PIP = re.compile(r"^\s*\[(pip\d?)\]\s+([A-Za-z0-9_.\-]+)\s*(?:==\s*(\S+)|\((\S+)\))?")
_CONDA = re.compile(r"^\s*\[conda\]\s+([A-Za-z0-9_.\-]+)\s+(\S+)(?:\s+(\S+))?")
_GPU = re.compile(r"^\s*GPU\s*(\d+)\s*[:：]\s*(.+?)\s*(?:\(UUID:.*)?$")


def looks_like(text: str) -> bool:
    lowered = text.lower()
    return sum(1 for m in MARKERS if m in lowered) >= 2


def _norm_key(key: str) -> str:
    return re.sub(r"\s+", " ", key.strip().lower())


_LIBRARIES_HEADING = re.compile(r"^[ \t]*Versions of relevant libraries[ \t]*:", re.M)


def _value(text: str) -> Optional[str]:
    text = text.strip().strip("`").strip()
    return None if text.lower() in UNKNOWN else text


def parse(text: str) -> dict[str, Any]:
    """The values one collect_env paste states; ``notes`` says what could not be read."""
    out: dict[str, Any] = {"notes": []}
    field: Optional[str] = None
    blocks: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.strip() and set(line.strip()) <= set("=-"):
            field = None  # vLLM's section rules
            continue
        old = _OLD_TORCH.match(line)
        if old and "torch_version" not in out:
            out["torch_version"], field = old.group(1), None
            continue
        match = _KEY.match(line)
        key = _norm_key(match.group(1)) if match else ""
        is_item = bool(_GPU.match(line)) or line.lstrip().startswith("[")
        if match and key in KEYS and not is_item:
            field = KEYS[key]
            if field in MULTILINE:
                blocks.setdefault(field, [])
                if match.group(2).strip():
                    blocks[field].append(match.group(2))
            else:
                out.setdefault(field, match.group(2))
                field = None
            continue
        if field is None:
            continue
        if not line.strip():
            if blocks[field] or field in ("gpus", "cudnn"):
                field = None  # a blank line ends a list (the library list may start after one)
            continue
        blocks[field].append(line)
    _finish(out, blocks)
    _cut_note(text, out)
    return out


def _finish(out: dict[str, Any], blocks: dict[str, list[str]]) -> None:
    for field in ("torch_version", "cuda_build", "rocm_build", "os", "python_platform", "cuda_runtime",
                  "driver_version", "vllm_version", "hip_runtime", "libc"):
        if field in out:
            out[field] = _value(out[field])
    if out.get("torch_version"):
        out["torch_version"] = out["torch_version"].split()[0]
    for field in ("debug_build", "cuda_available"):
        if field in out:
            word = str(out[field]).strip().lower()
            out[field] = True if word in ("true", "yes") else False if word in ("false", "no") else None
    if out.get("cuda_runtime"):
        found = _VERSION.search(out["cuda_runtime"])
        out["cuda_runtime"] = found.group(0) if found else None
    if out.get("driver_version"):
        found = _VERSION.search(out["driver_version"])
        out["driver_version"] = found.group(0) if found else None
    if out.get("cuda_build"):
        found = _VERSION.search(out["cuda_build"])
        out["cuda_build"] = found.group(0) if found else None
    py = out.get("python_version")
    if py is not None:
        found = re.match(r"\s*(\d+\.\d+(?:\.\d+)?)", py)
        out["python_bits"] = 64 if "64-bit runtime" in py else 32 if "32-bit runtime" in py else None
        out["python_version"] = found.group(1) if found else None
    out["gpus"] = _gpus(blocks.get("gpus") or [])
    out["cudnn"] = _cudnn(blocks.get("cudnn") or [])
    out["pip"], out["conda"] = _packages(blocks.get("libraries") or [])
    if "torch_version" not in out:
        out["notes"].append("collect_env: no PyTorch version line")


def _cut_note(text: str, out: dict[str, Any]) -> None:
    """collect_env always ends with its library list: a paste without that heading was cut short, and what
    it would have said after its last line (GPUs, driver, cuDNN, the pip packages) is unknown, not absent."""
    if _LIBRARIES_HEADING.search(text):
        return
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    out["notes"].append(f"collect_env: cut short after {last[:60]!r} (no 'Versions of relevant libraries' section); "
                        "what it would show after that line is not known")


def _gpus(lines: list[str]) -> list[dict[str, Any]]:
    """``GPU 0: NVIDIA A100-SXM4-80GB`` lines (nvidia-smi -L); a lone name (ROCm, macOS) has no index."""
    found = []
    for line in lines:
        m = _GPU.match(line)
        if m:
            found.append({"index": int(m.group(1)), "name": m.group(2).strip()})
        elif _value(line) and not found and not line.strip().startswith("["):
            found.append({"index": None, "name": line.strip()})
    return found


def _cudnn(lines: list[str]) -> list[str]:
    """cuDNN versions the paste names: from library file names (libcudnn.so.8.9.2, cudnn64_8.dll) or a
    bare version; "Probably one of the following" is kept as a list of what the loader could find."""
    versions = []
    for line in lines:
        text = line.strip()
        if _value(text) is None or text.lower().startswith("probably one of"):
            continue
        m = re.search(r"libcudnn(?:_\w+)?\.so\.(\d+(?:\.\d+)*)", text) or re.search(r"cudnn\w*?64_(\d+)\.dll", text, re.I) \
            or re.fullmatch(r"(\d+(?:\.\d+)*)", text)
        if m and m.group(1) not in versions:
            versions.append(m.group(1))
    return versions


def _packages(lines: list[str]) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    pip, conda = [], []
    for line in lines:
        m = _PIP.match(line)
        if m:
            version = m.group(3) or m.group(4)
            if version:
                pip.append({"name": m.group(2), "version": version.strip("()")})
            continue
        m = _CONDA.match(line)
        if m and _VERSION.match(m.group(2)):
            entry = {"name": m.group(1), "version": m.group(2)}
            if m.group(3):
                entry["build"] = m.group(3)
            conda.append(entry)
    return pip, conda
