"""gpudoctor/versions.py: NVIDIA's integer version codes decoded as each library's header encodes them.

Sources (as of 2026-11-27):
- CUDA: https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART____VERSION.html, cudaDriverGetVersion
  and cudaRuntimeGetVersion: "The version is returned as (1000 major + 10 minor). For example, CUDA 9.2
  would be represented by 9020. If no driver is installed, then 0 is returned"; cuDriverGetVersion, cuda.h's
  CUDA_VERSION and NVML's CUDA driver version use the same encoding.
- cuDNN: cudnn_version.h. cuDNN 8.x: ``#define CUDNN_VERSION (CUDNN_MAJOR * 1000 + CUDNN_MINOR * 100 +
  CUDNN_PATCHLEVEL)``; cuDNN 9.x: ``#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 +
  CUDNN_PATCHLEVEL)``, and NVIDIA's cuDNN 9 developer guide says version checks must compare with 90000,
  not 9000 (research/nvidia-compat-facts.md, "Encoding cuDNN 9").
- NCCL: nccl.h (https://github.com/NVIDIA/nccl/blob/master/src/nccl.h.in): ``#define NCCL_VERSION(X,Y,Z)
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))``, and
  ncclGetVersion "returns the NCCL_VERSION_CODE of the NCCL library".
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpudoctor import versions

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("code, text", [(13000, "13.0"), (12080, "12.8"), (9010, "9.1"), (11040, "11.4"),
                                        (12090, "12.9"), (10020, "10.2")])
def test_cuda(code, text):
    assert versions.cuda(code) == text


@pytest.mark.parametrize("code, text", [(8902, "8.9.2"), (7605, "7.6.5"), (8907, "8.9.7"), (90100, "9.1.0"),
                                        (90300, "9.3.0"), (91002, "9.10.2"), (91900, "9.19.0")])
def test_cudnn_both_encodings(code, text):
    assert versions.cudnn(code) == text


@pytest.mark.parametrize("code, text", [(21803, "2.18.3"), (22809, "2.28.9"), (20900, "2.9.0"),
                                        (2804, "2.8.4"), (2708, "2.7.8"), (2406, "2.4.6"), (1302, "1.3.2")])
def test_nccl_both_encodings(code, text):
    assert versions.nccl(code) == text


def _nccl_version_macro(x: int, y: int, z: int) -> int:
    """nccl.h's NCCL_VERSION(X,Y,Z), transcribed."""
    return x * 1000 + y * 100 + z if x <= 2 and y <= 8 else x * 10000 + y * 100 + z


def _cudnn_version_macro(major: int, minor: int, patch: int) -> int:
    """cudnn_version.h's CUDNN_VERSION: the 1000 * major form up to cuDNN 8, the 10000 * major form from 9."""
    return (major * 1000 if major <= 8 else major * 10000) + minor * 100 + patch


@pytest.mark.parametrize("x, y, z", [(2, 8, 99), (2, 9, 0), (2, 8, 4), (2, 30, 1), (3, 0, 0), (1, 0, 0)])
def test_nccl_round_trips_the_header_macro(x, y, z):
    assert versions.nccl(_nccl_version_macro(x, y, z)) == f"{x}.{y}.{z}"


@pytest.mark.parametrize("v", [(5, 1, 10), (7, 6, 5), (8, 9, 7), (9, 0, 0), (9, 10, 2), (10, 0, 1)])
def test_cudnn_round_trips_the_header_macro(v):
    assert versions.cudnn(_cudnn_version_macro(*v)) == ".".join(map(str, v))


@pytest.mark.parametrize("value", [0, -1, None, True, "13000", 13.0, {"unavailable": "not_found"}])
def test_what_is_no_code_is_no_version(value):
    """0 is what cuDriverGetVersion gives without a driver; a string or an absence is no code."""
    assert versions.cuda(value) is None and versions.cudnn(value) is None and versions.nccl(value) is None
    assert versions.cublaslt(value) is None


@pytest.mark.parametrize("code, text", [(130100, "13.1.0"), (120803, "12.8.3"), (110201, "11.2.1")])
def test_cublaslt_codes(code, text):
    """CUBLASLT_VERSION is CUBLASLT_VER_MAJOR * 10000 + CUBLASLT_VER_MINOR * 100 + CUBLASLT_VER_PATCH."""
    assert versions.cublaslt(code) == text


def test_no_other_module_decodes_cuda_by_hand():
    """The decoding is written once: a second copy would drift (a paste reader once read cuDNN 9 as 90.1.0)."""
    found = []
    for path in sorted((ROOT / "gpudoctor").rglob("*.py")):
        if path.name == "versions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)) \
                    and isinstance(node.right, ast.Constant) and node.right.value in (1000, 10000):
                found.append(f"{path.relative_to(ROOT)}:{_function_of(path, node.lineno)}")
    assert sorted(set(found)) == sorted(NOT_A_VERSION_CODE)


#: Divisions by 1000 or 10000 that decode no CUDA, cuDNN or NCCL code, each with why.
NOT_A_VERSION_CODE = {
    "gpudoctor/probes/smoke/worker.py:_inputs": "the smoke kernel's input pattern, not a version",
}


def _function_of(path: Path, line: int) -> str:
    """The function holding ``line`` in ``path``."""
    name = "<module>"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= (node.end_lineno or node.lineno):
            name = node.name
    return name


def test_the_decoder_is_a_leaf_the_children_can_import():
    tree = ast.parse((ROOT / "gpudoctor" / "versions.py").read_text(encoding="utf-8"), feature_version=(3, 9))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "typing"}
