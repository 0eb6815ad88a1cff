"""The typed views of facts (gpudoctor/facts_types.py) say what snapshot.SHAPE says, key for key and type for type,
so that mypy's reading of a section and report.load's cannot drift apart."""

from __future__ import annotations

import typing
from typing import Any, Iterator, Union

import pytest

from gpudoctor import facts_types
from gpudoctor.facts_types import Absent, FrameworkFacts, GpuFacts, NvmlFacts
from gpudoctor.snapshot import SHAPE

#: Each section: its SHAPE prefix and the TypedDict one of its values is.
SECTIONS = {"facts.nvml.": NvmlFacts, "facts.gpus[].": GpuFacts, "facts.frameworks.*.": FrameworkFacts}

#: Keys the probes (or a paste) write that report.load does not type-check, so SHAPE leaves them out.
NOT_IN_SHAPE = {
    "facts.nvml.incomplete", "facts.nvml.source", "facts.nvml.init.code", "facts.nvml.init.message",
    "facts.nvml.init.library_version",
    "facts.gpus[].handle", "facts.gpus[].architecture_source", "facts.gpus[].compute_capability_source",
    "facts.gpus[].source", "facts.gpus[].stated", "facts.gpus[].pci.subsystem_id", "facts.gpus[].fabric.api",
    *(f"facts.frameworks.*.{key}" for key in (
        "duration_s", "error", "last_error", "signal", "source", "stage", "started", "stderr_tail")),
    *(f"facts.frameworks.*.info.{key}" for key in (
        "arch_list_source", "backend", "built_cuda", "built_cudnn", "built_hip", "cpu_only_build", "cuda_available",
        "cuda_build", "cuda_major", "cuda_packages_installed", "default_backend", "devices[].compute_capability",
        "devices[].uuid", "distribution", "driver_cuda", "import_and_probe_s", "import_error", "init_error",
        "jaxlib_version", "module_file", "plugins", "pythonpath_entry", "runtime_cuda", "runtime_cudnn",
        "runtime_nccl", "smoke", "source", "traceback_tail", "version_unknown", "warnings")),
}

_KIND_OF = {str: "str", int: "int", float: "num", bool: "bool", type(None): "null", list: "list", dict: "obj"}


def _parts(tp: Any) -> list[Any]:
    """A type's alternatives, without the absent fact any value may be instead."""
    alternatives = typing.get_args(tp) if typing.get_origin(tp) is Union else (tp,)
    return [a for a in alternatives if a is not Absent]


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


def _kind(tp: Any) -> str:
    if _is_typeddict(tp):
        return "obj"
    return _KIND_OF.get(typing.get_origin(tp) or tp, repr(tp))


def _step(tp: Any, step: str) -> Any:
    """The type one SHAPE step below ``tp`` (a key, ``[]`` an item of a list, ``*`` a value of an object)."""
    for part in _parts(tp):
        if step == "[]" and typing.get_origin(part) is list:
            return typing.get_args(part)[0]
        if step == "*" and typing.get_origin(part) is dict:
            return typing.get_args(part)[1]
        if _is_typeddict(part) and step in typing.get_type_hints(part):
            return typing.get_type_hints(part)[step]
    raise KeyError(step)


def _steps(path: str) -> list[str]:
    out: list[str] = []
    for part in path.split("."):
        name, brackets = part.split("[", 1) if "[" in part else (part, "")
        out += ([name] if name else []) + ["[]"] * brackets.count("]")
    return out


def _typed_paths(prefix: str, tp: Any) -> Iterator[tuple[str, Any]]:
    """Every key path the TypedDict ``tp`` names, as SHAPE would spell it, with its type."""
    for part in _parts(tp):
        if typing.get_origin(part) is list:
            yield from _typed_paths(prefix + "[]", typing.get_args(part)[0])
        elif _is_typeddict(part):
            hints = typing.get_type_hints(part)
            for key, hint in hints.items():
                if key in ("unavailable", "error") and "unavailable" in hints:
                    continue  # the keys of the object's own absent form
                yield f"{prefix}.{key}", hint
                yield from _typed_paths(f"{prefix}.{key}", hint)


@pytest.mark.parametrize("prefix", SECTIONS)
def test_every_key_shape_checks_is_typed_with_the_same_type(prefix):
    typed = SECTIONS[prefix]
    for path, kinds in SHAPE.items():
        if not path.startswith(prefix):
            continue
        tp: Any = typed
        for step in _steps(path[len(prefix):]):
            tp = _step(tp, step)
        typed_kinds = {_kind(p) for p in _parts(tp)}
        if "num" in typed_kinds:
            typed_kinds.discard("int")  # an int is a number too
        assert typed_kinds == set(kinds.split("|")), path


@pytest.mark.parametrize("prefix", SECTIONS)
def test_every_typed_key_is_in_shape_or_named_as_unchecked(prefix):
    typed = {path for path, _ in _typed_paths(prefix.rstrip("."), SECTIONS[prefix])}
    assert typed - set(SHAPE) <= NOT_IN_SHAPE
    assert not NOT_IN_SHAPE & set(SHAPE)


def test_a_value_may_be_an_absent_fact():
    assert Absent in typing.get_args(typing.get_type_hints(GpuFacts)["name"])
    assert "unavailable" in typing.get_type_hints(facts_types.GpuMemory)


def test_the_module_imports_only_typing():
    imported = {line.split()[1] for line in open(facts_types.__file__, encoding="utf-8")
                if line.startswith(("import ", "from "))}
    assert imported <= {"__future__", "typing"}
