"""Which torch and TensorFlow builds this test environment really holds, as the frameworks themselves say.

The test extra pins releases, not builds: an index may serve a CPU, a CUDA or a ROCm torch for the same
pin (the public index serves torch's CUDA build; a mirror may serve +cpu). Tests of the real installs
read the answer here, from the imported framework in a child process of its own, and assert what
gpudoctor must say about that build, never which build it is.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Optional

import pytest

_TORCH = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda, getattr(torch.version, 'hip', None)]))"
_TF = ("import json, tensorflow as tf; b = tf.sysconfig.get_build_info(); "
       "print(json.dumps([tf.__version__, bool(b.get('is_cuda_build')), bool(b.get('is_rocm_build'))]))")


@dataclass(frozen=True)
class Build:
    """A framework build: its version string, and the CUDA or ROCm (HIP) it was built for, if any."""

    version: str
    cuda: Optional[str]
    rocm: Optional[str]

    @property
    def flavour(self) -> str:
        """cpu, cuda or rocm: what decides which finding a GPU machine gets for this build."""
        return "cuda" if self.cuda else "rocm" if self.rocm else "cpu"

    @property
    def release(self) -> str:
        """The release, major.minor, as the matrix keys it (2.13.0+cpu -> 2.13)."""
        return ".".join(self.version.split("+")[0].split(".")[:2])


def _ask(code: str) -> list:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@functools.lru_cache(maxsize=None)
def _torch() -> Build:
    version, cuda, hip = _ask(_TORCH)
    return Build(version, cuda, hip)


@functools.lru_cache(maxsize=None)
def _tensorflow() -> Build:
    version, cuda, rocm = _ask(_TF)
    # TensorFlow's build info names no CUDA version on every build; whether it has one is what matters here
    return Build(version, "yes" if cuda else None, "yes" if rocm else None)


def torch_build() -> Build:
    """The installed torch, or the test is skipped where none is installed (a bare system Python)."""
    installed_or_skip("torch")
    return _torch()


def tensorflow_build() -> Build:
    """The installed TensorFlow, or the test is skipped where none is installed."""
    installed_or_skip("tensorflow")
    return _tensorflow()


def installed_or_skip(name: str) -> None:
    """Skip unless ``name`` is installed, without importing it here: TensorFlow and a CUDA build of PyTorch
    in one process can crash it (both bring their own copies of native libraries), and the tests that need
    a framework run it in a child process of its own."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed")
