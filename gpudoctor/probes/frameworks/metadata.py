"""What each installed framework's own package says about its build, read without importing it.

``check --quick`` imports no framework, so whether PyTorch, TensorFlow, JAX or CuPy is a CUDA build is
read here from what the installed package holds: its distribution's name, version (a local tag such as
``+cpu`` or ``+cu128``), ``Requires-Dist`` lines, ``RECORD`` file list and ``WHEEL`` tag, and the
build-info files the frameworks themselves answer from (``torch/version.py``, which is
``torch.version.cuda``, and TensorFlow's ``build_info.py``, which is ``tf.sysconfig.get_build_info()``),
read as text, never executed. Each conclusion comes with the evidence it rests on. Where nothing
decides, the answer is None: unknown, never a guess.

This module finds each framework's package (gpudoctor/frameworks_table.py names its module and
distributions) and reads what every package says: its distributions' local version tags and their
requirements on CUDA packages (read_common). Where a framework's package says more, its own module
reads it (``read_KEY``, children.py), with the tools below. Standard library only and Python 3.9, like
the children: it reads another environment's packages through ``path`` (that interpreter's
``sys.path``) as well as this process's, and may itself run as a child under the diagnosed interpreter
(procs/child.py), given that path as JSON.

``read_builds(path)`` returns, per framework::

    {"installed": bool,          # ``import <name>`` would find it on ``path``
     "version": str | None,      # the module's own __version__ where its file says it, else the distribution's
     "version_unknown": str,     # only where version is None: why (two dist-infos, no metadata)
     "distribution": str | None, # the distribution read ("torch", "tensorflow-cpu", "cupy-cuda12x")
     "backend": "cuda" | "rocm" | "xpu" | "cpu" | None,   # None: the metadata cannot tell
     "cuda_build": bool | None,  # backend == "cuda"; None when unknown
     "cpu_only_build": bool | None,  # True only when proven to have no GPU backend
     "cuda_major": str | None,   # "13", where the metadata names the CUDA major it targets
     "built_cuda": str | None,   # "12.8", only where the metadata says the major.minor exactly
     "evidence": [str, ...],     # where each conclusion came from
     "source": str}              # what was read

plus ``cuda_packages_installed`` for plain ``tensorflow`` on Linux (are the ``and-cuda`` extra's nvidia
packages installed, or must the CUDA libraries come from the system), and ``plugins`` and
``jaxlib_version`` for jax. CuPy, which has no CPU-only build, is ``cpu_only_build`` False even where
its CUDA is unknown (a ``cupy`` built from source).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import glob
import json
import os
import re
import sys
from importlib import metadata
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from gpudoctor.frameworks_table import FRAMEWORKS, Framework
from gpudoctor.probes.frameworks import children


def header(dist: Any, key: str) -> Optional[str]:
    """One header of a distribution's METADATA (``Name``, ``Version``), read from the header block only.

    ``dist.metadata[...]`` and ``dist.version`` run the email parser over the whole file, long
    description included, for every distribution in view: most of ``check --quick``'s own time on an
    environment with a few hundred packages. Headers are never folded for these keys."""
    cache = getattr(dist, "_gpudoctor_headers", None)
    if cache is None:
        cache = _read_headers(dist)
        try:
            dist._gpudoctor_headers = cache
        except AttributeError:
            pass
    value = cache.get(key)
    return value if value else None


#: Headers already read, by METADATA file (path, modification time, size): the Python probe and the
#: framework probe each list every distribution, as new objects, and would read each file twice.
_HEADERS = {}  # type: Dict[Tuple[str, int, int], Dict[str, str]]


def _read_headers(dist: Any) -> Dict[str, str]:
    """A distribution's headers. A wheel's METADATA is read up to its first blank line only: the long
    description after it is most of the file (torch's, jax's), and some two hundred of them are read
    per check. Anything else (an egg's PKG-INFO, an empty METADATA) is read as importlib reads it."""
    base = getattr(dist, "_path", None)
    if base is not None:
        path = os.path.join(str(base), "METADATA")
        try:
            with open(path, "rb") as fh:
                stat = os.fstat(fh.fileno())
                seen = (path, stat.st_mtime_ns, stat.st_size)
                if seen in _HEADERS:
                    return _HEADERS[seen]
                block = _header_block(fh)
        except (OSError, UnicodeDecodeError):
            block = ""
        if block:
            _HEADERS[seen] = _parse_headers(block)
            return _HEADERS[seen]
    text = ""
    for name in ("METADATA", "PKG-INFO"):
        try:
            text = dist.read_text(name) or ""
        except (OSError, UnicodeDecodeError):
            text = ""
        if text:
            break
    return _parse_headers(text.replace("\r\n", "\n").split("\n\n", 1)[0])


def _header_block(fh: Any) -> str:
    """The text before the first blank line, with newlines as text mode reads them (\\r\\n and \\r are \\n)."""
    data = b""
    while True:
        chunk = fh.read(8192)
        data += chunk
        normal = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = normal.find(b"\n\n")
        if end >= 0 or not chunk:
            return normal[:end if end >= 0 else len(normal)].decode("utf-8")


def _parse_headers(block: str) -> Dict[str, str]:
    cache = {}  # type: Dict[str, str]
    for line in block.splitlines():
        field, sep, value = line.partition(":")
        if sep and line[:1] not in (" ", "\t") and field not in cache:
            cache[field] = value.strip()
    return cache


def dist_version(dist: Any) -> str:
    return header(dist, "Version") or ""


MAX_FILE = 64 * 1024  # the build-info files are a few hundred bytes


def read_builds(path: Optional[List[str]] = None) -> Dict[str, Any]:
    """Per framework, what its installed package says about its build (module docstring). ``path`` is
    the diagnosed interpreter's ``sys.path``; None reads this process's own."""
    index = _Index(path)
    return {fw.key: _read(fw, index) for fw in FRAMEWORKS}


# --- the environment ---------------------------------------------------------------------------------

def _norm(name: Optional[str]) -> str:
    return re.sub(r"[-_.]+", "-", name or "").lower()


class _Index:
    """The distributions on ``path``, by normalised name, in path order."""

    def __init__(self, path: Optional[List[str]]) -> None:
        self.path = path
        self.search = [p for p in (sys.path if path is None else path) if isinstance(p, str)]
        self.dists: Dict[str, List[Any]] = {}
        try:
            found = list(metadata.distributions(path=self.search))
        except Exception:  # noqa: BLE001 - an unreadable path entry must not lose the others
            found = []
        for dist in found:
            try:
                name = _norm(header(dist, "Name") or "")
            except Exception:  # noqa: BLE001 - a broken METADATA file
                continue
            if name:
                self.dists.setdefault(name, []).append(dist)

    def has(self, name: str) -> bool:
        return _norm(name) in self.dists

    def first(self, name: str) -> Optional[Any]:
        found = self.dists.get(_norm(name))
        return found[0] if found else None

    def names(self) -> List[str]:
        return sorted(self.dists)

    def find_spec(self, module: str) -> Optional[Any]:
        try:
            spec = importlib.machinery.PathFinder.find_spec(module, self.search)
            if spec is None and self.path is None:
                spec = importlib.util.find_spec(module)  # an editable install's import hook, in this process
        except (ImportError, ValueError, OSError):
            return None
        return spec


def _module_dir(spec: Any) -> Optional[str]:
    """The folder ``import <module>`` loads the package from."""
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    if locations:
        return os.path.realpath(locations[0])
    if getattr(spec, "origin", None) and os.path.isabs(spec.origin):
        return os.path.realpath(os.path.dirname(spec.origin))
    return None


def _site(dist: Any) -> Optional[str]:
    try:
        return os.path.realpath(str(dist.locate_file("")))
    except Exception:  # noqa: BLE001
        return None


def _owners(module: str, mod_dir: Optional[str], names: Tuple[str, ...], index: _Index) -> List[Any]:
    """The distributions whose files are the module ``import`` finds: installed beside it, or an
    editable install of the tree it is in. A distribution of that name elsewhere on the path (another
    copy, shadowed) is not its metadata."""
    if mod_dir is None:
        return []
    owners = []
    for name in names:
        for dist in index.dists.get(_norm(name), []):
            if _site(dist) == os.path.dirname(mod_dir) or _editable_root_holds(dist, mod_dir):
                owners.append(dist)  # two of one name in one folder (a leftover dist-info): both are read
    return owners


def _editable_root_holds(dist: Any, mod_dir: str) -> bool:
    try:
        info = json.loads(dist.read_text("direct_url.json") or "{}")
    except (ValueError, OSError):
        return False
    url = str(info.get("url") or "")
    if not (info.get("dir_info") or {}).get("editable") or not url.startswith("file://"):
        return False
    root = os.path.realpath(url[len("file://"):])
    return mod_dir == root or mod_dir.startswith(root + os.sep)


def _text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(MAX_FILE)
    except OSError:
        return None


def _record(dist: Any, under: str = "") -> Optional[List[str]]:
    """The paths a wheel's RECORD lists below ``under`` (None: no RECORD, as for an egg-info or conda
    install). A CUDA PyTorch's RECORD has some 12,000 lines, of which the checks want the few dozen
    under torch/lib/: a line that cannot name such a path is skipped before it is taken apart."""
    try:
        text = dist.read_text("RECORD")
    except Exception:  # noqa: BLE001
        return None
    if text is None:
        return None
    needle = next((part for part in reversed(under.split("/")) if part), "")  # in a path below it, either slash
    return [path for path in (line.split(",", 1)[0].strip().replace("\\", "/") for line in text.splitlines()
                              if line.strip() and needle in line) if path.startswith(under)]


def _wheel_tags(dist: Any) -> List[str]:
    try:
        text = dist.read_text("WHEEL") or ""
    except Exception:  # noqa: BLE001
        return []
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.lower().startswith("tag:")]


def _requires(dist: Any) -> List[str]:
    try:
        return [str(r) for r in (dist.requires or [])]
    except Exception:  # noqa: BLE001
        return []


def _req_name(req: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return _norm(match.group(1)) if match else ""


def _req_extra(req: str) -> Optional[str]:
    match = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", req.partition(";")[2])
    return _norm(match.group(1)) if match else None


def _req_text(req: str) -> str:
    """The requirement without its environment marker, as pip would print it."""
    return re.sub(r"\s+", "", req.partition(";")[0]).replace("(", "").replace(")", "")


def _pin(req: str) -> Optional[Tuple[str, str]]:
    """'==12.4.127' -> ('12', '4'); a range or a wildcard major ('==13.*') pins no minor."""
    match = re.search(r"===?\s*\(?\s*(\d+)\.(\d+)(?:\.|\s*[,;)]|\s*$)", req.partition(";")[0])
    return (match.group(1), match.group(2)) if match else None


def _major_pin(req: str) -> Optional[str]:
    match = re.search(r"===?\s*\(?\s*(\d+)\.", req.partition(";")[0])
    return match.group(1) if match else None


# --- claims and the conclusion ---------------------------------------------------------------------

class _Claims:
    """What each piece of evidence says. ``file`` claims come from the framework's own build-info file,
    which is what an import of it answers; they decide where present."""

    def __init__(self) -> None:
        self.items: List[Dict[str, Any]] = []
        self.notes: List[str] = []

    def add(self, backend: str, why: str, major: Optional[str] = None, built: Optional[str] = None,
            file: bool = False) -> None:
        self.items.append({"backend": backend, "why": why, "major": major, "built": built, "file": file})

    def note(self, why: str) -> None:
        self.notes.append(why)

    def conclude(self) -> Dict[str, Any]:
        from_file = [c for c in self.items if c["file"]]
        deciding = from_file or self.items
        evidence = [c["why"] for c in self.items] + self.notes
        backends = sorted({c["backend"] for c in deciding})
        out: Dict[str, Any] = {"backend": None, "cuda_build": None, "cpu_only_build": None,
                               "cuda_major": None, "built_cuda": None}
        if from_file and {c["backend"] for c in self.items if not c["file"]} - set(backends):
            evidence.append(f"the package metadata disagrees with {from_file[0]['why'].split(' says')[0]}, "
                            "which is what an import of it reads: that file decides")
        if len(backends) > 1:
            evidence.append("the evidence disagrees (" + " vs ".join(backends) + "): the build is unknown")
            return {**out, "evidence": evidence}
        if not backends:
            return {**out, "evidence": evidence}
        backend = backends[0]
        out.update(backend=backend, cuda_build=backend == "cuda", cpu_only_build=backend == "cpu")
        if backend == "cuda":
            # the versions the deciding evidence names; if it names none (a file without a version), the rest's
            named = [c for c in deciding if c["major"] or c["built"]] or \
                [c for c in self.items if c["backend"] == "cuda" and (c["major"] or c["built"])]
            majors = {c["major"] for c in named if c["major"]}
            builts = {c["built"] for c in named if c["built"]}
            if len(majors) > 1 or len(builts) > 1:
                evidence.append("the CUDA versions named disagree (" + ", ".join(sorted(majors | builts)) + ")")
            else:
                built = next(iter(builts), None)
                major = next(iter(majors), None) or (built.split(".")[0] if built else None)
                if built and built.split(".")[0] != major:
                    evidence.append(f"CUDA {built} and CUDA major {major} disagree")
                    built = None
                out.update(cuda_major=major, built_cuda=built)
        return {**out, "evidence": evidence}


def _cu_tag(text: str) -> Optional[str]:
    """'cu121' -> '12.1', 'cu92' -> '9.2', 'cu130' -> '13.0'."""
    match = re.fullmatch(r"cu(\d+)(\d)", text)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _local_tag(version: str, claims: _Claims) -> None:
    local = version.partition("+")[2].lower()
    if not local:
        return
    why = f"local version tag +{local}"
    if local == "cpu" or local.startswith("cpu."):
        claims.add("cpu", why)
    elif built := _cu_tag(local.split(".")[0]):
        claims.add("cuda", why, built.split(".")[0], built)
    elif local.startswith("rocm"):
        claims.add("rocm", why)
    elif local.startswith("xpu"):
        claims.add("xpu", why)


CUDA_SUFFIXED = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d+)$")
#: Unsuffixed NVIDIA packages whose version is the CUDA version (cuBLAS, cuFFT... have their own).
CUDA_VERSIONED = ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cuda-cupti", "nvidia-nvjitlink",
                  "nvidia-nvtx", "nvidia-cuda-nvcc")


RUNTIMES = ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12",
            "nvidia-cuda-runtime-cu13")


def _cuda_requirement(req: str) -> Optional[Tuple[Optional[str], Optional[str]]]:
    """(CUDA major, exact major.minor) a requirement on a CUDA package implies; None if it is not one."""
    name = _req_name(req)
    suffixed = CUDA_SUFFIXED.match(name)
    if suffixed:
        pin = _pin(req) if name.startswith(("nvidia-cuda-runtime-", "nvidia-cuda-nvrtc-")) else None
        if pin and pin[0] != suffixed.group(1):
            pin = None
        return suffixed.group(1), f"{pin[0]}.{pin[1]}" if pin else None
    if name in CUDA_VERSIONED:
        pin = _pin(req)
        return (pin[0] if pin else _major_pin(req)), (f"{pin[0]}.{pin[1]}" if pin else None)
    return None


def _cuda_requirements(dist: Any, claims: _Claims) -> None:
    """Requirements on CUDA packages that are not behind an extra: the wheel was built to run with them."""
    found = [(r, implied) for r in _requires(dist)
             if _req_extra(r) is None and (implied := _cuda_requirement(r)) is not None]
    if not found:
        return
    best = sorted(found, key=lambda f: (f[1][1] is None, _req_name(f[0]) not in RUNTIMES, f[1][0] is None))[0]
    majors = {implied[0] for _, implied in found if implied[0]}
    built = best[1][1]
    others = len(found) - 1
    why = f"Requires-Dist {_req_text(best[0])}" + (f" (and {others} more CUDA package requirement(s))" if others else "")
    if len(majors) > 1:
        claims.add("cuda", why)
        claims.note("its CUDA requirements name several majors (" + ", ".join(sorted(majors)) + ")")
        return
    claims.add("cuda", why, next(iter(majors), None), built)


def _installed_note(dist: Any, extra: str, index: _Index) -> Tuple[Optional[bool], Optional[str], str]:
    """Are the CUDA packages an extra names really installed? (all installed, the CUDA major, the sentence)."""
    wanted = [(r, implied) for r in _requires(dist)
              if _req_extra(r) == extra and (implied := _cuda_requirement(r)) is not None]
    if not wanted:
        return None, None, ""
    majors = {implied[0] for _, implied in wanted if implied[0]}
    major = next(iter(majors)) if len(majors) == 1 else None
    names = sorted({_req_name(r) for r, _ in wanted})
    missing = [n for n in names if not index.has(n)]
    if not missing:
        return True, major, f"the {len(names)} CUDA packages of extra {extra} are installed ({', '.join(names[:3])}...)"
    if len(missing) == len(names):
        return False, major, (f"extra {extra} names {len(names)} CUDA packages ({', '.join(names[:3])}...) and none is "
                              "installed: the CUDA libraries must come from the system")
    return False, major, (f"extra {extra}: {len(missing)} of its {len(names)} CUDA packages are not installed "
                          f"({', '.join(missing)})")


# --- per framework -----------------------------------------------------------------------------------

class Package(NamedTuple):
    """One framework's installed package, as its reader (``read_KEY``, children.py) is given it. The reader
    adds what each piece of evidence says of the build to ``claims``, and any fact of the framework's own
    beyond its build to ``out`` (JAX's plugins); it returns the version the module's own files give, if any."""

    owners: List[Any]  # the distributions whose files are the module ``import`` finds (_owners)
    mod_dir: Optional[str]  # the folder ``import`` loads the module from
    environment: _Index  # every distribution on the path
    claims: _Claims
    out: Dict[str, Any]


def read_common(package: Package) -> Optional[str]:
    """What every framework's package says of its build: each distribution's local version tag (+cu121,
    +cpu) and its requirements on CUDA packages that are not behind an extra."""
    for dist in package.owners:
        _local_tag(dist_version(dist), package.claims)
        _cuda_requirements(dist, package.claims)
    return None


def _read(fw: Framework, index: _Index) -> Dict[str, Any]:
    name = fw.key
    spec = index.find_spec(fw.module)
    if spec is None:
        return {"installed": False}
    mod_dir = _module_dir(spec)
    claims = _Claims()
    out: Dict[str, Any] = {"installed": True}
    names = fw.distributions
    if fw.distribution_prefixes:  # every distribution of the family, in the index's order
        names = tuple(n for n in index.names() if n in fw.distributions or n.startswith(fw.distribution_prefixes))
    owners = _owners(name, mod_dir, names, index)
    version = _versions(owners)
    if len(owners) > 1:
        claims.note("several distributions install " + name + " here: " +
                    ", ".join(f"{header(d, 'Name')} {dist_version(d)}" for d in owners))
    reader = children.reader(name) or read_common
    module_version = reader(Package(owners, mod_dir, index, claims, out))
    result = claims.conclude()
    if not fw.cpu_only_builds and result["cpu_only_build"] is None and owners:
        result["cpu_only_build"] = False  # it is built for CUDA or ROCm
        result["evidence"].append(f"{fw.label} has no CPU-only build")
    out["version"] = module_version or version
    if out["version"] is None and len(owners) > 1:
        out["version_unknown"] = ("several distributions install " + name + " here (" +
                                  ", ".join(sorted(f"{header(d, 'Name')} {dist_version(d)}" for d in owners)) +
                                  "); which one is imported is not known without importing it")
    elif out["version"] is None:
        unreadable = _undecodable_metadata(name, mod_dir)
        out["version_unknown"] = (f"{', '.join(unreadable)} is not UTF-8 text, so neither gpudoctor nor importlib reads "
                                  "its version" if unreadable else
                                  f"no distribution metadata names the version of the {name} at {mod_dir or '?'}")
    out["distribution"] = ", ".join(_norm(header(d, "Name")) for d in owners) or None
    out.update(result)
    if owners:
        where = ", ".join(sorted({str(_site(d)) for d in owners}))
        out["source"] = f"package metadata in {where} (read as text; nothing imported)"
    else:
        out["source"] = f"no distribution metadata for the {name} module at {mod_dir or '?'}"
        out["evidence"].insert(0, f"no distribution metadata installs the {name} found at {mod_dir or '?'}")
    return out


def _undecodable_metadata(name: str, mod_dir: Optional[str]) -> List[str]:
    """The METADATA files beside the module, of its own name, that are not UTF-8: importlib skips such a
    distribution, so without this the version would only be missing, with no reason given."""
    if not mod_dir:
        return []
    found = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(mod_dir), glob.escape(name) + "-*.dist-info", "METADATA"))):
        try:
            with open(path, "rb") as fh:
                fh.read().decode("utf-8")
        except UnicodeDecodeError:
            found.append(path)
        except OSError:
            continue
    return found


def _versions(owners: List[Any]) -> Optional[str]:
    found = {dist_version(d) for d in owners}
    return found.pop() if len(found) == 1 else None


if __name__ == "__main__":  # a child under the diagnosed interpreter: PATH is its sys.path, as JSON
    print(json.dumps(read_builds(json.loads(sys.argv[1]) if len(sys.argv) > 1 else None)))
