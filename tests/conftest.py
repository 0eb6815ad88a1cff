"""Shared fixtures: the reports recorded on real GPU machines (see tests/fixtures/real/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REAL = Path(__file__).parent / "fixtures" / "real"
REAL_DIRS = sorted(p for p in REAL.iterdir() if (p / "report.json").exists()) if REAL.is_dir() else []


def load_facts(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "report.json").read_text())["facts"]


@pytest.fixture(params=REAL_DIRS, ids=[p.name for p in REAL_DIRS])
def real_dir(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture
def h200x2() -> dict[str, Any]:
    """The 2 x H200 recording: two GPUs, so pair and multi-GPU faults can be derived from it."""
    return load_facts(next(p for p in REAL_DIRS if p.name.startswith("h200x2")))


@pytest.fixture(autouse=True)
def _children_allowed():
    """A test that ran `check --timeout` or an interrupt closed the child gate (probes/child.py); every
    test starts with it open, as every gpudoctor process does."""
    from gpudoctor.probes.child import reopen

    reopen()
    yield
