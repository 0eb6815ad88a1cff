"""Checks on gpudoctor itself: probes that crashed or overran their limit."""

from __future__ import annotations

from typing import Iterator

from gpudoctor.checks.base import Check, Facts, finding
from gpudoctor.findings import Finding
from gpudoctor.status import PROBE_ERROR, PROBE_TIMEOUT

#: Probes whose timeouts are judged elsewhere, with a more specific code (NVML: DRV009).
JUDGED_ELSEWHERE = {"nvml"}


def check_probes(facts: Facts) -> Iterator[Finding]:
    for name, record in sorted((facts.get("probes") or {}).items()):
        title = record.get("title", name)
        if record.get("status") == PROBE_ERROR:
            yield finding("INT001", f"could not check {title}: {record.get('error', 'unknown error')}",
                          detail=record.get("traceback_tail", ""),
                          text="Please report this to gpudoctor with the JSON report attached.")
        elif record.get("status") == PROBE_TIMEOUT and name not in JUDGED_ELSEWHERE:
            yield finding("INT002", f"could not check {title}: {record.get('error', 'timed out')}",
                          text="Run again; if it persists, the component this probe reads is hanging.")


CHECKS = (
    Check("doctor.probes", "doctor", "gpudoctor's own probes ran", ("INT001", "INT002", "INT003"), check_probes),
)
