"""Every output format in one table: its name, the ``-o FILE`` extensions that pick it, the functions that
render it, and how its file is written. A new format is one renderer file in this folder and one row here;
the commands' ``--format`` choices, ``-o``'s extensions and the preloading while probes run all read it.

Renderers are named as ``"module:function"`` and imported only when their format is chosen, so that
``check --quick`` never pays for a renderer it does not print."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix


class Options(NamedTuple):
    """What a renderer may take into account beyond the report: how the reader will see it, and the matrix
    the report was judged by, which the compatibility headline and the proof table read again. Named tuples
    rather than dataclasses: the CLI imports this table on every run, ``check --quick`` included, and a
    dataclass costs several times as much to define."""

    #: The compatibility matrix the report was judged by (compat/data.py Matrix).
    matrix: Matrix
    verbose: bool = False
    colour: bool = False
    unicode: bool = True
    fail_on: str = "error"
    #: The run's wall time, for a live check; None for a saved report, which does not hold it.
    duration_s: Optional[float] = None


class Format(NamedTuple):
    """One output format. ``report`` renders a judged report (``check``, ``analyze``) as
    ``function(report, Options) -> str``; ``quiet`` does so under ``check --quiet``; ``fleet`` renders
    ``merge``'s result as ``function(merged) -> str``. A command offers the formats that have its renderer."""

    name: str
    extensions: tuple[str, ...] = ()
    report: Optional[str] = None
    quiet: Optional[str] = None
    fleet: Optional[str] = None
    default: bool = False
    #: Written to a temporary file in the same folder, then renamed over ``-o FILE``: a reader that polls
    #: the file (node_exporter's textfile collector) never sees half of it.
    atomic: bool = False


FORMATS: tuple[Format, ...] = (
    Format("text", report="gpudoctor.render.text:render_report", quiet="gpudoctor.render.quiet:render_report",
           fleet="gpudoctor.render.fleet:render_fleet_text", default=True),
    Format("json", (".json",), report="gpudoctor.render.data:render_report", fleet="gpudoctor.report:to_json"),
    Format("markdown", (".md", ".markdown"), report="gpudoctor.render.markdown:render_report",
           fleet="gpudoctor.render.fleet:render_fleet_markdown"),
    Format("junit", (".xml",), report="gpudoctor.render.junit:render_report"),
    Format("prometheus", (".prom",), report="gpudoctor.render.prometheus:render_report",
           fleet="gpudoctor.render.prometheus:render_fleet", atomic=True),
)
BY_NAME = {f.name: f for f in FORMATS}
DEFAULT = next(f.name for f in FORMATS if f.default)


def names(kind: str = "report") -> tuple[str, ...]:
    """The formats that have a renderer of ``kind`` ("report" for check and analyze, "fleet" for merge)."""
    return tuple(f.name for f in FORMATS if getattr(f, kind))


def by_extension(suffix: str, kind: str = "report") -> Optional[str]:
    """The format a file name's extension (``.json``, any case) picks among those of ``kind``, or None."""
    suffix = suffix.lower()
    return next((f.name for f in FORMATS if suffix in f.extensions and getattr(f, kind)), None)


def extensions_help(kind: str = "report") -> str:
    """``.json json, .md markdown, ...``: each format's first extension, for ``--output``'s help."""
    return ", ".join(f"{f.extensions[0]} {f.name}" for f in FORMATS if f.extensions and getattr(f, kind))


def renderer(name: str, kind: str = "report") -> Callable[..., str]:
    """The function that renders format ``name`` for ``kind`` ("report", "quiet" or "fleet")."""
    module, function = _where(name, kind)
    return getattr(importlib.import_module(module), function)


def preload(name: str, kind: str = "report") -> None:
    """Import the renderer of ``name`` now (while probes run), so that printing the report waits for nothing."""
    if getattr(BY_NAME.get(name), kind, None):
        importlib.import_module(_where(name, kind)[0])


def _where(name: str, kind: str) -> tuple[str, str]:
    spec: Any = getattr(BY_NAME[name], kind)
    module, _, function = spec.partition(":")
    return module, function
