"""Loads the bundled compatibility matrix (compat_matrix/*.json).

Installed, the data is the package ``gpudoctor.compat_matrix``; in a source checkout it is the
top-level ``compat_matrix/`` folder. Each file has a topic, an "as of" date, named sources and
entries that each cite one of those sources; tests validate that shape.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any


class MatrixError(ValueError):
    """A matrix file that cannot be used; the message names the file and the problem."""


def data_dir() -> Path:
    installed = Path(__file__).parent / "compat_matrix"
    return installed if installed.is_dir() else Path(__file__).resolve().parent.parent / "compat_matrix"


@lru_cache(maxsize=None)
def load_topic(topic: str) -> dict[str, Any]:
    path = data_dir() / f"{topic}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MatrixError(f"{path}: {exc}") from None
    validate(data, str(path))
    return data


def validate(data: Any, where: str) -> None:
    if not isinstance(data, dict):
        raise MatrixError(f"{where}: expected a JSON object")
    for key in ("topic", "as_of", "sources", "entries"):
        if key not in data:
            raise MatrixError(f"{where}: missing {key!r}")
    sources = data["sources"]
    for i, entry in enumerate(data["entries"]):
        if not isinstance(entry, dict) or entry.get("source") not in sources:
            raise MatrixError(f"{where}: entry {i} does not cite one of the file's sources")


def architecture_for(compute_capability: str) -> str | None:
    for entry in load_topic("architectures")["entries"]:
        if entry["compute_capability"] == compute_capability:
            return entry["architecture"]
    return None
