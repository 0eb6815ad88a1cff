"""The GPUs CUDA will enumerate, told from NVML's facts and the environment, without starting CUDA.

Starting CUDA in a process that sees every GPU costs that process a context on each (1.5-1.85 s on
4 x H200 against 0.55 s on one), and the driver starts CUDA in one process at a time, so every other
child's start waits behind it. NVML's facts (index, name, UUID, MIG mode) and the CUDA_VISIBLE_DEVICES
resolver (views/visibility.py) name the same GPUs, in CUDA's order, wherever the resolver is sure.
Where it is not, CUDA counts them itself (``why`` says which case), as it does when this list is
wrong: a smoke child whose CUDA cannot start on its one GPU sends the smoke probe back to CUDA's count.

The cases left to CUDA's count:
- NVML did not start, did not finish, or lists no GPU (CUDA's own error then says why);
- a GPU NVML could not read, or without a ``GPU-`` UUID to pin its child by;
- MIG enabled on a GPU, or its mode unknown: CUDA then enumerates MIG instances, not GPUs;
- CUDA_DEVICE_ORDER other than unset, FASTEST_FIRST or PCI_BUS_ID;
- GPUs of more than one model: fastest-first order then differs from NVML's (and no real mixed machine
  has checked the PCI_BUS_ID case);
- NVML's indices not in PCI bus order, or a bus address it did not read: CUDA breaks ties by bus;
- a CUDA_VISIBLE_DEVICES entry other than plain digits or a ``GPU-`` hexadecimal UUID (or prefix), one
  that ends the list or makes CUDA refuse it, and a mask that hides every GPU;
- NVML without the CUDA driver version (``driver_cuda`` of the count).

Every real report recorded so far with a count (1, 2 and 4 GPUs; masks ``0``, ``1``, ``0,1`` and unset)
gets the count it recorded from this list (tests/test_gpu_list.py).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional

from gpudoctor.probes.smoke import NVML_SOURCE
from gpudoctor.snapshot import is_unavailable
from gpudoctor.views.visibility import resolve

#: CUDA_DEVICE_ORDER values whose order is known (unset is fastest-first).
KNOWN_ORDERS = (None, "FASTEST_FIRST", "PCI_BUS_ID")
_PLAIN_ENTRY = re.compile(r"[0-9]+|GPU-[0-9A-Fa-f-]+")


def cuda_list(nvml_facts: Mapping[str, Any], env: Mapping[str, str]) -> tuple[Optional[dict[str, Any]], str]:
    """``smoke.count`` as CUDA would give it in environment ``env`` (``driver_cuda``, ``devices`` with
    ``ordinal``, ``name``, ``uuid``; ``source``), or None and why CUDA must count them itself."""
    nvml = nvml_facts.get("nvml") or {}
    gpus = [g for g in nvml_facts.get("gpus") or [] if isinstance(g, dict)]
    why = _nvml_unsure(nvml, gpus) or _env_unsure(env)
    if why:
        return None, why
    driver_cuda = nvml.get("cuda_driver_version")
    if not isinstance(driver_cuda, int) or isinstance(driver_cuda, bool):
        return None, "NVML did not give the CUDA driver version"
    visible = resolve({"gpus": gpus, "host": {"env": {k: env.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}}})
    if visible.invalid_entry is not None or visible.refused:
        return None, "CUDA_VISIBLE_DEVICES has an entry CUDA stops at or refuses"
    if not visible.devices:
        return None, "no GPU is visible"
    devices = [{"ordinal": d.cuda_index, "name": d.name, "uuid": d.uuid} for d in visible.devices]
    return {"driver_cuda": driver_cuda, "devices": devices, "source": NVML_SOURCE}, ""


def _nvml_unsure(nvml: Mapping[str, Any], gpus: list[dict[str, Any]]) -> str:
    """Why NVML's GPUs may not be CUDA's, or "" when they are."""
    if not (nvml.get("init") or {}).get("ok") or "incomplete" in nvml:
        return "NVML did not start or finish"
    if not gpus or nvml.get("device_count") != len(gpus):
        return "NVML lists no GPU, or not every GPU it counted"
    for gpu in gpus:
        if not isinstance(gpu.get("name"), str) or not str(gpu.get("uuid", "")).startswith("GPU-"):
            return f"NVML could not read GPU {gpu.get('index')}'s name and UUID"
        if not _mig_off(gpu.get("mig")):
            return f"MIG is on, or its mode unknown, on GPU {gpu.get('index')}"
    if len({g["name"] for g in gpus}) > 1:
        return "the GPUs are of more than one model"
    buses = [str((g.get("pci") or {}).get("bus_id") or "").lower() for g in sorted(gpus, key=lambda g: g.get("index", -1))]
    if not all(buses) or buses != sorted(buses):
        return "NVML's indices are not in PCI bus order"
    return ""


def _mig_off(mig: Any) -> bool:
    """MIG known to be off: disabled now, or a GPU without MIG."""
    if is_unavailable(mig):
        return mig.get("unavailable") == "not_supported"
    return isinstance(mig, dict) and mig.get("current") == "disabled"


def _env_unsure(env: Mapping[str, str]) -> str:
    """Why the environment may make CUDA list GPUs otherwise than the resolver reads it, or ""."""
    if env.get("CUDA_DEVICE_ORDER") not in KNOWN_ORDERS:
        return "CUDA_DEVICE_ORDER has a value whose order is not known"
    mask = env.get("CUDA_VISIBLE_DEVICES")
    if mask is not None and not all(_PLAIN_ENTRY.fullmatch(entry) for entry in mask.split(",")):
        return "CUDA_VISIBLE_DEVICES has an entry that is not plain digits or a GPU- UUID"
    return ""
