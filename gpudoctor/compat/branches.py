"""Which NVIDIA driver branches drive which GPUs (compat_matrix/driver_branches.json).

NVIDIA moves an architecture to a legacy branch and newer branches stop listing its GPUs: a Tesla K80
is not even shown by nvidia-smi on driver 535, whatever CUDA that driver supports. So "does this driver
support CUDA X" is not enough; the driver must also drive the GPU. The judgement goes by architecture
(compute capability -> architectures.json -> last branch). Jetson GPUs are left out (unknown, never an
error): their driver comes with JetPack and is not numbered by these branches.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Any, Optional

from gpudoctor.compat import rules
from gpudoctor.compat.data import Matrix, architecture_for
from gpudoctor.compat.model import Stack, finding
from gpudoctor.findings import Finding


@dataclass(frozen=True)
class Branch:
    """The last branch that drives an architecture, and where the matrix says so."""
    architecture: str
    last: int
    newest_driver: Optional[str]  # the newest release of that branch NVIDIA lists
    source: str  # the source's text from the matrix file


#: Majors this far above a last branch are read as that branch, never as a newer one: Windows numbers one
#: branch over several majors (R470's Kepler releases are 471.xx to 474.xx, R580's 580.xx and 581.xx), and a
#: pasted nvidia-smi does not always say which OS it came from. No Linux branch starts within this span of
#: a last branch (the branch after R470 is 495, after R580 590); a miss is better than a false alarm.
SAME_BRANCH_SPAN = 4


def branch_of(driver: Optional[str]) -> Optional[int]:
    """The branch of a driver version: 535 for "535.104.05"; None when it is not a version."""
    parsed = rules.version(driver)
    return parsed.major if parsed is not None else None


def last_branch(matrix: Matrix, cc: str) -> Optional[Branch]:
    """The last branch that drives GPUs of compute capability ``cc``; None while newer branches still
    drive them, for a Jetson-only compute capability, or where the matrix does not know."""
    arch, data, entry = _architecture_entry(matrix, cc)
    last = entry.get("last_branch") if entry else None
    if not (isinstance(last, str) and last.isascii() and last.isdigit()):
        return None  # still driven, or a --matrix overlay's value that is not a branch: unknown, never a crash
    assert entry is not None  # last was read from it
    newest = entry.get("newest_driver")
    return Branch(arch or "", int(last), newest if isinstance(newest, str) and branch_of(newest) == int(last) else None,
                  data["sources"].get(entry["source"], entry["source"]))


def _architecture_entry(matrix: Matrix, cc: str) -> tuple[Optional[str], dict[str, Any], Optional[dict[str, Any]]]:
    """(architecture, the driver_branches table, its entry for the architecture of ``cc``); no entry for a
    Jetson-only compute capability, whose modules are not driven by these branches."""
    data = matrix.topic("driver_branches")
    if _jetson_only(matrix, cc):
        return None, data, None
    arch = architecture_for(matrix, cc)
    return arch, data, next((e for e in data["entries"] if e.get("architecture") == arch), None)


def first_branch(matrix: Matrix, cc: str) -> Optional[Branch]:
    """The first branch that drives GPUs of compute capability ``cc``, where the matrix gives one with its
    source (Hopper and Ada: R520); None elsewhere, so an older driver is never judged by a guess."""
    arch, data, entry = _architecture_entry(matrix, cc)
    first = entry.get("first_branch") if entry else None
    if not (isinstance(first, str) and first.isascii() and first.isdigit()):
        return None
    assert entry is not None  # first was read from it
    key = entry.get("first_branch_source") or entry["source"]
    return Branch(arch or "", int(first), None, data["sources"].get(key, key))


def first_driver(matrix: Matrix, cc: str, os_name: str = "linux") -> Optional[str]:
    """The oldest driver version known to drive compute capability ``cc``: the Table 3 minimum of the first
    toolkit that compiles for it (CUDA 11.8's 520.61.05 for Hopper and Ada), when that is of the first branch."""
    branch = first_branch(matrix, cc)
    row = next((r for r in matrix.topic("cuda_targets")["entries"]
                if rules.version(r.get("compute_capability")) == rules.version(cc)), None)
    entry = rules.toolkit_entry(matrix, str(row.get("first_cuda"))) if branch and row and row.get("first_cuda") else None
    driver = (entry or {}).get("min_driver_windows" if os_name in ("windows", "wsl") else "min_driver_linux")
    return driver if (isinstance(driver, str) and branch is not None and (got := branch_of(driver)) is not None
                      and got >= branch.last) else None


def too_old(matrix: Matrix, driver: Optional[str], cc: str) -> rules.Verdict:
    """Whether driver ``driver`` is of a branch older than the first that drives compute capability ``cc``:
    FAIL with that branch in ``needs`` ("520"). Windows numbers a branch at or above its Linux number (R470 is
    471.xx to 474.xx), never below, so a major below the first branch is older on every OS."""
    have = branch_of(driver)
    branch = first_branch(matrix, cc)
    if have is None or branch is None or have >= branch.last:
        return rules.Verdict(rules.OK if have is not None else rules.UNKNOWN, "")
    return rules.Verdict(rules.FAIL, f"R{branch.last} is the first driver branch that drives {branch.architecture.title()} GPUs "
                                     f"(compute capability {cc}); driver {driver} is of an older branch, which has no support for them",
                         needs=str(branch.last))


def drives(matrix: Matrix, driver: Optional[str], cc: str) -> rules.Verdict:
    """Whether driver ``driver`` drives a GPU of compute capability ``cc``: FAIL with the last branch
    that does in ``needs`` ("470"), OK, or UNKNOWN when the driver is not a version."""
    have = branch_of(driver)
    if have is None:
        return rules.Verdict(rules.UNKNOWN, f"driver {driver!r} is not a version")
    branch = last_branch(matrix, cc)
    if branch is None or have <= branch.last + SAME_BRANCH_SPAN:
        return rules.Verdict(rules.OK, "")
    return rules.Verdict(rules.FAIL, f"R{branch.last} is the last driver branch that drives {branch.architecture.title()} "
                                     f"GPUs (compute capability {cc}); driver {driver} (R{have}) does not list them",
                         needs=str(branch.last))


def stack_findings(matrix: Matrix, stack: Stack) -> list[Finding]:
    """CMP010 for each GPU of the stack its driver does not drive; nothing when the driver is not given."""
    out: list[Finding] = []
    for label, cc in stack.gpus:
        if not stack.driver or _is_jetson_label(matrix, label):
            continue
        early = too_old(matrix, stack.driver, cc)
        if early.status == rules.FAIL:
            out.append(_too_old_finding(matrix, stack, label, cc, early))
            continue
        if stack.driver_os == "windows":
            continue  # Windows numbers its drivers apart (R470 is 471.xx to 474.xx): the Linux last branches do not apply
        verdict = drives(matrix, stack.driver, cc)
        if verdict.status != rules.FAIL:
            continue
        branch = last_branch(matrix, cc)
        newest = branch.newest_driver if branch else None
        out.append(finding("CMP010", f"driver {stack.driver} does not drive {label}: R{verdict.needs} is the last branch that does",
                           detail=verdict.reason + ". No newer driver will list this GPU.",
                           text=f"Install driver {newest or 'R' + str(verdict.needs)} (branch R{verdict.needs}) with the CUDA and "
                                f"framework builds that branch supports, or move to a newer GPU.",
                           commands=[f"gpudoctor matrix suggest --cc {cc} --driver {newest}"] if newest else [],
                           links=[DRIVER_MATRIX_DOCS]))
    return out


def _too_old_finding(matrix: Matrix, stack: Stack, label: str, cc: str, verdict: rules.Verdict) -> Finding:
    first = first_driver(matrix, cc, stack.driver_os)
    return finding("CMP010", f"driver {stack.driver} does not drive {label}: R{verdict.needs} is the first branch that does",
                   detail=verdict.reason + ". The GPU is not listed by nvidia-smi and CUDA sees no device.",
                   text=f"Install driver {first or 'R' + str(verdict.needs)} or newer.",
                   commands=[f"gpudoctor matrix suggest --cc {cc} --driver {first}"] if first else [],
                   links=[DRIVER_MATRIX_DOCS])


def too_old_line(driver: str, cc: str, branch: Branch, first: str) -> str:
    """`matrix suggest`'s first line when the given driver predates the GPU."""
    return (f"Driver {driver} does not drive compute capability {cc} GPUs: R{branch.last} is the first branch that drives "
            f"{branch.architecture.title()} GPUs. The builds below are for driver {first}, the oldest that does; a newer one "
            f"unlocks newer builds.")


def wrong_branch_line(driver: str, cc: str, branch: Branch) -> str:
    """`matrix suggest`'s first line when the given driver cannot drive the GPU."""
    return (f"Driver {driver} does not drive compute capability {cc} GPUs: R{branch.last} is the last branch that drives "
            f"{branch.architecture.title()} GPUs. The builds below are for driver {branch.newest_driver}, its newest release.")


def ceiling_line(matrix: Matrix, branch: Branch, cc: str, os_name: str = "linux") -> str:
    """`matrix suggest`'s last line for an architecture newer drivers dropped: the newest CUDA that its last
    branch runs and that still targets the GPU, and that nothing newer will run."""
    driver = branch.newest_driver or ""
    fits = [r["version"] for r in matrix.topic("cuda_toolkits")["entries"]
            if rules.toolkit_targets(matrix, r["version"], cc).status == rules.OK
            and rules.driver_runs_cuda(matrix, r["version"], driver, rules.driver_cuda_of(matrix, driver, os_name), os_name).status in (rules.OK, rules.LIMITED)]
    newest = max(fits, key=rules.known_version, default=None)
    cuda = f"; with it CUDA {rules.major_minor(newest)} is the newest CUDA for compute capability {cc}" if newest else ""
    return (f"Nothing newer will run on this GPU: R{branch.last} (newest {driver}) is the last driver branch for "
            f"{branch.architecture.title()} GPUs{cuda}, and newer builds need a newer driver or drop compute capability {cc}.")


DRIVER_MATRIX_DOCS = "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html"


def _is_jetson_label(matrix: Matrix, label: str) -> bool:
    entry = rules.gpu_entry(matrix, label)
    return entry is not None and entry.get("segment") == "jetson"


def gpu_by_pci_id(matrix: Matrix, device_id: str) -> Optional[dict[str, Any]]:
    """The first gpus.json entry that lists PCI device id ``device_id`` ("0x102d"), or None."""
    wanted = device_id.strip().lower()
    for entry in matrix.topic("gpus")["entries"]:
        if wanted in (d.lower() for d in entry.get("pci_device_ids") or ()):
            return entry
    return None


def undriven(matrix: Matrix, device_id: Any, driver: Optional[str]) -> bool:
    """Whether the GPU with PCI ``device_id`` is one the ``driver``'s branch no longer drives (by the matrix):
    driver.branch names such a GPU (DRV021), and no other finding needs to speak for it."""
    entry = gpu_by_pci_id(matrix, str(device_id or ""))
    if not entry:
        return False
    return drives(matrix, driver, entry["compute_capability"]).status == rules.FAIL


def _jetson_only(matrix: Matrix, cc: str) -> bool:
    """A compute capability only Jetson modules have (5.3, 6.2, 7.2, 8.7): no discrete GPU to judge."""
    return _jetson_only_in(matrix, cc)


@functools.lru_cache(maxsize=64)
def _jetson_only_in(matrix: Matrix, cc: str) -> bool:
    """_jetson_only, remembered per matrix: asked once per GPU judged."""
    rows = [e for e in matrix.topic("gpus")["entries"] if e.get("compute_capability") == cc]
    return bool(rows) and all(e.get("segment") == "jetson" for e in rows)
