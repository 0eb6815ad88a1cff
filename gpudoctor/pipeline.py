"""Facts, then judgement: the two steps every command shares, importable without the CLI.

`check` takes its options as one value (RunOptions), made once by the command line: the interpreter
diagnosed, the deadline, the compatibility matrix with its --matrix overlays, the selection and the probes
already started travel from here to the runner, the probes and the checks as parameters. The checks are imported when first needed, so the
command line can start the early probes (start_early) before that import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Optional, Sequence

from gpudoctor import report as rep
from gpudoctor import runner
from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.probes import interpreter
from gpudoctor.procs.child import kill_all, reopen
from gpudoctor.probes.interpreter import BadPython, Target  # noqa: F401 - the command line's one layer
from gpudoctor.probes.interpreter import own as own_interpreter  # noqa: F401
from gpudoctor.run_options import Early, RunOptions
from gpudoctor.runner import FORKED_QUICK, Progress, run_probes, select_probes
from gpudoctor.views.visibility import cuda_numbers  # noqa: F401 - the commands ask the pipeline for it

if TYPE_CHECKING:
    from gpudoctor.checks.base import Check

__all__ = ["BadPython", "RunOptions", "Target", "check", "choose_interpreter", "judge", "judge_only",
           "device_facts", "own_interpreter", "run_options", "select_checks", "start_early"]

#: Probes every selection needs: what the machine is, whether the driver answers, and which Python is diagnosed.
BASE_PROBES = ("host", "driver_files", "nvml", "python")


def choose_interpreter(python: Optional[str]) -> Target:
    """The Python the run diagnoses: ``--python`` (``python``), else as interpreter.choose's rule says;
    BadPython, with a one-line message, for a ``--python`` that names no interpreter."""
    return interpreter.choose(python)


def start_early(target: Target, quick: bool) -> Early:
    """Start what can run while the command imports the checks, for ``target``: NVML's child, and for
    ``quick`` the probes whose work is all Python, each in a forked copy of this process. The run adopts
    them through RunOptions.early."""
    return runner.start_early(("nvml",), target, fork=FORKED_QUICK if quick else (), quick=quick)


def run_options(target: Target, timeout_s: Optional[float] = None, only: Sequence[str] = (), skip: Sequence[str] = (),
                quick: bool = False, deep: bool = False, require_gpus: Optional[int] = None,
                early: Optional[Early] = None, matrix: Matrix = BUNDLED) -> RunOptions:
    """The run's options, made once from the command's: --timeout becomes a deadline counted from now, and
    ``matrix`` (the bundled one with the command's --matrix files over it) is what the verdicts rest on."""
    import time

    deadline = time.monotonic() + timeout_s if timeout_s else None
    return RunOptions(interpreter=target, deadline=deadline, matrix=matrix, only=tuple(only),
                      skip=tuple(skip), quick=quick, deep=deep, require_gpus=require_gpus,
                      early=early if early is not None else Early())


def device_facts() -> dict[str, Any]:
    """What `gpudoctor devices` lists of this machine: the host and NVML probes' facts, judged by nothing."""
    return runner.run_probes([p for p in runner.PROBES if p.name in ("host", "nvml")], RunOptions())


def select_checks(only: Sequence[str] = (), skip: Sequence[str] = (), require_gpus: bool = False) -> list[Check]:
    """The checks ``--only``/``--skip`` select (registry.select_checks); ValueError names an unknown one."""
    from gpudoctor.checks.registry import select_checks as select

    return select(only, skip, require_gpus=require_gpus)


def check(options: RunOptions, on_progress: Optional[Callable[[Progress], None]] = None) -> dict[str, Any]:
    """Probe this machine and judge it as ``options`` ask: only the probes the selected checks read are
    run, and the verdicts read the compatibility matrix it names."""
    from gpudoctor.checks.selection import required_gpus

    recorded = options.recorded()
    checks = select_checks(options.only, options.skip, require_gpus=required_gpus({"options": recorded}) is not None)
    needed = set(BASE_PROBES) | {name for c in checks for name in c.needs}
    probes = select_probes(needed, quick=options.quick, deep=options.deep)
    reopen()
    try:
        facts = run_probes(probes, options, on_progress=on_progress)
    finally:
        kill_all()
    # the selection travels with the facts, so the gates (checks/gates.py) judge it again in `analyze`
    if recorded:
        facts["options"] = recorded
    return judge(facts, checks=checks, matrix=options.matrix)


def judge(facts: dict[str, Any], created: Optional[str] = None, checks: Optional[Sequence[Check]] = None,
          matrix: Matrix = BUNDLED) -> dict[str, Any]:
    """Judge facts (fresh, or from a saved report) with this version's checks: ``checks``, or those the run
    selected as its facts record it (all without ``options``), by the compatibility matrix ``matrix``.
    ``--require-gpus N``, as the facts record it, always brings its check, whatever the selection."""
    from gpudoctor.checks.registry import CHECKS, run_checks, selection
    from gpudoctor.checks.selection import REQUIRED_GPUS_CHECK, required_gpus

    checks = list(checks if checks is not None else selection(facts))
    if required_gpus(facts) is not None and all(c.id != REQUIRED_GPUS_CHECK for c in checks):
        order = {c.id: i for i, c in enumerate(CHECKS)}
        checks = sorted([*checks, *(c for c in CHECKS if c.id == REQUIRED_GPUS_CHECK)],
                        key=lambda c: order.get(c.id, len(order)))
    return rep.build(facts, run_checks(facts, checks, matrix), created=created)


def judge_only(facts: dict[str, Any], run: Collection[str], reasons: Mapping[str, str],
               created: Optional[str] = None, matrix: Matrix = BUNDLED) -> dict[str, Any]:
    """Judge facts that hold only part of a machine (read from a paste: gpudoctor/pastes/) with the checks
    named in ``run``; every other check is reported skipped, with the reason ``reasons`` gives for its id or
    its area, so nothing that was not judged shows as passed."""
    from gpudoctor.checks.registry import CHECKS, run_check
    from gpudoctor.findings import SKIP, CheckResult

    results = [run_check(c, facts, matrix) if c.id in run else
               CheckResult(c.id, c.area, c.title, SKIP, 0.0, reason=reasons.get(c.id) or reasons.get(c.area, "not checked"))
               for c in CHECKS]
    return rep.build(facts, results, created=created)
