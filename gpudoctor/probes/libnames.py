"""CUDA shared libraries: which family a file belongs to, the version its name carries, and the
version the library itself reports (through its own getter, called with ctypes).

Shared by the library probe (every copy on the machine) and the framework workers (the copies a
framework really mapped), so both read versions the same way.
"""

from __future__ import annotations

import ctypes
import os
import re
from typing import Any, Callable, Optional, Union

from gpudoctor import versions
from gpudoctor.snapshot import unavailable

FAMILIES = {
    "libcuda": re.compile(r"^libcuda\.so(\.\d+)*$"),
    "libcudart": re.compile(r"^libcudart\.so(\.\d+)*$"),
    "libcublas": re.compile(r"^libcublas\.so(\.\d+)*$"),
    "libcublasLt": re.compile(r"^libcublasLt\.so(\.\d+)*$"),
    "libcudnn": re.compile(r"^libcudnn\.so(\.\d+)*$"),
    "libcudnn_sub": re.compile(r"^libcudnn_\w+\.so(\.\d+)*$"),  # cuDNN 8/9 split libraries
    "libnccl": re.compile(r"^libnccl\.so(\.\d+)*$"),
    "libnvrtc": re.compile(r"^libnvrtc\.so(\.\d+)*$"),
    "libnvJitLink": re.compile(r"^libnvJitLink\.so(\.\d+)*$"),
    "libcusparse": re.compile(r"^libcusparse\.so(\.\d+)*$"),
}
_VERSION_SUFFIX = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")


#: Each family by the part of its file name before ".so" (libcudnn_* aside): ``ldconfig -p`` lists some
#: 3,000 libraries on a GPU host, and trying ten patterns on each was a tenth of `check --quick`'s probes.
_BY_STEM = {family: family for family in FAMILIES if family != "libcudnn_sub"}


def family_of(filename: str) -> Optional[str]:
    stem = filename.split(".so", 1)[0]
    family = _BY_STEM.get(stem) or ("libcudnn_sub" if stem.startswith("libcudnn_") else None)
    return family if family is not None and FAMILIES[family].match(filename) else None


def version_from_name(path: str) -> Optional[str]:
    """The version in the file name, following symlinks: libcudnn.so.9 -> libcudnn.so.9.14.0 gives 9.14.0."""
    best = None
    for candidate in (os.path.basename(os.path.realpath(path)), os.path.basename(path)):
        match = _VERSION_SUFFIX.search(candidate)
        if match and (best is None or len(match.group(1)) > len(best)):
            best = match.group(1)
    return best


def is_stub(path: str) -> bool:
    """Toolkit stub libraries (lib64/stubs/libcuda.so) exist only to link against, never to run."""
    return "/stubs/" in path or "/stubs/" in os.path.realpath(path)


def _int_out(lib: Any, fn: str) -> Optional[int]:
    value = ctypes.c_int()
    rc = getattr(lib, fn)(ctypes.byref(value))
    return value.value if rc == 0 else None


def _cudart(lib: Any) -> Optional[str]:
    v = _int_out(lib, "cudaRuntimeGetVersion")
    return versions.cuda(v)


def _cuda(lib: Any) -> Optional[str]:
    v = ctypes.c_int()
    rc = lib.cuDriverGetVersion(ctypes.byref(v))
    if rc == 34:  # CUDA_ERROR_STUB_LIBRARY
        return "stub"
    return versions.cuda(v.value) if rc == 0 else None


def _cudnn(lib: Any) -> Optional[str]:
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    v = lib.cudnnGetVersion()
    return versions.cudnn(int(v))


def _nccl(lib: Any) -> Optional[str]:
    v = _int_out(lib, "ncclGetVersion")
    return versions.nccl(v)


def _nvrtc(lib: Any) -> Optional[str]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    rc = lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}" if rc == 0 else None


def _nvjitlink(lib: Any) -> Optional[str]:
    major, minor = ctypes.c_uint(), ctypes.c_uint()
    rc = lib.nvJitLinkVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}" if rc == 0 else None


def _cublaslt(lib: Any) -> Optional[str]:
    lib.cublasLtGetVersion.restype = ctypes.c_size_t
    return versions.cublaslt(int(lib.cublasLtGetVersion()))


def _cublas(lib: Any) -> Optional[str]:
    parts = []
    for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        value = ctypes.c_int()
        if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
            return None
        parts.append(str(value.value))
    return ".".join(parts)


GETTERS: dict[str, Callable[[Any], Optional[str]]] = {
    "libcuda": _cuda,
    "libcudart": _cudart,
    "libcudnn": _cudnn,
    "libnccl": _nccl,
    "libnvrtc": _nvrtc,
    "libnvJitLink": _nvjitlink,
    "libcublasLt": _cublaslt,
    "libcublas": _cublas,
}


def version_from_library(family: str, path: str) -> Union[str, dict[str, Any]]:
    """Ask the library for its own version. Loading it runs only its initialisers: no GPU work."""
    getter = GETTERS.get(family)
    if getter is None:
        return unavailable("not_supported")
    try:
        lib = ctypes.CDLL(path)
        version = getter(lib)
    except (OSError, AttributeError) as exc:
        return unavailable("unknown", (str(exc) or _dlopen_error(path))[:300])
    except UnicodeDecodeError as exc:  # dlopen's message names a path that is not UTF-8
        return unavailable("unknown", bytes(exc.object).decode("utf-8", "backslashreplace")[:300])
    return version if version else unavailable("unknown")


def _dlopen_error(path: str) -> str:
    """dlopen's own message, read as bytes. Python 3.9's ctypes raises an OSError without a message where
    that message does not decode (it names a path that is not UTF-8), which would hide why it failed."""
    try:
        libc = ctypes.CDLL(None)
        libc.dlopen.restype, libc.dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
        libc.dlerror.restype = ctypes.c_char_p
        if libc.dlopen(os.fsencode(path), os.RTLD_NOW):
            return ""
        return (libc.dlerror() or b"").decode("utf-8", "backslashreplace")
    except (OSError, AttributeError):
        return ""


def describe(path: str, read_version: bool) -> dict[str, Any]:
    """One library file as the snapshot stores it."""
    family = family_of(os.path.basename(path)) or "other"
    entry: dict[str, Any] = {
        "family": family,
        "path": path,
        "real_path": os.path.realpath(path),
        "version_from_name": version_from_name(path),
        "stub": is_stub(path),
    }
    if read_version:
        entry["version"] = version_from_library(family, path)
    return entry


def mapped_libraries(maps_text: str) -> list[str]:
    """Paths of CUDA libraries in a /proc/PID/maps text, in first-mapped order."""
    seen: dict[str, None] = {}
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6:
            path = parts[5].strip()
            if path.startswith("/") and family_of(os.path.basename(path)):
                seen.setdefault(path, None)
    return list(seen)
