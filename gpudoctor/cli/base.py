"""What every command shares: the group, exit codes and common options (its one-line errors are cli/errors.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from gpudoctor import __version__
from gpudoctor import report as rep
from gpudoctor.cli.errors import BadInput
from gpudoctor.cli.format_choice import format_option
from gpudoctor.render import formats

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix

EXIT_CODES_HELP = """\b
Exit codes:
  0  nothing at or above --fail-on (default: error) was found
  1  findings at or above --fail-on
  2  usage error or bad input (unknown option, unreadable or malformed report;
     analyze: nothing to judge, as in an empty report or a paste with no version)
  3  gpudoctor itself could not complete (internal error, interrupted, report not written)
"""


#: ``ctx.meta`` key under which ``inputs.load_report`` records the saved reports a command loaded.
LOADED_REPORTS = "gpudoctor.loaded_reports"
#: ``ctx.meta`` key a listing command (checks, explain, matrix show) sets: its output is reference text, so
#: a reader that stops early (``| head``) is no failed delivery, unlike a report's.
LISTING = "gpudoctor.listing"
#: Commands whose whole input is a saved report or a paste: whatever still raises while judging or
#: rendering it is that input's fault as far as the user can act on it, so exit 2, not 3.
INPUT_COMMANDS = ("analyze", "merge")


class DoctorGroup(click.Group):
    """Turns anything unexpected into a one-line error and exit code 3, never a traceback; a saved report
    that still makes a check or renderer raise (report.load validates what it can) is bad input, exit 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        from gpudoctor.cli.streams import guard_standard_streams

        guard_standard_streams()  # before anything is printed: --help and --version too
        import gpudoctor.views.limits  # noqa: F401 - to name a limit once no file can be opened to import it
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            from gpudoctor.procs.child import kill_all

            kill_all()
            click.echo("gpudoctor: interrupted", err=True)
            ctx.exit(rep.EXIT_INTERNAL)
        except BrokenPipeError:
            _stdout_to_devnull()  # or Python's own flush at exit complains about the pipe once more
            if ctx.meta.get(LISTING):  # `gpudoctor checks | head`: the reader had what it wanted
                ctx.exit(0)
            click.echo("gpudoctor: standard output was closed by its reader: the report was not delivered", err=True)
            ctx.exit(rep.EXIT_INTERNAL)
        except Exception as exc:  # noqa: BLE001 - the contract is: no traceback, exit 3 (2 for bad input)
            what = f"{type(exc).__name__}: {_first_line(exc)}"
            loaded = ctx.meta.get(LOADED_REPORTS) or []
            if loaded or ctx.invoked_subcommand in INPUT_COMMANDS:
                source = ", ".join(loaded) or "the input"
                click.echo(f"gpudoctor: {source} could not be judged ({what}): a value in it does not have the "
                           "type this gpudoctor expects", err=True)
                ctx.exit(rep.EXIT_USAGE)
            limit = _limit_hit(exc)
            if limit is not None:  # the operating system's limit, not gpudoctor's fault: say which, and the fix
                click.echo(f"gpudoctor: could not complete: {limit.what} ({what}); raise it: {limit.fix}", err=True)
                ctx.exit(rep.EXIT_INTERNAL)
            click.echo(f"gpudoctor: internal error: {what}", err=True)
            ctx.exit(rep.EXIT_INTERNAL)


def _first_line(exc: BaseException) -> str:
    from gpudoctor.render.safe import terminal

    text = str(exc).strip()
    return terminal(text.splitlines()[0][:300]) if text else ""


def _limit_hit(exc: BaseException) -> Any:
    """The limit of this process an OSError names (views/limits.py, imported before anything can fail), with
    its value where it can still be read, or None."""
    from gpudoctor.views.limits import limit_hit

    if not isinstance(exc, OSError) or exc.errno is None:
        return None
    try:
        from gpudoctor.probes.system import probe_limits

        facts = {"host": {"limits": probe_limits()}}
    except Exception:  # noqa: BLE001 - out of files, this import may fail too: the limit without its value
        facts = {}
    return limit_hit(f"[Errno {exc.errno}]", facts)


def _stdout_to_devnull() -> None:
    import os
    import sys

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, AttributeError, ValueError):
        pass


def _load_matrix(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Matrix:
    """The compatibility matrix the command reads, handed to it as its ``matrix`` parameter: the bundled one,
    with ``--matrix FILE`` over it. The file is read and validated while the options are parsed, so a bad
    one is a one-line error before any work starts."""
    from gpudoctor.compat.data import BUNDLED, Matrix, MatrixError, read_overlay

    if not value:
        return BUNDLED
    try:
        return Matrix((read_overlay(value),))
    except MatrixError as exc:
        raise BadInput(f"--matrix: {exc}") from None


MATRIX_OPTION = click.option("--matrix", "matrix", metavar="FILE", callback=_load_matrix,
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
                      help="Write the report to FILE instead of standard output, as the shell's > would "
                           "(in place, mode 0666 less the umask). Its extension picks the format unless "
                           f"--format is given: {formats.extensions_help()}, else text.")(fn)
    return format_option()(fn)


@click.group(cls=DoctorGroup, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpudoctor")
def cli() -> None:
    """Judge whether this machine can really compute on its NVIDIA GPUs, and say how to fix it if not."""


def _names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n.strip() for v in value for n in v.split(",") if n.strip())
