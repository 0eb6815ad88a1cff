"""Signs that a ticket's stack is AMD's ROCm, not NVIDIA's CUDA: a PyTorch build tagged ``+rocm``,
collect_env's ``ROCM used to build PyTorch`` / ``HIP runtime version`` / ``MIOpen runtime version`` with
a value, ``rocm-smi`` and ``rocminfo`` output, ``torch.version.hip`` printing a version, an AMD GPU in
a GPU list, HIP's own errors, and the ROCm packages (``tensorflow-rocm``, ``pytorch-triton-rocm``) in a package
list or an install command.

A ROCm PyTorch answers through ``torch.cuda`` (HIP stands in for CUDA), so such a paste reads like a
CUDA one; judged by NVIDIA's rules it would pass or fail on facts that do not apply. Each sign is read
only in a shape those tools print, never from a bare mention of "ROCm" or "Radeon" in prose (an AMD
CPU's "with Radeon Graphics" names no GPU to compute on), and a CUDA collect_env's ``N/A`` lines are
no sign. The whole body is tested once for the signs' words, so a body without them costs one scan.
"""

from __future__ import annotations

import re
from typing import Any, Optional

#: Lowercase words every sign below holds; a body holding none of them is not read line by line.
WORDS = ("rocm", "hip runtime", "hip error", "hiperror", "hip gpus", "hip initialization", "torch.version.hip", "miopen",
         "radeon", "instinct", "hsa system attributes", "rock module", "gfx")
#: collect_env's ROCm lines; "N/A", "None" or "Could not collect" there is a CUDA or CPU build's.
_ENV_LINE = re.compile(r"^\s*(ROCM used to build PyTorch|HIP runtime version|MIOpen runtime version)\s*[:：]\s*(\S.{0,60}?)\s*$",
                       re.I)
_NOT_A_VALUE = {"n/a", "na", "none", "could not collect", "unknown", ""}
_BUILD = re.compile(r"\b\d{1,2}\.\d{1,2}(?:\.\d{1,3})?(?:[.\w]{0,20})?\+rocm\d(?:\.\d{1,2}){0,2}\b")
#: AMD's data-centre and consumer GPUs as their tools and collect_env's GPU line name them.
_AMD_GPU = re.compile(r"\b(?:AMD\s{1,3}Radeon(?:\(TM\))?\s{1,3}(?:RX|Pro|VII)\b[\w .-]{0,30}|Radeon\s{1,3}RX\s{0,2}\d{3,4}[\w -]{0,12}|"
                      r"AMD\s{1,3}Instinct(?:\(TM\))?\s{1,3}MI\d{2,3}\w{0,3}|gfx(?:90[0-9a-c]|94[0-2]|950|10[1-3][0-6]|11[0-5][0-3]|120[01])\b)",
                      re.I)
_GPU_LIST = re.compile(r"^\s*(?:GPU models and configuration|GPU \d{1,2}|Marketing Name|Device Name|torch\.cuda\.get_device_name)",
                       re.I)
_HIP_VERSION = re.compile(r"^\s*['\"]?(\d{1,2}\.\d{1,2}\.\d{3,6}(?:-[0-9a-f]{6,12})?)['\"]?\s*$")
#: rocm-smi's and rocminfo's own headings, HIP's errors and the ROCm packages: each is named by itself.
_FIXED = (("rocm system management interface", "rocm-smi output"),
          ("end of rocm smi log", "rocm-smi output"),
          ("hsa system attributes", "rocminfo output"),
          ("rock module", "rocminfo output"),
          ("no hip gpus are available", "PyTorch's HIP error"),
          ("hip error:", "a HIP error"),
          ("hiperror", "a HIP error"),
          ("hip initialization:", "PyTorch's HIP error"),
          ("download.pytorch.org/whl/rocm", "PyTorch's ROCm wheel index"),
          ("download.pytorch.org/whl/nightly/rocm", "PyTorch's ROCm wheel index"))
#: The ROCm packages: a sign where a package list or an install command names them, never in prose ("do I need
#: pytorch-triton-rocm?" is asked from NVIDIA machines too).
_PACKAGES = (("tensorflow-rocm", "the tensorflow-rocm package"), ("pytorch-triton-rocm", "the pytorch-triton-rocm package"))
_LISTED = re.compile(r"^\s*(?:\[(?:pip3?|conda)\]\s*)?(?:[-*]\s+)?(?P<name>[\w.-]+)(?:\s*(?:==|>=|~=|\s)\s*\d|\s*$)")
_INSTALL = re.compile(r"\b(?:pip3?|conda|mamba|uv\s+pip)\s+install\b")
#: Signs kept per paste: enough to show where the stack was read, bounded whatever the body holds.
MAX_SIGNS = 5
#: Lines holding a sign's words that are looked at: a ROCm stack shows in its first few; a log repeating the words
#: on every line costs no more than this many.
MAX_TRIED = 400


def read(lines: list[str]) -> Optional[dict[str, Any]]:
    """The ROCm signs in ``lines``, each with its line (1-based); None when there are none."""
    signs: list[dict[str, Any]] = []
    seen: set[str] = set()
    tried: set[str] = set()  # a line pasted again says nothing new
    for index, lowered in _candidates(lines):
        if lowered in tried:
            continue
        if len(tried) >= MAX_TRIED:
            break
        tried.add(lowered)
        what = _sign(lines[index], lowered, lines, index + 1)
        if what and what not in seen:
            seen.add(what)
            signs.append({"line": index + 1, "what": what, "text": lines[index].strip()[:200]})
            if len(signs) >= MAX_SIGNS:
                break
    return {"signs": signs, "lines": {"rocm": signs[0]["line"]}, "notes": []} if signs else None


def _candidates(lines: list[str]) -> list[tuple[int, str]]:
    """(index, lowered line) of the lines holding one of WORDS, in order: each word is found in the whole body by
    str.find, which then skips to the next line, so a body costs a scan per word rather than a test per line."""
    whole = "\n".join(lines).lower()
    if not any(word in whole for word in WORDS):
        return []
    spans: set[tuple[int, int]] = set()
    for word in WORDS:  # each word's first MAX_TRIED lines hold the body's first MAX_TRIED lines with any word
        at, hits = whole.find(word), 0
        while at >= 0 and hits < MAX_TRIED:
            end = whole.find("\n", at)
            end = len(whole) if end < 0 else end
            spans.add((whole.rfind("\n", 0, at) + 1, end))
            at, hits = whole.find(word, end), hits + 1
    out, index, counted = [], 0, 0
    for start, end in sorted(spans)[:MAX_TRIED]:
        index += whole.count("\n", counted, start)
        counted = start
        out.append((index, whole[start:end]))
    return out


def _sign(line: str, lowered: str, lines: list[str], number: int) -> Optional[str]:
    """What this line shows of a ROCm stack, or None."""
    if "+rocm" in lowered and _BUILD.search(line):
        return "a ROCm build (+rocm)"
    if "rocm used to build" in lowered or "hip runtime" in lowered or "miopen runtime" in lowered:
        m = _ENV_LINE.match(line)
        if m and m.group(2).strip().strip("`").lower() not in _NOT_A_VALUE:
            return f"collect_env's {m.group(1)}"
    if "torch.version.hip" in lowered and number < len(lines) and _HIP_VERSION.match(lines[number]):
        return "torch.version.hip"  # the line under it printed HIP's version; None would be a CUDA or CPU build
    for words, what in _FIXED:
        if words in lowered:
            return what
    for name, what in _PACKAGES:
        if name in lowered and (_INSTALL.search(lowered) or (m := _LISTED.match(lowered)) and m["name"] == name):
            return what
    if ("radeon" in lowered or "instinct" in lowered or "gfx" in lowered) and _GPU_LIST.match(line) and _AMD_GPU.search(line):
        return "an AMD GPU in a GPU list"
    if "gpu models and configuration" in lowered and number < len(lines) and _AMD_GPU.search(lines[number][:200]):
        return "an AMD GPU in a GPU list"  # collect_env puts the list on the next line when there are several
    return None
