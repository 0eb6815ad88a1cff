"""Facts, then judgement: the two steps every command shares, importable without the CLI."""

from __future__ import annotations

from typing import Any, Callable, Collection, Mapping, Optional, Sequence

from gpudoctor import report as rep
from gpudoctor.checks.base import Check
from gpudoctor.checks.registry import CHECKS, run_checks, select_checks, selection
from gpudoctor.checks.selection import REQUIRED_GPUS_CHECK, required_gpus
from gpudoctor.procs.child import kill_all, reopen
from gpudoctor.runner import Progress, run_probes, select_probes
from gpudoctor.views.visibility import cuda_numbers  # noqa: F401 - the commands ask the pipeline for it


#: Probes every selection needs: what the machine is, whether the driver answers, and which Python is diagnosed.
BASE_PROBES = ("host", "driver_files", "nvml", "python")


def check(on_progress: Optional[Callable[[Progress], None]] = None, quick: bool = False, deadline: Optional[float] = None,
          only: Sequence[str] = (), skip: Sequence[str] = (), options: Optional[dict[str, Any]] = None,
          deep: bool = False) -> dict[str, Any]:
    """Probe this machine and judge it. ``quick`` runs no work on the GPUs (it wins over ``deep``);
    ``deep`` adds the multi-GPU tests and longer workloads; ``only``/``skip`` select checks by area
    or id, and only the probes those checks read are run."""
    checks = select_checks(only, skip, require_gpus=required_gpus({"options": options or {}}) is not None)
    needed = set(BASE_PROBES) | {name for c in checks for name in c.needs}
    probes = select_probes(needed, quick=quick, deep=deep)
    reopen()
    try:
        facts = run_probes(probes, on_progress=on_progress, deadline=deadline)
    finally:
        kill_all()
    # the selection travels with the facts, so the gates (checks/gates.py) judge it again in `analyze`
    options = {**(options or {}), **({"only": list(only)} if only else {}), **({"skip": list(skip)} if skip else {})}
    from gpudoctor.compat.data import overlay_files

    overlays = overlay_files()
    if overlays:  # the verdicts rest on them: `analyze` without them says so (cli/reports.py)
        options["matrix_overlays"] = overlays
    if options:
        facts["options"] = options
    return judge(facts, checks=checks)


def judge(facts: dict[str, Any], created: Optional[str] = None, checks: Optional[Sequence[Check]] = None) -> dict[str, Any]:
    """Judge facts (fresh, or from a saved report) with this version's checks: ``checks``, or those the run
    selected as its facts record it (all without ``options``). ``--require-gpus N``, as the facts record it,
    always brings its check, whatever the selection."""
    checks = list(checks if checks is not None else selection(facts))
    if required_gpus(facts) is not None and all(c.id != REQUIRED_GPUS_CHECK for c in checks):
        order = {c.id: i for i, c in enumerate(CHECKS)}
        checks = sorted([*checks, *(c for c in CHECKS if c.id == REQUIRED_GPUS_CHECK)],
                        key=lambda c: order.get(c.id, len(order)))
    return rep.build(facts, run_checks(facts, checks), created=created)


def judge_only(facts: dict[str, Any], run: Collection[str], reasons: Mapping[str, str],
               created: Optional[str] = None) -> dict[str, Any]:
    """Judge facts that hold only part of a machine (read from a paste: gpudoctor/pastes/) with the checks
    named in ``run``; every other check is reported skipped, with the reason ``reasons`` gives for its id or
    its area, so nothing that was not judged shows as passed."""
    from gpudoctor.checks.registry import run_check
    from gpudoctor.findings import SKIP, CheckResult

    results = [run_check(c, facts) if c.id in run else
               CheckResult(c.id, c.area, c.title, SKIP, 0.0, reason=reasons.get(c.id) or reasons.get(c.area, "not checked"))
               for c in CHECKS]
    return rep.build(facts, results, created=created)
