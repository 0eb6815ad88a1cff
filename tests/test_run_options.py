"""What a run is asked to do travels as a value (gpudoctor/run_options.py), never in module state: one
command's --matrix does not reach the next one in the same process, and a probe started early is adopted
only by a run that diagnoses the same interpreter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from gpudoctor import runner
from gpudoctor.cli import cli
from gpudoctor.compat import data
from gpudoctor.probes.interpreter import Target, own
from gpudoctor.run_options import RunOptions

GPU = "Run Options Test GPU"


def _overlay(tmp_path: Path) -> Path:
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps({
        "topic": "gpus", "as_of": "2026-11-27", "sources": {"T": "a test overlay"},
        "entries": [{"model": GPU, "match": [GPU], "compute_capability": "9.0", "source": "T"}]}))
    return path


def _gpu_known(*extra: str) -> bool:
    """Whether `matrix check` knows the test GPU's compute capability (only the overlay names it)."""
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", "--gpu", GPU, *extra])
    assert result.exit_code in (0, 1), result.output
    return [g.get("compute_capability") for g in json.loads(result.stdout)["stack"]["gpus"]] == ["9.0"]


def test_a_commands_matrix_overlay_ends_with_the_command(tmp_path):
    overlay = _overlay(tmp_path)
    assert not _gpu_known()
    assert _gpu_known("--matrix", str(overlay))
    assert not _gpu_known()  # the next command reads the bundled matrix alone


def test_a_matrix_reads_its_overlay_first_and_the_bundled_one_is_untouched(tmp_path):
    overlay = data.read_overlay(str(_overlay(tmp_path)))
    models = lambda matrix: [e["model"] for e in matrix.topic("gpus")["entries"]]  # noqa: E731
    assert models(data.Matrix((overlay,)))[0] == GPU  # an overlay's entries come first
    assert GPU not in models(data.BUNDLED)
    assert data.Matrix((overlay,)).recorded() == [{"path": str(tmp_path / "gpus.json"), "sha256": overlay.sha256,
                                                   "topics": ["gpus"]}]


def test_an_early_probe_is_adopted_only_for_the_interpreter_it_was_started_for(monkeypatch):
    ran: list[tuple[str, str]] = []
    real = runner._run_one

    def run_one(probe, slot, target, scope):
        ran.append((probe.name, target.executable))
        real(probe, slot, target, scope)

    monkeypatch.setattr(runner, "_run_one", run_one)
    mine, other = own(), Target(sys.executable + "-other", False, "a test")
    early = runner.start_early(("host",), mine)
    facts = runner.run_probes(runner.select_probes(["host"]), RunOptions(interpreter=mine, early=early))
    assert facts["probes"]["host"]["status"] == "ok"
    assert ran == [("host", mine.executable)]  # adopted: not run a second time

    ran.clear()
    early = runner.start_early(("host",), mine)
    runner.run_probes(runner.select_probes(["host"]), RunOptions(interpreter=other, early=early))
    assert sorted(ran) == sorted([("host", mine.executable), ("host", other.executable)])


def test_every_probe_of_a_run_shares_the_scope_its_early_probes_began(monkeypatch):
    """The smoke probe reads the NVML facts the early NVML probe offered, and the probes share one GPU count and
    one child per framework: all through the scope start_early made, which the run hands every probe."""
    from gpudoctor import pipeline

    seen: dict[str, list[object]] = {}

    def record(name: str, facts: dict) -> object:
        def probe(*args: object, **kwargs: object) -> dict:
            scope = kwargs.get("scope") or next(a for a in args if type(a).__name__ == "RunScope")
            seen.setdefault(name, []).append(scope)
            return facts
        return probe

    monkeypatch.setattr(runner, "probe_nvml", record("nvml", {"nvml": {}, "gpus": [], "topology": {"pairs": []}}))
    monkeypatch.setattr(runner, "probe_smoke", record("smoke", {"smoke": {}}))
    monkeypatch.setattr(runner, "probe_workload", record("workload", {"workload": {}}))
    monkeypatch.setattr(runner, "framework_facts", record("frameworks", {}))
    monkeypatch.setattr(runner, "hosted_smoke", record("hosted smoke", {}))
    target = own()
    early = pipeline.start_early(target, quick=False)
    pipeline.check(pipeline.run_options(target, early=early))
    assert sorted(seen) == ["frameworks", "hosted smoke", "nvml", "smoke", "workload"]
    assert all(scope is early.scope for scopes in seen.values() for scope in scopes)
    assert len(seen["nvml"]) == 1  # the early NVML probe was adopted, not run again
