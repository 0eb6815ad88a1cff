"""Compatibility rules: pure judgements over versions, answered from the bundled matrix.

Every comparison goes through packaging.version (never floats: "12.10" > "12.9"). Each rule
answers with a Verdict whose status is "ok", "limited" (works, with a stated limit), "fail" or
"unknown": when the matrix does not know a version or a GPU, the answer is unknown, never a
guess. The checks (checks/compat.py) and `gpudoctor matrix check` share these functions.

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

import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from packaging.version import InvalidVersion, Version

from gpudoctor import matrix

OK, LIMITED, FAIL, UNKNOWN = "ok", "limited", "fail", "unknown"


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str
    needs: Optional[str] = None  # e.g. the driver version that would make it fully supported


def version(text: Any) -> Optional[Version]:
    try:
        return Version(str(text).strip()) if text not in (None, "") else None
    except InvalidVersion:
        return None


def major_minor(text: Any) -> Optional[Version]:
    v = version(text)
    return Version(f"{v.major}.{v.minor}") if v else None


# --- driver versus a CUDA version ---------------------------------------------------------------

def toolkit_entry(cuda: str) -> Optional[dict[str, Any]]:
    """The matrix row for CUDA major.minor (an update such as 12.4.1 falls back to 12.4)."""
    wanted = version(cuda)
    if wanted is None:
        return None
    rows = matrix.load_topic("cuda_toolkits")["entries"]
    exact = [r for r in rows if version(r.get("version")) == wanted]
    if exact:
        return exact[0]
    mm = major_minor(cuda)
    return next((r for r in rows if version(r.get("version")) == mm), None)


def mvc_floor(cuda_major: int, os_name: str = "linux") -> Optional[dict[str, Any]]:
    data = matrix.load_topic("cuda_toolkits")
    for row in data.get("minor_version_compatibility", []):
        if int(row.get("cuda_major", -1)) == cuda_major and row.get(f"min_driver_{os_name}"):
            return row
    return None


def newest_known_cuda() -> Optional[Version]:
    rows = matrix.load_topic("cuda_toolkits")["entries"]
    known = [v for v in (version(r.get("version")) for r in rows) if v]
    return max(known) if known else None


def driver_runs_cuda(cuda: str, driver: Optional[str] = None, driver_cuda: Optional[str] = None,
                     os_name: str = "linux") -> Verdict:
    """Can a program built with CUDA ``cuda`` run on this driver? ``driver_cuda`` is the driver's own
    CUDA version (NVML reports it); when given it decides full support exactly."""
    want = major_minor(cuda)
    if want is None:
        return Verdict(UNKNOWN, f"CUDA version {cuda!r} cannot be read")
    row = toolkit_entry(cuda)
    full_driver = row.get(f"min_driver_{os_name}") if row else None
    have_cuda = major_minor(driver_cuda)
    if have_cuda is not None:
        if have_cuda >= want:
            return Verdict(OK, f"the driver supports CUDA up to {have_cuda}")
    elif driver is not None and full_driver:
        if version(driver) and version(driver) >= version(full_driver):
            return Verdict(OK, f"driver {driver} is at least {full_driver}, which CUDA {want} needs")
    if row is None and have_cuda is None:
        newest = newest_known_cuda()
        return Verdict(UNKNOWN, f"CUDA {want} is newer than gpudoctor's matrix knows (newest: {newest}); "
                                "update gpudoctor or pass --matrix")
    if have_cuda is not None and want.major > have_cuda.major:
        return Verdict(FAIL, f"CUDA {want} needs a driver of the CUDA {want.major} generation; this driver supports CUDA "
                             f"{have_cuda}, and minor-version compatibility never crosses a major (only the cuda-compat "
                             "forward-compatibility package can, on datacenter GPUs)", full_driver)
    if want.major < 11:
        return Verdict(FAIL, f"CUDA {want} predates minor-version compatibility, so it needs a driver that supports "
                             f"CUDA {want} itself" + (f" ({full_driver} or newer)" if full_driver else ""), full_driver)
    floor = mvc_floor(want.major, os_name)
    driver_v = version(driver)
    same_major = have_cuda.major == want.major if have_cuda is not None else None
    if floor and driver_v is not None and driver_v >= version(floor[f"min_driver_{os_name}"]) \
            and (same_major is not False):
        return Verdict(LIMITED, f"CUDA {want} runs on driver {driver} only under minor-version compatibility: "
                                f"{floor.get('limits', 'PTX newer than the driver cannot be JIT-compiled')}",
                       full_driver)
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
    gpu = version(cc)
    if gpu is None:
        return Verdict(UNKNOWN, f"compute capability {cc!r} cannot be read")
    flags = [p for p in (parse_arch(a) for a in arch_list) if p]
    if not flags:
        return Verdict(UNKNOWN, "the build lists no GPU architectures")
    for kind, target, suffix in flags:
        if kind != "sass":
            continue
        if suffix == "a" and target == gpu:
            return Verdict(OK, f"it has machine code for sm_{_flag(target)}a")
        if suffix in ("", "f") and target.major == gpu.major and target.minor <= gpu.minor:
            return Verdict(OK, f"it has machine code for sm_{_flag(target)}{suffix}, which runs on compute capability {gpu}")
    ptx = sorted(t for kind, t, _ in flags if kind == "ptx" and t <= gpu)
    if ptx:
        return Verdict(LIMITED, f"it has no machine code for compute capability {gpu}, only PTX for compute_{_flag(ptx[-1])}, "
                                "which the driver JIT-compiles at first use (slow start; needs a driver at least as new as the build's CUDA)")
    listed = ", ".join(sorted({a for a in arch_list}))
    return Verdict(FAIL, f"it has no code for compute capability {gpu} (it lists {listed}): CUDA calls fail with "
                         "'no kernel image is available for execution on the device'")


def _flag(v: Version) -> str:
    return f"{v.major}{v.minor}"


# --- toolkit versus GPU -------------------------------------------------------------------------

def toolkit_targets(cuda: str, cc: str) -> Verdict:
    want, gpu = major_minor(cuda), version(cc)
    if want is None or gpu is None:
        return Verdict(UNKNOWN, "version cannot be read")
    row = next((r for r in matrix.load_topic("cuda_targets")["entries"] if version(r.get("compute_capability")) == gpu), None)
    if row is None:
        return Verdict(UNKNOWN, f"the matrix does not know compute capability {gpu}; update gpudoctor or pass --matrix")
    first, last = major_minor(row.get("first_cuda")), major_minor(row.get("last_cuda"))
    if first and want < first:
        return Verdict(FAIL, f"nvcc {want} cannot compile for compute capability {gpu}: it arrived in CUDA {first}", str(first))
    if last and want > last:
        return Verdict(FAIL, f"nvcc {want} cannot compile for compute capability {gpu}: CUDA {last} was the last toolkit that could")
    if newest_known_cuda() and want > newest_known_cuda() and last is None:
        return Verdict(UNKNOWN, f"CUDA {want} is newer than gpudoctor's matrix knows; update gpudoctor or pass --matrix")
    return Verdict(OK, f"nvcc {want} can compile for compute capability {gpu}")


# --- GPUs and framework builds ------------------------------------------------------------------

def gpu_entry(name: str, topic: str = "gpus") -> Optional[dict[str, Any]]:
    """The first entry of ``topic`` whose whole-word match string occurs in the NVML name (case-insensitive)."""
    lowered = f" {re.sub(r'[^a-z0-9]+', ' ', name.lower())} "
    for row in matrix.load_topic(topic)["entries"]:
        for pattern in row.get("match", []):
            words = re.sub(r"[^a-z0-9]+", " ", pattern.lower()).strip()
            if words and f" {words} " in lowered:
                return row
    return None


def torch_build(torch_version: str) -> tuple[Optional[dict[str, Any]], Optional[dict[str, Any]], str]:
    """The matrix release and CUDA variant of a torch version string: "2.7.1+cu128", "2.7.1" (the plain
    PyPI wheel for Linux x86_64), "2.7.1+cpu". Returns (release, variant, variant_name)."""
    base, _, local = torch_version.partition("+")
    release_v = major_minor(base)
    rows = matrix.load_topic("pytorch")["entries"]
    release = next((r for r in rows if major_minor(r.get("version")) == release_v), None)
    if release is None:
        return None, None, local or "?"
    name = local or release.get("default_pypi_variant", "")
    variant = next((v for v in release.get("variants", []) if v.get("name") == name), None)
    return release, variant, name


def tensorflow_release(tf_version: str) -> Optional[dict[str, Any]]:
    want = major_minor(tf_version)
    return next((r for r in matrix.load_topic("tensorflow")["entries"] if major_minor(r.get("version")) == want), None)


def python_in(spec: Optional[str], python: str) -> Optional[bool]:
    """Is Python X.Y inside a range like ">=3.9,<3.14"? None when the matrix gives no range."""
    if not spec:
        return None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return Version(f"{version(python).major}.{version(python).minor}") in SpecifierSet(spec)
    except (InvalidSpecifier, AttributeError):
        return None
