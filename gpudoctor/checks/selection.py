"""Which checks a run judges with: ``--only``/``--skip`` names and ``--require-gpus``, as given to ``check``
or as a saved report's facts record them (``facts["options"]``), over an explicit list of checks.

Pure functions of that list, so that the registry (which holds the list), the pipeline and the doctor's
gate (checks/gates.py, itself in the list) can all ask the same question without importing each other."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from gpudoctor.checks.base import Check, Facts

#: The check ``--require-gpus N`` brings, whatever the selection.
REQUIRED_GPUS_CHECK = "visibility.required_gpus"


def select(checks: Sequence[Check], only: Sequence[str] = (), skip: Sequence[str] = (),
           require_gpus: bool = False) -> list[Check]:
    """Checks whose area or id matches ``only`` (all if empty; the doctor's always) and not ``skip``, and the
    check of ``--require-gpus`` when ``require_gpus`` whatever they say; an unknown name is a ValueError."""
    known = {c.area for c in checks} | {c.id for c in checks}
    unknown = [n for n in (*only, *skip) if n not in known]
    if unknown:
        raise ValueError(f"unknown area or check: {', '.join(unknown)} (see `gpudoctor checks`)")

    def matches(check: Check, names: Sequence[str]) -> bool:
        return check.area in names or check.id in names

    return [c for c in checks if (not only or matches(c, only) or c.area == "doctor") and not matches(c, skip)
            or require_gpus and c.id == REQUIRED_GPUS_CHECK]


def recorded(checks: Sequence[Check], facts: Facts) -> list[Check]:
    """The checks the run that gathered these facts selected (all, without ``options``): what ``analyze``
    judges a saved report with. Names this gpudoctor does not know are left out; if every ``--only`` name
    is unknown here, only the doctor's checks are."""
    options = options_of(facts)
    known = {c.area for c in checks} | {c.id for c in checks}
    only, skip = (tuple(n for n in names(options.get(key)) if n in known) for key in ("only", "skip"))
    if names(options.get("only")) and not only:
        return [c for c in checks if c.area == "doctor"]
    return select(checks, only, skip, require_gpus=required_gpus(facts) is not None)


def required_gpus(facts: Facts) -> Optional[int]:
    """N of ``check --require-gpus N`` as the facts record it; None when not given (or 0: nothing to confirm)."""
    wanted = options_of(facts).get("require_gpus")
    return wanted if isinstance(wanted, int) and not isinstance(wanted, bool) and wanted > 0 else None


def names(value: Any) -> list[str]:
    return [str(n) for n in value] if isinstance(value, (list, tuple)) else []


def options_of(facts: Facts) -> dict[str, Any]:
    options = facts.get("options")
    return options if isinstance(options, dict) else {}
