"""Compatibility rules: pure judgements over versions, answered from the matrix each is given (compat/data.py
Matrix: the bundled tables, with the user's --matrix overlays over them).

Every comparison goes through packaging.version (never floats: "12.10" > "12.9"). Each rule
answers with a Verdict whose status is "ok", "limited" (works, with a stated limit), "fail" or
"unknown": when the matrix does not know a version or a GPU, the answer is unknown, never a
guess. The judge of a whole stack (compat/stack.py, behind both `check` and `gpudoctor matrix check`)
and a few other checks (container, frameworks, acceleration) ask these functions.

Rules and their sources (the data's own sources are in compat_matrix/*.json):
- Driver vs CUDA: a CUDA X.Y build is fully supported by a driver whose CUDA version is >= X.Y
  (Table 3 of the CUDA release notes gives the driver per toolkit). Under minor-version
  compatibility (CUDA 11 and later) it also runs on any driver of the same CUDA major at or
  above that major's floor, except that PTX newer than the driver cannot be JIT-compiled and
  APIs new in X.Y may fail (docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility).
- GPU vs compiled architectures: SASS for sm_XY runs on compute capability X.Z with Z >= Y (same
  major); an arch-specific sm_XYa only on exactly X.Y; PTX compute_XY is JIT-compiled on any GPU of
  compute capability >= X.Y (CUDA C Programming Guide, "Binary Compatibility", "PTX Compatibility").
"""

from __future__ import annotations

import functools
import operator
import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional, cast

from packaging.version import InvalidVersion, Version

from gpudoctor import versions
from gpudoctor.compat.data import Matrix
from gpudoctor.status import (COMPAT_FAIL as FAIL, COMPAT_LIMITED as LIMITED, COMPAT_OK as OK,
                              COMPAT_UNKNOWN as UNKNOWN)


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str
    needs: Optional[str] = None  # e.g. the driver version that would make it fully supported


def version(text: Any) -> Optional[Version]:
    return _parsed(str(text).strip()) if text not in (None, "") else None


def known_version(text: Any) -> Version:
    """version() of a version that always parses: one the bundled matrix holds (its loader's tests parse
    every one) or gpudoctor's code spells. The same call, typed without None so that mypy lets two compare."""
    return cast(Version, version(text))


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Optional[Version]:
    """Parsing is most of a fleet merge's judging time; a Version is immutable, so one parse per string."""
    try:
        return Version(text)
    except InvalidVersion:
        return None


def major_minor(text: Any) -> Optional[Version]:
    return _major_minor(str(text).strip()) if text not in (None, "") else None


@functools.lru_cache(maxsize=4096)
def _major_minor(text: str) -> Optional[Version]:
    """Remembered as _parsed is: a fleet's every node asks for the same matrix rows' versions."""
    v = _parsed(text)
    return Version(f"{v.major}.{v.minor}") if v else None


# --- driver versus a CUDA version ---------------------------------------------------------------

def toolkit_entry(matrix: Matrix, cuda: str) -> Optional[dict[str, Any]]:
    """The matrix row for CUDA major.minor (an update such as 12.4.1 falls back to 12.4)."""
    wanted = version(cuda)
    if wanted is None:
        return None
    rows = matrix.topic("cuda_toolkits")["entries"]
    exact = [r for r in rows if version(r.get("version")) == wanted]
    if exact:
        return exact[0]
    mm = major_minor(cuda)
    return next((r for r in rows if version(r.get("version")) == mm), None)


def mvc_floor(matrix: Matrix, cuda_major: int, os_name: str = "linux") -> Optional[dict[str, Any]]:
    data = matrix.topic("cuda_toolkits")
    for row in data.get("minor_version_compatibility", []):
        if int(row.get("cuda_major", -1)) == cuda_major and row.get(f"min_driver_{os_name}"):
            return row
    return None


def newest_known_cuda(matrix: Matrix) -> Optional[Version]:
    return _newest_known_cuda(matrix)


@functools.lru_cache(maxsize=16)
def _newest_known_cuda(matrix: Matrix) -> Optional[Version]:
    """newest_known_cuda, remembered per matrix: asked for every GPU judged."""
    rows = matrix.topic("cuda_toolkits")["entries"]
    known = [v for v in (version(r.get("version")) for r in rows) if v]
    return max(known) if known else None


def driver_runs_cuda(matrix: Matrix, cuda: str, driver: Optional[str] = None, driver_cuda: Optional[str] = None,
                     os_name: str = "linux") -> Verdict:
    """Can a program built with CUDA ``cuda`` run on this driver? ``driver_cuda`` is the driver's own
    CUDA version (NVML reports it); when given it decides full support exactly."""
    want = major_minor(cuda)
    if want is None:
        return Verdict(UNKNOWN, f"CUDA version {cuda!r} cannot be read")
    row = toolkit_entry(matrix, cuda)
    full_driver = row.get(f"min_driver_{os_name}") if row else None
    have_cuda = major_minor(driver_cuda)
    if have_cuda is not None:
        if have_cuda >= want:
            return Verdict(OK, f"the driver supports CUDA up to {have_cuda}")
    elif driver is not None and full_driver:
        if (given := version(driver)) and given >= known_version(full_driver):
            return Verdict(OK, f"driver {driver} is at least {full_driver}, which CUDA {want} needs")
    if row is None and have_cuda is None:
        newest = newest_known_cuda(matrix)
        return Verdict(UNKNOWN, f"CUDA {want} is newer than gpudoctor's matrix knows (newest: {newest}); "
                                "update gpudoctor or pass --matrix")
    if have_cuda is not None and want.major > have_cuda.major:
        return Verdict(FAIL, f"CUDA {want} needs a driver of the CUDA {want.major} generation; this driver supports CUDA "
                             f"{have_cuda}, and minor-version compatibility never crosses a major (only the cuda-compat "
                             "forward-compatibility package can, on datacenter GPUs)", full_driver)
    if want.major < 11:
        return Verdict(FAIL, f"CUDA {want} predates minor-version compatibility, so it needs a driver that supports "
                             f"CUDA {want} itself" + (f" ({full_driver} or newer)" if full_driver else ""), full_driver)
    floor = mvc_floor(matrix, want.major, os_name)
    driver_v = version(driver)
    if driver_v is None and have_cuda is not None and floor:
        # only the driver's CUDA is known: the oldest driver that reports it is its toolkit's Table 3 minimum
        implied = (toolkit_entry(matrix, str(have_cuda)) or {}).get(f"min_driver_{os_name}")
        driver_v = known_version(implied) if implied and known_version(implied) >= known_version(floor[f"min_driver_{os_name}"]) else None
    who = f"driver {driver}" if driver else f"a driver supporting CUDA {have_cuda}"
    same_major = have_cuda.major == want.major if have_cuda is not None else None
    if floor and driver_v is not None and driver_v >= known_version(floor[f"min_driver_{os_name}"]) \
            and (same_major is not False):
        return Verdict(LIMITED, f"CUDA {want} runs on {who} only under minor-version compatibility: "
                                f"{floor.get('limits', 'PTX newer than the driver cannot be JIT-compiled')}",
                       full_driver)
    if driver is None and same_major and floor:
        return Verdict(UNKNOWN, f"whether a driver supporting CUDA {have_cuda} is at the minor-version-compatibility floor "
                                f"({floor[f'min_driver_{os_name}']}) for CUDA {want} is not known; give --driver", full_driver)
    if floor is None and driver_v is not None:
        return Verdict(UNKNOWN, f"the matrix has no minor-version-compatibility floor for CUDA {want.major}")
    need = full_driver or (floor or {}).get(f"min_driver_{os_name}")
    return Verdict(FAIL, f"CUDA {want} needs a driver supporting CUDA {want}" + (f" ({need} or newer)" if need else "")
                   + (f"; this driver supports CUDA {have_cuda}" if have_cuda else ""), need)


# --- GPU versus compiled architectures ----------------------------------------------------------

_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def parse_arch(flag: str) -> Optional[tuple[str, Version, str]]:
    """"sm_90" -> ("sass", 9.0, ""), "compute_120" -> ("ptx", 12.0, ""), "sm_90a" -> ("sass", 9.0, "a")."""
    m = _ARCH.match(flag.strip().lower())
    if not m:
        return None
    kind = "sass" if m.group(1) == "sm" else "ptx"
    return kind, Version(f"{int(m.group(2))}.{m.group(3)}"), m.group(4)


def arch_runs(cc: str, arch_list: Iterable[str]) -> Verdict:
    """A mixed list as a build reports it (torch.cuda.get_arch_list(), TensorFlow's
    cuda_compute_capabilities): sm_XY flags are its machine code, compute_XY its PTX, both known."""
    flags = [a for a in arch_list if isinstance(a, str)]
    if not flags:
        return Verdict(UNKNOWN, "the build lists no GPU architectures")
    sass = [a for a in flags if a.strip().lower().startswith("sm_")]
    ptx = [a for a in flags if a.strip().lower().startswith("compute_")]
    return build_runs_on(cc, sass, ptx)


def build_runs_on(cc: str, sass: Optional[Iterable[str]], ptx: Optional[Iterable[str]]) -> Verdict:
    """Does a build run on a GPU of compute capability ``cc``? ``sass`` is its machine code (sm_XY),
    ``ptx`` its PTX (compute_XY); None means that list is not known (never taken for empty).

    SASS sm_XY runs on X.Z with Z >= Y (same major only); arch-specific sm_XYa only on exactly X.Y;
    family-specific sm_XYf on X.Z, Z >= Y. PTX compute_XY is JIT-compiled on any compute capability
    >= X.Y (compute_XYa only on X.Y, compute_XYf within the family)."""
    gpu = version(cc)
    if gpu is None:
        return Verdict(UNKNOWN, f"compute capability {cc!r} cannot be read")
    if sass is None:
        return Verdict(UNKNOWN, "the GPU architectures this build was compiled for are not known to gpudoctor's matrix")
    sass, ptx_known = list(sass), ptx is not None
    for flag in sass:
        parsed = parse_arch(flag)
        if parsed and parsed[0] == "sass" and _covers(parsed[1], parsed[2], gpu, jit=False):
            kind = {"a": "arch-specific ", "f": "family-specific "}.get(parsed[2], "")
            return Verdict(OK, f"it has {kind}machine code for {flag.strip().lower()}, which runs on compute capability {gpu}")
    jit = sorted((p[1] for p in (parse_arch(a) for a in (ptx or [])) if p and _covers(p[1], p[2], gpu, jit=True)))
    if jit:
        return Verdict(LIMITED, f"it has no machine code for compute capability {gpu}, only PTX for compute_{_flag(jit[-1])}, "
                                "which the driver JIT-compiles at first use (slow start; needs a driver at least as new as the build's CUDA)")
    listed = ", ".join(sorted(set(sass) | set(ptx or []), key=_arch_order)) or "nothing"
    if not ptx_known:
        return Verdict(UNKNOWN, f"it has no machine code for compute capability {gpu} (it lists {listed}), and whether it "
                                "carries PTX the driver could JIT-compile for it is not known to gpudoctor's matrix")
    return Verdict(FAIL, f"it has no code for compute capability {gpu}: its machine code is {', '.join(sorted(set(sass), key=_arch_order)) or 'none'} "
                         f"and its PTX {', '.join(sorted(set(ptx or []), key=_arch_order)) or 'none'}, neither of which runs there; "
                         f"CUDA calls fail with 'no kernel image is available for execution on the device' "
                         f"(PyTorch: 'sm_{_flag(gpu)} is not compatible with the current PyTorch installation')")


def _covers(target: Version, suffix: str, gpu: Version, jit: bool) -> bool:
    if suffix == "a":
        return target == gpu
    if suffix == "f" or not jit:
        return target.major == gpu.major and target.minor <= gpu.minor
    return target <= gpu


def _arch_order(flag: str) -> tuple[int, str]:
    parsed = parse_arch(flag)
    return (parsed[1].major * 10 + parsed[1].minor, flag) if parsed else (0, flag)


def _flag(v: Version) -> str:
    return f"{v.major}{v.minor}"


# --- toolkit versus GPU -------------------------------------------------------------------------

def toolkit_targets(matrix: Matrix, cuda: str, cc: str) -> Verdict:
    return _toolkit_targets(matrix, cuda, cc)


@functools.lru_cache(maxsize=1024)
def _toolkit_targets(matrix: Matrix, cuda: str, cc: str) -> Verdict:
    """toolkit_targets, remembered per matrix: a node's or a paste's GPUs repeat one architecture."""
    want, gpu = major_minor(cuda), version(cc)
    if want is None or gpu is None:
        return Verdict(UNKNOWN, "version cannot be read")
    row = next((r for r in matrix.topic("cuda_targets")["entries"] if version(r.get("compute_capability")) == gpu), None)
    if row is None:
        return Verdict(UNKNOWN, f"the matrix does not know compute capability {gpu}; update gpudoctor or pass --matrix")
    first, last = major_minor(row.get("first_cuda")), major_minor(row.get("last_cuda"))
    if first and want < first:
        return Verdict(FAIL, f"nvcc {want} cannot compile for compute capability {gpu}: it arrived in CUDA {first}", str(first))
    if last and want > last:
        return Verdict(FAIL, f"nvcc {want} cannot compile for compute capability {gpu}: CUDA {last} was the last toolkit that could")
    if (newest := newest_known_cuda(matrix)) and want > newest and last is None:
        return Verdict(UNKNOWN, f"CUDA {want} is newer than gpudoctor's matrix knows; update gpudoctor or pass --matrix")
    return Verdict(OK, f"nvcc {want} can compile for compute capability {gpu}")


# --- what a CUDA version alone proves about a build ---------------------------------------------
# Deductions that need no entry for the build itself, only cuda_targets.json (which toolkit compiles for
# which architecture) and the PTX rule of the CUDA C++ Programming Guide ("PTX Compatibility": PTX for
# compute_XY is JIT-compiled only on compute capability X.Y or higher).

def _target_row(matrix: Matrix, cc: str) -> Optional[dict[str, Any]]:
    gpu = version(cc)
    return next((r for r in matrix.topic("cuda_targets")["entries"] if version(r.get("compute_capability")) == gpu), None) \
        if gpu is not None else None


def cuda_dropped(matrix: Matrix, cuda: str, cc: str) -> Optional[Verdict]:
    """FAIL when CUDA ``cuda`` ("13.0", or a major alone, "13") no longer compiles for compute capability
    ``cc``: nvcc then emits neither machine code nor PTX at or below it, and the toolkit's libraries carry
    none, so nothing built with that CUDA runs there (CUDA 11.0 dropped sm_30, 12.0 sm_35/sm_37, 13.0
    everything below sm_75: cuda_targets.json, whose sources quote the release notes). None otherwise.
    A renamed architecture (Thor's sm_101, sm_110 from CUDA 13.0) is the same GPU under a new name: no verdict."""
    want, row = major_minor(cuda), _target_row(matrix, cc)
    last = major_minor((row or {}).get("last_cuda"))
    if want is None or last is None or want <= last or (row or {}).get("renamed_to"):
        return None
    return Verdict(FAIL, f"nothing built with CUDA {want} runs on compute capability {version(cc)}: CUDA {last} was the "
                         f"last toolkit that compiled for it, and later toolkits removed its offline compilation and "
                         f"library support (no machine code for it, and no PTX that runs there)")


def cuda_too_old(matrix: Matrix, cuda: str, cc: str) -> Optional[str]:
    """Why a build for CUDA ``cuda`` carries no machine code for compute capability ``cc`` (the GPU arrived in
    a later toolkit: CUDA 11.0 first compiles sm_80, 11.8 sm_89/sm_90, 12.8 sm_100/sm_120), or None. Such a
    build can still run there through PTX of an older architecture, so this alone is no failure."""
    want, row = major_minor(cuda), _target_row(matrix, cc)
    first = major_minor((row or {}).get("first_cuda"))
    if want is None or first is None or want >= first:
        return None
    return f"CUDA {want} cannot compile machine code for compute capability {version(cc)} (first supported by CUDA {first})"


def ptx_floor_verdict(cc: str, floor: str, why: str) -> Optional[Verdict]:
    """FAIL when a build whose PTX is not listed can carry PTX only for ``floor`` ("compute_120") or newer
    architectures and the GPU is older than that: PTX runs only on its own architecture or newer."""
    gpu, parsed = version(cc), parse_arch(floor)
    if gpu is None or parsed is None or gpu >= parsed[1]:
        return None
    return Verdict(FAIL, f"it has no machine code for compute capability {gpu}, and any PTX it carries is for "
                         f"{floor.lower()} ({why}), which runs only on compute capability {parsed[1]} or newer")


# --- GPUs and framework builds ------------------------------------------------------------------

def gpu_entry(matrix: Matrix, name: str, topic: str = "gpus") -> Optional[dict[str, Any]]:
    """The first entry of ``topic`` whose whole-word match string occurs in the NVML name (case-insensitive)."""
    return _gpu_entry(matrix, topic, name)


@functools.lru_cache(maxsize=1024)
def _gpu_entry(matrix: Matrix, topic: str, name: str) -> Optional[dict[str, Any]]:
    """gpu_entry, remembered per matrix: a node's or a paste's GPUs repeat one name, and each lookup walks a
    thousand match strings."""
    lowered = f" {_words(name)} "
    for words, row in _match_words(matrix, topic):
        if f" {words} " in lowered:
            return row
    return None


def allreduce_row(matrix: Matrix, model: Optional[str], world: Any, link: str) -> Optional[dict[str, Any]]:
    """The matrix's reference all-reduce figure for ``world`` GPUs of ``model`` joined by ``link``, or None."""
    entry = performance_entry(matrix, model) if model else None
    rows = (entry or {}).get("allreduce") or []
    return next((r for r in rows if r.get("gpus") == world and r.get("link") == link), None)


def performance_entry(matrix: Matrix, name: str) -> Optional[dict[str, Any]]:
    """The expected figures for this GPU, only when the row is for the very product the name is: "RTX 4090"
    must not judge an RTX 4090 Laptop GPU or a 4090 D, nor "H200" an H200 NVL, by a desktop card's figures.
    The product is the GPU catalogue's entry for the name and for the row's model or match strings."""
    if re.search(r"\bMIG\b", name):
        return None  # a MIG slice has a fraction of the GPU's engines and memory bandwidth: no reference for it
    row = gpu_entry(matrix, name, "performance")
    if row is None:
        return None
    product = gpu_entry(matrix, name)
    rows_product = next((e for e in (gpu_entry(matrix, n) for n in [row.get("model", ""), *row.get("match", [])]) if e), None)
    return row if product is not None and product is rows_product else None


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


@functools.lru_cache(maxsize=16)
def _match_words(matrix: Matrix, topic: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """Each entry's match strings as words, in order; remembered per matrix."""
    rows = matrix.topic(topic)["entries"]
    return tuple((w, row) for row in rows for w in (_words(p) for p in row.get("match", [])) if w)


def torch_build(matrix: Matrix, torch_version: str) -> tuple[Optional[dict[str, Any]], Optional[dict[str, Any]], str]:
    """The matrix release and CUDA variant of a torch version string: "2.7.1+cu128", "2.7.1" (the plain
    PyPI wheel for Linux x86_64), "2.7.1+cpu". Returns (release, variant, variant_name)."""
    base, _, local = torch_version.partition("+")
    release_v = major_minor(base)
    rows = matrix.topic("pytorch")["entries"]
    # a patch release built with other architectures than its line (1.3.1) has an entry of its own "X.Y.Z";
    # the line's entry "X.Y" stands for every other patch release
    release = next((r for r in rows if str(r.get("version")).count(".") == 2 and version(r.get("version")) == version(base)), None) \
        or next((r for r in rows if str(r.get("version")).count(".") == 1 and major_minor(r.get("version")) == release_v), None)
    if release is None:
        return None, None, local or "?"
    name = local or release.get("default_pypi_variant", "")
    variant = next((v for v in release.get("variants", []) if v.get("name") == name), None)
    return release, variant, name


def tensorflow_release(matrix: Matrix, tf_version: str) -> Optional[dict[str, Any]]:
    want = major_minor(tf_version)
    return next((r for r in matrix.topic("tensorflow")["entries"] if major_minor(r.get("version")) == want), None)


def cudnn_satisfies(have: str, built: str) -> Optional[bool]:
    """TensorFlow and JAX refuse a cuDNN whose major differs from the one they were built with, or whose
    minor is lower ("CuDNN library needs to have matching major version and equal or higher minor
    version"). None when either cannot be read."""
    h, b = version(have), version(built)
    if h is None or b is None:
        return None
    return h.major == b.major and h.minor >= b.minor


def parse_driver_cuda(text: Any) -> Optional[str]:
    """The CUDA version a driver supports, as nvidia-smi prints it ("12.2") or as the CUDA API returns it
    (cudaDriverGetVersion: 1000 * major + 10 * minor, so 11040 is 11.4, as in PyTorch's "found version
    11040"). None when it is neither."""
    raw = str(text).strip()
    if raw.isascii() and raw.isdigit() and len(raw) >= 4:  # isdigit alone takes "١٢٠٢٠"
        number = int(raw)
        return versions.cuda(number) if number >= 1000 else None
    v = version(raw)
    if v is None or len(v.release) > 3 or v.major == 0 or v.major > 99 or v.pre or v.post or v.dev or v.local:
        return None
    return f"{v.major}.{v.minor}"


def driver_cuda_of(matrix: Matrix, driver: str, os_name: str = "linux", bounded: bool = False) -> Optional[str]:
    """The newest CUDA whose toolkit minimum driver (Table 3) this driver meets, for Linux or Windows
    (WSL runs the Windows driver: 551.86 is R550, CUDA 12.4, as 550.54.14 is on Linux). ``bounded``: only
    when a newer toolkit's minimum driver is above it, so the answer is exact (a driver past the newest row
    of its column may support a CUDA the matrix does not list there: None)."""
    have = version(driver)
    column = "min_driver_windows" if os_name in ("windows", "wsl") else "min_driver_linux"
    rows = [(version(r.get(column)), major_minor(r.get("version"))) for r in matrix.topic("cuda_toolkits")["entries"]]
    if have is None:
        return None
    known = [(need, cuda) for need, cuda in rows if need and cuda]
    best = max((cuda for need, cuda in known if have >= need), default=None)
    above = best is not None and any(cuda > best and need > have for need, cuda in known)
    return str(best) if best and (above or not bounded) else None


def jax_release(matrix: Matrix, jax_version: str) -> Optional[dict[str, Any]]:
    """jax.json's entries are change points (the release where a requirement changed). The facts in force
    for ``jax_version`` are those of every entry at or below it, later ones winning; None when the
    version is older than the first entry or newer than the matrix's newest minor release line."""
    want = version(jax_version)
    if want is None:
        return None
    rows = sorted((r for r in matrix.topic("jax")["entries"] if version(r.get("version"))),
                  key=lambda r: known_version(r["version"]))
    if not rows or want < known_version(rows[0]["version"]):
        return None
    newest = known_version(rows[-1]["version"])
    if (want.major, want.minor) > (newest.major, newest.minor):
        return None
    merged: dict[str, Any] = {"version": jax_version}
    for row in rows:
        if known_version(row["version"]) <= want:
            merged.update({k: v for k, v in row.items() if k != "version"})
            merged["matrix_version"] = row["version"]
    return merged


def python_in(spec: Optional[str], python: str) -> Optional[bool]:
    """Is Python X.Y inside a range like ">=3.9,<3.14"? None when the matrix gives no range."""
    if not spec:
        return None
    parsed = version(python)
    return None if parsed is None else in_range(Version(f"{parsed.major}.{parsed.minor}"), spec)


_CLAUSE = re.compile(r"\s*(>=|<=|==|!=|<|>)\s*([0-9]+(?:\.[0-9]+)*)\s*")  # ASCII digits: Version takes no others
_COMPARE = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
            ">": operator.gt}


def in_range(value: Version, spec: str) -> Optional[bool]:
    """Is the release ``value`` (3.12, 12.0: never a pre-release) inside a PEP 440 range such as
    ">=3.9,<3.14"? None when the range is not valid. The matrix's ranges are plain comparisons of release
    numbers, which Version's own ordering answers exactly as packaging's SpecifierSet does for a release;
    anything else (~=, wildcards, pre-releases) goes to SpecifierSet, whose import costs about 70 ms of
    `check --quick` (tests/test_compat_rules.py compares the two on every range in the matrix)."""
    clauses = [_CLAUSE.fullmatch(c) for c in spec.split(",")]
    if all(clauses) and not (value.pre or value.post or value.dev or value.local):
        return all(_COMPARE[m.group(1)](value, Version(m.group(2))) for m in clauses if m)
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return value in SpecifierSet(spec)
    except InvalidSpecifier:
        return None
