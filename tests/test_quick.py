"""`check --quick`: no GPU work, and frameworks read from package metadata without importing them
(so that --quick takes at most 0.5x collect_env's wall time). What a framework sees or
loads is then unknown, so only the verdicts metadata can support are given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpudoctor import pipeline
from gpudoctor.probes.frameworks import probe_frameworks_metadata
from helpers_facts import with_fact
from helpers_builds import tensorflow_build, torch_build

H200X2 = Path(__file__).parent / "fixtures/real/h200x2-20261121/report.json"


def h200_facts_with(frameworks: dict) -> dict:
    facts = json.loads(H200X2.read_text())["facts"]
    return with_fact(facts, "frameworks", frameworks)


def test_quick_imports_no_framework_and_starts_no_framework_child():
    code = ("import sys, json; from gpudoctor import pipeline; r = pipeline.check(pipeline.RunOptions(quick=True)); "
            "print(json.dumps([sorted(m for m in ('torch', 'tensorflow', 'jax', 'cupy') if m in sys.modules), "
            "sorted({fw.get('status') for fw in r['facts']['frameworks'].values() if fw.get('installed')}), "
            "sorted(r['facts']['probes'])]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    imported, statuses, probes = json.loads(out.stdout.splitlines()[-1])
    assert imported == []
    assert set(statuses) <= {"metadata"}
    assert not {"smoke", "workload", "multigpu"} & set(probes)


def test_real_builds_are_recognised_from_metadata():
    """The installed torch and TensorFlow, whichever builds they are, read from metadata as the imported
    frameworks describe themselves; on a GPU machine only a CPU-only build is a problem metadata can prove
    (what a GPU build sees needs a live import)."""
    builds = {"torch": torch_build(), "tensorflow": tensorflow_build()}
    fw = probe_frameworks_metadata()["frameworks"]
    for name, build in builds.items():
        assert fw[name]["status"] == "metadata"
        assert fw[name]["info"]["version"] == build.version
        assert fw[name]["info"]["cpu_only_build"] is (build.flavour == "cpu"), (name, fw[name])
    report = pipeline.judge(h200_facts_with(fw))
    codes = sorted(f["code"] for f in report["findings"])
    assert codes == ["FWK001"] * sum(b.flavour == "cpu" for b in builds.values())


def test_metadata_builds_still_get_the_driver_verdict():
    """A cu130 wheel known only from its metadata, on a driver for CUDA 12.8: CMP001, and no claim about
    the GPUs it sees (FWK002 needs a live import)."""
    fw = {"torch": {"installed": True, "status": "metadata",
                    "info": {"version": "2.11.0+cu130", "built_cuda": "13.0", "cpu_only_build": False}}}
    facts = with_fact(h200_facts_with(fw), "nvml.cuda_driver_version", 12080)
    codes = {f["code"] for f in pipeline.judge(facts)["findings"]}
    assert "CMP001" in codes and not {"FWK002", "FWK003"} & codes


def test_plain_pypi_torch_metadata_reads_the_cuda_runtime_it_requires():
    """The CUDA a requirement implies: (major, exact major.minor where the pin says it). Pins other than
    nvidia-cuda-runtime count: torch 2.11.0 from PyPI (cuda-toolkit==13.0.2, nvidia-*-cu13) names none and
    is still no CPU-only build; tests/test_framework_metadata.py covers whole packages."""
    from gpudoctor.probes.frameworks.metadata import _cuda_requirement

    assert _cuda_requirement('nvidia-cuda-runtime-cu12==12.4.127; platform_system == "Linux"') == ("12", "12.4")
    assert _cuda_requirement("nvidia-cuda-runtime==13.0.96; extra == 'x'") == ("13", "13.0")
    assert _cuda_requirement('cuda-toolkit[cublas,cudart]==13.0.2; platform_system == "Linux"') == ("13", "13.0")
    assert _cuda_requirement("cuda-toolkit[cublas]==12.*") == ("12", None)
    assert _cuda_requirement("nvidia-cudnn-cu13==9.19.0.56") == ("13", None)
    assert _cuda_requirement("nvidia-cublas==13.1.0.3") is None  # cuBLAS has its own version numbers
    assert _cuda_requirement("filelock") is None


def test_quick_starts_one_nvml_child_and_it_leaves_per_link_counters_unread(tmp_path, monkeypatch):
    """The NVML child started early for --quick is the one the run adopts (one child, asked with --quick); on a
    driver without NVLink totals it reads no link one by one, and the NVLink check says it was not checked."""
    from helpers_faults import install_fake_pynvml

    from gpudoctor import runner
    from gpudoctor.probes.interpreter import own
    from gpudoctor.procs import child
    from gpudoctor.run_options import RunOptions

    install_fake_pynvml(tmp_path, monkeypatch, nvlink="per_link_only")
    real, asked = child.run_module, []

    def spy(module, args=(), **kwargs):
        asked.append((module, tuple(args)))
        return real(module, args, **kwargs)
    monkeypatch.setattr(child, "run_module", spy)
    target = own()
    early = runner.start_early(("nvml",), target, quick=True)
    facts = runner.run_probes(runner.select_probes(["host", "nvml"], quick=True),
                              RunOptions(interpreter=target, quick=True, early=early))
    assert asked == [("gpudoctor.probes.nvml.worker", ("--quick",))]
    assert {g["counters"]["nvlink_errors_unread"] for g in facts["gpus"]} == {"quick"}
    check = {c["id"]: c for c in pipeline.judge(facts)["checks"]}["gpus.nvlink_errors"]
    assert (check["status"], check["reason"].split(":")[0]) == ("skip", "not checked in --quick")
