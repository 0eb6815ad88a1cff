"""`gpudoctor check`: this machine (and, under torchrun with --deep, the whole job)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import click

from gpudoctor import report as rep
from gpudoctor.cli.base import EXIT_CODES_HELP, NO_REDACT_OPTION, _names, cli, report_options
from gpudoctor.cli.errors import BadInput
from gpudoctor.cli.output import emit, prepare
from gpudoctor.cli.progress import clear_progress, progress_printer

if TYPE_CHECKING:
    from gpudoctor import pipeline
    from gpudoctor.compat.data import Matrix


class Seconds(click.FloatRange):
    """A duration: a finite number in range. ``FloatRange`` lets ``nan`` through (every comparison with it
    is false) and ``inf``, which would make the deadline meaningless."""

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        import math

        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number of seconds.", param, ctx)
        return rv


@cli.command(epilog=EXIT_CODES_HELP, short_help="Check this machine's driver, GPUs, libraries and frameworks.")
@report_options
@click.option("--quick", is_flag=True, help="Run no work on the GPUs (skip the smoke kernel and the framework workloads). "
                                            "Wins over --deep: with both, no GPU work runs at all.")
@click.option("--deep", is_flag=True,
              help="Also test the GPUs together: P2P access and copy bandwidth between every pair, and an NCCL "
                   "all-reduce across all of them (PyTorch, two or more GPUs); framework workloads repeat longer. "
                   "Takes a minute or more. Ignored with --quick. Under torchrun (one rank per GPU, any number of "
                   "nodes), each node checks itself, then all ranks run one NCCL all-reduce across the job, and rank 0 "
                   "writes the combined report.")
@click.option("-q", "--quiet", is_flag=True, help="Print only problems, one line each (for logs); nothing when healthy.")
@click.option("--timeout", "timeout_s", type=Seconds(min=0.1), metavar="SECONDS",
              help="Hard deadline for the whole run: whatever is unfinished is reported as timed out.")
@click.option("--require-gpus", type=click.IntRange(min=0), metavar="N",
              help="Fewer usable GPUs than N, or none confirmed, is an error (VIS005, INT005); checked whatever "
                   "--only and --skip say.")
@click.option("--only", multiple=True, callback=_names, metavar="AREA|CHECK",
              help="Run only these areas or checks (repeat or comma-separate; `gpudoctor checks` lists them). "
                   "One whose checks could all not run here is an error (INT005).")
@click.option("--skip", multiple=True, callback=_names, metavar="AREA|CHECK", help="Leave out these areas or checks.")
@click.option("--python", "python", metavar="PATH",
              help="Diagnose this Python (an interpreter, or a venv/conda folder): its frameworks, libraries and "
                   "packages. Default: gpudoctor's own if it holds a framework, else the active environment "
                   "($VIRTUAL_ENV, else $CONDA_PREFIX), else python3 on PATH if it holds one, else gpudoctor's own.")
@NO_REDACT_OPTION
def check(fmt: str, output: Optional[Path], verbose: bool, fail_on: str, quick: bool, deep: bool, quiet: bool,
          timeout_s: Optional[float], require_gpus: Optional[int], only: tuple[str, ...], skip: tuple[str, ...],
          python: Optional[str], no_redact: bool, matrix: Matrix) -> None:
    """Check the driver, every GPU, the CUDA libraries and frameworks, and report problems with their fixes."""
    import time

    from gpudoctor import pipeline
    from gpudoctor.trace import mark

    mark("cli: check command starts")
    started = time.monotonic()
    try:  # before the probes start: they read the interpreter chosen (a bad --python is said after a bad --only)
        target = pipeline.choose_interpreter(python)
        bad_python = None
    except pipeline.BadPython as exc:
        target, bad_python = pipeline.own_interpreter(), exc
    # NVML's child (gpudoctor's own Python) starts while the checks are imported, and so do the --quick
    # probes that are all Python, each in a forked copy of this process
    early = pipeline.start_early(target, quick=quick and bad_python is None)
    try:
        pipeline.select_checks(only, skip)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    mark("cli: checks imported")
    if bad_python is not None:
        raise BadInput(str(bad_python)) from None
    prepare(fmt, quiet, matrix=matrix)  # while the probes started above run
    mark("cli: output prepared")
    run_options = pipeline.run_options(target, timeout_s=timeout_s, only=only, skip=skip, quick=quick, deep=deep,
                                   require_gpus=require_gpus, early=early, matrix=matrix)

    launch = _launch()
    if launch is not None and not (deep and not quick) and launch.local_rank != 0:
        # one check per node: ranks checking the same GPUs at once would slow each other's measurements
        # said even with --quiet: a launcher's variables inherited by a plain check would otherwise pass silently
        click.echo(f"gpudoctor: rank {launch.rank} of {launch.world_size}: local rank 0 checks this node "
                   "(add --deep to test the GPUs of every node together)", err=True)
        sys.exit(rep.EXIT_OK)
    if launch is None or not deep or quick:
        report = _node_check(run_options, quiet)
    else:
        report = _cluster_check(launch, run_options, quiet, redact=not no_redact)
    mark("cli: judged")
    # a FIFO named by --output waits no longer than the rest of the run
    emit(report, fmt, output, verbose, redact=not no_redact, quiet=quiet, fail_on=fail_on,
         duration_s=time.monotonic() - started, deadline=run_options.deadline, matrix=run_options.matrix)
    mark("cli: report written")
    if launch is not None and deep and not quick:
        from gpudoctor.distributed import wait_for_local_ranks

        wait_for_local_ranks(launch, run_options.deadline)
    sys.exit(rep.exit_code(rep.findings_of(report), fail_on))


def _node_check(options: pipeline.RunOptions, quiet: bool) -> dict[str, Any]:
    """This node's check, as ``options`` (pipeline.RunOptions) ask, with a progress line unless ``quiet``."""
    from gpudoctor import pipeline

    try:
        return pipeline.check(options, on_progress=None if quiet else progress_printer())
    finally:
        clear_progress()  # also before "interrupted" or an internal error


def _launch() -> Any:
    """This process's rank in a torchrun job, or None; a launcher variable that makes no sense is bad input."""
    import os

    if not os.environ.get("WORLD_SIZE"):  # launch_from_env needs it: not a job (and no import on the quick path)
        return None
    from gpudoctor.distributed import launch_from_env

    try:
        return launch_from_env()
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _cluster_check(launch: Any, options: pipeline.RunOptions, quiet: bool, redact: bool = True) -> dict[str, Any]:
    """``check --deep`` as one rank of a torchrun job (gpudoctor/distributed.py): rank 0 gets the combined
    report; every other rank says what it sent and exits 0, so that torchrun lets rank 0 finish. The
    node's own check ends by the node deadline run_rank gives it, within the run's."""
    from dataclasses import replace

    from gpudoctor import distributed, pipeline

    def node_check(until: Optional[float]) -> dict[str, Any]:
        return _node_check(replace(options, deadline=until), quiet)

    report, data = distributed.run_rank(launch, node_check, options.deadline, redact=redact)
    if launch.rank != 0:
        if not quiet or (data.get("rank") or {}).get("error"):
            click.echo(distributed.describe_rank(launch, data, report), err=True)
        sys.exit(rep.EXIT_OK)
    facts = {**(report or {}).get("facts", {}), "cluster": distributed.cluster_facts(launch, data)}
    if (report or {}).get("error"):  # this node's own check crashed: INT001 says so, the job is still judged
        facts["probes"] = {**facts.get("probes", {}), "node_check": {
            "status": "error", "title": "this node's own check", "error": (report or {})["error"], "duration_s": 0.0}}
    return pipeline.judge(facts, checks=pipeline.select_checks(options.only, options.skip), matrix=options.matrix)
