"""PyTorch install commands per release (compat/torch_pip.py), against pytorch.org's previous-versions page
(pytorch.json source PIP-PINS): 2.x from the per-CUDA index, 1.11-1.13 pinned with --extra-index-url, up to 1.10
pinned with a local version from torch_stable.html, and never a wheel the page does not show (1.8.0 has no
cu101 wheel, 1.8.1 has). And the 1.3.1 entry: its wheels dropped sm_35, so a Tesla K40 is judged apart.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.compat import rules
from gpudoctor.compat.data import BUNDLED
from gpudoctor.compat.queries import suggest
from gpudoctor.compat.torch_pip import pip_args



def _build(text: str):
    release, variant, _ = rules.torch_build(BUNDLED, text)
    assert release is not None and variant is not None, text
    return release, variant


@pytest.mark.parametrize("build, os_name, expected", [
    ("2.7.1+cu118", None, "'torch==2.7.*' --index-url https://download.pytorch.org/whl/cu118"),
    ("1.13.1+cu116", None, "torch==1.13.1+cu116 --extra-index-url https://download.pytorch.org/whl/cu116"),
    ("1.13.1+cu117", None, "torch==1.13.1"),  # the PyPI default variant comes from PyPI
    ("1.8.0+cu101", None, "torch==1.8.1+cu101 -f https://download.pytorch.org/whl/torch_stable.html"),
    ("1.7.1+cu110", None, "torch==1.7.1+cu110 -f https://download.pytorch.org/whl/torch_stable.html"),
    ("1.10.0+cu111", None, "torch==1.10.1+cu111 -f https://download.pytorch.org/whl/cu111/torch_stable.html"),
    ("1.10.0+cu113", None, "torch==1.10.0+cu113 -f https://download.pytorch.org/whl/cu113/torch_stable.html"),
    ("1.3.0+cu100", None, "torch==1.3.0+cu100 -f https://download.pytorch.org/whl/torch_stable.html"),
    ("1.3.1+cu92", None, "torch==1.3.1+cu92 -f https://download.pytorch.org/whl/torch_stable.html"),
    ("1.1.0+cu100", None, "--no-index --no-deps -f https://download.pytorch.org/whl/cu100/torch_stable.html torch==1.1.0"),
    ("1.0.0+cu80", None, "--no-index --no-deps -f https://download.pytorch.org/whl/cu80/torch_stable.html torch==1.0.0"),
    ("1.6.0+cu102", "windows", "torch==1.6.0 -f https://download.pytorch.org/whl/torch_stable.html"),
    ("1.9.0+cu102", "windows", None),  # PyPI's Windows wheel of the same version is CPU-only: no sure pin
    # cmd.exe keeps single quotes as part of the argument; double quotes work there, in PowerShell and in bash
    ("2.2.2+cu121", "windows", '"torch==2.2.*" --index-url https://download.pytorch.org/whl/cu121'),
    ("2.2.2+cu121", "wsl", "'torch==2.2.*' --index-url https://download.pytorch.org/whl/cu121"),
])
def test_pip_args(build, os_name, expected):
    assert pip_args(*_build(build), os_name) == expected


def test_every_release_before_2_names_a_patch_release_it_was_published_as():
    """A wildcard cannot carry a local version: every pre-2.0 release and variant pins one patch release of its line."""
    for release in BUNDLED.topic("pytorch")["entries"]:
        if rules.version(release["version"]) >= rules.version("2.0"):
            continue
        for variant in release["variants"]:
            args = pip_args(release, variant, "linux")
            pinned = re.search(r"torch==(\d+\.\d+\.\d+)", args or "")
            assert pinned, (release["version"], variant["name"], args)
            assert rules.major_minor(pinned.group(1)) == rules.major_minor(release["version"])
            assert "*" not in args


def test_the_1_3_1_entry_is_chosen_for_1_3_1_only():
    assert rules.torch_build(BUNDLED, "1.3.1")[0]["version"] == "1.3.1"
    assert rules.torch_build(BUNDLED, "1.3.1+cu92")[0]["version"] == "1.3.1"
    assert rules.torch_build(BUNDLED, "1.3.0")[0]["version"] == "1.3"
    assert rules.torch_build(BUNDLED, "1.3.0+cu100")[0]["version"] == "1.3"


@pytest.mark.parametrize("torch, exit_code", [("1.3.1", 1), ("1.3.1+cu92", 1), ("1.3.0", 0), ("1.2.0", 0)])
def test_a_tesla_k40m_is_judged_by_the_patch_release(torch, exit_code):
    result = CliRunner().invoke(cli, ["matrix", "check", "--gpu", "Tesla K40m", "--torch", torch])
    assert result.exit_code == exit_code, result.output
    assert ("CMP003" in result.output) == (exit_code == 1)
    assert "beyond gpudoctor's compatibility matrix" not in result.output


def test_suggest_for_a_k40_pins_the_release_with_sm_35():
    line = next(ln for ln in suggest(BUNDLED, "418.87.01", "3.5", "3.7") if ln.startswith("PyTorch "))
    assert line.endswith("pip install torch==1.3.0")


def test_fix_command_for_a_pascal_gpu_on_an_r418_driver_names_an_existing_wheel():
    line = next(ln for ln in suggest(BUNDLED, "418.87.01", "6.1", "3.7") if ln.startswith("PyTorch "))
    assert line.endswith("pip install torch==1.8.1+cu101 -f https://download.pytorch.org/whl/torch_stable.html")
