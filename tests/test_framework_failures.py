"""Where a framework failed, in its own words, and advice that follows the evidence.

Reproduced for real on 1 x H100 (2026-11-23, tests/fixtures/real/h100x1-20261123/before/): with
PYTORCH_CUDA_ALLOC_CONF=bogus_option:1, PyTorch 2.11 imports, torch.cuda.is_available() is True,
torch.cuda.init() raises ``ValueError: Unrecognized key 'bogus_option' in CUDA allocator config.``
(bogus-direct.txt), and asking for a GPU's properties after that killed the process with SIGSEGV
(bogus-worker.txt). The import did not fail, so "fails to import: the import crashed (SIGSEGV)" would be
wrong, and a reinstall would not fix it. The fakes below reproduce that sequence in a real child process, step by step.
"""

from __future__ import annotations

import copy

import pytest

from gpudoctor import pipeline
from gpudoctor.procs.child import ChildResult
from gpudoctor.probes.frameworks import last_error_line, summarise
from test_framework_faults import GENEROUS_S, install_fake, probe

BOGUS = "ValueError: Unrecognized key 'bogus_option' in CUDA allocator config."

#: What every fake torch below starts with: a CUDA 13.0 build of 2.11.
TORCH_HEAD = """
    import os, signal
    __version__ = "2.11.0+cu130"
    class version:
        cuda = "13.0"
        hip = None
    class _cuda:
        @staticmethod
        def get_arch_list(): return ["sm_90"]
"""

#: PyTorch 2.11 as it behaved on the H100 with the bad allocator config: init raises, and a GPU's
#: properties asked after that crash the process.
TORCH_BAD_ALLOC_CONF = TORCH_HEAD + """
        @staticmethod
        def is_available(): return True
        @staticmethod
        def init(): raise ValueError("Unrecognized key 'bogus_option' in CUDA allocator config.")
        @staticmethod
        def device_count(): return 1
        @staticmethod
        def get_device_properties(i): os.kill(os.getpid(), signal.SIGSEGV)
    cuda = _cuda
"""

TORCH_CRASHES_IN_CUDA_INIT = TORCH_HEAD + """
        @staticmethod
        def is_available():
            import sys
            sys.stderr.write("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.\\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSEGV)
    cuda = _cuda
"""


def _fwk(findings: list[dict], code: str) -> dict:
    (found,) = [f for f in findings if f["code"] == code]
    return found


def test_an_allocator_config_torch_refuses_is_its_own_error_not_a_crash(tmp_path, monkeypatch, h200x2):
    install_fake(tmp_path, monkeypatch, TORCH_BAD_ALLOC_CONF, "torch")
    record, _ = probe("torch")
    assert record["status"] == "ok", record  # it imported; no GPU is asked for after the failed start
    assert record["info"]["init_error"] == BOGUS and record["info"]["devices"] == []
    facts = copy.deepcopy(h200x2)
    facts["frameworks"]["torch"] = record
    facts.setdefault("host", {}).setdefault("framework_env", {})["PYTORCH_CUDA_ALLOC_CONF"] = "bogus_option:1"
    findings = pipeline.judge(facts)["findings"]
    sees_none = _fwk(findings, "FWK002")
    assert BOGUS in sees_none["detail"]
    assert "FWK004" not in {f["code"] for f in findings}
    assert not any("reinstall" in " ".join(f["remediation"]["commands"]).lower() for f in findings)


def test_a_crash_while_starting_cuda_is_located_and_not_blamed_on_the_install(tmp_path, monkeypatch, h200x2):
    install_fake(tmp_path, monkeypatch, TORCH_CRASHES_IN_CUDA_INIT, "torch")
    record, elapsed = probe("torch")
    assert elapsed < GENEROUS_S
    assert record["status"] == "crashed" and record["stage"] == "cuda_init" and record["signal"] == "SIGSEGV"
    assert record["error"] == "its process ended (killed by SIGSEGV) while starting CUDA"
    assert record["last_error"].startswith("RuntimeError: CUDA driver initialization failed")
    facts = copy.deepcopy(h200x2)
    facts["frameworks"]["torch"] = record
    crash = _fwk(pipeline.judge(facts)["findings"], "FWK004")
    assert crash["title"].startswith("PyTorch fails to start CUDA: its process ended (killed by SIGSEGV)")
    assert "Its last error line: RuntimeError: CUDA driver initialization failed" in crash["detail"]
    assert "Reinstall" not in crash["remediation"]["text"]
    assert any("torch.ones(1, device=" in c for c in crash["remediation"]["commands"])


def test_an_import_that_cannot_load_a_library_still_gets_the_reinstall_advice(tmp_path, monkeypatch, h200x2):
    install_fake(tmp_path, monkeypatch, """
        raise ImportError("libcudnn.so.9: cannot open shared object file: No such file or directory")
    """, "torch")
    record, _ = probe("torch")
    assert record["status"] == "import_error" and record["stage"] == "import"
    facts = copy.deepcopy(h200x2)
    facts["frameworks"]["torch"] = record
    # the fake stands for the installed torch: its folder is where the environment's torch lies
    facts["python"]["distributions"].append({"name": "torch", "version": "2.11.0", "location": str(tmp_path / "fakes")})
    failure = _fwk(pipeline.judge(facts)["findings"], "FWK004")
    assert failure["title"].startswith("PyTorch fails to import: ImportError: libcudnn.so.9")
    assert failure["remediation"]["text"].startswith("Reinstall PyTorch")


def test_a_stray_torch_on_pythonpath_is_named_as_the_cause(tmp_path, monkeypatch, h200x2):
    """PYTHONPATH names a folder holding a stray torch/ (a source tree, a half-copied package): `import torch`
    finds it before the environment's own PyTorch, and fails. The variable is the cause, not the install."""
    install_fake(tmp_path, monkeypatch, """
        raise ModuleNotFoundError("No module named 'torch._C'")
    """, "torch")
    record, _ = probe("torch")
    assert record["info"]["module_file"] == str(tmp_path / "fakes" / "torch" / "__init__.py")
    assert record["info"]["pythonpath_entry"] == str(tmp_path / "fakes")
    facts = copy.deepcopy(h200x2)
    facts["frameworks"]["torch"] = record
    failure = _fwk(pipeline.judge(facts)["findings"], "FWK004")
    assert failure["remediation"]["text"].startswith(f"PYTHONPATH is the cause: its entry {tmp_path / 'fakes'} holds a torch")
    assert "unset PYTHONPATH" in failure["remediation"]["commands"]
    assert "Reinstall" not in failure["remediation"]["text"]


@pytest.mark.parametrize("stages, returncode, expected", [
    (["import"], -11, "its process ended (killed by SIGSEGV) while importing it"),
    (["import", "cuda_init", "devices"], -9, "its process ended (killed by SIGKILL) while listing its GPUs"),
    (["import", "cuda_init", "devices", "first_kernel"], 1, "its process ended (exit status 1) at its first computation on a GPU"),
    ([], 0, "its process ended (exit status 0) before it said anything"),
])
def test_a_child_that_ends_without_its_facts_says_where(stages, returncode, expected):
    child = ChildResult(lines=[{"section": "stage", "data": s} for s in stages], returncode=returncode)
    record = summarise(child, 60.0)
    assert record["status"] == "crashed" and record["error"] == expected
    assert record["stage"] == (stages[-1] if stages else None)
    assert record["signal"] == (child.signal_name or None)


def test_the_last_error_line_is_the_frameworks_own():
    assert last_error_line(f"Traceback (most recent call last):\n  File \"x\", line 1\n{BOGUS}\n") == BOGUS
    assert last_error_line("terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA error: "
                           "no kernel image is available\nException raised from c10_cuda_check") == \
        "what():  CUDA error: no kernel image is available"
    assert last_error_line("E1123 14:56:01.123456   12345 cuda_dnn.cc:535] Could not create cudnn handle\n"
                           "I1123 info line") == "E1123 14:56:01.123456   12345 cuda_dnn.cc:535] Could not create cudnn handle"
    assert last_error_line("just a warning\nloading extensions...") == ""
