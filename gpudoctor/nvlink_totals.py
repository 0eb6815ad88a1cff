"""A GPU's NVLink error counts summed over its links, from either shape a report may hold.

A report holds ``counters.nvlink_errors`` as the driver's totals over all links, one count per kind
(``{"replay", "recovery", "crc_flit", "crc_data"}``, read in one NVML call), or, in reports recorded
before that, as a list of per-link entries. DCGM's health watch judges the totals (its
``DCGM_FI_DEV_NVLINK_*_TOTAL`` fields), so the checks, renderers and ``merge`` read both shapes through
:func:`nvlink_totals` and so compare like with like. A driver that keeps no totals (580 on H200) gives the
per-link counts only, and the full check records those.
"""

from __future__ import annotations

from typing import Any, Optional

from gpudoctor.snapshot import is_unavailable, unavailable

#: The kinds of NVLink error, as the facts name them, in the order ``nvidia-smi nvlink -e`` prints them.
KINDS = ("replay", "recovery", "crc_flit", "crc_data")
#: ``counters.nvlink_errors_unread`` where the driver gives the counts per link only (no totals: 580 on H200)
#: and ``check --quick`` left them to the full check: 72 calls per GPU, served one at a time, do not fit its time.
UNREAD_IN_QUICK = "quick"


def nvlink_totals(value: Any) -> Optional[dict[str, Any]]:
    """``{kind: count or absent fact}`` for a GPU's ``counters.nvlink_errors``; None where the value is
    itself an absent fact or not a counter set. A per-link list sums to a total only where every link's
    count of that kind was read: a sum that skips a link would understate it."""
    if isinstance(value, dict) and not is_unavailable(value):
        return {kind: value.get(kind, unavailable("not_found")) for kind in KINDS}
    if not isinstance(value, list):
        return None
    links = [e for e in value if isinstance(e, dict)]
    return {kind: _sum([e.get(kind) for e in links]) for kind in KINDS}


def _sum(counts: list[Any]) -> Any:
    missing = next((c for c in counts if is_unavailable(c)), None)
    if missing is not None:
        return missing
    if any(read_count(c) is None for c in counts):
        return unavailable("unknown")
    return sum(counts)


def read_count(value: Any) -> Optional[int]:
    """A count that was read (an int), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
