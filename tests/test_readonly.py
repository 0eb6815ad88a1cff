"""The read-only guarantee, read from the source: gpudoctor only ever calls allow-listed NVML getters,
only _binding imports pynvml, and the layers import only downwards."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pynvml
import pytest

from gpudoctor.probes.nvml import _binding

PACKAGE = Path(__file__).resolve().parents[1] / "gpudoctor"
SOURCES = sorted(PACKAGE.rglob("*.py"))
BINDING = PACKAGE / "probes" / "nvml" / "_binding.py"

CALL = re.compile(r"""\b(?:nv\.|_binding\.)?(?:call|query|q)\(\s*["'](\w+)["']""")  # q: the worker's per-GPU query
CONSTANT = re.compile(r"""\bconstant\(\s*["'](\w+)["']""")
NVML_NAME = re.compile(r"\bnvml[A-Z]\w*")
MUTATING_WORDS = ("Set", "Reset", "Clear", "Register", "Enable", "Disable", "Modify")
READ_VERB = re.compile(r"^nvml(?:System|Device|Unit|Event|GpuInstance|ComputeInstance|Vgpu\w*?)(?:Get|Is)[A-Z0-9_]")
LIFECYCLE = {"nvmlInit", "nvmlShutdown", "nvmlErrorString"}
#: Members of structs the bindings return, named nvml... by nvml.h: data read from a result, not a call
#: (c_nvmlFieldValue_t.nvmlReturn, each field's own status in nvmlDeviceGetFieldValues).
STRUCT_MEMBERS = {"nvmlReturn"}
#: The C entry point pynvml's own nvmlInit calls; workload/sharing.py calls it through ctypes (the workload
#: child runs under the diagnosed interpreter, which may not have pynvml).
C_LIFECYCLE = {"nvmlInit_v2"}


def _rel(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_sources_found():
    names = {_rel(p) for p in SOURCES}
    assert {"gpudoctor/probes/nvml/worker.py", "gpudoctor/probes/nvml/_binding.py", "gpudoctor/cli/__init__.py"} <= names


def test_every_called_nvml_function_is_allow_listed():
    called: dict[str, set[str]] = {}
    for path in SOURCES:
        for name in CALL.findall(path.read_text(encoding="utf-8")):
            called.setdefault(name, set()).add(_rel(path))
    # the scan does see the worker's calls of every form: nv.call, nv.query and its q() shorthand
    assert {"nvmlInit", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetMigMode", "nvmlDeviceGetName"} <= set(called)
    outside = {name: sorted(where) for name, where in called.items() if name not in _binding.GETTERS}
    assert outside == {}


def test_every_nvml_identifier_is_a_getter_or_a_constant():
    """Any nvmlXxx name anywhere in the package is an allow-listed getter, or a non-callable constant
    read through _binding.constant()."""
    constants = {name for p in SOURCES for name in CONSTANT.findall(p.read_text(encoding="utf-8"))}
    strays = {}
    for path in SOURCES:
        for name in set(NVML_NAME.findall(path.read_text(encoding="utf-8"))):
            if name in _binding.GETTERS or name in C_LIFECYCLE:
                continue
            if name in STRUCT_MEMBERS and not callable(getattr(pynvml, name, None)):
                continue
            if name in constants and not callable(getattr(pynvml, name, None)):
                continue
            strays.setdefault(name, []).append(_rel(path))
    assert strays == {}


def test_getters_are_read_only_by_name():
    for name in sorted(_binding.GETTERS):
        if name in LIFECYCLE:
            continue
        match = READ_VERB.match(name)
        assert match, f"{name} is not a Get/Is call"
        before_verb = name[: match.end() - 1]
        assert not any(word in before_verb for word in MUTATING_WORDS), name


def test_no_getter_name_contains_a_mutating_word():
    """Stricter than the verb rule while no harmless getter needs such a word: none may contain one."""
    flagged = sorted(n for n in _binding.GETTERS if any(w in n for w in MUTATING_WORDS))
    assert flagged == []


def test_every_getter_exists_in_the_bindings():
    """An allow-listed name that the bindings do not have would be a typo that hides a fact forever."""
    assert sorted(n for n in _binding.GETTERS if not callable(getattr(pynvml, n, None))) == []


@pytest.mark.parametrize("name", [
    "nvmlDeviceSetPersistenceMode",
    "nvmlDeviceSetComputeMode",
    "nvmlDeviceResetGpuLockedClocks",
    "nvmlDeviceClearEccErrorCounts",
    "nvmlDeviceSetPowerManagementLimit",
    "nvmlDeviceSetMigMode",
])
def test_call_refuses_setters(name):
    assert callable(getattr(pynvml, name))  # the bindings have it: only the allow-list stops it
    with pytest.raises(PermissionError, match=name):
        _binding.call(name, None)
    with pytest.raises(PermissionError):
        _binding.query(name, None)  # query must not turn the refusal into an "unavailable" fact


def _imports(path: Path, root: Path = PACKAGE.parent) -> set[str]:
    """Absolute module names a file imports, relative imports resolved against ``root``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(root).parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            found.add(str(node.args[0].value))
    return found


def _imports_module(imports: set[str], module: str) -> bool:
    return any(name == module or name.startswith(module + ".") for name in imports)


def test_only_binding_imports_pynvml():
    importers = sorted(_rel(p) for p in SOURCES if _imports_module(_imports(p), "pynvml"))
    assert importers == ["gpudoctor/probes/nvml/_binding.py"]
    text_hits = sorted(_rel(p) for p in SOURCES if re.search(r"^\s*(import pynvml|from pynvml\b)", p.read_text(), re.M))
    assert text_hits == ["gpudoctor/probes/nvml/_binding.py"]


@pytest.mark.parametrize("layer,forbidden", [
    ("checks", ("click", "gpudoctor.render")),
    ("probes", ("click", "gpudoctor.render")),
    ("procs", ("click", "gpudoctor.render", "gpudoctor.cli", "gpudoctor.checks", "gpudoctor.probes",
               "gpudoctor.runner", "gpudoctor.pipeline", "gpudoctor.distributed")),
    ("render", ("gpudoctor.probes",)),
    ("compat", ("click", "gpudoctor.checks", "gpudoctor.render", "gpudoctor.cli")),
    ("pastes", ("click", "gpudoctor.render", "gpudoctor.cli", "gpudoctor.probes")),
    ("views", ("click", "gpudoctor.checks", "gpudoctor.render", "gpudoctor.cli", "gpudoctor.probes", "gpudoctor.compat")),
])
def test_layers_import_downwards(layer, forbidden):
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files
    bad = {_rel(p): sorted(m for m in forbidden if _imports_module(_imports(p), m)) for p in files}
    assert {k: v for k, v in bad.items() if v} == {}


#: The check modules that hold the registry and its tools rather than checks: only they may import other
#: check modules (the registry lists every check; the gates ask the registry which checks ran).
CHECK_INFRASTRUCTURE = ("base", "selection")  # the Check record and finding(); which checks a run selected


def test_checks_do_not_import_each_other():
    """A check reads facts and the views of them (gpudoctor/views/), never another check's module: what two
    checks share is a view of the facts, so one check can be read, moved or removed on its own."""
    allowed = tuple(f"gpudoctor.checks.{name}" for name in CHECK_INFRASTRUCTURE)
    bad = {}
    for path in sorted((PACKAGE / "checks").rglob("*.py")):
        if path.stem == "registry":  # it lists every check; the doctor's gate is handed the run (RunView)
            continue
        own = f"gpudoctor.checks.{path.stem}"
        siblings = sorted(m for m in _imports(path) if m.startswith("gpudoctor.checks.")
                          and not any(m == a or m.startswith(a + ".") for a in (*allowed, own)))
        if siblings:
            bad[_rel(path)] = siblings
    assert bad == {}


def test_no_import_loops_and_the_report_imports_no_renderer():
    """No module of the package imports one that imports it back, however indirectly and wherever the import
    stands (a function's lazy import too): the doctor's gate is handed the run (checks/base.py RunView) rather
    than importing the registry that lists it. The report (data) imports no renderer."""
    def name(path: Path) -> str:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = [p for p in SOURCES if p.name != "__init__.py"]  # a package's face only hands names on
    graph = {}
    for path in modules:
        mods = _imports(path)  # exact names: ``from gpudoctor.compat import rules`` is an arrow to rules.py
        graph[_rel(path)] = {_rel(q) for q in modules if q != path and name(q) in mods}
    loops = []
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            node = todo.pop()
            if node == start:
                loops.append(start)
                break
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
    assert loops == []
    assert not _imports_module(_imports(PACKAGE / "report.py"), "gpudoctor.render")


def test_fleet_and_pipeline_import_no_renderer():
    """The fleet summary and the pipeline sit below the renderers: a reading of the facts they share with a
    renderer (the driver's CUDA version, the visible GPUs) is a view (gpudoctor/views/), not a renderer's helper."""
    importers = sorted(_rel(p) for p in (PACKAGE / "fleet.py", PACKAGE / "pipeline.py")
                       if _imports_module(_imports(p), "gpudoctor.render"))
    assert importers == []


def test_import_scanner_sees_relative_and_absolute_imports(tmp_path):
    """The scanner itself: relative, absolute and dynamic imports are all caught."""
    target = tmp_path / "gpudoctor" / "checks" / "sample.py"
    target.parent.mkdir(parents=True)
    target.write_text("from ..render import text\nimport click.testing\nfrom gpudoctor import probes\n"
                      "import importlib\nimportlib.import_module('pynvml')\n")
    found = _imports(target, root=tmp_path)
    for module in ("gpudoctor.render", "click", "gpudoctor.probes", "pynvml"):
        assert _imports_module(found, module), module
    assert not _imports_module(found, "gpudoctor.checks")
