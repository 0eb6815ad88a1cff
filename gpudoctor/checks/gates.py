"""Gates that cannot pass by checking nothing: what the run was asked to check was really checked.

A container entrypoint or a node health gate reads only the exit code, so a run must never pass
because the thing it asked for was not checked. This check judges the verdicts of the other checks
the run selected, as the facts record the selection (``facts["options"]``: ``only``, ``skip``,
``require_gpus``, written by ``check``; checks/selection.py reads it). Checks are pure functions of the
facts, so it re-derives those verdicts from the facts: a saved report re-judged by ``analyze`` keeps its
verdict. The registry that lists this check hands it the run (checks/base.py RunView: every check, and
each one's verdict so far) instead of this module importing the registry back.

- INT004: a selected check timed out: a probe it needs did not finish (the ``--timeout`` deadline
  passed, or the probe overran its own time limit). What it judges was not checked.
- INT005: something asked for by name was not checked: an area or check named with ``--only`` whose
  checks were all skipped (nothing they judge here), timed out, or only noted that they measured
  nothing on a GPU (``NOTHING_MEASURED``); or ``--require-gpus N`` whose check could not run.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from gpudoctor.checks.base import Check, Facts, RunView, finding
from gpudoctor.checks.selection import REQUIRED_GPUS_CHECK, names, options_of, recorded, required_gpus
from gpudoctor.findings import SKIP, TIMEOUT, CheckResult, Finding
from gpudoctor.snapshot import as_object, stopped_by
from gpudoctor.status import NOTHING_MEASURED, PROBE_TIMEOUT, STOPPED_DEADLINE, area_status

GATE_ID = "doctor.gates"
#: How many reasons an INT005 title quotes; the detail lists every check with its reason.
TITLE_REASONS = 3


def selected_checks(facts: Facts, run: RunView) -> list[Check]:
    """The checks the run selected (as its facts record it), less this one."""
    return [c for c in recorded(run.checks, facts) if c.id != GATE_ID]


def check_gates(facts: Facts, run: RunView) -> Iterator[Finding]:
    checks = selected_checks(facts, run)
    results = {c.id: run.result_of(c) for c in checks}
    timed_out = [c for c in checks if results[c.id].status == TIMEOUT]
    if timed_out:
        yield _timed_out(facts, timed_out)
    for name in names(options_of(facts).get("only")):
        if name == GATE_ID:
            continue
        chosen = [results[c.id] for c in checks if name in (c.area, c.id)]
        if not chosen:
            why = ["every check it names was left out by --skip"] if any(name in (c.area, c.id) for c in run.checks) else \
                  ["this gpudoctor has no area or check of that name"]
            yield _not_checked(f"--only {name} checked nothing", why, [])
        elif all(_not_run(r) for r in chosen):
            yield _not_checked(f"--only {name} checked nothing", [_why(r) for r in chosen], chosen)
    wanted = required_gpus(facts)
    required = results.get(REQUIRED_GPUS_CHECK)
    if wanted and required is not None and required.status in (SKIP, TIMEOUT):
        yield _not_checked(f"could not confirm {wanted} usable GPU(s) (--require-gpus {wanted})", [_why(required)],
                           [required])


def _not_run(result: CheckResult) -> bool:
    """Skipped, timed out, or ran and only noted that it measured nothing on a GPU."""
    if result.status in (SKIP, TIMEOUT):
        return True
    return area_status(result.status, [f.code for f in result.findings]) == SKIP


def _why(result: CheckResult) -> str:
    if result.status in (SKIP, TIMEOUT):
        return result.reason or ("timed out" if result.status == TIMEOUT else "skipped")
    return "; ".join(dict.fromkeys(NOTHING_MEASURED[f.code] for f in result.findings))


def _not_checked(title: str, reasons: Sequence[str], results: Sequence[CheckResult]) -> Finding:
    unique = list(dict.fromkeys(reasons))
    shown = "; ".join(unique[:TITLE_REASONS]) + (f"; and {len(unique) - TITLE_REASONS} more" if len(unique) > TITLE_REASONS else "")
    detail = " ".join(f"{r.id}: {r.status}, {_why(r)}." for r in results)
    return finding("INT005", f"{title}: {shown}", detail=detail,
                   text="What was asked for was not checked, so this run cannot pass. Run where it can be checked "
                        "(a machine with the GPUs and the driver; without --quick for GPU work; with a longer "
                        "--timeout), or stop asking for it.")


def _timed_out(facts: Facts, checks: Sequence[Check]) -> Finding:
    probes = as_object(facts.get("probes"))
    by_probe: dict[str, list[str]] = {}
    for check in checks:
        probe = next((n for n in check.needs if _record(probes, n).get("status") == PROBE_TIMEOUT), "?")
        by_probe.setdefault(probe, []).append(check.id)
    errors = {name: str(_record(probes, name).get("error", "timed out")) for name in by_probe}
    deadline = all(stopped_by(_record(probes, name)) == STOPPED_DEADLINE for name in by_probe)
    title = (f"{len(checks)} check(s) did not finish before the --timeout deadline" if deadline else
             f"{len(checks)} check(s) did not finish: a probe they need did not answer in time")
    detail = " ".join(f"Probe {name} ({errors[name]}): {', '.join(ids)}." for name, ids in by_probe.items())
    return finding("INT004", title, detail=detail,
                   text="What these checks judge was not checked, so this run cannot pass. Run again with a longer "
                        "--timeout, or none; a probe that overran its own limit has its own finding (INT002, or "
                        "DRV009 for NVML) naming what hangs.")


def _record(probes: dict[str, Any], name: str) -> dict[str, Any]:
    record = probes.get(name)
    return record if isinstance(record, dict) else {}


CHECKS = (
    Check(GATE_ID, "doctor", "what the run was asked to check was checked, before any deadline", ("INT004", "INT005"),
          check_gates, sees_run=True),
)
