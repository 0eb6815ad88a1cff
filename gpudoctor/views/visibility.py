"""What a CUDA program will see: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER applied to the GPUs NVML lists.

CUDA's documented rules (CUDA C Programming Guide, "CUDA Environment Variables"): entries are GPU
indices, ``GPU-<UUID>`` or ``MIG-<UUID>``; devices are enumerated in the order listed; the first
invalid entry hides itself and every entry after it. Indices count in CUDA's order, which is
fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and equals NVML's (PCI bus) order when every
GPU is the same model.

The undocumented corners were measured against libcuda itself (driver 580.159.04, 2 x H200,
2026-11-21; tools/device/cuda_visible.py): an empty value or "-1" hides every GPU; a UUID may be
a unique prefix, in any letter case; numbers are read as C's strtol reads them ("+1", "00", "-0",
"1abc" -> 1, "0x1" -> 0, "1.0" -> 1, "0 1" -> 0); surrounding spaces are ignored; an entry naming a GPU already
listed makes CUDA refuse the whole list (cuInit returns CUDA_ERROR_INVALID_DEVICE); numbers and
UUIDs cannot be mixed: the first entry's kind decides, and an entry of the other kind ends the list.
The reading is C's, in ASCII (4 x H100, driver 580, 2026-11-26): only C's white space (space, tab,
newline, vertical tab, form feed, carriage return) around an entry is ignored, and only ASCII digits
are digits. A no-break space (text copied from a web page), an em space, a full-width "０" or an
Arabic-Indic "٠" makes an entry invalid: "\u00a00" alone hides every GPU, "0,\u00a00" gives GPU 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from gpudoctor.snapshot import get, known

Facts = dict[str, Any]

CUDA_ENV_DOCS = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables"


@dataclass
class Visible:
    """One device a CUDA program gets: ``cuda_index`` is its number inside the program."""

    cuda_index: int
    gpu_index: int
    name: str
    uuid: str
    mig_uuid: Optional[str] = None


@dataclass
class Visibility:
    mask: Optional[str]
    devices: list[Visible] = field(default_factory=list)
    invalid_entry: Optional[str] = None  # the entry that ended enumeration
    invalid_reason: str = ""
    refused: bool = False  # CUDA rejects the whole list, not just the tail
    hidden_entries: list[str] = field(default_factory=list)  # entries after the invalid one
    order_uncertain: bool = False  # mixed models in fastest-first order: numbers may map elsewhere


def cuda_numbers(facts: Facts) -> dict[int, list[int]]:
    """For each GPU index, the cuda:N numbers a CUDA program in this environment gives it."""
    numbers: dict[int, list[int]] = {}
    for dev in resolve(facts).devices:
        numbers.setdefault(dev.gpu_index, []).append(dev.cuda_index)
    return numbers


def resolve(facts: Facts) -> Visibility:
    """Apply the environment's mask to the GPUs in the snapshot; pure, so checks, `devices`, the compat judge
    and the renderers share it."""
    # every GPU NVML counted takes a position, read or not: CUDA numbers them all
    gpus = sorted((g for g in facts.get("gpus") or [] if isinstance(g, dict) and "index" in g), key=lambda g: g["index"])
    env = get(facts, "host.env") or {}
    mask = env.get("CUDA_VISIBLE_DEVICES")
    mixed = len({str(known(g.get("name"))) for g in gpus if "name" in g}) > 1
    pci_order = (env.get("CUDA_DEVICE_ORDER") or "").strip() == "PCI_BUS_ID"
    result = Visibility(mask=mask, order_uncertain=mixed and not pci_order)
    if mask is None:
        result.devices = [_visible(i, g) for i, g in enumerate(gpus)]
        return result
    entries = entries_of(mask)
    if mask.strip(C_SPACE) == "":
        result.invalid_entry, result.invalid_reason = "", "the value is empty"
        return result
    numeric = cuda_number(entries[0]) is not None
    for pos, entry in enumerate(entries):
        target, reason = _match(entry, gpus)
        if target is not None and (cuda_number(entry) is not None) != numeric:
            target, reason = None, "CUDA does not accept numbers and UUIDs mixed in one list"
        if target is not None and any(d.gpu_index == target[0]["index"] and d.mig_uuid == target[1] for d in result.devices):
            result.devices, result.refused = [], True
            result.invalid_entry = entry
            result.invalid_reason = ("it names a GPU already listed, and CUDA then refuses the whole list "
                                     "(cuInit fails with CUDA_ERROR_INVALID_DEVICE)")
            return result
        if target is None:
            result.invalid_entry, result.invalid_reason = entry, reason
            result.hidden_entries = entries[pos + 1:]
            break
        gpu, mig = target
        result.devices.append(_visible(len(result.devices), gpu, mig))
    return result


#: What C's isspace() calls white space: all CUDA skips around an entry (Python's strip() would skip more).
C_SPACE = " \t\n\v\f\r"
_NUMBER = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: Python's \d also takes "٠" and "０", strtol does not


def entries_of(mask: str) -> list[str]:
    """The entries of a CUDA_VISIBLE_DEVICES value, as CUDA reads them: split at commas, C's white space
    around each one ignored."""
    return [e.strip(C_SPACE) for e in mask.split(",")]


def cuda_number(entry: str) -> Optional[int]:
    """How CUDA reads a numeric entry: like strtol, a sign and leading ASCII digits, the rest ignored."""
    match = _NUMBER.match(entry)
    return int(match.group(0)) if match else None


def _visible(cuda_index: int, gpu: dict[str, Any], mig_uuid: Optional[str] = None) -> Visible:
    return Visible(cuda_index, gpu["index"], str(known(gpu.get("name"))), str(known(gpu.get("uuid"))), mig_uuid)


def _match(entry: str, gpus: list[dict[str, Any]]) -> tuple[Optional[tuple[dict[str, Any], Optional[str]]], str]:
    number = cuda_number(entry)
    if number is not None:
        if number < 0:
            return None, "a negative number names no GPU"
        if number < len(gpus):
            return (gpus[number], None), ""
        return None, f"there is no GPU {number} (this machine has {len(gpus)})"
    lowered = entry.lower()
    if lowered.startswith("gpu-"):
        hits = [g for g in gpus if str(known(g.get("uuid")) or "").lower().startswith(lowered)]
        if len(hits) == 1:
            return (hits[0], None), ""
        return None, "no GPU has this UUID" if not hits else "this UUID prefix matches several GPUs"
    if lowered.startswith("mig-"):
        for g in gpus:
            for dev in (known(g.get("mig")) or {}).get("devices") or []:
                uuid = str(known(dev.get("uuid")) or "").lower()
                if uuid and uuid.startswith(lowered):
                    return (g, str(known(dev.get("uuid")))), ""
        return None, "no MIG device has this UUID"
    return None, "it is neither a GPU number nor a GPU-/MIG- UUID"
