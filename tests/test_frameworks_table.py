"""gpudoctor/frameworks_table.py is the one description of each framework: each row's module for the
children holds what they run for it, and the checks and `matrix check` read their framework knowledge
from the table."""

from __future__ import annotations

import ast

import pytest

from gpudoctor import frameworks_table
from gpudoctor.compat import from_facts
from gpudoctor.compat.queries import stack_from_args
from gpudoctor.frameworks_table import FRAMEWORKS, KEYS
from gpudoctor.probes.frameworks import children
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


#: A release of each framework the matrix knows.
RELEASES = {"torch": "2.5.1+cu121", "tensorflow": "2.15.0", "jax": "0.4.30+cuda12", "cupy": "13.3.0+cuda12x"}


def test_matrix_check_takes_each_framework_by_its_key():
    assert set(RELEASES) == set(KEYS)
    stack = stack_from_args(driver="535.104.05", **RELEASES)
    assert [(b.framework, b.version) for b in stack.builds] == [(key, RELEASES[key]) for key in KEYS]
    assert stack.unknown == []
    with pytest.raises(TypeError, match="mxnet"):
        stack_from_args(mxnet="1.9.1")
