"""What a CUDA program will see: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER applied to the GPUs NVML lists.

CUDA's documented rules (CUDA C Programming Guide, "CUDA Environment Variables"): entries are GPU
indices, ``GPU-<UUID>`` or ``MIG-<UUID>``; devices are enumerated in the order listed; the first
invalid entry hides itself and every entry after it. Indices count in CUDA's order, which is
fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and equals NVML's (PCI bus) order when every
GPU is the same model.

The undocumented corners were measured against libcuda itself (driver 580.159.04, 2 x H200,
2026-11-21; tools/device/cuda_visible.py): an empty value or "-1" hides every GPU; a UUID may be
a unique prefix, in any letter case; numbers are read as C's strtol reads them ("+1", "00", "-0",
"1abc" -> 1, "0x1" -> 0, "1.0" -> 1); surrounding spaces are ignored; an entry naming a GPU already
listed makes CUDA refuse the whole list (cuInit returns CUDA_ERROR_INVALID_DEVICE); numbers and
UUIDs cannot be mixed: the first entry's kind decides, and an entry of the other kind ends the list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, require_gpus
from gpudoctor.findings import Finding
from gpudoctor.snapshot import get, known

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


def resolve(facts: Facts) -> Visibility:
    """Apply the environment's mask to the GPUs in the snapshot; pure, so `devices` and checks share it."""
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
    entries = [e.strip() for e in mask.split(",")]
    if mask.strip() == "":
        result.invalid_entry, result.invalid_reason = "", "the value is empty"
        return result
    numeric = _number(entries[0]) is not None
    for pos, entry in enumerate(entries):
        target, reason = _match(entry, gpus)
        if target is not None and (_number(entry) is not None) != numeric:
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


def _number(entry: str) -> Optional[int]:
    """How CUDA reads a numeric entry: like strtol, a sign and leading digits, the rest ignored."""
    match = re.match(r"([+-]?\d+)", entry)
    return int(match.group(1)) if match else None


def _visible(cuda_index: int, gpu: dict[str, Any], mig_uuid: Optional[str] = None) -> Visible:
    return Visible(cuda_index, gpu["index"], str(known(gpu.get("name"))), str(known(gpu.get("uuid"))), mig_uuid)


def _match(entry: str, gpus: list[dict[str, Any]]) -> tuple[Optional[tuple[dict[str, Any], Optional[str]]], str]:
    number = _number(entry)
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


def check_mask(facts: Facts) -> Iterator[Finding]:
    require_gpus(facts)
    vis = resolve(facts)
    if vis.mask is None:
        raise NotApplicable("CUDA_VISIBLE_DEVICES is not set")
    shown = f"CUDA_VISIBLE_DEVICES={vis.mask!r}"
    if not vis.devices:
        yield finding("VIS001", f"{shown} hides every GPU from CUDA programs",
                      detail=f"Entry {vis.invalid_entry!r}: {vis.invalid_reason}." if vis.invalid_entry else "",
                      text="CUDA programs here will see no GPU. Unset the variable, or list the GPUs you want.",
                      commands=["unset CUDA_VISIBLE_DEVICES"], links=[CUDA_ENV_DOCS])
        return
    if vis.invalid_entry is not None:
        hidden = f"; the entries after it are ignored too: {', '.join(vis.hidden_entries)}" if vis.hidden_entries else ""
        good = ",".join(e for e in vis.mask.split(",") if e.strip() != vis.invalid_entry)
        yield finding("VIS002", f"{shown}: entry {vis.invalid_entry!r} is invalid ({vis.invalid_reason}){hidden}",
                      detail=f"CUDA programs get {len(vis.devices)} GPU(s) instead of the {len(vis.mask.split(','))} listed.",
                      text="Fix the list so that every entry names a GPU that exists.",
                      commands=[f"export CUDA_VISIBLE_DEVICES={good}"] if good else [], links=[CUDA_ENV_DOCS])
    uses_numbers = any(_number(e.strip()) is not None for e in vis.mask.split(","))
    if vis.order_uncertain and uses_numbers:
        yield finding("VIS003", f"{shown} uses numbers, and CUDA numbers these mixed GPU models fastest-first",
                      text="The numbers may select other GPUs than nvidia-smi shows under them. Number GPUs in PCI "
                           "order, or select them by UUID.",
                      commands=["export CUDA_DEVICE_ORDER=PCI_BUS_ID"], links=[CUDA_ENV_DOCS])
    mapping = "; ".join(
        f"cuda:{d.cuda_index} = GPU {d.gpu_index} {d.name}" + (f" ({d.mig_uuid})" if d.mig_uuid else "")
        for d in vis.devices)
    yield finding("VIS004", f"CUDA programs will see {len(vis.devices)} GPU(s): {mapping}",
                  detail="GPU numbers are nvidia-smi's." + (" The order is uncertain: these are mixed models "
                                                            "numbered fastest-first." if vis.order_uncertain else ""))


def check_required(facts: Facts) -> Iterator[Finding]:
    """``check --require-gpus N``: fewer usable GPUs than N is an error (the entrypoint's gate)."""
    wanted = (get(facts, "options") or {}).get("require_gpus")
    if not isinstance(wanted, int):
        raise NotApplicable("no --require-gpus given")
    init = get(facts, "nvml.init") or {}
    if wanted > 0 and not init.get("ok"):  # nothing says a GPU is usable: the gate fails, it cannot pass unchecked
        why = init.get("reason") or init.get("message")
        yield finding("VIS005", f"could not confirm {wanted} usable GPU(s): NVML is not available" + (f" ({why})" if why else ""),
                      detail="GPUs are counted through NVML, the driver's management library; without it no GPU is "
                             "known to be usable. The driver findings say why it is not available.",
                      text="Give the job a machine or allocation with working GPUs and driver; fix the driver findings first.")
        return
    usable = _usable(facts)
    if len(usable) < wanted:
        yield finding("VIS005", f"{len(usable)} usable GPU(s), {wanted} required",
                      detail="Usable: visible to CUDA programs, answering NVML, and (where it ran) passing the smoke kernel"
                             + (f": GPU {', '.join(map(str, usable))}." if usable else "."),
                      text="Give the job a machine or allocation with enough healthy GPUs.")


def _usable(facts: Facts) -> list[int]:
    if not (get(facts, "nvml.init") or {}).get("ok"):
        return []
    by_index = {g.get("index"): g for g in facts.get("gpus") or []}
    runs = {r.get("uuid"): r for r in ((facts.get("smoke") or {}).get("runs") or [])}
    usable = []
    for dev in resolve(facts).devices:
        gpu = by_index.get(dev.gpu_index) or {}
        if "name" not in gpu:
            continue
        run = runs.get(dev.uuid)
        if facts.get("smoke") and (run is None or not run.get("ok")):
            continue
        usable.append(dev.gpu_index)
    return sorted(set(usable))


CHECKS = (
    Check("visibility.cuda_visible_devices", "visibility", "CUDA_VISIBLE_DEVICES selects existing GPUs",
          ("VIS001", "VIS002", "VIS003", "VIS004"), check_mask, ("nvml", "host")),
    Check("visibility.required_gpus", "visibility", "at least --require-gpus usable GPUs", ("VIS005",), check_required,
          ("nvml", "host")),
)
