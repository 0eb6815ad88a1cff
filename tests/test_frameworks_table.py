"""gpudoctor/frameworks_table.py is the one description of each framework: the copies that must exist (the
package-metadata reader runs with the standard library only) equal it, the children's dispatch tables name
the same frameworks, and the checks and `matrix check` read their framework knowledge from it."""

from __future__ import annotations

import ast

import pytest

from gpudoctor import frameworks_table
from gpudoctor.compat import from_facts
from gpudoctor.compat.queries import stack_from_args
from gpudoctor.frameworks_table import FRAMEWORKS, KEYS
from gpudoctor.probes.frameworks import metadata
from gpudoctor.probes.frameworks import worker as framework_worker
from gpudoctor.probes.workload import THREADED
from gpudoctor.probes.workload import worker as workload_worker
from gpudoctor.compat.data import BUNDLED
from helpers_facts import with_fact
from helpers_judge import findings


def test_the_metadata_readers_copy_equals_the_table():
    assert metadata.FRAMEWORKS == KEYS
    for fw in FRAMEWORKS:
        kind = metadata.KINDS[fw.key]
        assert (kind.label, kind.module, kind.distributions, kind.prefixes, kind.cpu_only_builds) == \
               (fw.label, fw.module, fw.distributions, fw.distribution_prefixes, fw.cpu_only_builds), fw.key


def test_the_childrens_dispatch_tables_name_the_tables_frameworks():
    assert set(framework_worker.PROBES) == set(KEYS)
    assert {key: run.__module__ for key, run in workload_worker.RUNNERS.items()} == {f.key: f.workload for f in FRAMEWORKS}
    assert set(THREADED) <= set(KEYS)


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
    stack = stack_from_args(BUNDLED, driver="535.104.05", **RELEASES)
    assert [(b.framework, b.version) for b in stack.builds] == [(key, RELEASES[key]) for key in KEYS]
    assert stack.unknown == []
    with pytest.raises(TypeError, match="mxnet"):
        stack_from_args(BUNDLED, mxnet="1.9.1")
