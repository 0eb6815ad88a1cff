"""The driver's facts as versions: read once for the renderers and the fleet summary."""

from __future__ import annotations

from typing import Any, Optional

from gpudoctor import versions


def cuda_version(raw: Any) -> Optional[str]:
    """NVML's encoded CUDA version (1000*major + 10*minor) as text: 13000 -> "13.0", 12040 -> "12.4";
    None for anything that is not a positive number (an absent fact, 0)."""
    return versions.cuda(raw)
