"""Facts, then judgement: the two steps every command shares, importable without the CLI."""

from __future__ import annotations

from typing import Any, Callable, Optional

from gpudoctor import report as rep
from gpudoctor.checks.registry import run_checks
from gpudoctor.checks.visibility import resolve
from gpudoctor.runner import GPU_WORK, PROBES, run_probes


def check(on_progress: Optional[Callable[[str], None]] = None, quick: bool = False) -> dict[str, Any]:
    """Probe this machine and judge it; ``quick`` runs no work on the GPUs."""
    probes = [p for p in PROBES if not (quick and p.name in GPU_WORK)]
    facts = run_probes(probes, on_progress=on_progress)
    return judge(facts)


def judge(facts: dict[str, Any], created: Optional[str] = None) -> dict[str, Any]:
    """Judge facts (fresh, or from a saved report) with this version's checks."""
    return rep.build(facts, run_checks(facts), created=created)


def cuda_numbers(facts: dict[str, Any]) -> dict[int, list[int]]:
    """For each GPU index, the cuda:N numbers a CUDA program in this environment gives it."""
    numbers: dict[int, list[int]] = {}
    for dev in resolve(facts).devices:
        numbers.setdefault(dev.gpu_index, []).append(dev.cuda_index)
    return numbers
