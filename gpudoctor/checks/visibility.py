"""The visibility checks: CUDA_VISIBLE_DEVICES selects GPUs that exist (VIS001-VIS004), and at least
``--require-gpus N`` of them are usable (VIS005).

What a CUDA program sees, by CUDA's documented and measured rules, is the view gpudoctor/views/visibility.py
(``resolve``); these checks only judge it.
"""

from __future__ import annotations

from typing import Iterator

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, require_gpus
from gpudoctor.findings import Finding
from gpudoctor.snapshot import get
from gpudoctor.views.visibility import C_SPACE, CUDA_ENV_DOCS, cuda_number, entries_of, resolve


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
        good = ",".join(e for e in vis.mask.split(",") if e.strip(C_SPACE) != vis.invalid_entry)
        yield finding("VIS002", f"{shown}: entry {vis.invalid_entry!r} is invalid ({vis.invalid_reason}){hidden}",
                      detail=f"CUDA programs get {len(vis.devices)} GPU(s) instead of the {len(vis.mask.split(','))} listed.",
                      text=(f"Drop {vis.invalid_entry!r} from the list, or replace it with a GPU that exists."
                            if good else "Fix the list so that every entry names a GPU that exists."),
                      commands=[f"export CUDA_VISIBLE_DEVICES={good}"] if good else [], links=[CUDA_ENV_DOCS])
    uses_numbers = any(cuda_number(e) is not None for e in entries_of(vis.mask))
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
