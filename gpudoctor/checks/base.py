"""What every check module needs: the Check record, the way a check says "not applicable",
and the one constructor of findings (which takes the severity from the code catalogue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence, cast

from gpudoctor.codes import lookup
from gpudoctor.findings import Finding, Remediation, Subject

if TYPE_CHECKING:
    from gpudoctor.facts_types import GpuFacts, NvmlFacts

Facts = dict[str, Any]


class NotApplicable(Exception):
    """Raised by a check that has nothing to judge here (no GPU, a single GPU, not in a container)."""


@dataclass(frozen=True)
class Check:
    id: str
    area: str
    title: str
    codes: tuple[str, ...]
    run: Callable[..., Iterable[Finding]]  # run(facts); run(facts, matrix) with reads_matrix; run(facts, RunView) with sees_run
    needs: tuple[str, ...] = ()  # probes whose facts it reads
    reads_matrix: bool = False  # judges by the compatibility matrix: given the run's (the bundled one, --matrix files over it)
    sees_run: bool = False  # judges the other checks' verdicts (the doctor's gate): given a RunView


@dataclass(frozen=True)
class RunView:
    """What a check that judges the run (``sees_run``) is handed by the registry that runs it: every check
    there is, and each one's verdict on these facts. Handed, not imported: the registry lists that check."""

    checks: Sequence[Check]
    result_of: Callable[[Check], Any]  # -> CheckResult


def finding(code: str, title: str, detail: str = "", subject: Optional[Subject] = None,
            text: str = "", commands: Sequence[str] = (), links: Sequence[str] = (),
            severity: Optional[str] = None) -> Finding:
    return Finding(
        code=code,
        severity=severity or lookup(code).severity,
        title=title,
        detail=detail,
        subject=subject or Subject(),
        remediation=Remediation(text=text, commands=tuple(commands), links=tuple(links)),
    )


def nvml_ready(facts: Facts) -> bool:
    """NVML started; per-GPU checks have nothing to read otherwise (the driver checks report why)."""
    init = cast("NvmlFacts", facts.get("nvml") or {}).get("init") or {}
    return bool(init.get("ok"))


def require_gpus(facts: Facts) -> list[GpuFacts]:
    from gpudoctor.snapshot import gpus

    if not nvml_ready(facts):
        raise NotApplicable("NVML is not available")
    found = [g for g in gpus(facts) if "name" in g]
    if not found:
        raise NotApplicable("no GPU could be read")
    return found


def nvml_index(facts: Facts, uuid: Any) -> Any:
    """The NVML index of the GPU with this UUID, None if no GPU has it. The smoke kernel and the framework
    workloads number GPUs as CUDA does; their findings name a GPU by the NVML index every other check uses."""
    for gpu in facts.get("gpus") or []:
        if gpu.get("uuid") == uuid:
            return gpu.get("index")
    return None


#: Where an NVIDIA GPU's hardware and driver faults are logged (Xid events): the first look after a
#: GPU fell off the bus, a kernel failed or memory errors were counted.
XID_COMMAND = "sudo dmesg | grep -i xid | tail -n 20"
#: The driver's own kernel messages (NVRM) and Xid errors: what it said when a GPU or a call failed.
DRIVER_LOG_COMMAND = "sudo dmesg | grep -i -E 'xid|nvrm' | tail -n 20"
#: Only the errors and warnings among them: why the driver would not load or answer.
DRIVER_ERRORS_COMMAND = "sudo dmesg --level=err,warn | grep -i -E 'nvrm|xid' | tail -n 20"
#: The driver's load messages alone (NVRM): a module that would not load, or a GPU it refused.
DRIVER_LOAD_COMMAND = "sudo dmesg | grep -i nvrm | tail -n 20"
