"""Commands on saved reports: analyze, merge, devices."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from gpudoctor import report as rep
from gpudoctor.cli.base import EXIT_CODES_HELP, MATRIX_OPTION, NO_REDACT_OPTION, cli, report_options
from gpudoctor.cli.inputs import load_report
from gpudoctor.cli.output import emit, write


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("report_file", metavar="REPORT.json", type=click.Path(dir_okay=False, path_type=Path))
@report_options
@NO_REDACT_OPTION
def analyze(report_file: Path, fmt: str, output: Optional[Path], verbose: bool, fail_on: str, no_redact: bool) -> None:
    """Re-check a saved JSON report with this version's checks (for triaging someone else's machine)."""
    from gpudoctor import pipeline

    saved = load_report(report_file)
    report = pipeline.judge(saved["facts"], created=saved.get("created"))
    if saved.get("redacted") is True:
        report["redacted"] = True  # its facts stay redacted, whatever --no-redact says
    emit(report, fmt, output, verbose, redact=not no_redact, fail_on=fail_on)
    from gpudoctor.redact import redact_report

    # secrets leave redacted whatever --no-redact says, on stderr too (README: "removed anyway")
    before, after = (redact_report(saved, identities=not no_redact), redact_report(report, identities=not no_redact))
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
        facts = load_report(report_file)["facts"]
    else:
        from gpudoctor.runner import PROBES, run_probes

        facts = run_probes([p for p in PROBES if p.name in ("host", "nvml")])
    if as_json:
        click.echo(json.dumps({k: facts.get(k) for k in ("nvml", "gpus", "topology")}, indent=2))
        return
    click.echo(f"NVIDIA driver: {driver_line(facts)}")
    click.echo(render_devices(facts, pipeline.cuda_numbers(facts)), nl=False)


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

    reports = [(str(p), redact_report(load_report(p), identities=not no_redact)) for p in report_files]
    merged = rep.encodable(fleet.merge(reports, fail_on=fail_on))
    render = {"json": lambda m: json.dumps(m, indent=2, ensure_ascii=False) + "\n",
              "markdown": render_fleet_markdown, "text": render_fleet_text}[fmt]
    text = render(merged)
    if output is None:
        click.echo(text, nl=False)
    else:
        write(output, text)
        click.echo(f"gpudoctor: merged report written to {output}", err=True)
    sys.exit(fleet.exit_code(merged))
