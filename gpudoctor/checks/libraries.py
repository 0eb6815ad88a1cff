"""CUDA libraries: the copy each framework really loaded against the copies it could have loaded.

The loader searches LD_LIBRARY_PATH before a wheel's own RUNPATH, so a system library placed
there silently replaces the one a pip wheel brings. A toolkit's stub libcuda (made only for
linking) on the search path makes every CUDA program fail with CUDA_ERROR_STUB_LIBRARY (34).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Iterator, cast

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding
from gpudoctor.findings import Finding
from gpudoctor.frameworks_table import NAMES
from gpudoctor.snapshot import get, known

if TYPE_CHECKING:
    from gpudoctor.facts_types import FrameworksFacts

SHADOWABLE = ("libcudart", "libcublas", "libcublasLt", "libcudnn", "libcudnn_sub", "libnccl", "libnvrtc", "libnvJitLink",
              "libcusparse")
REACHABLE = ("LD_LIBRARY_PATH", "ldconfig", "system")


def _copies(facts: Facts) -> list[dict[str, Any]]:
    copies = get(facts, "libraries.copies")
    if not isinstance(copies, list):
        raise NotApplicable("the libraries were not probed")
    return copies


def _loaded(facts: Facts) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, fw in cast("FrameworksFacts", facts.get("frameworks") or {}).items():
        for lib in ((fw or {}).get("info") or {}).get("loaded_libraries") or []:
            yield name, lib


def check_shadowing(facts: Facts) -> Iterator[Finding]:
    copies = _copies(facts)
    ld_path = [os.path.normpath(d) for d in get(facts, "libraries.ld_library_path") or []]
    by_path = _by_path(copies)
    for name, lib in _loaded(facts):
        if lib.get("family") not in SHADOWABLE:
            continue
        soname = _soname(lib["path"])
        mine = by_path.get(lib["path"])
        if mine and "pip" in mine.get("origins", []):
            continue  # loaded from a wheel: the intended copy
        wheel = next((c for c in copies if "pip" in c.get("origins", []) and _soname(c["path"]) == soname), None)
        if wheel is None:
            continue
        directory = os.path.dirname(lib["path"])
        on_path = os.path.normpath(directory) in ld_path
        dist = wheel.get("distribution") or {}
        yield finding("LIB001", f"{NAMES.get(name, name)} loaded {soname} {_ver(lib)} from {directory}, not the "
                                f"{_ver(wheel)} its wheel {dist.get('name', 'package')} installed",
                      detail=f"Wheel copy: {wheel['path']}." + (" The directory is on LD_LIBRARY_PATH, which the loader "
                                                                 "searches before the wheel's own path." if on_path else ""),
                      severity="error" if _older(lib, wheel) else "warning",
                      text="Let the framework load the libraries its wheels bring: remove that directory from "
                           "LD_LIBRARY_PATH (or the system copy from the loader's path).",
                      commands=[_without(ld_path, directory)] if on_path else [f"ls -l {directory}/{soname}*"])


def _soname(path: str) -> str:
    """libcudnn_graph.so.9.14.0 and libcudnn_graph.so.9 are the same soname to the loader."""
    name = os.path.basename(path)
    match = re.match(r"(lib[\w.+-]*?\.so\.\d+)", name)
    return match.group(1) if match else name


def _by_path(copies: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """The copy a process mapped, by the path it names, the first copy with that path or real path. Judged
    from the facts alone (a saved report is judged on another machine, so nothing here resolves a path on
    this one): a process's maps name the file's real path. One index, not a scan per loaded library."""
    index: dict[Any, dict[str, Any]] = {}
    for copy in copies:
        for key in (copy.get("path"), copy.get("real_path")):
            if isinstance(key, str):
                index.setdefault(key, copy)
    return index


def _ver(lib: dict[str, Any]) -> str:
    version = known(lib.get("version"))
    if isinstance(version, str) and version != "stub":
        return version
    dist = lib.get("distribution") or {}
    return str(dist.get("version") or lib.get("version_from_name") or "of unknown version")


def _older(loaded: dict[str, Any], wheel: dict[str, Any]) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(_ver(loaded)) < Version(_ver(wheel))
    except InvalidVersion:
        return False


def _without(ld_path: list[str], directory: str) -> str:
    kept = [d for d in ld_path if d != os.path.normpath(directory)]
    return f"export LD_LIBRARY_PATH={':'.join(kept)}" if kept else "unset LD_LIBRARY_PATH"


def check_stub_libcuda(facts: Facts) -> Iterator[Finding]:
    copies = _copies(facts)
    for name, lib in _loaded(facts):
        if lib.get("family") == "libcuda" and (lib.get("stub") or lib.get("version") == "stub"):
            yield finding("LIB002", f"{NAMES.get(name, name)} loaded the toolkit's stub libcuda from {lib['path']}",
                          text="The stub exists only to link against; with it CUDA fails with CUDA_ERROR_STUB_LIBRARY. "
                               "Remove the stubs directory from LD_LIBRARY_PATH and the loader cache.",
                          commands=["echo $LD_LIBRARY_PATH", "ldconfig -p | grep libcuda.so"])
    for copy in copies:
        if copy.get("family") == "libcuda" and copy.get("stub") and set(copy.get("origins", [])) & {"LD_LIBRARY_PATH", "ldconfig"} \
                and os.path.basename(copy["path"]).startswith("libcuda.so."):
            yield finding("LIB003", f"a stub libcuda is on the loader's search path: {copy['path']}",
                          detail="Found through " + " and ".join(o for o in copy["origins"] if o in REACHABLE) + ".",
                          text="A CUDA program may load it instead of the driver's libcuda and fail with "
                               "CUDA_ERROR_STUB_LIBRARY. Remove the stubs directory from LD_LIBRARY_PATH (and from "
                               "/etc/ld.so.conf.d, then run ldconfig).",
                          commands=["echo $LD_LIBRARY_PATH", "grep -r stubs /etc/ld.so.conf.d/"])


def check_libcuda_version(facts: Facts) -> Iterator[Finding]:
    """A libcuda left over from another driver (a container image, a manual copy) on the search path."""
    driver = known(get(facts, "nvml.driver_version"))
    if not isinstance(driver, str):
        raise NotApplicable("the driver version is unknown")
    loaded = {os.path.realpath(lib["path"]) for _, lib in _loaded(facts) if lib.get("family") == "libcuda"}
    for copy in _copies(facts):
        name_version = copy.get("version_from_name") or ""
        if copy.get("family") != "libcuda" or copy.get("stub") or name_version.count(".") != 2 or name_version == driver:
            continue
        if not set(copy.get("origins", [])) & set(REACHABLE):
            continue
        in_use = copy.get("real_path") in loaded
        yield finding("LIB004", f"libcuda {name_version} at {copy['path']} does not match the running driver {driver}",
                      severity="error" if in_use else "warning",
                      detail="A framework loaded this copy." if in_use else "No framework loaded it here, but a program "
                                                                            "searching the same path may.",
                      text="libcuda must come from the running driver. Remove the stale copy from the search path "
                           "(in a container: do not bake libcuda into the image; the NVIDIA runtime mounts the host's).",
                      commands=[f"ls -l {copy['path']}", "ldconfig -p | grep libcuda.so"])


#: What the dynamic loader says about a file it cannot load at all (glibc's dlopen messages).
UNLOADABLE = ("invalid ELF header", "wrong ELF class", "file too short", "cannot open shared object file",
              "ELF file", "not a dynamic executable", "ELF load command")


def check_unloadable(facts: Facts) -> Iterator[Finding]:
    """A copy on the loader's search path that cannot be loaded breaks every program that reaches it first."""
    for copy in _copies(facts):
        reachable = [o for o in copy.get("origins", []) if o in ("LD_LIBRARY_PATH", "ldconfig")]
        version = copy.get("version")
        error = version.get("error", "") if isinstance(version, dict) else ""
        if not reachable or not any(sign in error for sign in UNLOADABLE):
            continue
        directory = os.path.dirname(copy["path"])
        ld_path = [os.path.normpath(d) for d in get(facts, "libraries.ld_library_path") or []]
        yield finding("LIB005", f"{copy['path']} cannot be loaded: {error.split(': ')[-1]}",
                      detail=f"It is reached through {' and '.join(reachable)}; a program that looks for "
                             f"{os.path.basename(copy['path'])} there fails to start or falls back to no GPU.",
                      text=f"Remove or repair {copy['path']}, or take {directory} off the loader's path.",
                      commands=[_without(ld_path, directory)] if "LD_LIBRARY_PATH" in reachable
                      else [f"ls -l {copy['path']}", "sudo ldconfig"])


CHECKS = (
    Check("libraries.shadowing", "libraries", "frameworks load the CUDA libraries their wheels bring", ("LIB001",),
          check_shadowing, ("cuda_stack", "frameworks")),
    Check("libraries.stub_libcuda", "libraries", "no stub libcuda in the way", ("LIB002", "LIB003"),
          check_stub_libcuda, ("cuda_stack",)),
    Check("libraries.unloadable", "libraries", "no broken library on the loader's search path", ("LIB005",),
          check_unloadable, ("cuda_stack",)),
    Check("libraries.libcuda_version", "libraries", "libcuda matches the running driver", ("LIB004",),
          check_libcuda_version, ("cuda_stack", "nvml")),
)
