"""What one `gpudoctor check` is asked to do, made once by the command line and passed down as a value.

The pipeline hands it to the runner, and the runner hands each probe the part it reads (the interpreter
diagnosed); its compatibility matrix goes to the checks that read one (checks/registry.py). So every route
from an option to the code it steers is a chain of parameters: no module holds the state of a run.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.probes.interpreter import Target, own
from gpudoctor.procs.scope import RunScope


@dataclass(frozen=True)
class Started:
    """A probe started before the run (runner.start_early), for the run to adopt: the probe's name and
    variant (which of its runs it is: "quick", "deep", ...), the interpreter it diagnoses, its thread,
    the slot its thread fills, and when it began (``time.monotonic()``)."""

    name: str
    variant: str
    target: Target
    thread: threading.Thread
    slot: dict[str, Any]
    began: float


@dataclass(frozen=True)
class Early:
    """What a run began before its options were made (runner.start_early): its scope, the answers its
    probes hand each other (procs/scope.py), which the probes started then already use; and those probes."""

    scope: RunScope = field(default_factory=RunScope)
    probes: tuple[Started, ...] = ()


@dataclass(frozen=True)
class RunOptions:
    """The run's options. ``interpreter``: the Python diagnosed (interpreter.choose). ``deadline``: the
    --timeout deadline, a ``time.monotonic()`` value, or None. ``matrix``: the compatibility matrix the
    verdicts rest on, the bundled one with the --matrix files over it. ``only``/``skip``: the checks
    selected, by area or id. ``quick``: no work on the GPUs (it wins over ``deep``); ``deep``: the multi-GPU
    tests and longer workloads. ``require_gpus``: --require-gpus. ``early``: the run's scope and the probes
    already started in it (runner.start_early), for the run to adopt. One value serves one run: a second run
    needs options of its own (``dataclasses.replace(options, early=Early())``), or it would adopt the first
    run's probes and children."""

    interpreter: Target = field(default_factory=own)
    deadline: Optional[float] = None
    matrix: Matrix = BUNDLED
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    quick: bool = False
    deep: bool = False
    require_gpus: Optional[int] = None
    early: Early = field(default_factory=Early)

    def recorded(self) -> dict[str, Any]:
        """The options a report records (facts.options), so `analyze` judges it as this run did: the
        selection, --require-gpus and the --matrix files."""
        out: dict[str, Any] = {}
        if self.require_gpus is not None:
            out["require_gpus"] = self.require_gpus
        if self.only:
            out["only"] = list(self.only)
        if self.skip:
            out["skip"] = list(self.skip)
        if self.matrix.overlays:  # the verdicts rest on them: `analyze` without them says so (cli/reports.py)
            out["matrix_overlays"] = self.matrix.recorded()
        return out
