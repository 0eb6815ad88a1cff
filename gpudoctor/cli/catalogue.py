"""`gpudoctor checks` and `gpudoctor explain`: the catalogue of checks and finding codes. The catalogue is
gpudoctor's own text, yet it goes out through render/safe.py as everything printed does, so no edit to it
can put a control character on a terminal."""

from __future__ import annotations

import click

from gpudoctor.cli.base import LISTING, cli
from gpudoctor.cli.errors import BadInput
from gpudoctor.render.safe import terminal


@cli.command("checks")
def list_checks() -> None:
    """List every check, its area and the finding codes it may report."""
    from gpudoctor.checks.registry import CHECKS

    click.get_current_context().meta[LISTING] = True
    for c in CHECKS:
        click.echo(terminal(f"{c.id:<36} {c.area:<11} {', '.join(c.codes)}"))
        click.echo(terminal(f"{'':<36} {c.title}"))


@cli.command(short_help="Explain a finding code: what it means and how to fix it.")
@click.argument("code")
def explain(code: str) -> None:
    """Explain a finding code: what it means, why it matters, how to fix it, and where its entry is."""
    from gpudoctor.codes import CATALOGUE, doc_link

    click.get_current_context().meta[LISTING] = True
    entry = CATALOGUE.get(code.upper())
    if entry is None:
        raise BadInput(f"unknown finding code {code!r}; `gpudoctor checks` lists them")
    click.echo(terminal(f"{entry.code} {entry.slug} ({entry.severity})\n\nWhat it means: {entry.means}\n\n"
                        f"Why it matters: {entry.why}\n\nHow to fix: {entry.fix}\n\n"
                        f"More, with an example: {doc_link(entry)}", newlines=True))
