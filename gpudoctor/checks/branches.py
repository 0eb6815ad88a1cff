"""driver.branch: an NVIDIA GPU on the PCI bus that the running driver's branch no longer drives.

Such a GPU is not a failed GPU: the driver ignores it on purpose (a Tesla K80 under driver 535), so
nvidia-smi does not show it and nothing says why unless one reads the kernel log. The GPU is named from
its PCI device id (gpus.json) and judged by compat_matrix/driver_branches.json; the driver's own
kernel-log notice, where it could be read, is the evidence (and the verdict, for an id the matrix does
not know). A GPU NVML lists is driven by definition, and a GPU bound to another driver (vfio-pci for a
VM) was given away on purpose: neither is judged, so a healthy machine stays quiet.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Optional

from gpudoctor.checks.base import DRIVER_LOAD_COMMAND, Check, Facts, NotApplicable, finding, nvml_ready
from gpudoctor.compat import branches, rules
from gpudoctor.compat.data import Matrix
from gpudoctor.findings import Finding
from gpudoctor.snapshot import get, gpus, known


def check_driver_branch(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    pci = get(facts, "driver.pci_devices")
    if not isinstance(pci, list):
        raise NotApplicable("the PCI bus was not read")  # nothing judged: not a pass
    if get(facts, "host.container.detected"):
        return  # a container's /sys shows the host's GPUs, not the ones it was given
    driver = _driver_version(facts)
    listed = {str(known(get(g, "pci.bus_id")) or "")[-12:].lower() for g in gpus(facts)} if nvml_ready(facts) else set()
    notices = _notices(facts)
    for dev in pci:
        if not isinstance(dev, dict) or dev.get("driver") not in (None, "nvidia"):
            continue
        if str(dev.get("bus_id") or "")[-12:].lower() in listed:
            continue
        found = _judge(dev, driver, notices, facts, matrix)
        if found is not None:
            yield found


def _judge(dev: dict[str, Any], driver: Optional[str], notices: list[dict[str, Any]], facts: Facts,
           matrix: Matrix) -> Optional[Finding]:
    """The finding for one GPU the driver does not list, or None when neither the matrix nor the kernel
    log says its branch is the cause (DRV013 and DRV014 speak for the other causes)."""
    entry = branches.gpu_by_pci_id(matrix, str(dev.get("device_id") or ""))
    name = (entry.get("listed_as") or [entry["model"]])[0] if entry else None
    notice = _notice_for(matrix, entry, notices)
    if entry and driver:
        verdict = branches.drives(matrix, driver, entry["compute_capability"])
        if verdict.status == rules.FAIL:
            return _finding(dev, name, driver, int(verdict.needs or 0), verdict.reason, notice, facts, matrix,
                            entry["compute_capability"])
    if notice and (driver is None or notice.get("driver") in (None, driver)):
        return _finding(dev, name or notice.get("name"), driver or notice.get("driver"), int(notice["branch"]),
                        f"the driver logged that this GPU is supported through the NVIDIA {notice['branch']}.xx Legacy drivers",
                        notice, facts, matrix, entry["compute_capability"] if entry else None)
    return None


def _finding(dev: dict[str, Any], name: Optional[str], driver: Optional[str], last: int, reason: str,
             notice: Optional[dict[str, Any]], facts: Facts, matrix: Matrix, cc: Optional[str]) -> Finding:
    branch = branches.last_branch(matrix, cc) if cc else None
    newest = branch.newest_driver if branch and branch.last == last else None
    what = f"{name}, device {dev.get('device_id')}" if name else f"device {dev.get('device_id')}"
    log = (f" Kernel log: the NVIDIA {notice['name']} GPU 'is supported through the NVIDIA {notice['branch']}.xx Legacy "
           f"drivers'" + (f"; the {notice['driver']} NVIDIA driver ignores it." if notice.get("driver") else ".")) if notice \
        else f" The kernel log was {_log_state(facts)}."
    commands = [DRIVER_LOAD_COMMAND] + ([f"gpudoctor matrix suggest --cc {cc} --driver {newest}"] if cc and newest else [])
    return finding("DRV021", f"NVIDIA GPU {dev.get('bus_id')} ({what}) is not driven by driver {driver or '(version unknown)'}: "
                             f"R{last} is the last branch that drives it",
                   detail=reason[:1].upper() + reason[1:] + "." + log,
                   text=f"Install driver {newest or 'R' + str(last)} (branch R{last}) and the CUDA and framework builds "
                        f"that branch supports, or move to a newer GPU; no newer driver will drive this one.",
                   commands=commands, links=[branches.DRIVER_MATRIX_DOCS])


def _driver_version(facts: Facts) -> Optional[str]:
    """The running driver's version: NVML's, else the loaded module's, else the one NVML library
    installed (a driver whose module found no GPU to drive does not stay loaded)."""
    for path in ("nvml.driver_version", "driver.kernel_module.version"):
        value = known(get(facts, path))
        if isinstance(value, str) and rules.version(value) is not None:
            return value
    files = get(facts, "driver.nvml_library_files") or []
    versions = {m.group(1) for p in files if isinstance(p, str) and (m := re.search(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$", p))}
    return versions.pop() if len(versions) == 1 else None


def _notices(facts: Facts) -> list[dict[str, Any]]:
    log = get(facts, "driver.legacy_notices")
    if not isinstance(log, dict) or not log.get("read"):
        return []
    return [n for n in log.get("notices") or [] if isinstance(n, dict) and str(n.get("branch") or "").isdigit()]


def _notice_for(matrix: Matrix, entry: Optional[dict[str, Any]], notices: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The notice naming this GPU (its name matches the same gpus.json entry), or the only one there is."""
    for notice in notices:
        if entry is not None and (rules.gpu_entry(matrix, str(notice.get("name") or "")) or {}).get("model") == entry["model"]:
            return notice
    return notices[0] if len(notices) == 1 else None


def _log_state(facts: Facts) -> str:
    log = get(facts, "driver.legacy_notices")
    if not isinstance(log, dict):
        return "not read"
    return "read: no notice names this GPU" if log.get("read") else f"not read ({log.get('reason') or 'unknown'})"


CHECKS = (
    Check("driver.branch", "driver", "every NVIDIA GPU is one the driver's branch still drives", ("DRV021",),
          check_driver_branch, ("nvml", "driver_files"), reads_matrix=True),
)
