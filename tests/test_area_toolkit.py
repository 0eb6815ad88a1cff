"""The toolkit area: toolkit.nvcc_home (checks/toolkit.py), whether CUDA_HOME and the nvcc on PATH are one
toolkit (CUDA001, CUDA002).

Judged on the real 2 x H200 recording (nvcc 13.0 at /usr/local/cuda, tests/fixtures/real/README.md) with
CUDA_HOME changed one fact at a time; each fault asserts the exact codes over every check.
"""

from __future__ import annotations

import os

from gpudoctor.checks import registry
from helpers_facts import with_fact

from helpers_judge import after_commands, codes, only, statuses


def test_the_healthy_recording_passes_every_toolkit_check(h200x2):
    """The real 2 x H200 recording: every toolkit check had its facts to judge (the nvcc found and CUDA_HOME) and passes,
    and no check at all finds anything."""
    assert statuses(h200x2, "toolkit") == {c.id: "pass" for c in registry.CHECKS if c.area == "toolkit"}
    assert codes(h200x2) == set()


CUDA_124 = {"path": "/usr/local/cuda-12.4", "exists": True, "real_path": "/usr/local/cuda-12.4", "version": "12.4"}


def test_cuda_home_on_another_toolkit(h200x2):
    assert h200x2["toolkit"]["nvcc"]["release"] == "13.0"
    f = only(with_fact(h200x2, "toolkit.env.CUDA_HOME", CUDA_124), "CUDA001")
    assert f["severity"] == "warning"
    assert "13.0" in f["title"] and "12.4" in f["title"] and "/usr/local/cuda-12.4" in f["title"]


def test_cuda_home_fix_leaves_nvcc_and_cuda_home_agreeing(h200x2):
    """Running the commands of the finding, in order, must end the mismatch rather than swap it."""
    f = only(with_fact(h200x2, "toolkit.env.CUDA_HOME", CUDA_124), "CUDA001")
    before = {"PATH": "/usr/local/cuda/bin:/usr/bin", "CUDA_HOME": "/usr/local/cuda-12.4"}
    after = after_commands(list(f["remediation"]["commands"]), before)
    nvcc_dir = next(d for d in after["PATH"].split(":") if d.endswith("/bin") and "cuda" in d)
    nvcc_root = os.path.dirname(nvcc_dir)
    roots = {"/usr/local/cuda": "/usr/local/cuda-13.0"}  # the recorded machine's symlink
    assert roots.get(nvcc_root, nvcc_root) == roots.get(after["CUDA_HOME"], after["CUDA_HOME"]), (f["remediation"], after)


def test_cuda_home_on_the_same_release_elsewhere_is_fine(h200x2):
    same = {"path": "/usr/local/cuda-13", "exists": True, "real_path": "/usr/local/cuda-13", "version": "13.0"}
    assert codes(with_fact(h200x2, "toolkit.env.CUDA_HOME", same)) == set()


def test_cuda_home_missing(h200x2):
    missing = {"path": "/usr/local/cuda-12.1", "exists": False, "real_path": "/usr/local/cuda-12.1",
               "version": {"unavailable": "not_found"}}
    f = only(with_fact(h200x2, "toolkit.env.CUDA_HOME", missing), "CUDA002")
    assert "/usr/local/cuda-12.1" in f["title"]
    assert "unset CUDA_HOME" in f["remediation"]["commands"]
