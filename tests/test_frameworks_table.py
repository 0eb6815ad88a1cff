"""gpudoctor/frameworks_table.py is the one description of each framework: each row's module for the
children holds what they run for it, and the checks and `matrix check` read their framework knowledge
from the table."""

from __future__ import annotations

import ast

import pytest

from gpudoctor import frameworks_table
from gpudoctor.compat import data, from_facts
from gpudoctor.compat import stack as stack_rules
from gpudoctor.compat.data import topics
from gpudoctor.compat.model import Stack
from gpudoctor.compat.queries import stack_from_args
from gpudoctor.frameworks_table import FRAMEWORKS, KEYS, Framework
from gpudoctor.probes.frameworks import children
from gpudoctor.compat.data import BUNDLED
from helpers_facts import with_fact
from helpers_judge import findings


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=KEYS)
def test_each_frameworks_module_holds_its_facts_probe_and_its_workload(fw):
    assert children.module(fw.key).__name__ == fw.child
    assert callable(children.probe(fw.key)) and callable(children.run(fw.key))
    reader = children.reader(fw.key)
    assert reader is None or callable(reader)


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=KEYS)
def test_own_step_is_one_line_of_python_that_imports_the_framework(fw):
    tree = ast.parse(fw.own_step)
    first = tree.body[0]
    assert isinstance(first, (ast.Import, ast.ImportFrom)) and first.names[0].name == fw.module
    assert "'" not in fw.own_step  # the check quotes it in single quotes for the shell


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=KEYS)
def test_a_failure_at_the_first_kernel_names_the_frameworks_own_step(h200x2, fw):
    failed = {"installed": True, "status": "import_error", "error": "RuntimeError: no kernel image", "stage": "first_kernel",
              "info": {}}
    (f,) = [f for f in findings(with_fact(h200x2, f"frameworks.{fw.key}", failed)) if f["code"] == "FWK004"]
    assert f["title"].startswith(f"{fw.label} fails at its first computation on a GPU")
    assert f["remediation"]["commands"] == [f"{h200x2['python']['executable']} -c '{fw.own_step}'"]


def test_an_unknown_framework_is_shown_and_imported_by_its_key():
    assert frameworks_table.get("mxnet") is None
    assert (frameworks_table.label("mxnet"), frameworks_table.module("mxnet")) == ("mxnet", "mxnet")


@pytest.mark.parametrize("package, cuda", [("jax-cuda13-plugin", "13"), ("cupy-cuda12x", "12"), ("cupy-cuda101", "10.1"),
                                           ("cupy-cuda12x-extra", None), ("jax-cuda12-pjrt", None)])
def test_the_cuda_a_package_name_gives(package, cuda):
    key = package.split("-")[0]
    facts = {"python": {"distributions": [{"name": package, "version": "1"}]}}
    assert from_facts._package_cuda_major(frameworks_table.get(key).cuda_package, facts) == cuda


#: A release of each of the four frameworks whose matrix has rules of its own, as `matrix check` takes it.
RELEASES = {"torch": "2.5.1+cu121", "tensorflow": "2.15.0", "jax": "0.4.30+cuda12", "cupy": "13.3.0+cuda12x"}


def _release(fw: Framework) -> str:
    """A release the matrix knows: RELEASES' for the four, the first entry's for any other framework."""
    return RELEASES.get(fw.key) or str(BUNDLED.topic(fw.topic)["entries"][0]["version"])


def test_matrix_check_takes_each_framework_by_its_key():
    releases = {fw.key: _release(fw) for fw in FRAMEWORKS}
    stack = stack_from_args(BUNDLED, driver="535.104.05", **releases)
    assert [(b.framework, b.version) for b in stack.builds] == [(key, releases[key]) for key in KEYS]
    assert stack.unknown == []
    with pytest.raises(TypeError, match="mxnet"):
        stack_from_args(BUNDLED, mxnet="1.9.1")


def test_each_framework_has_its_matrix_and_its_fields_have_a_known_type():
    assert {fw.topic for fw in FRAMEWORKS} <= set(topics())
    assert {kind for fw in FRAMEWORKS for _, kind in fw.matrix_fields} <= set(data.FIELD_TYPES)


#: A framework whose matrix lists its releases in the usual shape, as a new row would describe it.
NEW = Framework("newfw", "NewFW", "newfw", ("newfw",), own_step="import newfw", child="newfw_child",
                matrix_fields=(("min_compute_capability", "a string"),))
NEW_MATRIX = {"topic": "newfw", "as_of": "2026-01-01", "sources": {"S": "its release notes"}, "entries": [
    {"version": "1.2", "python": ">=3.9", "cuda": "12.4", "cudnn": "9.1", "arch_list": ["sm_80", "sm_90"],
     "ptx": ["compute_90"], "source": "S"},
    {"version": "1.2.7", "python": ">=3.10", "cuda": "12.8", "source": "S"}]}


@pytest.fixture
def new_framework(monkeypatch):
    monkeypatch.setattr(frameworks_table, "FRAMEWORKS", (*FRAMEWORKS, NEW))
    monkeypatch.setitem(frameworks_table._BY_KEY, NEW.key, NEW)


class _WithNew:
    """The bundled matrix with the new framework's topic beside it, as its compat_matrix/newfw.json gives it."""

    def topic(self, name):
        return NEW_MATRIX if name == NEW.topic else BUNDLED.topic(name)


def test_a_new_framework_needs_no_build_rule_of_its_own(new_framework):
    stack = Stack()
    build = stack_rules.build_from_matrix(_WithNew(), "newfw", "1.2.3+cu124", stack)
    assert (build.label, build.cuda, build.python_spec, build.sass, build.ptx, build.cudnn_built) == \
           ("NewFW 1.2.3+cu124", "12.4", ">=3.9", ["sm_80", "sm_90"], ["compute_90"], "9.1")
    assert stack_rules.build_from_matrix(_WithNew(), "newfw", "1.2.7", stack).cuda == "12.8"  # its own entry before its line's
    assert stack_rules.build_from_matrix(_WithNew(), "newfw", "2.0", stack) is None and stack.unknown == ["NewFW 2.0"]


def test_a_new_frameworks_matrix_is_held_to_a_releases_shape_and_its_own_fields(new_framework):
    data.validate_shapes(NEW_MATRIX, "newfw.json")
    for field, value in (("arch_list", "sm_80"), ("cuda", "twelve"), ("min_compute_capability", 8.0)):
        bad = {**NEW_MATRIX, "entries": [{**NEW_MATRIX["entries"][0], field: value}]}
        with pytest.raises(data.MatrixError, match=field):
            data.validate_shapes(bad, "newfw.json")
