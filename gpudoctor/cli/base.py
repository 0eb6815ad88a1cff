"""What every command shares: the group, exit codes, error types and common options."""

from __future__ import annotations

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


def report_options(fn: Callable) -> Callable:
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
