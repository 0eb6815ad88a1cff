"""Which format a command prints: ``--format``, else ``--output``'s extension, else the default, among the
formats the format table (render/formats.py) gives the command."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Optional

import click

from gpudoctor.render import formats


def format_for(ctx: click.Context, fmt: str, output: Optional[Path], kind: str = "report", param: str = "fmt") -> str:
    """``fmt`` when ``--format`` was given (or no ``--output``); else the format ``output``'s extension names
    (``-o report.json`` writes JSON), if the command offers it (``kind``: "report" or "fleet"), else ``fmt``."""
    from click.core import ParameterSource

    if output is None or ctx.get_parameter_source(param) not in (ParameterSource.DEFAULT, None):
        return fmt
    return formats.by_extension(Path(output).suffix, kind) or fmt


def format_option(kind: str = "report", help: str = "Report format (default: from --output's extension, else text).") -> Callable:
    """``-f/--format`` with the choices of ``kind``; the command's ``fmt`` then follows ``format_for``."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs["fmt"] = format_for(click.get_current_context(), kwargs["fmt"], kwargs.get("output"), kind)
            return fn(*args, **kwargs)

        return click.option("-f", "--format", "fmt", type=click.Choice(formats.names(kind)), default=formats.DEFAULT,
                            show_default="default" not in help, help=help)(wrapper)  # a help that says it: once

    return decorate
