"""Framework faults in real child processes: a FAKE framework package shadows the real one.

The fake (a package named ``cupy``, or ``torch`` where said) is written into tmp_path, which goes
first on PYTHONPATH for the worker child (procs/child.py's child_env keeps PYTHONPATH after the
package root) and on sys.path here, since probe_frameworks asks importlib.util.find_spec in the
parent whether a framework is installed. Everything else is real: the parallel runner, the time
limit, the process-group kill, the stderr tail, the worker, and the checks, which judge each
result in place of the framework recorded on the real 2 x H200 machine.
"""

from __future__ import annotations

import copy
import os
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from gpudoctor import pipeline
from gpudoctor.probes import frameworks as fw_probe
from gpudoctor.probes.interpreter import own
from helpers_faults import CUPY_ON_OLD_DRIVER

#: The limit for imports that hang; the others get GENEROUS_S, so a slow machine cannot turn a
#: crash into a timeout, and assert they ended long before it.
TIMEOUT_S = 4.0
GENEROUS_S = 30.0
#: Starting a child Python, killing its process group and joining the readers: well under this.
SLACK_S = 6.0


def install_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, name: str = "cupy") -> Path:
    """Write package ``name`` with ``source`` as its __init__.py; only it is probed."""
    pkg = tmp_path / "fakes" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(source))
    root = str(pkg.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.syspath_prepend(root)
    monkeypatch.setattr(fw_probe, "FRAMEWORKS", (name,))
    assert fw_probe.installed(name, own())
    return pkg


def probe(name: str = "cupy", timeout_s: float = GENEROUS_S) -> tuple[dict[str, Any], float]:
    start = time.monotonic()
    result = fw_probe.probe_frameworks(own(), timeout_s=timeout_s)["frameworks"]
    elapsed = time.monotonic() - start
    assert set(result) == {name}
    return result[name], elapsed


def judge_on_h200(h200x2: dict[str, Any], name: str, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every finding, with the probed framework in place of the one recorded on 2 x H200."""
    facts = copy.deepcopy(h200x2)
    facts["frameworks"][name] = copy.deepcopy(record)
    return pipeline.judge(facts)["findings"]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("name", ["cupy", "torch"])
def test_import_that_segfaults(tmp_path, monkeypatch, h200x2, name):
    """torch too: where the real torch is installed, the fake on PYTHONPATH must win in the child."""
    install_fake(tmp_path, monkeypatch, """
        import os, signal
        os.kill(os.getpid(), signal.SIGSEGV)
    """, name)
    record, elapsed = probe(name)
    assert record["installed"] is True
    assert record["status"] == "crashed", record
    assert "SIGSEGV" in record["error"]
    assert "info" not in record
    assert elapsed < GENEROUS_S / 2
    findings = judge_on_h200(h200x2, name, record)
    assert [f["code"] for f in findings] == ["FWK004"], findings
    assert findings[0]["severity"] == "error"
    assert "SIGSEGV" in findings[0]["title"]
    assert f"import {name}" in " ".join(findings[0]["remediation"]["commands"])


def test_import_killed_like_by_the_oom_killer(tmp_path, monkeypatch, h200x2):
    install_fake(tmp_path, monkeypatch, """
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    record, _ = probe()
    assert record["status"] == "crashed", record
    assert "SIGKILL" in record["error"]
    findings = judge_on_h200(h200x2, "cupy", record)
    assert [f["code"] for f in findings] == ["FWK004"]
    assert "SIGKILL" in findings[0]["title"]


def test_import_that_hangs_is_killed_with_everything_it_started(tmp_path, monkeypatch, h200x2):
    pids = tmp_path / "pids"
    install_fake(tmp_path, monkeypatch, f"""
        import os, subprocess, sys, time
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open({str(pids)!r}, "w") as fh:
            fh.write(f"{{os.getpid()}} {{helper.pid}}")
        time.sleep(600)
    """)
    record, elapsed = probe(timeout_s=TIMEOUT_S)
    assert record["status"] == "timeout", record
    assert record["error"] == f"no answer within {TIMEOUT_S:g} s"
    assert TIMEOUT_S <= elapsed < TIMEOUT_S + SLACK_S
    assert record["duration_s"] < TIMEOUT_S + SLACK_S
    worker, helper = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 5.0
    while not (gone(worker) and gone(helper)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(worker), "the framework worker outlived its time limit"
    assert gone(helper), "a process the import started outlived the worker's time limit"
    findings = judge_on_h200(h200x2, "cupy", record)
    assert [f["code"] for f in findings] == ["FWK005"]
    assert "did not finish" in findings[0]["title"] and f"{TIMEOUT_S:g} s" in findings[0]["title"]


def test_import_flooding_stderr_then_raising(tmp_path, monkeypatch, h200x2):
    install_fake(tmp_path, monkeypatch, """
        import sys
        line = "W external/xla/xla/stream_executor/cuda/cuda_dnn.cc:1] " + "x" * 960 + "\\n"
        for _ in range(5 * 1024):
            sys.stderr.write(line)
        sys.stderr.write("LAST LINE BEFORE THE ERROR\\n")
        sys.stderr.flush()
        raise ImportError("libcudart.so.13: cannot open shared object file: No such file or directory")
    """)
    record, elapsed = probe()
    assert elapsed < GENEROUS_S / 2, "5 MB on stderr must not stall the child on a full pipe"
    assert record["status"] == "import_error", record
    assert record["error"] == "ImportError: libcudart.so.13: cannot open shared object file: No such file or directory"
    assert 0 < len(record["stderr_tail"]) <= 2000
    assert record["stderr_tail"].rstrip().endswith("LAST LINE BEFORE THE ERROR")
    assert "libcudart.so.13" in record["info"]["traceback_tail"]
    findings = judge_on_h200(h200x2, "cupy", record)
    assert [f["code"] for f in findings] == ["FWK004"]
    fwk = findings[0]
    assert "libcudart.so.13: cannot open shared object file" in fwk["title"]
    assert "LAST LINE BEFORE THE ERROR" in fwk["detail"]
    assert len(fwk["detail"]) < 1400



def test_cuda_init_error_gives_no_gpu(tmp_path, monkeypatch, h200x2):
    install_fake(tmp_path, monkeypatch, CUPY_ON_OLD_DRIVER)
    record, _ = probe()
    assert record["status"] == "ok", record
    info = record["info"]
    assert info["version"] == "14.2.0"
    assert info["runtime_cuda"] == "13.2" and info["driver_cuda"] == "12.2"
    assert info["devices"] == [] and info["cuda_available"] is False
    assert info["init_error"] == ("CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is insufficient "
                                  "for CUDA runtime version")
    findings = judge_on_h200(h200x2, "cupy", record)
    assert [f["code"] for f in findings] == ["FWK002"], findings
    fwk = findings[0]
    assert fwk["title"] == "CuPy sees no GPU, but CUDA programs here should see 2"
    assert "cudaErrorInsufficientDriver" in fwk["detail"]


def test_frameworks_are_probed_in_parallel(tmp_path, monkeypatch):
    """Two frameworks that each hang: the probe takes one time limit, not two."""
    for name in ("cupy", "torch"):
        install_fake(tmp_path / name, monkeypatch, "import time\ntime.sleep(600)\n", name)
    monkeypatch.setattr(fw_probe, "FRAMEWORKS", ("cupy", "torch"))
    start = time.monotonic()
    result = fw_probe.probe_frameworks(own(), timeout_s=TIMEOUT_S)["frameworks"]
    elapsed = time.monotonic() - start
    assert {n: r["status"] for n, r in result.items()} == {"cupy": "timeout", "torch": "timeout"}
    assert elapsed < 2 * TIMEOUT_S
