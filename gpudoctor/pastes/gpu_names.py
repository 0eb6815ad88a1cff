"""A GPU named in a paste, looked up in the matrix's catalogue: shared by every reader that meets a name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix


def matrix_gpu(matrix: Matrix, name: str) -> Optional[dict[str, Any]]:
    """The catalogue entry (``matrix``'s gpus table) for a GPU name as a paste gives it, or None for a name
    too generic to pick one ("NVIDIA", "GeForce") or a matrix that cannot be read."""
    from gpudoctor.compat.rules import gpu_entry

    if not name or name.strip(". ") in ("NVIDIA", "NVIDIA GeForce", "GeForce", "Tesla"):
        return None
    try:
        return gpu_entry(matrix, name.rstrip(". "))
    except Exception:  # noqa: BLE001 - an unreadable matrix leaves the capability unknown, never a crash
        return None
