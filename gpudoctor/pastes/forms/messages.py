"""The messages frameworks, CUDA, NVML, the container toolkit and the kernel print when GPU work cannot
run, quoted in a ticket: each one found becomes an evidence item with its line and what it names.

Each message is matched on its own fixed words (PyTorch's torch/cuda/__init__.py warnings,
TensorFlow's dso_loader and gpu_device lines, jaxlib's cuDNN check, libnvidia-container's errors, the
NVRM kernel prints), so a line is tested with a substring first and a short anchored expression after.
A line that says the message is no longer seen ("I no longer get ...") is not evidence of it.
"""

from __future__ import annotations

import re
from typing import Any, Optional

_NEGATED = re.compile(r"\b(?:no longer|not|never|without|instead of|don't|doesn't|didn't|won't)\b", re.I)
_SM = re.compile(r"(?:^|:\s)\s*([^:\n]{1,120}?) with CUDA capability sm_(\d{2,3})\s+is not compatible with the current "
                 r"PyTorch installation", re.I)
_SUPPORTS = re.compile(r"supports CUDA capabilities((?:\s+(?:sm|compute)_\d{2,3}[a-z]?){1,40})", re.I)
_OLD_GPU = re.compile(r"Found GPU(\d+) (.{1,120}?) which is of cuda capability (\d+\.\d+)", re.I)
_MIN_CC = re.compile(r"minimum cuda capability (?:supported by this library )?is (\d+\.\d+)", re.I)
_TOO_OLD = re.compile(r"driver on your system is too old \(found version (\d{4,5})\)", re.I)
_DLOPEN = re.compile(r"Could not load dynamic library '([^']{1,120})'", re.I)
# cuDNN's check in TensorFlow and XLA: "7201 (compatibility version 7200) but source was compiled with 7004" in
# older releases, "8.7.0 but source was compiled with: 8.9.4" in newer ones
_JAX_CUDNN = re.compile(r"Loaded runtime CuDNN library: ([\d.]{1,12})(?: \(compatibility version [\d.]{1,12}\))? but source "
                        r"was compiled with:? ([\d.]{1,12}[\d])", re.I)
_CONTAINER_INIT = re.compile(r"nvidia-container-cli: initialization error: (.{0,200})", re.I)
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]{7,16})\): (\d{1,3})\b(.{0,160})")
_NVRM = re.compile(r"NVRM: (.{1,200})")
#: Xid numbers that mean the GPU or its memory failed, not an application's fault (NVIDIA's Xid
#: catalogue, docs.nvidia.com/deploy/xid-errors: 48 double-bit ECC, 63/64 row remapping, 74 NVLink,
#: 79 fallen off the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP).
HARDWARE_XIDS = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120}

#: (lowercase words tested first, evidence kind) for the messages that carry no value to extract.
FIXED = (
    ("no kernel image is available for execution on the device", "no_kernel_image"),
    ("cuda driver version is insufficient for cuda runtime version", "driver_insufficient"),
    ("found no nvidia driver on your system", "no_driver"),
    ("cannot dlopen some gpu libraries", "dlopen_failed"),
    ("cuda-enabled jaxlib is not installed", "jaxlib_cpu"),
    ("could not select device driver", "container_no_gpu_driver"),
    ("driver/library version mismatch", "driver_library_mismatch"),
    ("torch not compiled with cuda enabled", "torch_cpu_build"),
)

#: Every word a message above is tested by, for the one scan that passes over lines holding none.
_TRIGGER = re.compile("|".join(re.escape(w) for w in (
    "cuda capability sm_", "which is of cuda capability", "is too old (found version", "could not load dynamic library",
    "loaded runtime cudnn library", "nvidia-container-cli: initialization error", "nvrm:", *(w for w, _ in FIXED))))


def read(lines: list[str]) -> Optional[dict[str, Any]]:
    """The messages in ``lines`` (1-based line numbers), first occurrence of each; None when there are none."""
    evidence: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    read_lines: set[str] = set()
    for number, line in enumerate(lines, 1):
        lowered = line.lower()
        if not _TRIGGER.search(lowered) or line in read_lines:
            continue  # one scan in C for every message's words; a repeated line says nothing new
        read_lines.add(line)
        for item in _items(line, lowered, lines, number):
            key = (item["kind"], item.get("gpu"), item.get("library"), item.get("xid"))
            if key in seen:
                continue
            seen.add(key)
            item["line"], item["text"] = number, line.strip()[:300]
            evidence.append(item)
    return {"evidence": evidence, "notes": []} if evidence else None


def _items(line: str, lowered: str, lines: list[str], number: int) -> list[dict[str, Any]]:
    out = []
    if "cuda capability sm_" in lowered:
        m = _SM.search(line)
        if m and not _negated(line, m.start(2)):
            gpu = m.group(1).strip().strip("'\"`").rsplit("UserWarning:", 1)[-1].strip()
            item: dict[str, Any] = {"kind": "gpu_arch_unsupported", "gpu": gpu, "sm": f"sm_{m.group(2)}"}
            supported = _following(_SUPPORTS, lines, number)
            if supported:
                item["supported"] = supported.group(1).split()
            out.append(item)
    if "which is of cuda capability" in lowered:
        m = _OLD_GPU.search(line)
        if m:
            item = {"kind": "gpu_too_old", "gpu": m.group(2).strip(), "compute_capability": m.group(3)}
            minimum = _following(_MIN_CC, lines, number)
            if minimum:
                item["minimum"] = minimum.group(1)
            out.append(item)
    if "is too old (found version" in lowered:
        m = _TOO_OLD.search(line)
        if m and not _negated(line, m.start()):
            found = int(m.group(1))
            out.append({"kind": "driver_too_old", "driver_cuda": f"{found // 1000}.{found % 1000 // 10}"})
    if "could not load dynamic library" in lowered:
        m = _DLOPEN.search(line)
        if m and not _negated(line, m.start()):
            out.append({"kind": "library_not_loaded", "library": m.group(1)})
    if "loaded runtime cudnn library" in lowered:
        m = _JAX_CUDNN.search(line)
        if m:
            out.append({"kind": "cudnn_mismatch", "loaded": m.group(1), "built": m.group(2)})
    if "nvidia-container-cli: initialization error" in lowered:
        m = _CONTAINER_INIT.search(line)
        if m:
            out.append({"kind": "container_init_error", "error": m.group(1).strip()})
    if "nvrm:" in lowered:
        m = _XID.search(line)
        if m:
            out.append({"kind": "xid", "bus_id": m.group(1), "xid": int(m.group(2)), "detail": m.group(3).strip(" ,")})
        elif "api mismatch" in lowered or "version mismatch" in lowered:
            out.append({"kind": "driver_library_mismatch"})
    for words, kind in FIXED:
        at = lowered.find(words)
        if at >= 0 and not _negated(line, at) and not (kind == "driver_library_mismatch" and out):
            out.append({"kind": kind})
    return out


def _negated(line: str, at: int) -> bool:
    """True when the words before the message on its line deny it ("I no longer see ...")."""
    before = line[:at]
    return ":" not in before[-40:] and bool(_NEGATED.search(before[-60:]))


def _following(pattern: re.Pattern[str], lines: list[str], number: int) -> Optional[re.Match[str]]:
    """``pattern`` on this line or one of the next two: PyTorch prints the message over several lines."""
    for line in lines[number - 1:number + 2]:
        m = pattern.search(line)
        if m:
            return m
    return None
