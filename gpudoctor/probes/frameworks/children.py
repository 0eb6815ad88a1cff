"""Each framework's own module under the diagnosed interpreter: the one its row in
gpudoctor/frameworks_table.py names (``child``), imported only when asked for, so that a child imports
the code of the framework it was started for and of no other.

The module of the framework of key KEY holds:

* ``probe_KEY()``: its facts once the framework worker (worker.py) has imported it: its build, the GPUs
  it sees, its first computation on one, each step said first (asking.stage);
* ``run_KEY(device, deep)``: its workload on one GPU, or on the CPU (probes/workload/worker.py);
* ``read_KEY(package)``, where its installed package says more of its build than every package does:
  what ``check --quick`` reads of it without importing it (metadata.py reads the rest).

Such a module runs under the diagnosed interpreter: standard library only at module level, the framework
imported inside its functions.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable, Optional

from gpudoctor import frameworks_table


def module(key: str) -> ModuleType:
    """The module of framework ``key``; KeyError for a framework the table does not know."""
    fw = frameworks_table.get(key)
    if fw is None:
        raise KeyError(key)
    return importlib.import_module(fw.child)


def probe(key: str) -> Callable[[], dict[str, Any]]:
    """What asks framework ``key`` for its facts, once it is imported."""
    return getattr(module(key), f"probe_{key}")


def run(key: str) -> Callable[[str, bool, Optional[str]], dict[str, Any]]:
    """Framework ``key``'s workload on one device: run_KEY(device, deep, checks_on), where ``checks_on``
    names the GPU of the same model whose run makes the correctness checks and the training step, so this
    run makes only what is measured on every GPU (None: this run makes them all)."""
    return getattr(module(key), f"run_{key}")


def reader(key: str) -> Optional[Callable[[Any], Optional[str]]]:
    """What reads framework ``key``'s own package beyond what every package says; None where nothing does."""
    return getattr(module(key), f"read_{key}", None)
