"""Loads the bundled compatibility matrix (compat_matrix/*.json) and the user's --matrix overlays.

Installed, the data is the package ``gpudoctor.compat_matrix`` (a sibling of this ``gpudoctor.compat``
package, not inside it); in a source checkout it is the top-level ``compat_matrix/`` folder. Each file
has a topic, an "as of" date, named sources and entries that each cite one of those sources; validate()
and validate_shapes() hold the bundled files and every overlay to that shape. A Matrix is the bundled
files with the overlays merged over them, as one value that whatever reads a table is handed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpudoctor import frameworks_table


class MatrixError(ValueError):
    """A matrix file that cannot be used; the message names the file and the problem."""


def data_dir() -> Path:
    """gpudoctor/compat_matrix when installed, else the checkout's top-level compat_matrix/."""
    installed = Path(__file__).parent.parent / "compat_matrix"
    return installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "compat_matrix"


@dataclass(frozen=True)
class Overlay:
    """A user's matrix file (``--matrix FILE``), read and validated. Its topics are kept as the JSON text
    they were read from, so an overlay is immutable and hashable: the merged matrix is cached per set of
    overlays (Matrix.topic), never changed in place."""

    path: str  # absolute
    sha256: str  # of the file's bytes: the same path with other contents is another overlay
    topics_json: str
    topic_names: tuple[str, ...]

    def recorded(self) -> dict[str, Any]:
        """How a report records it (options.matrix_overlays)."""
        return {"path": self.path, "sha256": self.sha256, "topics": list(self.topic_names)}


@dataclass(frozen=True)
class Matrix:
    """The compatibility matrix a verdict is read from: the bundled tables with the user's --matrix overlays
    (``overlays``, in the order given) merged over them. A value, made once by the command line and handed
    to whatever reads the matrix, so a verdict names what it rests on and one command's overlays never reach
    another's. Hashable: the rules remember their answers per matrix."""

    overlays: tuple[Overlay, ...] = ()

    def topic(self, name: str) -> dict[str, Any]:
        """The topic's table: the bundled file with the overlays merged over it (read once per matrix)."""
        return _merged_topic(name, self.overlays)

    def recorded(self) -> list[dict[str, Any]]:
        """The overlays as the report records them (options.matrix_overlays): each file's path, the SHA-256 of
        its bytes and its topics. A verdict that rests on an overlay is only reproducible with it, so
        `analyze` compares them with the ones it is given."""
        return [o.recorded() for o in self.overlays]


#: The bundled matrix alone: what is read where no --matrix file is given.
BUNDLED = Matrix()

#: The largest --matrix file read (the same cap as a saved report): /dev/zero or a huge file is refused,
#: not read without limit.
MAX_OVERLAY_BYTES = 16 * 1024 * 1024


def read_overlay(path: str) -> Overlay:
    """Read a user's matrix file (``--matrix FILE``): one topic object, or {"topics": [...]}. In a Matrix, its
    entries come first, so they win over the bundled ones; nothing bundled is changed. The file is validated
    like the bundled ones, plus the types of the fields the rules read (shapes), so a wrong type is a
    one-line error, never an internal one."""
    from gpudoctor.files import TooLarge, read_capped

    try:
        raw = read_capped(path, MAX_OVERLAY_BYTES)
    except OSError as exc:
        raise MatrixError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except TooLarge as exc:
        raise MatrixError(f"{path}: {exc}, not a matrix file") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise MatrixError(f"{path}: cannot read it ({exc})") from None
    except (ValueError, RecursionError) as exc:
        raise MatrixError(f"{path}: not valid JSON ({(str(exc).splitlines() or ['too deeply nested'])[0]})") from None
    topics = data.get("topics") if isinstance(data, dict) and "topics" in data else [data]
    if not isinstance(topics, list):
        raise MatrixError(f"{path}: 'topics' must be a list")
    for i, topic in enumerate(topics):
        where = f"{path} (topic {i + 1})"
        validate(topic, where)
        validate_shapes(topic, where)
    return Overlay(os.path.abspath(path), hashlib.sha256(raw).hexdigest(), json.dumps(topics),
                   tuple(str(t.get("topic")) for t in topics))


@lru_cache(maxsize=None)
def _merged_topic(topic: str, overlays: tuple[Overlay, ...]) -> dict[str, Any]:
    data = _bundled_topic(topic)
    for overlay in overlays:
        for part in _topics_of(overlay):
            if part.get("topic") == topic:
                data = _merge(part, data)
    return data


@lru_cache(maxsize=None)
def _bundled_topic(topic: str) -> dict[str, Any]:
    path = data_dir() / f"{topic}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MatrixError(f"{path}: {exc}") from None
    validate(data, str(path))
    return data


@lru_cache(maxsize=None)
def _topics_of(overlay: Overlay) -> list[dict[str, Any]]:
    return json.loads(overlay.topics_json)


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
    if not isinstance(data["topic"], str):
        raise MatrixError(f"{where}: 'topic' must be a string")
    sources = data["sources"]
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise MatrixError(f"{where}: 'sources' must be an object of KEY: url-or-citation")
    if not isinstance(data["entries"], list):
        raise MatrixError(f"{where}: 'entries' must be a list")
    for i, entry in enumerate(data["entries"]):
        if not isinstance(entry, dict) or not _cites(entry.get("source"), sources):
            raise MatrixError(f"{where}: entry {i} does not cite one of the file's sources")
        _check_citations(entry, sources, f"{where}: entry {i}")
    for key, section in data.items():
        if key in _METADATA_KEYS:
            continue
        if key.endswith("_source"):
            if not _cites(section, sources):
                raise MatrixError(f"{where}: {key!r} cites {section!r}, which is not a declared source")
            continue
        if not isinstance(section, (dict, list)):
            # a plain top-level value (e.g. "minor_version_compatibility_since": "11.0") cites its
            # source in a sibling "<key>_source"
            if not _cites(data.get(f"{key}_source"), sources):
                raise MatrixError(f"{where}: {key!r} needs a {key + '_source'!r} naming one of the file's sources")
            continue
        items = section if isinstance(section, list) else [section]
        for j, item in enumerate(items):
            if not isinstance(item, dict) or not _cites(item.get("source"), sources):
                raise MatrixError(f"{where}: section {key!r} item {j} does not cite one of the file's sources")
            _check_citations(item, sources, f"{where}: section {key!r} item {j}")


def _cites(value: Any, sources: dict[str, Any]) -> bool:
    """A citation is the key (a string) of one of the file's declared sources; anything else (a list, a
    number) is not, and must not reach a dict lookup (a list is unhashable)."""
    return isinstance(value, str) and value in sources


def _check_citations(node: Any, sources: dict[str, Any], where: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "source" or key.endswith("_source"):
                if not _cites(value, sources):
                    raise MatrixError(f"{where}: {key!r} cites {value!r}, which is not a declared source")
            else:
                _check_citations(value, sources, where)
    elif isinstance(node, list):
        for value in node:
            _check_citations(value, sources, where)


def architecture_for(matrix: Matrix, compute_capability: str) -> str | None:
    for entry in matrix.topic("architectures")["entries"]:
        if entry["compute_capability"] == compute_capability:
            return entry["architecture"]
    return None


# --- shapes: the types of the fields the rules read ------------------------------------------------

_STR, _LIST_STR, _BOOL, _DICT = "a string", "a list of strings", "true or false", "an object"
_OPT_STR = "a string or null"


def _is(kind: str, value: Any) -> bool:
    if kind == _STR:
        return isinstance(value, str)
    if kind == _OPT_STR:
        return value is None or isinstance(value, str)
    if kind == _LIST_STR:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == _BOOL:
        return isinstance(value, bool)
    return isinstance(value, dict)


# For each topic: the fields of an entry the rules read, and their type (a field may be absent; present,
# it must have this type). "variants" of a pytorch entry and "extras" of a jax entry are checked too.
_SHAPES: dict[str, dict[str, str]] = {
    "gpus": {"model": _STR, "match": _LIST_STR, "compute_capability": _STR, "pci_device_ids": _LIST_STR},
    "pytorch": {"version": _STR, "python": _STR, "default_pypi_variant": _STR},
    "pytorch.variants": {"name": _STR, "cuda": _OPT_STR, "cudnn": _OPT_STR, "arch_list": _LIST_STR, "ptx": _LIST_STR},
    "tensorflow": {"version": _STR, "python": _STR, "cuda": _OPT_STR, "cudnn": _OPT_STR, "arch_list": _LIST_STR,
                   "ptx": _LIST_STR, "compute_capabilities": _LIST_STR, "windows_native_gpu": _BOOL, "and_cuda_extra": _BOOL},
    "jax": {"version": _STR, "python": _STR, "min_cudnn": _STR, "min_cuda": _STR, "jaxlib_tags": _DICT,
            "min_cudnn_by_major": _DICT, "no_jaxlib": _BOOL},
    "jax.extras": {"name": _STR, "min_compute_capability": _STR, "min_driver_linux": _STR, "cudnn": _STR,
                   "min_cudnn": _STR, "arch_list": _LIST_STR, "ptx": _LIST_STR},
    "cupy": {"package": _STR, "min_compute_capability": _STR},
    "cuda_toolkits": {"version": _STR, "min_driver_linux": _STR, "min_driver_windows": _STR},
    "cuda_targets": {"compute_capability": _STR, "first_cuda": _OPT_STR, "last_cuda": _OPT_STR},
    "architectures": {"compute_capability": _STR, "architecture": _STR},
    "cudnn": {"version": _STR, "min_compute_capability": _STR, "max_compute_capability": _STR},
    "known_bad": {"id": _STR, "when": _DICT, "severity": _STR, "message": _STR, "fix": _STR, "as_of": _STR},
}
_SUBLISTS = {"pytorch": "variants", "jax": "extras"}
#: The types a field may be declared to have (a framework's row names them: frameworks_table.matrix_fields).
FIELD_TYPES = (_STR, _OPT_STR, _LIST_STR, _BOOL, _DICT)
#: A framework's release entry as the build rule every framework gets reads it (compat/stack.py): one entry
#: per release with the CUDA and cuDNN it was built with and the architectures it carries. A framework whose
#: matrix has this shape needs no shape above; one whose entries hold more declares those in its row.
RELEASE = {"version": _STR, "python": _STR, "cuda": _OPT_STR, "cudnn": _OPT_STR, "arch_list": _LIST_STR,
           "ptx": _LIST_STR}
_VERSION_FIELDS = ("version", "cuda", "cudnn", "compute_capability", "min_driver_linux", "min_driver_windows",
                   "first_cuda", "last_cuda", "min_compute_capability", "max_compute_capability", "min_cudnn", "min_cuda")


def validate_shapes(data: dict[str, Any], where: str) -> None:
    """The fields the rules read have the right type, and version fields parse (validate() has run)."""
    from packaging.version import InvalidVersion, Version

    topic = data["topic"]

    def check(entry: dict[str, Any], shape: dict[str, str], at: str) -> None:
        for key, kind in shape.items():
            if key not in entry:
                continue
            value = entry[key]
            if not _is(kind, value):
                raise MatrixError(f"{where}: {at}: {key!r} must be {kind}, not {json.dumps(value)[:60]}")
            if key in _VERSION_FIELDS and isinstance(value, str) and not (topic == "jax" and key == "cudnn"):
                try:
                    Version(value)
                except InvalidVersion:
                    raise MatrixError(f"{where}: {at}: {key!r} is {value!r}, which is not a version") from None

    for i, entry in enumerate(data["entries"]):
        check(entry, _shape(topic), f"entry {i}")
        sub = _SUBLISTS.get(topic)
        if sub and sub in entry:
            items = entry[sub]
            if not isinstance(items, list) or not all(isinstance(v, dict) for v in items):
                raise MatrixError(f"{where}: entry {i}: {sub!r} must be a list of objects")
            for j, item in enumerate(items):
                check(item, _SHAPES[f"{topic}.{sub}"], f"entry {i} {sub}[{j}]")


def _shape(topic: str) -> dict[str, str]:
    """The fields of an entry of ``topic`` and their types: its own shape above, else, for a framework's
    matrix, a release's with the fields its row adds."""
    if topic in _SHAPES:
        return _SHAPES[topic]
    fw = next((f for f in frameworks_table.FRAMEWORKS if f.topic == topic), None)
    return {**RELEASE, **dict(fw.matrix_fields)} if fw else {}
