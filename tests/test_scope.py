"""procs/scope.py: what the probes of one run hand each other, and nothing of another run's."""

from __future__ import annotations

import threading
import time

import pytest

from gpudoctor.procs.scope import RunScope


def test_once_computes_once_per_run_for_every_caller_that_asks():
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.05)
        return len(calls)

    scope = RunScope()
    got = []
    threads = [threading.Thread(target=lambda: got.append(scope.once("k", compute))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [1, 1, 1]
    assert RunScope().once("k", compute) == 2  # a new run computes again


def test_a_failure_reaches_every_caller_of_the_run():
    scope = RunScope()
    with pytest.raises(ZeroDivisionError):
        scope.once("fails", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        scope.once("fails", lambda: 42)  # the same run: the same answer


def test_an_offer_is_read_once_made_and_only_in_its_run():
    scope = RunScope()
    assert scope.offered("facts", 0.01) is None  # nothing offered
    future = scope.offer("facts")
    assert scope.offered("facts", 0.01) is None  # offered, not made in time
    threading.Timer(0.05, lambda: future.set_result({"gpus": []})).start()
    assert scope.offered("facts", 5.0) == {"gpus": []}
    assert RunScope().offered("facts", 0.01) is None


def test_an_offer_whose_maker_failed_reads_as_none():
    scope = RunScope()
    scope.offer("facts").set_exception(RuntimeError("the NVML child could not start"))
    assert scope.offered("facts", 0.01) is None
