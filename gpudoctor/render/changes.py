"""What re-judging a saved report changed (report.changes), as lines for the terminal: ``analyze`` prints
them on standard error beside the report it renders."""

from __future__ import annotations

from typing import Any

from gpudoctor.render.safe import terminal


def describe_changes(diff: dict[str, Any]) -> list[str]:
    """Lines for the terminal (``analyze`` prints them on stderr). The saved report's version, codes and
    titles are data from anywhere: each is shown on its line with every control character escaped."""
    lines = [f"gpudoctor: compared with the verdict saved by gpudoctor {terminal(diff['saved_by'])}: "
             f"{len(diff['new'])} new, {len(diff['gone'])} no longer reported, {diff['unchanged']} unchanged"]
    lines += [f"  new: {terminal(f.get('code'))} {terminal(f.get('title', ''))}" for f in diff["new"]]
    lines += [f"  gone: {terminal(f.get('code'))} {terminal(f.get('title', ''))}" for f in diff["gone"]]
    return lines
