"""CUDA's forward compatibility seen from the driver's facts: a CUDA version above what the driver's branch runs by
itself can only come from the cuda-compat package's libcuda on the loader path (nvidia-smi and NVML report the CUDA
of the libcuda they load). NVIDIA supports that package only on data-center GPUs, some NGC-Ready RTX cards and
Jetson boards; elsewhere CUDA stops with error 804 (compat_matrix/cuda_toolkits.json, forward_compatibility)."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from gpudoctor.compat.data import Matrix
from gpudoctor.compat.rules import driver_cuda_of, major_minor, version


class Forward(NamedTuple):
    reported: str  # the CUDA the driver's facts report: the cuda-compat libcuda's
    native: str  # the newest CUDA the driver's own branch runs (Table 3)
    needs: str  # the oldest driver whose own CUDA is ``reported``


def forward_cuda(matrix: Matrix, driver: Any, driver_cuda: Any, os_name: Optional[str]) -> Optional[Forward]:
    """The forward-compatibility CUDA in use, or None. Only on Linux (the package's only OS; a paste that does not
    say the OS counts as Linux when its driver is numbered as Linux's are), and only where the
    reported CUDA's oldest Table 3 driver is of a later branch than this driver's: an update within one branch,
    or a CUDA the matrix does not list, says nothing."""
    if os_name != "linux" and not (os_name is None and _linux_numbered(driver)):
        return None
    have, reported = version(driver), major_minor(driver_cuda)
    native = driver_cuda_of(matrix, str(driver), "linux") if have else None
    native_mm = major_minor(native)
    if have is None or reported is None or native is None or native_mm is None or reported <= native_mm:
        return None
    drivers = [(v, str(r["min_driver_linux"])) for r in matrix.topic("cuda_toolkits")["entries"]
               if major_minor(r.get("version")) == reported and (v := version(r.get("min_driver_linux")))]
    if not drivers:
        return None
    oldest, needs = min(drivers)
    if oldest.major <= have.major:
        return None
    return Forward(str(reported), native, needs)


def _linux_numbered(driver: Any) -> bool:
    """A driver numbered as only Linux's are (470.57.02): Windows drivers have two parts (551.86)."""
    return isinstance(driver, str) and driver.count(".") == 2


def supported_where(matrix: Matrix, names: list[str]) -> Optional[str]:
    """Whether NVIDIA supports forward compatibility on these GPUs, by their catalogue segment: "yes" (every one a
    data-center GPU or a Jetson), "no" (a GeForce among them), or None (a workstation card, which may be an
    NGC-Ready SKU, or a GPU the catalogue does not name)."""
    from gpudoctor.compat.rules import gpu_entry

    segments = [(gpu_entry(matrix, name) or {}).get("segment") for name in names]
    if not segments:
        return None
    if "geforce" in segments:
        return "no"
    return "yes" if all(s in ("datacenter", "jetson") for s in segments) else None
