"""NVIDIA's integer version codes as text: one decoder per library, each the inverse of the macro in that
library's own header, so that every probe, check, renderer and paste reader reads a code the same way.
Standard library only: the framework and library children, which import nothing else, use it too.

- CUDA (``CUDA_VERSION`` in cuda.h; cudaRuntimeGetVersion, cuDriverGetVersion, NVML's CUDA driver
  version): 1000 * major + 10 * minor, so 13000 is 13.0, 12080 is 12.8 and 9010 is 9.1.
- cuDNN (``CUDNN_VERSION`` in cudnn_version.h; cudnnGetVersion): up to cuDNN 8, 1000 * major + 100 *
  minor + patch (8902 is 8.9.2); from cuDNN 9, 10000 * major + 100 * minor + patch (90100 is 9.1.0). The
  older scheme holds minors up to 9 (cuDNN 8 ended at 8.9.7, 8907), all below 9.0.0's 90000, so the size
  picks the scheme.
- NCCL (``NCCL_VERSION_CODE`` in nccl.h; ncclGetVersion): ``NCCL_VERSION(X,Y,Z)`` is X * 1000 + Y * 100 + Z
  while X <= 2 and Y <= 8, else X * 10000 + Y * 100 + Z: 2804 is 2.8.4, 21803 is 2.18.3. The newest old-scheme
  code (2.8.99, 2899) lies below the first new-scheme one (2.9.0, 20900).
- cuBLASLt (``CUBLASLT_VERSION`` in cublasLt.h; cublasLtGetVersion): 10000 * major + 100 * minor + patch,
  so 130100 is 13.1.0.
"""

from __future__ import annotations

from typing import Any, Optional

#: The first cuDNN code of the 10000 * major scheme (cuDNN 9.0.0).
CUDNN_WIDE_FROM = 90000
#: The first NCCL code of the 10000 * major scheme (NCCL 2.9.0).
NCCL_WIDE_FROM = 20900


def _code(value: Any) -> Optional[int]:
    """A positive integer code, or None: a bool, a string or 0 (no driver, no library) is no version."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def cuda(value: Any) -> Optional[str]:
    """CUDA's 1000 * major + 10 * minor as "major.minor": 13000 -> "13.0"; None for anything else."""
    code = _code(value)
    return None if code is None else f"{code // 1000}.{(code % 1000) // 10}"


def _three(code: int, major_unit: int) -> str:
    return f"{code // major_unit}.{(code % major_unit) // 100}.{code % 100}"


def cudnn(value: Any) -> Optional[str]:
    """cuDNN's CUDNN_VERSION as "major.minor.patch": 8902 -> "8.9.2", 90100 -> "9.1.0"; None for anything else."""
    code = _code(value)
    return None if code is None else _three(code, 10000 if code >= CUDNN_WIDE_FROM else 1000)


def nccl(value: Any) -> Optional[str]:
    """NCCL's NCCL_VERSION_CODE as "major.minor.patch": 2804 -> "2.8.4", 21803 -> "2.18.3"; None for anything else."""
    code = _code(value)
    return None if code is None else _three(code, 10000 if code >= NCCL_WIDE_FROM else 1000)


def cublaslt(value: Any) -> Optional[str]:
    """cuBLASLt's CUBLASLT_VERSION as "major.minor.patch": 130100 -> "13.1.0"; None for anything else."""
    code = _code(value)
    return None if code is None else _three(code, 10000)
