"""The explicit, ordered list of checks, bottom of the stack to top, and the loop that runs them.

Order is declared, not discovered, so output is stable and ``gpudoctor checks`` lists the same
thing every time. Each check declares the codes it may emit; tests hold it to that.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping, Optional, Sequence

from gpudoctor.checks import branches, cluster, compat, container, driver, error_counters, framework_env, frameworks, gates, gpu_health, internal, libraries, messages, multigpu, pyenv, smoke, toolkit, topology, visibility, workload, xid_events
from gpudoctor.checks.base import Check, NotApplicable, RunView, finding
from gpudoctor.checks.selection import recorded, select
from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.findings import SKIP, TIMEOUT, CheckResult, Finding
from gpudoctor.status import PROBE_ERROR, PROBE_TIMEOUT, check_status

from gpudoctor.areas import NAMES as AREAS  # noqa: F401 - the areas, bottom of the stack to top: gpudoctor/areas.py

CHECKS: tuple[Check, ...] = (
    *internal.CHECKS,
    *driver.CHECKS,
    *branches.CHECKS,  # a GPU the driver's branch no longer drives
    *gpu_health.CHECKS,
    *xid_events.CHECKS,  # each GPU's Xid and driver errors in the kernel log
    *error_counters.CHECKS,  # what the driver counted since it loaded, and the NVSwitch fabric
    *topology.CHECKS,
    *visibility.CHECKS,
    *container.CHECKS,
    *toolkit.CHECKS,
    *libraries.CHECKS,
    *pyenv.CHECKS,
    *frameworks.CHECKS,
    *framework_env.CHECKS,  # the variables that steer a framework, named as the cause
    *messages.CHECKS,  # what a pasted ticket shows happened (analyze only)
    *compat.CHECKS,
    *smoke.CHECKS,
    *workload.CHECKS,
    *multigpu.CHECKS,
    *cluster.CHECKS,
    *gates.CHECKS,  # last: it judges whether the checks before it could run
)


def run_checks(facts: dict[str, Any], checks: Sequence[Check] = CHECKS, matrix: Matrix = BUNDLED) -> list[CheckResult]:
    """Each check once, in order; those whose row says they read the compatibility matrix are given ``matrix``.
    The results so far are handed on, so that a check that judges other checks' verdicts (``doctor.gates``,
    last) reads them instead of running every check twice."""
    done: dict[str, CheckResult] = {}
    out = []
    for check in checks:
        result = run_check(check, facts, matrix, done)
        done[check.id] = result
        out.append(result)
    return out


def result_of(check: Check, facts: dict[str, Any], matrix: Matrix = BUNDLED,
              done: Optional[Mapping[str, CheckResult]] = None) -> CheckResult:
    """``check``'s verdict on ``facts``: the one this run already reached (``done``), else judged now."""
    if done is not None and check.id in done:
        return done[check.id]
    return run_check(check, facts, matrix, done)


def run_check(check: Check, facts: dict[str, Any], matrix: Matrix = BUNDLED,
              done: Optional[Mapping[str, CheckResult]] = None) -> CheckResult:
    """``check``'s verdict on ``facts``; ``done``: the verdicts this run already reached, which a check that
    judges other checks reads (``doctor.gates``)."""
    start = time.monotonic()
    try:
        blocked = _blocked_by(check, facts)
        if blocked:
            status, reason = blocked
            return CheckResult(check.id, check.area, check.title, status, time.monotonic() - start, reason=reason)
        found = [_stamp(f, check) for f in _collect(_ran(check, facts, matrix, done))]
    except NotApplicable as exc:
        return CheckResult(check.id, check.area, check.title, SKIP, time.monotonic() - start, reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a broken check must not take the report down
        crash = finding("INT003", f"check {check.id} crashed: {type(exc).__name__}: {exc}",
                        text="Please report this to gpudoctor with the JSON report attached.")
        found = [_stamp(crash, check)]
    return CheckResult(check.id, check.area, check.title, status_of(found), time.monotonic() - start, found)


def _ran(check: Check, facts: dict[str, Any], matrix: Matrix, done: Optional[Mapping[str, CheckResult]]) -> Iterable[Finding]:
    """What ``check`` yields, handed what its row says it reads besides the facts."""
    if check.sees_run:
        return check.run(facts, RunView(CHECKS, lambda other: result_of(other, facts, matrix, done)))
    return check.run(facts, matrix) if check.reads_matrix else check.run(facts)


def _collect(items: Iterable[Finding]) -> list[Finding]:
    return list(items or ())


def _stamp(f: Finding, check: Check) -> Finding:
    from dataclasses import replace

    return replace(f, check=check.id)


def _blocked_by(check: Check, facts: dict[str, Any]) -> tuple[str, str] | None:
    probes = facts.get("probes") or {}
    for name in check.needs:
        record = probes.get(name) if isinstance(probes, dict) else None
        record = record if isinstance(record, dict) else {}
        if record.get("status") == PROBE_TIMEOUT:
            return TIMEOUT, f"probe {name} timed out"
        if record.get("status") == PROBE_ERROR:
            return SKIP, f"probe {name} failed"
    return None


def status_of(found: Sequence[Finding]) -> str:
    """A check's status from its findings: the mapping of gpudoctor/status.py."""
    return check_status(f.severity for f in found)


def select_checks(only: Sequence[str] = (), skip: Sequence[str] = (), require_gpus: bool = False) -> list[Check]:
    """The registered checks that ``--only``/``--skip`` (and ``--require-gpus``) select (checks/selection.py)."""
    return select(CHECKS, only, skip, require_gpus)


def selection(facts: dict[str, Any]) -> list[Check]:
    """The registered checks the run that gathered ``facts`` selected, as they record it."""
    return recorded(CHECKS, facts)


def codes_of(checks: Sequence[Check] = CHECKS) -> dict[str, str]:
    """Every code any check may emit, with the check that owns it."""
    return {code: check.id for check in checks for code in check.codes}
