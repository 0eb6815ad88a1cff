"""The fix for a cuDNN TensorFlow refuses (FWK006/FWK007), per release: the tensorflow[and-cuda] extra exists
from 2.14 only (tensorflow.json and_cuda_extra); before it TensorFlow's install guide installed the tested CUDA
and cuDNN with conda (tensorflow.json gpu_install_*, source TF-PIP-GUIDE: tensorflow/docs site/en/install/pip.md
at be62ee25b, 5b96ef6e9, 518478ecc), and older releases name their tested versions.
"""

from __future__ import annotations

import pytest

from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.compat.queries import stack_from_args
from gpudoctor.compat.stack import judge_stack



def _cudnn_finding(tensorflow: str, cudnn: str, os_name=None, matrix: Matrix = BUNDLED):
    stack = stack_from_args(matrix, driver="535.104.05", gpu="NVIDIA GeForce RTX 3090", tensorflow=tensorflow, cudnn=cudnn, os_name=os_name)
    found = [f for f in judge_stack(matrix, stack) if f.code in ("FWK006", "FWK007")]
    assert len(found) == 1, [f.code for f in judge_stack(matrix, stack)]
    return found[0]


@pytest.mark.parametrize("tensorflow, cudnn, os_name, first_command", [
    ("2.10.0", "7.6.5", None, "conda install -c conda-forge cudatoolkit=11.2 cudnn=8.1.0"),
    ("2.6.2", "8.0.4", None, "conda install -c conda-forge cudatoolkit=11.2 cudnn=8.1.0"),
    ("2.10.0", "8.0.4", "windows", "conda install -c conda-forge cudatoolkit=11.2 cudnn=8.1.0"),
    ("2.11.0", "8.0.4", None, "conda install -c conda-forge cudatoolkit=11.2.2 cudnn=8.1.0"),
    ("2.13.1", "8.1.0", None, "conda install -c conda-forge cudatoolkit=11.8.0"),
])
def test_before_2_14_the_fix_is_the_guides_conda_commands(tensorflow, cudnn, os_name, first_command):
    found = _cudnn_finding(tensorflow, cudnn, os_name)
    assert "and-cuda" not in found.remediation.text
    assert found.remediation.commands[0] == first_command
    assert all("and-cuda" not in c for c in found.remediation.commands)


def test_2_12_gets_cudnn_8_6_from_pip_as_the_guide_did():
    commands = _cudnn_finding("2.12.0", "8.1.0").remediation.commands
    assert "python3 -m pip install nvidia-cudnn-cu11==8.6.0.163" in commands
    assert commands[-1] == "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$CONDA_PREFIX/lib/:$CUDNN_PATH/lib"


def test_before_the_guide_had_commands_the_tested_versions_are_named():
    found = _cudnn_finding("2.3.0", "8.0.5")
    assert not found.remediation.commands
    assert "install cuDNN 7.6 for CUDA 10.1" in found.remediation.text and "and-cuda" not in found.remediation.text


def test_from_2_14_the_and_cuda_extra_is_the_fix():
    found = _cudnn_finding("2.15.0", "8.6.0")
    assert "pip install 'tensorflow[and-cuda]'" in found.remediation.text


def test_no_release_with_the_extra_carries_conda_commands_and_each_command_list_is_sourced():
    data = BUNDLED.topic("tensorflow")
    for release in data["entries"]:
        listed = release.get("gpu_install_linux") or release.get("gpu_install_windows")
        assert not (listed and release.get("and_cuda_extra")), release["version"]
        if listed:
            assert release["gpu_install_source"] in data["sources"], release["version"]


def test_an_overlays_command_list_that_is_not_a_list_gives_no_commands(tmp_path):
    from gpudoctor.compat.data import read_overlay

    overlay = tmp_path / "tf.json"
    overlay.write_text('{"topic": "tensorflow", "as_of": "2026-11-27", "sources": {"X": "test"}, "entries": '
                       '[{"version": "2.10", "cuda": "11.2", "cudnn": "8.1", "gpu_install_linux": "conda install x", "source": "X"}]}',
                       encoding="utf-8")
    found = _cudnn_finding("2.10.0", "7.6.5", matrix=Matrix((read_overlay(str(overlay)),)))
    assert list(found.remediation.commands) == []
