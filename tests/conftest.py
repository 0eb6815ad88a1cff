"""Shared fixtures: the reports recorded on real GPU machines (see tests/fixtures/real/README.md)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from click import testing as click_testing

REAL = Path(__file__).parent / "fixtures" / "real"


def _results_as_click_8_2_gives_them() -> None:
    """The tests read a command's errors from ``result.stderr`` and both streams from ``result.output``, as
    Click 8.2 gives them. Python 3.9, which gpudoctor supports, gets Click 8.1 at most, whose runner mixes
    the streams unless told not to; told so, its ``output`` is the standard output alone."""
    init = click_testing.CliRunner.__init__
    if "mix_stderr" not in inspect.signature(init).parameters:
        return  # Click 8.2 or newer

    def separate(self: Any, *args: Any, mix_stderr: bool = False, **kwargs: Any) -> None:
        init(self, *args, mix_stderr=mix_stderr, **kwargs)

    click_testing.CliRunner.__init__ = separate  # type: ignore[method-assign]
    click_testing.Result.output = property(  # type: ignore[method-assign]
        lambda r: r.stdout + (r.stderr if r.stderr_bytes is not None else ""))


_results_as_click_8_2_gives_them()

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
    """A test that ran `check --timeout` or an interrupt closed the child gate (procs/child.py); every
    test starts with it open, as every gpudoctor process does."""
    from gpudoctor.procs.child import reopen

    reopen()
    yield
