"""Faults derived from a real recording one fact at a time (STYLE.md section 7): the tests' way to build a
broken machine from a healthy one, so that each test states the one fact it changes."""

from __future__ import annotations

import copy
from typing import Any, Mapping


def with_fact(facts: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``facts`` with the fact at ``path`` (dotted; a number indexes a list) set to ``value``,
    creating the objects on the way that are missing."""
    out = copy.deepcopy(dict(facts))
    parts = path.split(".")
    node: Any = out
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out
