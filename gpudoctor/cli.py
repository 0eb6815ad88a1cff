"""The command line: parse, run the pipeline, pick a renderer, choose the exit code. Nothing else."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

import click

from gpudoctor import __version__
from gpudoctor import report as rep

EXIT_CODES_HELP = """\b
Exit codes:
  0  nothing at or above --fail-on (default: error) was found
  1  findings at or above --fail-on
  2  usage error or bad input (unknown option, unreadable or malformed report)
  3  gpudoctor itself could not complete (internal error, interrupted, report not written)
"""
FORMATS = ("text", "json", "markdown", "junit")


class Failure(click.ClickException):
    """A one-line error with gpudoctor's exit code 3."""

    exit_code = rep.EXIT_INTERNAL


class BadInput(click.ClickException):
    exit_code = rep.EXIT_USAGE


class DoctorGroup(click.Group):
    """Turns anything unexpected into a one-line error and exit code 3, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            from gpudoctor.probes.child import kill_all

            kill_all()
            click.echo("gpudoctor: interrupted", err=True)
            ctx.exit(rep.EXIT_INTERNAL)
        except Exception as exc:  # noqa: BLE001 - the contract is: no traceback, exit 3
            click.echo(f"gpudoctor: internal error: {type(exc).__name__}: {exc}", err=True)
            ctx.exit(rep.EXIT_INTERNAL)


def _load_matrix(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    if value:
        from gpudoctor.matrix import MatrixError, set_overlay

        try:
            set_overlay(value)
        except MatrixError as exc:
            raise BadInput(f"--matrix: {exc}") from None
    return value


MATRIX_OPTION = click.option("--matrix", "matrix_file", metavar="FILE", callback=_load_matrix, expose_value=False,
                             help="Overlay or extend the bundled compatibility matrix with FILE (JSON).")
NO_REDACT_OPTION = click.option("--no-redact", is_flag=True,
                                help="Keep host names, GPU UUIDs and serials, and home directories (for your own "
                                     "fleet). Tokens, keys and passwords are removed anyway.")


def _report_options(fn: Callable) -> Callable:
    """Options shared by every command that prints a report."""
    fn = MATRIX_OPTION(fn)
    fn = click.option("--fail-on", type=click.Choice(tuple(rep.FAIL_ON)), default="error", show_default=True,
                      help="Lowest severity that makes the exit code 1.")(fn)
    fn = click.option("-v", "--verbose", is_flag=True, help="Show every fact and each check's duration.")(fn)
    fn = click.option("-o", "--output", type=click.Path(dir_okay=False, writable=False, path_type=Path),
                      help="Write the report to FILE instead of standard output.")(fn)
    fn = click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
                      help="Report format.")(fn)
    return fn


@click.group(cls=DoctorGroup, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpudoctor")
def cli() -> None:
    """Judge whether this machine can really compute on its NVIDIA GPUs, and say how to fix it if not."""


def _names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n.strip() for v in value for n in v.split(",") if n.strip())


@cli.command(epilog=EXIT_CODES_HELP)
@_report_options
@click.option("--quick", is_flag=True, help="Run no work on the GPUs (skip the smoke kernel and the framework workloads). "
                                            "Wins over --deep: with both, no GPU work runs at all.")
@click.option("--deep", is_flag=True,
              help="Also test the GPUs together: P2P access and copy bandwidth between every pair, and an NCCL "
                   "all-reduce across all of them (PyTorch, two or more GPUs); framework workloads repeat longer. "
                   "Takes a minute or more. Ignored with --quick. Under torchrun (one rank per GPU, any number of "
                   "nodes), each node checks itself, then all ranks run one NCCL all-reduce across the job, and rank 0 "
                   "writes the combined report.")
@click.option("-q", "--quiet", is_flag=True, help="Print only problems, one line each (for logs); nothing when healthy.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), metavar="SECONDS",
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
                   "($VIRTUAL_ENV, $CONDA_PREFIX, then python3 on PATH).")
@NO_REDACT_OPTION
def check(fmt: str, output: Optional[Path], verbose: bool, fail_on: str, quick: bool, deep: bool, quiet: bool,
          timeout_s: Optional[float], require_gpus: Optional[int], only: tuple[str, ...], skip: tuple[str, ...],
          python: Optional[str], no_redact: bool) -> None:
    """Check the driver, every GPU, the CUDA libraries and frameworks, and report problems with their fixes."""
    import time

    from gpudoctor import pipeline

    try:
        pipeline.select_checks(only, skip)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    from gpudoctor.probes import interpreter

    try:
        interpreter.use(interpreter.choose(python))
    except interpreter.BadPython as exc:
        raise BadInput(str(exc)) from None
    deadline = time.monotonic() + timeout_s if timeout_s else None
    options = {"require_gpus": require_gpus} if require_gpus is not None else None

    def node_check(until: Optional[float] = deadline) -> dict[str, Any]:
        try:
            return pipeline.check(on_progress=None if quiet else _progress_printer(), quick=quick, deep=deep,
                                  deadline=until, only=only, skip=skip, options=options)
        finally:
            _clear_progress()  # also before "interrupted" or an internal error

    launch = _launch()
    if launch is not None and not (deep and not quick) and launch.local_rank != 0:
        # one check per node: ranks checking the same GPUs at once would slow each other's measurements
        # said even with --quiet: a launcher's variables inherited by a plain check would otherwise pass silently
        click.echo(f"gpudoctor: rank {launch.rank} of {launch.world_size}: local rank 0 checks this node "
                   "(add --deep to test the GPUs of every node together)", err=True)
        sys.exit(rep.EXIT_OK)
    if launch is None or not deep or quick:
        report = node_check()
    else:
        report = _cluster_check(launch, node_check, deadline, only, skip, quiet, redact=not no_redact)
    _emit(report, fmt, output, verbose, redact=not no_redact, quiet=quiet, fail_on=fail_on)
    sys.exit(rep.exit_code(rep.findings_of(report), fail_on))


def _launch() -> Any:
    """This process's rank in a torchrun job, or None; a launcher variable that makes no sense is bad input."""
    from gpudoctor.distributed import launch_from_env

    try:
        return launch_from_env()
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _cluster_check(launch: Any, node_check: Callable[..., dict[str, Any]], deadline: Optional[float],
                   only: tuple[str, ...], skip: tuple[str, ...], quiet: bool, redact: bool = True) -> dict[str, Any]:
    """``check --deep`` as one rank of a torchrun job (gpudoctor/distributed.py): rank 0 gets the combined
    report; every other rank says what it sent and exits 0, so that torchrun lets rank 0 finish."""
    from gpudoctor import distributed, pipeline

    report, data = distributed.run_rank(launch, node_check, deadline, redact=redact)
    if launch.rank != 0:
        if not quiet or (data.get("rank") or {}).get("error"):
            click.echo(distributed.describe_rank(launch, data, report), err=True)
        sys.exit(rep.EXIT_OK)
    facts = {**(report or {}).get("facts", {}), "cluster": distributed.cluster_facts(launch, data)}
    if (report or {}).get("error"):  # this node's own check crashed: INT001 says so, the job is still judged
        facts["probes"] = {**facts.get("probes", {}), "node_check": {
            "status": "error", "title": "this node's own check", "error": report["error"], "duration_s": 0.0}}
    return pipeline.judge(facts, checks=pipeline.select_checks(only, skip))


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("report_file", metavar="REPORT.json", type=click.Path(dir_okay=False, path_type=Path))
@_report_options
@NO_REDACT_OPTION
def analyze(report_file: Path, fmt: str, output: Optional[Path], verbose: bool, fail_on: str, no_redact: bool) -> None:
    """Re-check a saved JSON report with this version's checks (for triaging someone else's machine)."""
    from gpudoctor import pipeline

    saved = _load_report(report_file)
    report = pipeline.judge(saved["facts"], created=saved.get("created"))
    if saved.get("redacted") is True:
        report["redacted"] = True  # its facts stay redacted, whatever --no-redact says
    _emit(report, fmt, output, verbose, redact=not no_redact, fail_on=fail_on)
    from gpudoctor.redact import redact_report

    before, after = (saved, report) if no_redact else (redact_report(saved), redact_report(report))
    for line in rep.describe_changes(rep.changes(before, after)):
        click.echo(line, err=True)
    sys.exit(rep.exit_code(rep.findings_of(report), fail_on))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the GPU and topology facts as JSON.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Show the devices of a saved report instead of this machine's.")
def devices(as_json: bool, report_file: Optional[Path]) -> None:
    """List every GPU, the number CUDA gives it, and the topology matrix between GPUs."""
    import json

    from gpudoctor import pipeline
    from gpudoctor.render.devices import render_devices
    from gpudoctor.render.facts_text import driver_line

    if report_file:
        facts = _load_report(report_file)["facts"]
    else:
        from gpudoctor.runner import PROBES, run_probes

        facts = run_probes([p for p in PROBES if p.name in ("host", "nvml")])
    if as_json:
        click.echo(json.dumps({k: facts.get(k) for k in ("nvml", "gpus", "topology")}, indent=2))
        return
    click.echo(f"NVIDIA driver: {driver_line(facts)}")
    click.echo(render_devices(facts, pipeline.cuda_numbers(facts)), nl=False)


@cli.group("matrix")
def matrix_group() -> None:
    """Query the bundled compatibility matrix without the stack installed."""


@matrix_group.command("check", epilog=EXIT_CODES_HELP)
@click.option("--driver", metavar="VER", help="NVIDIA driver version, e.g. 535.104.05.")
@click.option("--gpu", metavar="NAME", help="GPU model as NVML names it, e.g. 'NVIDIA L4'.")
@click.option("--cc", metavar="X.Y", help="GPU compute capability, instead of --gpu.")
@click.option("--torch", metavar="VER[+cuXXX]", help="PyTorch version; without +cuXXX, the plain PyPI wheel for Linux x86_64.")
@click.option("--tensorflow", metavar="VER", help="TensorFlow version.")
@click.option("--cuda", metavar="VER", help="CUDA toolkit version (nvcc).")
@click.option("--cudnn", metavar="VER", help="cuDNN version.")
@click.option("--python", metavar="X.Y", help="Python version.")
@click.option("--json", "as_json", is_flag=True, help="Print {verdict, findings} as JSON.")
@MATRIX_OPTION
def matrix_check(driver, gpu, cc, torch, tensorflow, cuda, cudnn, python, as_json) -> None:
    """Judge a hypothetical stack: exit 1 on an error verdict, 2 on bad input, else 0."""
    from gpudoctor import matrix_cli

    if not any((driver, gpu, cc, torch, tensorflow, cuda, cudnn, python)):
        raise BadInput("give at least one of --driver, --gpu, --cc, --torch, --tensorflow, --cuda, --cudnn, --python")
    stack = _matrix_call(lambda: matrix_cli.stack_from_args(driver, gpu, cc, torch, tensorflow, cuda, cudnn, python))
    sys.exit(_matrix_call(lambda: matrix_cli.run_check(stack, as_json)))


@matrix_group.command("suggest")
@click.option("--driver", metavar="VER", required=True, help="NVIDIA driver version.")
@click.option("--gpu", metavar="NAME", help="GPU model as NVML names it.")
@click.option("--cc", metavar="X.Y", help="GPU compute capability, instead of --gpu.")
@click.option("--python", metavar="X.Y", help="Python version.")
@MATRIX_OPTION
def matrix_suggest(driver, gpu, cc, python) -> None:
    """The newest PyTorch and TensorFlow builds that will work here, with their install commands."""
    from gpudoctor import compat, matrix_cli

    if not (gpu or cc):
        raise BadInput("give --gpu NAME or --cc X.Y")
    if cc is None:
        row = _matrix_call(lambda: compat.gpu_entry(gpu))
        if row is None:
            raise BadInput(f"--gpu {gpu!r} is not in gpudoctor's matrix; give --cc X.Y instead")
        cc = row["compute_capability"]
    for line in _matrix_call(lambda: matrix_cli.suggest(driver, cc, python)) or ["nothing in the matrix fits this driver and GPU"]:
        click.echo(line)


@matrix_group.command("show")
@click.argument("topic", required=False)
@MATRIX_OPTION
def matrix_show(topic) -> None:
    """The matrix data as tables, with sources (TOPIC: one of the compat_matrix files)."""
    from gpudoctor import matrix, matrix_cli

    if topic and topic not in matrix.topics():
        raise BadInput(f"unknown topic {topic!r}; topics: {', '.join(matrix.topics())}")
    click.echo(_matrix_call(lambda: matrix_cli.show(topic)))


def _matrix_call(fn: Callable[[], Any]) -> Any:
    from gpudoctor.matrix import MatrixError

    try:
        return fn()
    except MatrixError as exc:
        raise BadInput(str(exc)) from None


@cli.command("checks")
def list_checks() -> None:
    """List every check, its area and the finding codes it may report."""
    from gpudoctor.checks.registry import CHECKS

    for c in CHECKS:
        click.echo(f"{c.id:<36} {c.area:<11} {', '.join(c.codes)}")
        click.echo(f"{'':<36} {c.title}")


@cli.command()
@click.argument("code")
def explain(code: str) -> None:
    """Explain a finding code: what it means, why it matters, how to fix it."""
    from gpudoctor.codes import CATALOGUE

    entry = CATALOGUE.get(code.upper())
    if entry is None:
        raise BadInput(f"unknown finding code {code!r}; `gpudoctor checks` lists them")
    click.echo(f"{entry.code} {entry.slug} ({entry.severity})\n\nWhat it means: {entry.means}\n\n"
               f"Why it matters: {entry.why}\n\nHow to fix: {entry.fix}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("report_files", metavar="REPORT.json...", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("-f", "--format", "fmt", type=click.Choice(("text", "markdown", "json")), default="text",
              show_default=True, help="Output format.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the result to FILE instead of standard output.")
@click.option("--fail-on", type=click.Choice(tuple(rep.FAIL_ON)), default="error", show_default=True,
              help="Lowest severity on any node that makes the exit code 1.")
@MATRIX_OPTION
@NO_REDACT_OPTION
def merge(report_files: tuple[Path, ...], fmt: str, output: Optional[Path], fail_on: str, no_redact: bool) -> None:
    """Compare saved JSON reports of many nodes: a nodes x areas table, drift between nodes, outlier GPUs.

    Each report is re-judged with this version's checks, as `analyze` does. Drift lists the driver,
    CUDA driver, GPU models and count, framework and CUDA toolkit versions that differ between nodes;
    outliers are measured figures worse than 0.7 x the median of peers with the same GPU model.
    A node is named by its host name, or by its file name when that is redacted or not unique. As every
    report gpudoctor prints, the output is redacted unless --no-redact (name the files after the nodes).
    """
    import json

    from gpudoctor import fleet
    from gpudoctor.redact import redact_report
    from gpudoctor.render.fleet import render_fleet_markdown, render_fleet_text

    reports = [(str(p), redact_report(_load_report(p), identities=not no_redact)) for p in report_files]
    merged = rep.encodable(fleet.merge(reports, fail_on=fail_on))
    render = {"json": lambda m: json.dumps(m, indent=2, ensure_ascii=False) + "\n",
              "markdown": render_fleet_markdown, "text": render_fleet_text}[fmt]
    text = render(merged)
    if output is None:
        click.echo(text, nl=False)
    else:
        _write(output, text)
        click.echo(f"gpudoctor: merged report written to {output}", err=True)
    sys.exit(fleet.exit_code(merged))


def _load_report(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(rep.MAX_REPORT_BYTES + 1)
        if len(data) > rep.MAX_REPORT_BYTES:
            raise BadInput(f"{path} is not a gpudoctor report (larger than {rep.MAX_REPORT_BYTES // (1024 * 1024)} MiB)")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return rep.load(text, source=str(path))
    except rep.ReportError as exc:
        raise BadInput(str(exc)) from None


def _emit(report: dict[str, Any], fmt: str, output: Optional[Path], verbose: bool, redact: bool = True,
          quiet: bool = False, fail_on: str = "error") -> None:
    """Redact (secrets always; host names, UUIDs, serials and home directories unless ``redact`` is
    false), then render and print or write. Every report leaves through here."""
    from gpudoctor.redact import redact_report

    report = rep.encodable(redact_report(report, identities=redact))
    if quiet and fmt == "text":
        from gpudoctor.render.quiet import render_quiet

        text = render_quiet(report)
        _write(output, text) if output else click.echo(text, nl=False)
        return
    text = _render(report, fmt, verbose, to_terminal=output is None, fail_on=fail_on)
    if output is None:
        click.echo(text, nl=False)
        return
    _write(output, text)
    click.echo(f"gpudoctor: report written to {output}", err=True)


def _render(report: dict[str, Any], fmt: str, verbose: bool, to_terminal: bool, fail_on: str = "error") -> str:
    if fmt == "json":
        return rep.to_json(report)
    if fmt == "junit":
        from gpudoctor.render.junit import render_junit

        return render_junit(report, fail_on)
    if fmt == "markdown":
        from gpudoctor import pipeline
        from gpudoctor.render.markdown import render_markdown

        return render_markdown(report, pipeline.cuda_numbers(report["facts"]))
    from gpudoctor.render.text import render_text

    colour = to_terminal and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    return render_text(report, verbose=verbose, colour=colour, unicode=_can_encode("✓✗⏱"))


def _can_encode(text: str) -> bool:
    try:
        text.encode(sys.stdout.encoding or "ascii")
        return True
    except (UnicodeEncodeError, LookupError):
        return False


def _write(path: Path, text: str) -> None:
    """Write through a temporary file, so a full disk never leaves a truncated report behind.

    A path that exists and is not a regular file (/dev/stdout, a FIFO, /dev/full) is written in
    place: renaming over it would replace the device node or pipe with a file. A symlink to a
    file keeps the link: the file it points to is replaced."""
    try:
        if os.path.exists(path) and not os.path.isfile(path):
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return
        target = Path(os.path.realpath(path)) if os.path.islink(path) else path
        directory = target.parent if str(target.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise Failure(f"could not write the report to {path}: {exc.strerror or exc}") from None


_progress_shown = False
SPINNER = "|/-\\"


def _progress_printer() -> Optional[Callable[[Any], None]]:
    """A one-line live display on a terminal (standard error only, so piped or redirected output stays
    clean): a spinner, the probes finished out of all, the seconds so far, and what is still running."""
    if not sys.stderr.isatty():
        return None
    import shutil

    ticks = [0]

    def show(progress: Any) -> None:
        global _progress_shown
        _progress_shown = True
        ticks[0] += 1
        line = progress_line(progress, SPINNER[ticks[0] % len(SPINNER)])
        try:
            columns = os.get_terminal_size(sys.stderr.fileno()).columns  # stderr: stdout may be a file
        except OSError:
            columns = 0
        if columns <= 0:  # no size known (a fresh pseudo-terminal says 0): $COLUMNS, else 80
            columns = shutil.get_terminal_size((80, 24)).columns
        width = max(20, columns - 1)
        sys.stderr.write("\r\x1b[2K" + (line if len(line) <= width else line[:width - 3] + "..."))
        sys.stderr.flush()

    return show


def _clear_progress() -> None:
    if _progress_shown:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()


def progress_line(progress: Any, spin: str = "") -> str:
    """``gpudoctor: | 6/9 done, 4 s; running: framework workloads on every GPU, +1 more``."""
    running = list(progress.running)
    what = "" if not running else f"; running: {running[0]}" + (f", +{len(running) - 1} more" if len(running) > 1 else "")
    return f"gpudoctor: {spin + ' ' if spin else ''}{progress.done}/{progress.total} done, {progress.elapsed_s:.0f} s{what}"


def main() -> None:
    import signal

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds through the same clean-up as Ctrl-C: children killed, exit 3

    signal.signal(signal.SIGTERM, _terminate)
    cli(prog_name="gpudoctor")
