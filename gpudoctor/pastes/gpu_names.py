"""A GPU named in a paste, looked up in the matrix's catalogue: shared by every reader that meets a name."""

from __future__ import annotations

from typing import Any, Optional


def matrix_gpu(name: str) -> Optional[dict[str, Any]]:
    """The catalogue entry (compat_matrix/gpus.json) for a GPU name as a paste gives it, or None for a name
    too generic to pick one ("NVIDIA", "GeForce") or a matrix that cannot be read."""
    from gpudoctor.compat.data import matrix_in_force
    from gpudoctor.compat.rules import gpu_entry

    if not name or name.strip(". ") in ("NVIDIA", "NVIDIA GeForce", "GeForce", "Tesla"):
        return None
    try:
        return gpu_entry(matrix_in_force(), name.rstrip(". "))
    except Exception:  # noqa: BLE001 - an unreadable matrix leaves the capability unknown, never a crash
        return None
