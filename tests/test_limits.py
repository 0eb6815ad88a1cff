"""A process gpudoctor could not start is a limit's doing, and the limit is named: never a driver that
was not asked (DRV019 "reinstall the driver"), never a pass of a check whose probe did not run.

Real limits on a real gpudoctor (ulimit -n, with the fake NVML of helpers_faults), and the errors of the
other limits (E2BIG, EAGAIN) as the NVML probe records them."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor import pipeline
from gpudoctor.probes.nvml import assemble
from gpudoctor.probes.system import probe_limits
from gpudoctor.views.limits import limit_hit

from helpers_faults import FAKE_PYNVML

ROOT = Path(__file__).resolve().parent.parent


def _facts(start_error: str, limits: dict) -> dict:
    facts = {"probes": {"nvml": {"status": "ok"}, "host": {"status": "ok"}, "driver_files": {"status": "ok"}},
             "host": {"limits": limits, "container": {"detected": False, "markers": []}, "env": {}},
             "driver": {"nvml_library_files": ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"], "device_nodes": {}}}
    facts.update(assemble([], False, None, "", start_error))
    return facts


@pytest.mark.parametrize("error, words, fix", [
    ("OSError: [Errno 24] Too many open files", "may open no more files (ulimit -n is 16)", "ulimit -n 4096"),
    ("OSError: [Errno 7] Argument list too long: '/usr/bin/python3'",
     "environment is too large to hand to a new process (2097000 bytes, against at most 2097152", "env | wc -c"),
    ("BlockingIOError: [Errno 11] Resource temporarily unavailable", "may start no more processes (ulimit -u is 64)",
     "ulimit -u 4096"),
])
def test_a_probe_stopped_by_a_limit_names_it(error, words, fix):
    facts = _facts(error, {"open_files": 16, "processes": 64, "environment_bytes": 2097000, "arg_max_bytes": 2097152})
    report = pipeline.judge(facts)
    codes = [f["code"] for f in report["findings"]]
    assert "DRV019" not in codes
    [int006] = [f for f in report["findings"] if f["code"] == "INT006"]
    assert words in int006["title"] and int006["severity"] == "error" and fix in int006["remediation"]["commands"]
    assert {c["id"]: c["status"] for c in report["checks"]}["driver.nvml"] != "pass"


def test_an_unknown_start_error_is_still_not_the_drivers():
    report = pipeline.judge(_facts("OSError: [Errno 13] Permission denied: '/usr/bin/python3'", {}))
    [int006] = [f for f in report["findings"] if f["code"] == "INT006"]
    assert "Permission denied" in int006["title"] and "DRV019" not in [f["code"] for f in report["findings"]]


def test_a_crash_after_the_start_is_still_a_crash():
    facts = _facts("", {})
    facts.update(assemble([{"section": "progress", "data": "nvmlInit"}], False, -11, "Segmentation fault", ""))
    assert "DRV019" in [f["code"] for f in pipeline.judge(facts)["findings"]]


def test_limit_hit_reads_only_an_errno():
    assert limit_hit("ValueError: bad", {}) is None and limit_hit(None, {}) is None
    assert limit_hit("[Errno 24]", {}).what == "this process may open no more files"


def test_this_process_limits_are_facts():
    limits = probe_limits()
    assert limits["open_files"] is None or limits["open_files"] == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert limits["environment_bytes"] > 0 and limits["arg_max_bytes"] == os.sysconf("SC_ARG_MAX")


@pytest.mark.parametrize("files", [9, 12, 16])
def test_few_open_files_are_named_and_never_pass(tmp_path, files):
    """A healthy (fake) driver under `ulimit -n`: whichever start runs out first, the limit is what is said,
    and the exit is never 0. With 12 or 16 the run may also find enough files (children end and give theirs
    back): then it is judged as usual, here DRV015 for the device files this machine lacks."""
    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    out = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--only", "driver,doctor"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": f"{ROOT}:{tmp_path}"}, capture_output=True, text=True,
                         timeout=120, preexec_fn=limit)
    said = out.stdout + out.stderr
    assert out.returncode != 0, said
    assert "Traceback" not in said and "DRV019" not in said and "reinstall" not in said
    if files == 9 or "may open no more files" not in said:
        assert "may open no more files" in said or "DRV015" in said, said
