"""Versions a ticket states in its own words: "RTX 3060", "CUDA 11.8 and cuDNN 8.6", "driver 535",
"PyTorch 2.1", "torch 1.13.1+cu117", "TensorFlow 2.15", "Windows 11", "Ubuntu 22.04", "Python 3.12".

Prose is the weakest evidence: a value is kept only when the body names one value for it (two CUDA
versions, two GPUs or two drivers name a change or a comparison, not the machine), never from a line
that another form prints (nvidia-smi's table and header, key: value reports), and never after words
that deny it ("not", "instead of"). What prose says fills only what no stronger form gave
(pastes/evidence.py), so it never contradicts one.
"""

from __future__ import annotations

import re
from typing import Any, Optional

_TORCH = re.compile(r"\b(?:py)?torch(?:\s{1,3}version)?[\s:=*]{1,8}[`'\"]?v?(\d{1,2}\.\d{1,2}(?:\.\d{1,2})?(?:\.dev\d{8})?"
                    r"(?:\+(?:cu\d{2,3}|cpu))?)(?!\w|\.\d)")
_TF = re.compile(r"\btensorflow(?:-gpu)?(?:\s{1,3}version)?[\s:=*]{1,8}v?(\d\.\d{1,2}(?:\.\d{1,2})?)(?!\w|\.\d)")
_CUDA = re.compile(r"\bcuda(?:\s{1,3}toolkit)?(?:\s{1,3}version)?[\s:=*]{0,8}v?(\d{1,2}\.\d)(?:\.\d{1,3})?(?!\w|\.\d)")
_CUDNN = re.compile(r"\bcudnn(?:\s{1,3}version)?[\s:=*]{0,8}v?(\d{1,2}(?:\.\d{1,2}){1,2})(?!\w|\.\d)")
_DRIVER = re.compile(r"\b(?:nvidia\s{1,3})?driver(?:\s{1,3}version)?[\s:=]{1,6}v?(\d{3}(?:\.\d{1,3}){0,2})(?!\w|\.\d)")
_PYTHON = re.compile(r"\bpython\s{0,3}v?(3\.\d{1,2})(?:\.\d{1,2})?(?!\w|\.\d)")
_GEFORCE = re.compile(r"\b(?:nvidia\s{1,3})?(?:geforce\s{1,3})?(rtx|gtx|gt)\s?-?(\d{3,4})(?:\s?-?(ti|super))?(\s{1,3}laptop)?\b")
_DATACENTER = re.compile(r"\b(?:nvidia\s{1,3}|tesla\s{1,3})?((?:rtx\s)?a[1-6]000|[ahv]100|h200|a10g?|a30|a40|l40s?|l4|t4|k80|p100|p40)\b")
_OS = (("wsl", re.compile(r"\bwsl\s?2?\b|\bwindows subsystem for linux\b")),
       # a Python built by MSVC ("[MSC v.1943 64 bit (AMD64)]") and os.name "nt" (ComfyUI's "OS: nt") are Windows'
       ("windows", re.compile(r"\bwin(?:dows)?\s?(?:10|11)\b|\bwindows\b|\[msc v\.\d{3,4} |\bos:\W{0,4}nt\b")),
       ("macos", re.compile(r"\bmac\s?os\b|\bmacbook\b|\bapple silicon\b")),
       ("linux", re.compile(r"\b(?:ubuntu|debian|centos|fedora|rocky linux|rhel|arch linux|linux mint)\b")))
_DENIED = re.compile(r"(?:\bnot|n't|\bno longer|\binstead of|\bwithout|\bother than)\b[^.;]{0,30}$")
#: Words that show a line is another form's output, which its own reader reads: never prose.
_FORM_LINE = re.compile(r"^\s*(?:\||\+-|>>>|\$\s)|NVIDIA-SMI|Driver Version:|\S\s{2,40}:\s")
#: (field, the word every value of it follows, expression): a line is scanned for a field only when it holds
#: the word, so a long body costs a substring test per field and line, not an expression.
_FIELDS = (("torch_version", "torch", _TORCH), ("tensorflow_version", "tensorflow", _TF), ("cudnn", "cudnn", _CUDNN),
           ("cuda", "cuda", _CUDA), ("driver_version", "driver", _DRIVER), ("python_version", "python", _PYTHON))
_DATACENTER_HINT = re.compile(r"[ahvlktp]\d")
#: Lines stating versions read at most: a ticket's prose states its machine in a few; a body with hundreds is a
#: log or a list, whose versions are not one machine's.
MAX_STATING_LINES = 200
_OS_HINT = re.compile("wsl|win|mac|apple|ubuntu|debian|centos|fedora|rocky|rhel|arch|mint|msc v|os:")
#: Any of _OS's expressions: one search before the four, which then say which OS in their order.
_ANY_OS = re.compile("|".join(f"(?:{pattern.pattern})" for _, pattern in _OS))
_DIGIT = re.compile(r"\d")


def read(lines: list[str]) -> Optional[dict[str, Any]]:
    """The versions the prose of ``lines`` states once each; None when it states none."""
    seen: dict[str, dict[str, int]] = {}
    done: set[str] = set()
    settled: set[str] = set()  # fields with two values already: none of theirs will be used, so none is looked for
    stating, notes = 0, []
    for number, line in enumerate(lines, 1):
        if line in done or len(line) > 600:
            continue
        done.add(line)
        low = line.lower()
        found = _values(low, settled)
        if not found or _FORM_LINE.search(line):
            continue
        stating += 1
        if stating > MAX_STATING_LINES:
            notes = [f"prose: only the first {MAX_STATING_LINES} lines that state versions were read"]
            break
        for field, value in found:
            seen.setdefault(field, {}).setdefault(value, number)
            if len(seen[field]) > 1 and not (field == "os" and "wsl" in seen[field]):
                settled.add(field)
    out: dict[str, Any] = {"notes": notes, "lines": {}}
    if "wsl" in seen.get("os", {}):  # WSL runs on Windows and shows Linux: a body naming it names both
        seen["os"] = {"wsl": seen["os"]["wsl"]}
    for field, values in seen.items():
        if len(values) == 1:
            (value, number), = values.items()
            out[field], out["lines"][field] = value, number
        else:  # "from 470 to 535", "works on the 3090, not the 4090": no one value is the machine's
            out["notes"].append(f"the prose names {len(values)} values for {field.replace('_', ' ')} "
                                f"({', '.join(sorted(values)[:4])}); none is used")
    return out if out["lines"] else None


def _values(line: str, skip: set[str]) -> list[tuple[str, str]]:
    """The values on one lowered line, but for the fields in ``skip``."""
    found = []
    digits = _DIGIT.search(line) is not None  # every value but the OS's holds one: a line without is tested for an OS only
    for field, word, pattern in _FIELDS if digits else ():
        if word not in line or field in skip:
            continue
        for m in pattern.finditer(line):
            if not _DENIED.search(line[max(0, m.start() - 40):m.start()]):
                found.append((field, _major_minor(m.group(1)) if field == "cuda" else m.group(1)))
    for m in _GEFORCE.finditer(line) if digits and "gpu" not in skip and ("rtx" in line or "gt" in line) else ():
        if not _DENIED.search(line[max(0, m.start() - 40):m.start()]):
            suffix = f" {'Ti' if m.group(3) == 'ti' else m.group(3).upper()}" if m.group(3) else ""
            found.append(("gpu", f"GeForce {m.group(1).upper()} {m.group(2)}{suffix}" + (" Laptop GPU" if m.group(4) else "")))
    for m in _DATACENTER.finditer(line) if digits and "gpu" not in skip and _DATACENTER_HINT.search(line) else ():
        if not _DENIED.search(line[max(0, m.start() - 40):m.start()]):
            found.append(("gpu", m.group(1).upper()))
    for family, pattern in _OS if "os" not in skip and _OS_HINT.search(line) and _ANY_OS.search(line) else ():
        if pattern.search(line):
            found.append(("os", family))
            break
    return found


def _major_minor(text: str) -> str:
    return ".".join(text.split(".")[:2])
