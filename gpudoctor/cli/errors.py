"""The one-line errors every command raises: bad input (exit 2) and gpudoctor's own failure (exit 3).

Apart from cli/base.py (the group and the shared options) so that cli/output.py, which base calls to guard
the standard streams, can raise them without importing base back."""

from __future__ import annotations

import click

from gpudoctor import report as rep


class _OneLine(click.ClickException):
    """Its message names untrusted things (a file name, a report's value): shown on one line, controls escaped."""

    def format_message(self) -> str:
        from gpudoctor.render.safe import terminal

        return terminal(self.message)


class Failure(_OneLine):
    """A one-line error with gpudoctor's exit code 3."""

    exit_code = rep.EXIT_INTERNAL


class BadInput(_OneLine):
    exit_code = rep.EXIT_USAGE
