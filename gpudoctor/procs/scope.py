"""What the probes of one run hand each other, held by an object the run passes to every probe.

Two probes need the same child (the count of the GPUs, a framework's workload child): the driver starts
CUDA in one process at a time, so each extra process that starts it on every GPU delays all the others.
And one probe reads another's facts (the smoke probe takes its list of GPUs from NVML's). A new scope
per run keeps a run from ever reading what another run in the same process shared (tests, `merge`'s
re-checks), with nothing to clear or to tell apart by a counter.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable, Optional


class RunScope:
    """One run's shared answers: each computed once (``once``), or offered by the probe that makes them
    for others to read (``offer``/``offered``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._once: dict[str, Future] = {}
        self._offers: dict[str, Future] = {}

    def once(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, once in this run for every caller that asks for ``key``: the first computes, the
        others wait for its answer (or its exception)."""
        with self._lock:
            future = self._once.get(key)
            owner = future is None
            if owner:
                future = self._once[key] = Future()
        assert future is not None
        if owner:
            try:
                future.set_result(compute())
            except BaseException as exc:
                future.set_exception(exc)
        return future.result()

    def offer(self, key: str) -> Future:
        """A future for ``key`` that its maker fills; ``offered`` reads it. A second offer replaces the first."""
        future: Future = Future()
        with self._lock:
            self._offers[key] = future
        return future

    def offered(self, key: str, wait_s: float) -> Optional[Any]:
        """What was offered as ``key`` in this run, once it is made (waiting ``wait_s`` at most); None where
        nothing was offered, or its maker failed or did not finish in time."""
        with self._lock:
            future = self._offers.get(key)
        if future is None:
            return None
        try:
            return future.result(timeout=wait_s)
        except Exception:  # noqa: BLE001 - a timeout, or a failure the maker reports itself
            return None
