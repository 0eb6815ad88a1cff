"""Every copy of the CUDA libraries that the dynamic loader or a framework could pick up.

Searched in the order the loader itself uses where that order matters (LD_LIBRARY_PATH before
the ldconfig cache before the default directories), plus the copies pip wheels (nvidia-*,
torch/lib) and a conda environment bring. Each copy's version is read from the library itself in
a child process (a broken library may crash whoever loads it), falling back to its file name and
the pip distribution that installed it. ``ldconfig -p`` runs through processes.run_bounded
(bounded in time and output, killed with what it started).
"""

from __future__ import annotations

import glob
import json
import os
import re
import site
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpudoctor.probes import interpreter
from gpudoctor.probes.interpreter import Target
from gpudoctor.procs.child import child_env, run_module
from gpudoctor.probes.libnames import family_of, is_stub, version_from_name
from gpudoctor.procs.processes import closed, run_bounded
from gpudoctor.snapshot import unavailable

SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib64",
               "/usr/lib/aarch64-linux-gnu", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib")
TOOLKIT_SUBDIRS = ("lib64", "lib", "targets/*/lib", "lib64/stubs", "targets/*/lib/stubs")
VERSION_WORKER = "gpudoctor.probes.libversions"
MAX_VERSION_READS = 48
LDCONFIG_TIMEOUT_S = 10.0
#: ``ldconfig -p`` prints about 100 bytes a library: 16 MiB is some 160,000 of them.
LDCONFIG_MAX_BYTES = 16 << 20


def probe_libraries(toolkit_roots: list[str], target: Target, read_versions: bool = True,
                    timeout_s: float = 20.0) -> dict[str, Any]:
    """Every copy under ``toolkit_roots``, the loader's folders and the site-packages of ``target`` (the
    interpreter diagnosed, whose frameworks load them)."""
    sites = _site_dirs(target)
    copies: dict[str, dict[str, Any]] = {}
    for origin, directory in search_dirs(toolkit_roots, sites):
        for path in _library_files(directory):
            entry = copies.setdefault(path, _entry(path))
            if origin not in entry["origins"]:
                entry["origins"].append(origin)
    for path in _ldconfig_paths():
        entry = copies.setdefault(path, _entry(path))
        if "ldconfig" not in entry["origins"]:
            entry["origins"].append("ldconfig")
    if closed():  # stopped at the run's deadline: what follows is slow, and its facts would not be used
        return {"ld_library_path": _ld_library_path(), "copies": list(copies.values()), "stopped": True}
    _attach_distributions(copies, sites)
    if read_versions:
        _read_versions(copies, timeout_s)
    return {"ld_library_path": _ld_library_path(), "copies": list(copies.values())}


def _entry(path: str) -> dict[str, Any]:
    return {"family": family_of(os.path.basename(path)), "path": path, "real_path": os.path.realpath(path),
            "version_from_name": version_from_name(path), "stub": is_stub(path), "origins": []}


def _ld_library_path() -> list[str]:
    return [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]


def search_dirs(toolkit_roots: list[str], sites: list[str]) -> list[tuple[str, str]]:
    dirs: list[tuple[str, str]] = [("LD_LIBRARY_PATH", d) for d in _ld_library_path()]
    dirs += [("system", d) for d in SYSTEM_DIRS]
    for root in dict.fromkeys(os.path.realpath(r) for r in toolkit_roots):
        for sub in TOOLKIT_SUBDIRS:
            dirs += [("toolkit", d) for d in sorted(glob.glob(os.path.join(root, sub)))]
    for sp in sites:
        dirs += [("pip", d) for d in sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib")))]
        dirs += [("pip", d) for d in sorted(glob.glob(os.path.join(sp, "nvidia", "cu*", "lib")))]
        dirs += [("pip", os.path.join(sp, "torch", "lib"))]
    if os.environ.get("CONDA_PREFIX"):
        dirs.append(("conda", os.path.join(os.environ["CONDA_PREFIX"], "lib")))
    return dirs


def _site_dirs(target: Target) -> list[str]:
    """The site-packages folders of the diagnosed interpreter (interpreter.py), whose wheels' libraries
    its frameworks load; gpudoctor's own when that is the one diagnosed."""
    path = interpreter.target_path(target)
    found = [p for p in path if p.rstrip("/").endswith(("site-packages", "dist-packages"))]
    if target.own:
        try:
            found += site.getsitepackages() + [site.getusersitepackages()]
        except AttributeError:  # virtualenv's old site.py
            pass
    return [p for p in dict.fromkeys(found) if os.path.isdir(p)]


def _library_files(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []  # missing or unreadable: nothing the loader could take from it either
    stubs = os.path.basename(directory.rstrip("/")) == "stubs"
    return [os.path.join(directory, n) for n in sorted(names) if family_of(n) and (loadable_name(n) or stubs)]


def loadable_name(name: str) -> bool:
    """The loader opens libraries by soname (libcudnn.so.9); a bare libX.so is a link-time alias,
    except libcuda.so in a stubs/ directory, which is exactly the trap worth listing."""
    return bool(re.search(r"\.so\.\d", name))


def _ldconfig_paths() -> list[str]:
    for exe in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            res = run_bounded([exe, "-p"], LDCONFIG_TIMEOUT_S, LDCONFIG_MAX_BYTES)
        except OSError:
            continue
        if res.timed_out:
            continue
        paths = re.findall(r"^\s*(\S+) \(.*?\) => (\S+)$", res.stdout, re.M)
        return [path for name, path in paths if family_of(name) and loadable_name(name)]
    return []


def _attach_distributions(copies: dict[str, dict[str, Any]], sites: list[str]) -> None:
    """Name the pip distribution that installed each copy under site-packages, with its version.

    Only the CUDA wheels and torch can own a CUDA library, so only their ``.dist-info`` folders are read,
    and of their RECORD only the shared libraries: torch's RECORD lists some 15,000 files, and reading
    it through importlib.metadata was most of ``check --quick``'s time on a GPU machine."""
    owners: dict[str, tuple[str, str]] = {}
    for info in _cuda_dist_infos(sites):
        name, version = _name_and_version(info)
        if not name:
            continue
        try:
            with open(os.path.join(info, "RECORD"), encoding="utf-8", errors="replace") as fh:
                record = fh.read()
        except OSError:
            continue
        site_dir = os.path.dirname(info)
        for line in record.splitlines():
            rel = line.split(",", 1)[0]
            if ".so" in rel and family_of(os.path.basename(rel)):
                owners[os.path.realpath(os.path.join(site_dir, rel))] = (name, version)
    for entry in copies.values():
        owner = owners.get(entry["real_path"])
        if owner:
            entry["distribution"] = {"name": owner[0], "version": owner[1]}


def _cuda_dist_infos(sites: list[str]) -> list[str]:
    """The ``.dist-info`` folders of nvidia-* wheels and torch in the diagnosed site-packages (installers
    write the name normalised: nvidia_cudnn_cu13-9.19.0.56.dist-info)."""
    found: list[str] = []
    for sp in sites:
        for pattern in ("nvidia_*.dist-info", "nvidia-*.dist-info", "torch-*.dist-info"):
            found.extend(sorted(glob.glob(os.path.join(glob.escape(sp), pattern))))
    return list(dict.fromkeys(found))


def _name_and_version(info: str) -> tuple[str, str]:
    """Name and Version from the METADATA headers (the first lines; the long description is not read)."""
    name = version = ""
    try:
        with open(os.path.join(info, "METADATA"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key == "Name":
                    name = value.strip().lower()
                elif key == "Version":
                    version = value.strip()
                if name and version:
                    break
    except OSError:
        return "", ""
    return name, version


def _read_versions(copies: dict[str, dict[str, Any]], timeout_s: float) -> None:
    """One child process per copy: within one process the loader hands back whatever library of the
    same soname is already loaded, so a second libcudnn.so.9 would report the first one's version."""
    wanted = [e for e in copies.values() if e["family"] != "libcudnn_sub"]
    unique = list(dict.fromkeys(e["real_path"] for e in wanted))[:MAX_VERSION_READS]
    family = {e["real_path"]: e["family"] for e in wanted}
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        versions = dict(zip(unique, pool.map(lambda rp: _read_one(family[rp], rp, timeout_s), unique)))
    for entry in wanted:
        if entry["real_path"] in versions:
            entry["version"] = versions[entry["real_path"]]


def _read_one(family: str, real_path: str, timeout_s: float) -> Any:
    """The copy's own directory goes first on the loader path, so a shim (cuDNN 9's libcudnn.so.9)
    reports its own siblings' version rather than whatever LD_LIBRARY_PATH would give it."""
    own = os.path.dirname(real_path)
    env = child_env({"LD_LIBRARY_PATH": ":".join([own] + _ld_library_path())})
    child = run_module(VERSION_WORKER, [json.dumps([[family, real_path]])], timeout_s=timeout_s, env=env)
    for line in child.sections("library"):
        if isinstance(line, dict) and line.get("path") == real_path:
            return line.get("version")
    if child.timed_out:
        return unavailable("timeout")
    return unavailable("unknown", f"loading it crashed ({child.signal_name or child.returncode})")


