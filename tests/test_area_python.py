"""The python area (checks/pyenv.py): python.readable, the diagnosed interpreter could not be read (PY002;
a real Python 3.6 is in tests/test_interpreter.py); python.conflicts, installed distributions that fight over
one import name or one GPU library (PY001): TensorFlow beside tensorflow-cpu, two CuPy wheels, the legacy
pynvml and nvidia-ml-py3 that shadow nvidia-ml-py, tensorflow-gpu, one package installed twice.

Judged on the real 2 x H200 recording with one distribution added at a time; each fault asserts the exact
codes over every check.
"""

from __future__ import annotations

import pytest

from gpudoctor.checks import registry
from helpers_facts import with_fact

from helpers_judge import codes, only, statuses


def test_the_healthy_recording_passes_every_python_check(h200x2):
    """The real 2 x H200 recording: every python check had its facts to judge (the diagnosed interpreter's distributions) and passes,
    and no check at all finds anything."""
    assert statuses(h200x2, "python") == {c.id: "pass" for c in registry.CHECKS if c.area == "python"}
    assert codes(h200x2) == set()


VENV = "/opt/torch/.venv/lib/python3.12/site-packages"


def _dist(name: str, version: str, location: str = VENV) -> dict[str, str]:
    return {"name": name, "version": version, "location": location}


@pytest.mark.parametrize("extra,words", [
    ([_dist("tensorflow", "2.21.0"), _dist("tensorflow-cpu", "2.21.0")], ["tensorflow-cpu"]),
    ([_dist("cupy-cuda12x", "13.6.0")], ["cupy-cuda12x", "cupy-cuda13x"]),
    ([_dist("pynvml", "11.5.0")], ["pynvml 11.5.0"]),
    ([_dist("nvidia-ml-py3", "7.352.0")], ["nvidia-ml-py3"]),
    ([_dist("tensorflow-gpu", "2.12.0")], ["tensorflow-gpu"]),
    ([_dist("jax", "0.4.30", "/root/.local/lib/python3.12/site-packages")], ["jax", "0.4.30", "0.11.2"]),
], ids=["tensorflow-and-cpu", "two-cupys", "legacy-pynvml", "nvidia-ml-py3", "tensorflow-gpu", "installed-twice"])
def test_conflicting_distributions(h200x2, extra, words):
    facts = with_fact(h200x2, "python.distributions", h200x2["python"]["distributions"] + extra)
    f = only(facts, "PY001")
    assert f["severity"] == "warning"
    for word in words:
        assert word in f["title"]
    assert f["remediation"]["commands"]


def test_modern_pynvml_wrapper_is_fine(h200x2):
    """pynvml >= 12 is a thin package that imports nvidia-ml-py's module: no shadowing."""
    facts = with_fact(h200x2, "python.distributions", h200x2["python"]["distributions"] + [_dist("pynvml", "12.0.0")])
    assert codes(facts) == set()


def test_an_unreadable_diagnosed_python_is_a_warning_naming_it(h200x2):
    """The recording with its python section replaced by what the probe writes when the interpreter will not
    describe itself (a Python 3.6 venv named by --python): PY002, and nothing else."""
    facts = with_fact(h200x2, "python", {"diagnosed": {"executable": "/opt/legacy/bin/python", "own": False,
                                                       "reason": "--python names it"},
                                         "unavailable": "unknown", "executable": "/opt/legacy/bin/python",
                                         "error": "SyntaxError: future feature annotations is not defined"})
    f = only(facts, "PY002")
    assert (f["check"], f["severity"]) == ("python.readable", "warning")
    assert f["title"] == ("gpudoctor could not read the Python it diagnoses, /opt/legacy/bin/python: "
                          "SyntaxError: future feature annotations is not defined")
