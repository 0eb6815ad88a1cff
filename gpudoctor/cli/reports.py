"""Commands on saved reports: analyze, merge, devices."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import click

from gpudoctor import report as rep
from gpudoctor.cli.base import EXIT_CODES_HELP, MATRIX_OPTION, NO_REDACT_OPTION, cli, report_options
from gpudoctor.cli.errors import BadInput
from gpudoctor.cli.inputs import load_report
from gpudoctor.cli.format_choice import format_option
from gpudoctor.cli.output import emit
from gpudoctor.cli.writing import write
from gpudoctor.render.changes import describe_changes
from gpudoctor.render.safe import terminal

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix


@cli.command(epilog=EXIT_CODES_HELP, short_help="Re-judge a saved report, or judge what a user pasted.")
@click.argument("inputs", metavar="REPORT.json|PASTE...", nargs=-1, required=True,
                type=click.Path(path_type=Path, allow_dash=True))  # a folder: the reader's one-line error
@report_options
@NO_REDACT_OPTION
def analyze(inputs: tuple[Path, ...], fmt: str, output: Optional[Path], verbose: bool, fail_on: str, no_redact: bool,
            matrix: Matrix) -> None:
    """Re-check a saved JSON report with this version's checks (for triaging someone else's machine), or judge
    what a user pasted: gpudoctor's Markdown report, `python -m torch.utils.collect_env` output (PyTorch's or
    vLLM's), `nvidia-smi` output (table, -q or -q -x), or a whole issue body holding several of them. Give
    several files to read them together, and - for standard input. A paste says only part of what `check`
    sees: what it cannot tell is reported as not checked."""
    from gpudoctor import pipeline

    if len(inputs) == 1 and str(inputs[0]) != "-" and _starts_as_json(inputs[0]):
        saved = load_report(inputs[0])  # a saved JSON report: exactly as before pastes were read
        _judge_saved(saved, fmt, output, verbose, fail_on, no_redact, matrix, str(inputs[0]))
        return
    from gpudoctor.pastes import PasteError, read_inputs
    from gpudoctor.pastes.read import decode, read_bytes
    from gpudoctor.pastes.to_facts import skip_reasons

    texts, notes = [], []
    try:
        for path in inputs:
            name = str(path)
            text, bad = decode(read_bytes(name), name)
            if text.lstrip().startswith("{") and len(inputs) == 1:  # standard input holding a JSON report
                try:
                    saved = rep.load(text, source=name)
                except rep.ReportError as exc:
                    raise BadInput(str(exc)) from None
                _judge_saved(saved, fmt, output, verbose, fail_on, no_redact, matrix, name)
                return
            texts.append((name, text))
            notes += bad
        found = read_inputs(texts, matrix)
    except PasteError as exc:
        raise BadInput(str(exc)) from None
    if found.report is not None:
        try:
            saved = rep.load(rep.to_json(found.report), source=found.report_source)
        except rep.ReportError as exc:
            raise BadInput(str(exc)) from None
        for line in found.notes:
            click.echo(f"gpudoctor: note: {terminal(line)}", err=True)
        _judge_saved(saved, fmt, output, verbose, fail_on, no_redact, matrix, found.report_source, found.left_out,
                     found.shown_findings)
        return
    report = pipeline.judge_only(found.facts, found.runnable, skip_reasons(found.facts), matrix=matrix)
    _refuse_if_nothing_judged(report, ", ".join(name for name, _ in texts), "the pastes hold")
    if fmt == "markdown":  # for a ticket: the reply a maintainer posts back, not the whole report
        _emit_reply(report, [f"{p.kind} ({p.where})" for p in found.pastes], output, no_redact)
    else:
        emit(report, fmt, output, verbose, redact=not no_redact, fail_on=fail_on, matrix=matrix)
    read = terminal(listed([f"{p.kind} ({p.where})" for p in found.pastes]))
    areas = {c["area"] for c in report["checks"] if c["area"] != "doctor"}
    ran = {c["area"] for c in report["checks"] if c["id"] in found.runnable}
    click.echo(f"gpudoctor: judged from what was pasted: {read}. Not checked, as a paste cannot tell: "
               f"{', '.join(sorted(areas - ran)) or 'nothing'}; checked in part: {', '.join(sorted(ran)) or 'nothing'} "
               "(-v lists each check and why it was not run).", err=True)
    for line in dict.fromkeys(notes + found.notes):  # the same note for each of many pastes is said once
        click.echo(f"gpudoctor: note: {terminal(line)}", err=True)
    sys.exit(rep.exit_code(rep.findings_of(report), fail_on))


#: How many pastes the stderr summary names: an issue body can hold thousands, and one line must stay one line.
LISTED_PASTES = 10


def listed(names: Sequence[str], limit: int = LISTED_PASTES) -> str:
    """``names`` joined by commas, the first ``limit`` of them and then "and N more"."""
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def _emit_reply(report: dict, read: list[str], output: Optional[Path], no_redact: bool) -> None:
    """The ticket reply (render/reply.py), redacted as every report is: secrets always, identities unless
    --no-redact."""
    from gpudoctor.redact import redact_report
    from gpudoctor.render.reply import render_reply

    text = render_reply(rep.encodable(redact_report(report, identities=not no_redact)), read)
    if output is None:
        click.echo(text, nl=False)
    else:
        write(output, text)
        click.echo(f"gpudoctor: reply written to {terminal(output)}", err=True)


def _starts_as_json(path: Path) -> bool:
    """Whether a file is meant as a saved JSON report: named .json, or its text begins like JSON (unreadable
    and empty files go the saved-report way too, whose message says why)."""
    if path.suffix.lower() == ".json":
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return True
    text = head.lstrip(b" \t\r\n").lstrip(b"\xef\xbb\xbf").lstrip()
    # a JSON array opens with "[{" or "[]"; a pasted log line opens with "[10/06/2022 ...]" or "[pip3]"
    return text.startswith(b"{") or re.match(rb"\[\s*[\[{\]]", text) is not None or not head.strip()


def _refuse_if_nothing_judged(report: dict, source: str, what: str) -> None:
    """Bad input (exit 2, one line) when no check could judge anything: an empty report, or pastes whose
    every value is beyond what a check reads. Never "no problems found" for what nobody looked at."""
    if not rep.judged_anything(report):
        raise BadInput(f"{source}: nothing to judge: {what} no driver, GPU, CUDA or framework fact a check "
                       f"reads; on the machine, run: {rep.GATHER_COMMAND}")


def _judge_saved(saved: dict, fmt: str, output: Optional[Path], verbose: bool, fail_on: str, no_redact: bool, matrix: Matrix,
                 source: str = "the report", left_out: Sequence[str] = (), shown: Sequence[dict] = ()) -> None:
    from gpudoctor import pipeline

    report = pipeline.judge(saved["facts"], created=saved.get("created"), matrix=matrix)
    if left_out:  # what the checks reading those facts would say is unknown: reported as not judged, never passed
        from gpudoctor.pastes.markdown_report import carry_shown, not_judged

        reasons = not_judged(list(left_out), [c["id"] for c in report["checks"]])
        report = pipeline.judge_only(saved["facts"], {c["id"] for c in report["checks"]} - set(reasons), reasons,
                                     created=saved.get("created"), matrix=matrix)
        report = carry_shown(report, list(shown), reasons)  # the report's own verdict on what it left out stands
        click.echo(f"gpudoctor: note: {terminal(source)} left out {terminal('; '.join(left_out))} to fit an issue: "
                   f"{len(reasons)} check(s) not judged ({terminal(', '.join(sorted(reasons)))}); the JSON report "
                   "(--format json --output report.json) judges them", err=True)
    _refuse_if_nothing_judged(report, source, "the report holds")
    for line in missing_overlays(saved["facts"], source, matrix):
        click.echo(line, err=True)
    if saved.get("redacted") is True:
        report["redacted"] = True  # its facts stay redacted, whatever --no-redact says
    emit(report, fmt, output, verbose, redact=not no_redact, fail_on=fail_on, matrix=matrix)
    from gpudoctor.redact import redact_report

    # secrets leave redacted whatever --no-redact says, on stderr too (README: "removed anyway")
    before, after = (redact_report(saved, identities=not no_redact), redact_report(report, identities=not no_redact))
    if isinstance(saved.get("findings"), list):  # a Markdown report carries its facts, not its verdict: no "new"
        for line in describe_changes(rep.changes(before, after)):
            click.echo(line, err=True)
    sys.exit(rep.exit_code(rep.findings_of(report), fail_on))


DEVICES_EXIT_HELP = """\b
Exit codes:
  0  the devices were listed
  1  no GPU is listed: no driver, or NVML lists none (`gpudoctor check`
     fails on such a machine too, and says why)
  2  usage error or an unreadable --report
  3  NVML did not answer or its probe failed: nothing could be listed
     (`gpudoctor check` says why and what to do)
"""


def missing_overlays(facts: dict, source: str, matrix: Matrix) -> list[str]:
    """A note for each --matrix file the report was judged with that ``matrix``, the one it is judged by now,
    lacks (none given, or one with other bytes): its verdicts rested on it, so a verdict that changes now
    would be unexplained."""
    from gpudoctor.checks.selection import options_of

    recorded = options_of(facts).get("matrix_overlays")
    now = {overlay.sha256 for overlay in matrix.overlays}
    notes = []
    for overlay in recorded if isinstance(recorded, list) else []:
        if not isinstance(overlay, dict) or overlay.get("sha256") in now:
            continue
        topics = ", ".join(str(t) for t in overlay.get("topics") or []) or "?"
        notes.append(f"gpudoctor: note: {terminal(source)} was judged with --matrix {terminal(overlay.get('path'))} "
                     f"(sha256 {terminal(str(overlay.get('sha256'))[:16])}, topics {terminal(topics)}), which is not given "
                     "now: verdicts that rested on it may differ; pass the same file with --matrix to judge as it did")
    return notes


@cli.command(epilog=DEVICES_EXIT_HELP, short_help="List the GPUs, their CUDA numbers and the topology matrix.")
@click.option("--json", "as_json", is_flag=True, help="Print the GPU and topology facts as JSON.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Show the devices of a saved report instead of this machine's.")
def devices(as_json: bool, report_file: Optional[Path]) -> None:
    """List every GPU, the number CUDA gives it, and the topology matrix between GPUs."""
    import json

    from gpudoctor import pipeline
    from gpudoctor.render.devices import render_devices
    from gpudoctor.render.facts_text import driver_line
    from gpudoctor.snapshot import gpus

    if report_file:
        facts = load_report(report_file)["facts"]
    else:
        facts = pipeline.device_facts()
    unanswered = nvml_unanswered(facts)
    if as_json:
        click.echo(json.dumps({k: facts.get(k) for k in ("nvml", "gpus", "topology")}, indent=2))
    elif unanswered:
        click.echo(f"NVIDIA driver: unknown: {terminal(unanswered)}")
    else:
        click.echo(f"NVIDIA driver: {driver_line(facts)}")  # driver_line and render_devices show data as one-line text
        click.echo(render_devices(facts, pipeline.cuda_numbers(facts)), nl=False)
    if unanswered:
        click.echo(f"gpudoctor: no device listed: {terminal(unanswered)}; `gpudoctor check` says why", err=True)
        if not report_file:  # a saved report was read whole: only a live run failed to list
            sys.exit(rep.EXIT_INTERNAL)
    elif not list(gpus(facts)):  # a listing of no GPU is no success for a script that gates on it
        click.echo(f"gpudoctor: no GPU listed (NVIDIA driver: {driver_line(facts)}); `gpudoctor check` says why",
                   err=True)
        sys.exit(rep.EXIT_FINDINGS)


def nvml_unanswered(facts: dict[str, Any]) -> Optional[str]:
    """Why NVML gave no answer at all (its probe timed out or failed), or None: "driver not available"
    would be a diagnosis the facts do not hold, since a hung or crashed NVML says nothing of the driver."""
    from gpudoctor.status import PROBE_ERROR, PROBE_TIMEOUT

    record = (facts.get("probes") or {}).get("nvml") or {}
    if not isinstance(record, dict) or record.get("status") not in (PROBE_TIMEOUT, PROBE_ERROR):
        return None
    verb = "did not answer" if record.get("status") == PROBE_TIMEOUT else "failed"
    return f"NVML {verb} ({record.get('error') or record.get('status')})"


@cli.command(epilog=EXIT_CODES_HELP, short_help="Compare saved reports of many nodes: areas, drift, outliers.")
@click.argument("report_files", metavar="REPORT.json|DIR|-...", nargs=-1, required=True,
                type=click.Path(path_type=Path, allow_dash=True))
@format_option("fleet", help="Output format (default: from --output's extension, else text).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the result to FILE instead of standard output. Its extension picks the format unless "
                   "--format is given: .json json, .md markdown, .prom prometheus, else text.")
@click.option("--fail-on", type=click.Choice(tuple(rep.FAIL_ON)), default="error", show_default=True,
              help="Lowest severity on any node that makes the exit code 1.")
@MATRIX_OPTION
@NO_REDACT_OPTION
def merge(report_files: tuple[Path, ...], fmt: str, output: Optional[Path], fail_on: str, no_redact: bool,
          matrix: Matrix) -> None:
    """Compare saved JSON reports of many nodes: a nodes x areas table, drift between nodes, outlier GPUs.

    Each report is re-judged with this version's checks, as `analyze` does. Drift lists the driver,
    CUDA driver, GPU models and count, framework and CUDA toolkit versions that differ between nodes;
    outliers are measured figures worse than 0.7 x the median of peers with the same GPU model.
    A node is named by its host name, or by its file name when that is redacted or not unique. As every
    report gpudoctor prints, the output is redacted unless --no-redact (name the files after the nodes).
    A folder stands for the .json files in it; - reads the paths from standard input, one a line. A file
    that is not a readable report, or a folder with no .json file beside other reports, is a row of its own
    (refused) and the rest is merged: exit 2.
    """
    from gpudoctor import fleet
    from gpudoctor.render import formats
    from gpudoctor.render.safe import terminal

    reports, judged, refused = _load_fleet(_fleet_files(report_files), identities=not no_redact, matrix=matrix)
    merged = rep.encodable(fleet.merge(reports, fail_on=fail_on, judge=lambda facts, created: judged.pop(
        id(facts), None) or fleet.judge_node(facts, created, matrix), refused=refused))
    text = formats.renderer(fmt, "fleet")(merged)
    if output is None:
        click.echo(text, nl=False)
    else:
        write(output, text, atomic=formats.BY_NAME[fmt].atomic)
        click.echo(f"gpudoctor: merged report written to {terminal(output)}", err=True)
    if refused:  # the row says why; this line is for a gate's log, which may keep only standard error
        click.echo(f"gpudoctor: {len(refused)} file(s) refused, not readable reports: "
                   f"{terminal(', '.join(source for source, _ in refused))}", err=True)
    sys.exit(fleet.exit_code(merged))


#: From this many reports on, merge reads, redacts and judges them in worker processes (one per CPU):
#: each report's work is independent and pure, and a thousand-node fleet is otherwise CPU-bound here.
PARALLEL_FROM = 64


def _fleet_files(given: tuple[Path, ...]) -> tuple[Path, ...]:
    """The report files ``merge`` was given: a folder's .json files (sorted), and with ``-`` the paths read
    from standard input, one a line. None at all is bad input."""
    out: list[Path] = []
    empty: list[Path] = []  # a folder with no report in it: a node whose report was never written, refused
    for path in given:
        if str(path) == "-":
            try:
                text = sys.stdin.read() if sys.stdin is not None else ""
            except (OSError, ValueError):  # no standard input (closed, a CI job's): no paths from it
                text = ""
            out += _fleet_files(tuple(Path(line.strip()) for line in text.splitlines() if line.strip() and line.strip() != "-"))
        elif path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix.lower() == ".json" and p.is_file())
            out += found
            empty += [] if found else [path]
        else:
            out.append(path)
    if not out:
        raise BadInput("merge: no report files given (a folder holds no .json file, or standard input named none)")
    return tuple(out + empty)


def _load_fleet(paths: tuple[Path, ...], identities: bool, matrix: Matrix
                ) -> tuple[list[tuple[str, dict]], dict[int, dict], list[tuple[str, str]]]:
    """(source, what merge shows of its report, redacted) per readable file in order, the verdicts already
    reached by ``matrix``, by ``id`` of each report's facts (a torchrun job's nodes, unpacked later by fleet.expand_jobs,
    are judged there), and (source, why) per file that is not a readable report."""
    import os

    import threading

    workers = min(os.cpu_count() or 1, 8)
    # fork: spawn would re-run the user's __main__ (a pipx shim, pytest, a zipapp); forking is safe only
    # while this process runs no other thread (nothing gpudoctor starts for merge does)
    if len(paths) < PARALLEL_FROM or workers < 2 or threading.active_count() > 1:
        done = [_prepare_node(p, identities, matrix) for p in paths]
    else:
        import concurrent.futures
        import multiprocessing

        ctx = click.get_current_context(silent=True)
        if ctx is not None:  # a value that still breaks a check is bad input (DoctorGroup), as in one process
            from gpudoctor.cli.base import LOADED_REPORTS

            ctx.meta.setdefault(LOADED_REPORTS, []).extend(str(p) for p in paths)
        chunk = max(1, len(paths) // (workers * 4))
        from gpudoctor.procs.processes import die_with_parent

        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                                    initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            done = list(pool.map(_prepare_node, paths, [identities] * len(paths), [matrix] * len(paths), chunksize=chunk))
    reports = [(str(p), report) for p, (report, _) in zip(paths, done) if isinstance(report, dict)]
    refused = [(str(p), why) for p, (report, why) in zip(paths, done) if not isinstance(report, dict)]
    judged = {id(r["facts"]): j for r, j in done if isinstance(r, dict) and isinstance(j, dict)}
    return reports, judged, refused


def _prepare_node(path: Path, identities: bool, matrix: Matrix) -> tuple[Any, Any]:
    """One node's report loaded and judged by ``matrix``, and what merge shows of it redacted (fleet.judged_view); a file
    that is not a readable report gives (None, why) instead, so one bad file among a thousand does not stop
    the merge."""
    from gpudoctor import fleet

    if path.is_dir():  # named on the command line and empty: dropping it would let a gate pass a missing node
        return None, f"{path} is a folder that holds no .json report"
    try:
        report = load_report(path)
    except BadInput as exc:
        return None, str(exc)
    return fleet.judged_view(report, identities, matrix)
