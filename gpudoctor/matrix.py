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


_overlays: list[dict[str, Any]] = []


def set_overlay(path: str) -> None:
    """Overlay a user's matrix file (``--matrix FILE``): one topic object, or {"topics": [...]}.
    Its entries come first, so they win over the bundled ones; nothing bundled is changed."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise MatrixError(f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    except ValueError as exc:
        raise MatrixError(f"{path}: not valid JSON ({str(exc).splitlines()[0]})") from None
    topics = data.get("topics") if isinstance(data, dict) and "topics" in data else [data]
    if not isinstance(topics, list):
        raise MatrixError(f"{path}: 'topics' must be a list")
    for i, topic in enumerate(topics):
        validate(topic, f"{path} (topic {i + 1})")
    _overlays.extend(topics)
    load_topic.cache_clear()


def clear_overlays() -> None:
    _overlays.clear()
    load_topic.cache_clear()


@lru_cache(maxsize=None)
def load_topic(topic: str) -> dict[str, Any]:
    path = data_dir() / f"{topic}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MatrixError(f"{path}: {exc}") from None
    validate(data, str(path))
    for overlay in _overlays:
        if overlay.get("topic") == topic:
            data = _merge(overlay, data)
    return data


def _merge(overlay: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    merged["sources"] = {**base.get("sources", {}), **overlay.get("sources", {})}
    for key, value in overlay.items():
        if isinstance(value, list) and isinstance(base.get(key), list):
            merged[key] = value + base[key]
        elif key not in ("sources", "topic"):
            merged[key] = value
    return merged


def topics() -> list[str]:
    return sorted(p.stem for p in data_dir().glob("*.json"))


# Top-level keys every matrix file has; any other top-level key is a section that must cite a source.
_METADATA_KEYS = ("topic", "title", "as_of", "sources", "entries")


def validate(data: Any, where: str) -> None:
    """Check a matrix file's shape: metadata present, every entry and every extra top-level section
    (an object or a list of objects) cites one of the file's declared sources in "source", a plain
    top-level value cites one in a sibling "<key>_source", and every per-field citation ("source" or
    a key ending in "_source", at any depth) names a declared source too."""
    if not isinstance(data, dict):
        raise MatrixError(f"{where}: expected a JSON object")
    for key in ("topic", "as_of", "sources", "entries"):
        if key not in data:
            raise MatrixError(f"{where}: missing {key!r}")
    sources = data["sources"]
    if not isinstance(sources, dict):
        raise MatrixError(f"{where}: 'sources' must be an object of KEY: url-or-citation")
    if not isinstance(data["entries"], list):
        raise MatrixError(f"{where}: 'entries' must be a list")
    for i, entry in enumerate(data["entries"]):
        if not isinstance(entry, dict) or entry.get("source") not in sources:
            raise MatrixError(f"{where}: entry {i} does not cite one of the file's sources")
        _check_citations(entry, sources, f"{where}: entry {i}")
    for key, section in data.items():
        if key in _METADATA_KEYS:
            continue
        if key.endswith("_source"):
            if section not in sources:
                raise MatrixError(f"{where}: {key!r} cites {section!r}, which is not a declared source")
            continue
        if not isinstance(section, (dict, list)):
            # a plain top-level value (e.g. "minor_version_compatibility_since": "11.0") cites its
            # source in a sibling "<key>_source"
            if data.get(f"{key}_source") not in sources:
                raise MatrixError(f"{where}: {key!r} needs a {key + '_source'!r} naming one of the file's sources")
            continue
        items = section if isinstance(section, list) else [section]
        for j, item in enumerate(items):
            if not isinstance(item, dict) or item.get("source") not in sources:
                raise MatrixError(f"{where}: section {key!r} item {j} does not cite one of the file's sources")
            _check_citations(item, sources, f"{where}: section {key!r} item {j}")


def _check_citations(node: Any, sources: dict[str, Any], where: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "source" or key.endswith("_source"):
                if value not in sources:
                    raise MatrixError(f"{where}: {key!r} cites {value!r}, which is not a declared source")
            else:
                _check_citations(value, sources, where)
    elif isinstance(node, list):
        for value in node:
            _check_citations(value, sources, where)


def architecture_for(compute_capability: str) -> str | None:
    for entry in load_topic("architectures")["entries"]:
        if entry["compute_capability"] == compute_capability:
            return entry["architecture"]
    return None
