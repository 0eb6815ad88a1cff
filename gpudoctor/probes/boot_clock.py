"""The machine's uptime and boot time as the kernel keeps them: the window the driver's counters and the
kernel log's records are counted over. Standard library only: the NVML worker reads it too."""

from __future__ import annotations

from typing import Optional


def uptime_s() -> Optional[float]:
    """Seconds since boot (/proc/uptime), None where it cannot be read."""
    try:
        with open("/proc/uptime", "rb") as fh:  # bytes: no codec to look up, so it also reads after a drop of privileges
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def boot_time() -> Optional[float]:
    """The kernel's own boot time (/proc/stat btime, whole seconds since the epoch): the same in every
    reading, where now minus the uptime moves by the milliseconds between two reads. None where unread."""
    try:
        with open("/proc/stat", "rb") as fh:
            for line in fh:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None
