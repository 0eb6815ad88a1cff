"""What an Xid means and how gpudoctor judges it (compat_matrix/xid.json, from NVIDIA's Xid catalogue).

The one source of truth for Xids: the live check of this machine's kernel log (checks/xid_events.py)
and the check of a pasted log (checks/messages.py) both read it. A severity is that of an Xid logged
recently; some Xids carry their verdict in their own words: Xid 154 names the recovery the GPU now needs,
an NVLink5 Xid (144-150) says Fatal or Nonfatal, and Xid 94/95 say whether the GPU must be reset (RST: Yes).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from gpudoctor.compat.data import Matrix
from gpudoctor.nvrm import RECOVERY_ACTIONS, asks_reset, recovery_action

XID_DOCS = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
_FATAL = re.compile(r"\bFatal\b")  # "NETIR Fatal XC0"; "Nonfatal" is not the word


def entry(matrix: Matrix, xid: int) -> Optional[dict[str, Any]]:
    """The catalogue's entry for this Xid, None for one it does not describe."""
    return _by_code(matrix).get(xid)


def _by_code(matrix: Matrix) -> dict[int, dict[str, Any]]:
    return {e["xid"]: e for e in matrix.topic("xid")["entries"] if isinstance(e.get("xid"), int)}


def severity(matrix: Matrix, xid: int, detail: str = "") -> Optional[str]:
    """gpudoctor's severity of this Xid logged recently, read with its message; None for an Xid the
    catalogue does not describe (unknown, never a guess)."""
    found = entry(matrix, xid)
    if found is None:
        return None
    if xid == 154:
        action = recovery_action(detail)
        return RECOVERY_ACTIONS.get(action.lower(), "warning") if action else "info"
    if found.get("fatal_in_message_is_error") and _FATAL.search(detail):
        return "error"
    if xid in (94, 95) and asks_reset(detail):
        return "error"  # the driver marked the GPU for a reset (RST: Yes) or a drain and reset (D-RST: Yes)
    return str(found["severity"])


def error_xids(matrix: Matrix) -> frozenset[int]:
    """The Xids that mean the GPU itself needs a reset, a reboot or its hardware checked."""
    return frozenset(code for code, e in _by_code(matrix).items() if e.get("severity") == "error")


def describe(matrix: Matrix, xid: int) -> str:
    """'Xid 79 (GPU has fallen off the bus)', or 'Xid 201 (not in gpudoctor's catalogue)'."""
    found = entry(matrix, xid)
    return f"Xid {xid} ({found['meaning']})" if found else f"Xid {xid} (not in gpudoctor's Xid catalogue)"
