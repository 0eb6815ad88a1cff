"""The frameworks gpudoctor knows, as a reader names them: shared by the framework, library,
environment and workload checks, so one framework is never spelled two ways."""

from __future__ import annotations

#: A framework's key in ``facts.frameworks`` -> the name shown in findings.
NAMES = {"torch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX", "cupy": "CuPy"}
#: PyTorch's wheel index; a CUDA variant's index is ``{TORCH_INDEX}/cu130`` and so on.
TORCH_INDEX = "https://download.pytorch.org/whl"
