"""A jaxlib wheel named by its local version, and the oldest cuDNN each JAX build accepts.

Before the pip extras, a jaxlib wheel named its CUDA in its local version ("0.1.69+cuda111" is CUDA
11.1), and from jaxlib 0.1.73 also the cuDNN it was built with ("0.3.25+cuda11.cudnn82"). jaxlib
refuses at start-up a cuDNN of another major or of an older minor than its build's ("Loaded runtime
CuDNN library: 8.0.5 but source was compiled with: 8.2.4"; compat_matrix/jax.json JAX-VERSION-CHECK),
so each wheel has a cuDNN floor. jax.json lists the tags of each release line ("jaxlib_tags") and the
floor of each CUDA major's wheels ("min_cudnn_by_major").

A version given without its tag could be any of the release's wheels: its cuDNN is refused only when
every one of them refuses it, so a stack that one of its wheels runs is never an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from gpudoctor.compat import rules
from gpudoctor.compat.data import Matrix


@dataclass(frozen=True)
class Wheel:
    """One jaxlib wheel of a release: its CUDA ("10.1", or a major "11") and its cuDNN floor."""

    tag: str
    cuda: str
    min_cudnn: Optional[str]

    @property
    def major(self) -> int:
        return int(self.cuda.split(".")[0])


def tagged_wheel(release: dict[str, Any], extra: str) -> Optional[Wheel]:
    """The wheel a local version names ("cuda111", "cuda11.cudnn82"), when the release lists it."""
    row = _tags(release).get(extra.lower())
    cuda = str(row.get("cuda") or "") if isinstance(row, dict) else ""
    if not cuda.split(".")[0].isdigit():
        return None
    floor = row.get("min_cudnn") if isinstance(row, dict) else None  # a dict: cuda was read from it
    return Wheel(extra.lower(), cuda, floor if isinstance(floor, str) and rules.version(floor) else None)


def cudnn_floors(release: dict[str, Any], major: Optional[int], wheel: Optional[Wheel]) -> list[str]:
    """The cuDNN floors of the wheels the given version may be: the named wheel's alone, else those of
    every wheel of the CUDA major asked for (every major when none was), else the release's one floor."""
    if wheel is not None:
        return [wheel.min_cudnn] if wheel.min_cudnn else []
    floors = [w.min_cudnn for w in _wheels(release) if w.min_cudnn and (major is None or w.major == major)]
    by_major = release.get("min_cudnn_by_major")
    if isinstance(by_major, dict):
        floors += [str(v) for k, v in by_major.items() if isinstance(v, str) and rules.version(v)
                   and (major is None or str(k) == str(major))]
    if not floors and isinstance(release.get("min_cudnn"), str) and rules.version(release["min_cudnn"]):
        floors = [release["min_cudnn"]]
    return sorted(set(floors), key=lambda f: rules.known_version(f))


def refusing_floor(have: str, floors: list[str]) -> Optional[str]:
    """The floor to name when no wheel accepts cuDNN ``have`` (None when one does, or nothing is known):
    the one of the same major if any (its minor is too old), else the oldest."""
    verdicts = [rules.cudnn_satisfies(have, f) for f in floors]
    if not floors or any(v is not False for v in verdicts):
        return None
    got = rules.version(have)
    same = [f for f in floors if got is not None and rules.known_version(f).major == got.major]
    return same[0] if same else floors[0]


def jaxlib_lines_of(matrix: Matrix, release: dict[str, Any], jax_version: str) -> Optional[tuple[str, dict[str, Any]]]:
    """A jax 0.2 version names no jaxlib: it imports any jaxlib from its minimum on (the release's
    "min_jaxlib" change points). Returns that minimum and a release holding every wheel of the jaxlib
    0.1 lines from it on, which the any-wheel rule above judges; None when the minimum is not known."""
    want = rules.version(jax_version)
    table = release.get("min_jaxlib")
    if want is None or release.get("no_jaxlib") is not True or not isinstance(table, dict):
        return None
    known = [(rules.known_version(k), v) for k, v in table.items() if rules.version(k) and isinstance(v, str) and rules.version(v)]
    floor = max((kv for kv in known if kv[0] <= want), key=lambda kv: kv[0], default=None)
    if floor is None:
        return None
    oldest = rules.known_version(floor[1])
    lines = [rules.jax_release(matrix, v) for v in _line_starts(matrix) if oldest <= rules.known_version(v) < rules.known_version("0.2")]
    first = rules.jax_release(matrix, floor[1])
    if first is None:
        return None
    merged = dict(first)
    tags: dict[str, Any] = {}
    majors: set[int] = set()
    for line in [first] + [x for x in lines if x]:
        tags.update(_tags(line))
        majors.update(int(m) for m in line.get("cuda_majors") or [] if str(m).isdigit())
    merged.update(jaxlib_tags=tags, cuda_majors=sorted(majors), no_jaxlib=False)
    return floor[1], merged


def _line_starts(matrix: Matrix) -> list[str]:
    return [str(r["version"]) for r in matrix.topic("jax")["entries"] if rules.version(r.get("version"))]


def _tags(release: dict[str, Any]) -> dict[str, Any]:
    tags = release.get("jaxlib_tags")
    return tags if isinstance(tags, dict) else {}


def _wheels(release: dict[str, Any]) -> list[Wheel]:
    return [w for w in (tagged_wheel(release, tag) for tag in _tags(release)) if w is not None]
