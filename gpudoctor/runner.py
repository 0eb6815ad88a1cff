"""Runs probes side by side, each isolated and time-limited, and assembles the snapshot.

Each probe runs in its own daemon thread (probes that can hang the interpreter go further and
use a child process, see procs/child.py). A probe that raises or overruns its limit leaves a
record in ``facts["probes"]`` that a check turns into a finding; the rest of the report still
comes out. A record says why a probe was stopped as data (``reason``: its own limit, or the run's
--timeout deadline), which the checks read, beside the sentence (``error``) that people read.
Results are merged in registry order, so the snapshot does not depend on timing.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, replace
from typing import Any, Callable, Collection, Optional, Sequence

from gpudoctor import frameworks_table
from gpudoctor.probes import interpreter
from gpudoctor.procs import forking, processes
from gpudoctor.probes.interpreter import Target
from gpudoctor.procs.child import kill_all
from gpudoctor.probes.driver_events import QUICK_BUDGET_S, probe_driver_events
from gpudoctor.probes.frameworks import probe_frameworks, probe_frameworks_metadata
from gpudoctor.probes.libraries import probe_libraries
from gpudoctor.probes.multigpu import TIMEOUT_S as MULTIGPU_TIMEOUT_S, probe_multigpu
from gpudoctor.probes.nvml import probe_nvml
from gpudoctor.probes.pyenv import probe_python
from gpudoctor.probes.smoke import probe_smoke
from gpudoctor.probes.workload import framework_facts, hosted_smoke, probe_workload
from gpudoctor.probes.system import probe_driver_files, probe_host
from gpudoctor.probes.toolkit import probe_toolkit
from gpudoctor.procs.scope import RunScope
from gpudoctor.run_options import Early, RunOptions, Started
from gpudoctor.snapshot import DEADLINE_SENTENCE
from gpudoctor.status import PROBE_ERROR, PROBE_OK, PROBE_TIMEOUT, STOPPED_DEADLINE, STOPPED_TIMEOUT
from gpudoctor.trace import mark


#: What a probe runs: given the interpreter the run diagnoses and what the run's probes share (procs/scope.py),
#: its facts.
ProbeRun = Callable[[Target, RunScope], dict[str, Any]]


@dataclass(frozen=True)
class Probe:
    name: str
    title: str  # what it was doing, for "could not check <title>"
    run: ProbeRun
    timeout_s: float
    deep_run: Optional[ProbeRun] = None  # what it runs instead under `check --deep`
    quick_run: Optional[ProbeRun] = None  # ...and under `check --quick`
    #: Stopped at the --timeout deadline, what it had read still goes into the facts. Only for a probe whose
    #: facts say themselves that they are incomplete (NVML's ``incomplete``): other checks read facts
    #: without knowing which probe they came from, and must not take a half-read section for the whole.
    keeps_partial: bool = False
    #: Which of its runs ``run`` is ("quick", "deep", "shared"; "" for the plain one): a probe started
    #: early is adopted by a run that wants the same one (start_early).
    variant: str = ""


NVML_TIMEOUT_S = 20.0
FRAMEWORK_TIMEOUT_S = 60.0
SMOKE_TIMEOUT_S = 30.0
WORKLOAD_TIMEOUT_S = 90.0


def _cuda_stack(target: Target, read_versions: bool = True) -> dict[str, Any]:
    toolkit = probe_toolkit()
    roots = [i["path"] for i in toolkit["installs"]]
    return {"toolkit": toolkit, "libraries": probe_libraries(roots, target, read_versions=read_versions)}


PROBES: tuple[Probe, ...] = (
    Probe("host", "the host and its environment", lambda target, scope: {"host": probe_host()}, 5.0),
    Probe("driver_files", "the kernel driver and device nodes", lambda target, scope: {"driver": probe_driver_files()}, 5.0),
    Probe("kernel_log", "the kernel log's Xid and driver errors", lambda target, scope: {"kernel_log": probe_driver_events()},
          5.0, quick_run=lambda target, scope: {"kernel_log": probe_driver_events(QUICK_BUDGET_S)}),
    Probe("nvml", "the driver and GPUs through NVML", lambda target, scope: probe_nvml(NVML_TIMEOUT_S, scope=scope), NVML_TIMEOUT_S + 5.0,
          keeps_partial=True, quick_run=lambda target, scope: probe_nvml(NVML_TIMEOUT_S, quick=True, scope=scope)),
    Probe("cuda_stack", "the CUDA toolkit and libraries", lambda target, scope: _cuda_stack(target), 40.0,
          quick_run=lambda target, scope: _cuda_stack(target, read_versions=False)),
    Probe("python", "the Python environment", lambda target, scope: {"python": probe_python(target)}, 10.0),
    Probe("frameworks", f"the installed frameworks ({', '.join(frameworks_table.NAMES.values())})",
          lambda target, scope: probe_frameworks(target, FRAMEWORK_TIMEOUT_S), FRAMEWORK_TIMEOUT_S + 5.0,
          quick_run=lambda target, scope: probe_frameworks_metadata(path=interpreter.target_path(target))),
    Probe("smoke", "a smoke kernel on every GPU", lambda target, scope: probe_smoke(scope, SMOKE_TIMEOUT_S), 2 * SMOKE_TIMEOUT_S + 5.0),
    Probe("workload", "framework workloads on every GPU", lambda target, scope: probe_workload(scope, target, WORKLOAD_TIMEOUT_S),
          WORKLOAD_TIMEOUT_S + 40.0, deep_run=lambda target, scope: probe_workload(scope, target, WORKLOAD_TIMEOUT_S, deep=True)),
    Probe("multigpu", "P2P copies and an NCCL all-reduce between the GPUs", lambda target, scope: probe_multigpu(target, scope),
          MULTIGPU_TIMEOUT_S),
)
#: Probes that run work on the GPUs; `check --quick` leaves them out.
GPU_WORK = ("smoke", "workload", "multigpu")
#: Probes only `check --deep` runs.
DEEP_ONLY = ("multigpu",)


def select_probes(names: Collection[str], quick: bool = False, deep: bool = False) -> list[Probe]:
    """The probes among ``names`` that this kind of run makes: ``quick`` runs no GPU work (and so no
    deep work either) and each probe's quick variant (frameworks from package metadata, without
    importing them); ``deep`` adds the deep-only probes and runs each probe's deep variant."""
    chosen = [p for p in PROBES if p.name in names and not (quick and p.name in GPU_WORK)
              and (deep or p.name not in DEEP_ONLY)]
    if quick:
        return [replace(p, run=p.quick_run, variant="quick") if p.quick_run else p for p in chosen]
    chosen = [replace(p, run=p.deep_run, variant="deep") if deep and p.deep_run else p for p in chosen]
    if any(p.name == "workload" for p in chosen):  # one child per framework serves both probes
        chosen = [_shared(p, deep, hosts_smoke=any(p.name == "smoke" for p in chosen)) for p in chosen]
        if any(p.name == "multigpu" for p in chosen):
            chosen = _multigpu_after_workload(chosen)
    return chosen


def _multigpu_after_workload(chosen: list[Probe]) -> list[Probe]:
    """The multi-GPU tests start once the workloads have ended: their children hold CUDA contexts (2 GiB each)
    on every GPU while they run, which a workload timing its GPU rightly sees as another process there, so
    that its figures would go unjudged (RUN019). The tests wait at most as long as the workloads may take."""
    ended = threading.Event()
    workload = next(p for p in chosen if p.name == "workload")

    def workload_run(target: Target, scope: RunScope) -> dict[str, Any]:
        try:
            return workload.run(target, scope)
        finally:
            ended.set()

    def after(run: ProbeRun) -> ProbeRun:
        def waiting(target: Target, scope: RunScope) -> dict[str, Any]:
            ended.wait(workload.timeout_s)
            return run(target, scope)

        return waiting

    return [replace(p, run=workload_run) if p is workload else
            replace(p, run=after(p.run), timeout_s=p.timeout_s + workload.timeout_s) if p.name == "multigpu" else p
            for p in chosen]


def _shared(probe: Probe, deep: bool, hosts_smoke: bool) -> Probe:
    """``probe`` where the workloads run too: the threaded frameworks' workload children report the
    framework probe's facts, and (``hosts_smoke``) PyTorch's runs the smoke kernel, so that no other
    process starts CUDA on a GPU that PyTorch starts it on anyway."""
    if probe.name == "frameworks":
        return replace(probe, run=lambda target, scope: probe_frameworks(
            target, FRAMEWORK_TIMEOUT_S, facts_from=framework_facts(scope, deep, WORKLOAD_TIMEOUT_S, hosts_smoke)),
                       variant="shared")
    if probe.name == "workload" and hosts_smoke:
        return replace(probe, run=lambda target, scope: probe_workload(scope, target, WORKLOAD_TIMEOUT_S, deep, smoke=True))
    if probe.name == "smoke" and hosts_smoke:
        return replace(probe, run=lambda target, scope: probe_smoke(
            scope, SMOKE_TIMEOUT_S, host=hosted_smoke(scope, deep, WORKLOAD_TIMEOUT_S, target)),
                       variant="shared")
    return probe


@dataclass(frozen=True)
class Progress:
    """Where a run stands, for a progress display: how many probes have finished, which are still running."""

    done: int
    total: int
    running: tuple[str, ...]  # titles, in registry order
    elapsed_s: float


#: How often a run reports its progress while it waits.
PROGRESS_EVERY_S = 0.1


#: The --quick probes whose work is all Python (reading files, a program or two): start_early can run each in
#: a forked copy of this process (procs/forking.py), on a core of its own instead of the interpreter lock's turn.
FORKED_QUICK = ("cuda_stack", "python", "frameworks")


def start_early(names: Sequence[str], target: Target, fork: Sequence[str] = (), quick: bool = False) -> Early:
    """Start these probes now, in the background, for ``target`` (the interpreter the run diagnoses), in a
    new run scope that the run's other probes then share (procs/scope.py): the NVML child (a Python
    start, NVML's own start) then runs while the command imports the checks, instead of after. The run
    adopts each one it would have started itself (the same name, variant and interpreter: RunOptions.early
    holds what this returns); one it does not need is left to the run's end,
    where kill_all stops its child. Only a probe that waits on a child gains as a thread: the others' work
    is Python's, and would only contend with the import for the one interpreter lock (started here as
    threads, the --quick probes make `check --quick` slower, not faster).

    ``fork`` names --quick probes to start in forked copies of this process instead (FORKED_QUICK), where
    forking is safe (forking.safe: before any thread); otherwise they are left to run_probes, as threads.
    ``quick``: the others start as `check --quick` runs them, so that its run adopts them."""
    started: dict[str, Started] = {}
    scope = RunScope()
    if fork and forking.safe():
        probes = select_probes(fork, quick=True)
        copies = forking.fork_all([_work_of(p, target, scope) for p in probes])  # every copy before the first thread
        for probe, copy in zip(probes, copies):
            if copy is None:
                continue  # not forked: run_probes runs it as a thread
            slot: dict[str, Any] = {}
            thread = threading.Thread(target=_collect, args=(probe, copy, slot), name=f"probe-{probe.name}",
                                      daemon=True)
            thread.start()
            started[probe.name] = Started(probe.name, probe.variant, target, thread, slot, time.monotonic())
    for probe in select_probes(names, quick=True) if quick else PROBES:
        if probe.name in names and probe.name not in started:
            slot = {}
            thread = threading.Thread(target=_run_one, args=(probe, slot, target, scope), name=f"probe-{probe.name}",
                                      daemon=True)
            thread.start()
            started[probe.name] = Started(probe.name, probe.variant, target, thread, slot, time.monotonic())
    return Early(scope, tuple(started.values()))


def _work_of(probe: Probe, target: Target, scope: RunScope) -> Callable[[], dict[str, Any]]:
    """What a forked copy runs for ``probe``: the probe, as a thread would, returning its slot."""

    def work() -> dict[str, Any]:
        slot: dict[str, Any] = {}
        _run_one(probe, slot, target, scope)
        return slot

    return work


def _collect(probe: Probe, copy: forking.Copy, slot: dict[str, Any]) -> None:
    """Wait for a forked probe's copy and fill its slot as _run_one would have; a copy that sent nothing
    (killed, or its facts could not be written as JSON) is the probe's error."""
    start = time.monotonic()
    sent, ended = copy.wait()
    if isinstance(sent, dict) and isinstance(sent.get("record"), dict):
        slot.update(sent)
        return
    slot["record"] = {"status": PROBE_ERROR, "title": probe.title, "duration_s": round(time.monotonic() - start, 3),
                      "error": f"its process ({ended}) ended before it sent its facts"}


def run_probes(probes: Sequence[Probe], options: RunOptions,
               on_progress: Optional[Callable[[Progress], None]] = None) -> dict[str, Any]:
    """Run the probes side by side, each given ``options.interpreter``, adopting those of ``options.early``
    started for the same run of them. ``options.deadline`` (a time.monotonic() value) is a hard end for
    the whole run: probes unfinished then are reported as timed out, and their children are killed.
    ``on_progress`` is called every PROGRESS_EVERY_S while probes run, and once when all have ended."""
    deadline = options.deadline
    target = options.interpreter
    scope = options.early.scope
    results: dict[str, dict[str, Any]] = {}
    threads = []
    begun = time.monotonic()
    early = {s.name: s for s in options.early.probes}
    for probe in probes:
        early_run = early.get(probe.name)
        if early_run is not None and (early_run.variant, early_run.target) == (probe.variant, target):
            results[probe.name] = early_run.slot
            threads.append((probe, early_run.thread, early_run.began))
            continue
        slot: dict[str, Any] = {}
        results[probe.name] = slot
        thread = threading.Thread(target=_run_one, args=(probe, slot, target, scope), name=f"probe-{probe.name}",
                                  daemon=True)
        thread.start()
        threads.append((probe, thread, time.monotonic()))
    processes.load()  # the run's end kills its children with psutil: imported now, while this thread would only wait
    pending = list(threads)
    while pending:
        now = time.monotonic()
        # a probe stops being waited for when it ends or its own limit (or the run's deadline) passes
        pending = [(p, t, s) for p, t, s in pending if t.is_alive() and now < _limit(p, s, deadline)]
        if on_progress:
            on_progress(Progress(len(threads) - len(pending), len(threads), tuple(p.title for p, _, _ in pending),
                                 now - begun))
        if pending:
            probe, thread, started = pending[0]
            thread.join(max(0.0, min(PROGRESS_EVERY_S, _limit(probe, started, deadline) - now)))
    late = _stop_at_deadline(threads, deadline)
    facts: dict[str, Any] = {"probes": {}}
    for probe, thread, started in threads:
        slot = results[probe.name]
        if thread.is_alive() or probe.name in late:
            # why it was stopped, as data (reason) for the checks, and as a sentence (error) for people
            reason, why = (STOPPED_DEADLINE, DEADLINE_SENTENCE) if probe.name in late else \
                (STOPPED_TIMEOUT, f"no answer within {probe.timeout_s:g} s")
            facts["probes"][probe.name] = {"status": PROBE_TIMEOUT,
                                           "duration_s": round(late.get(probe.name, time.monotonic()) - started, 3),
                                           "title": probe.title, "error": why, "reason": reason}
            if probe.keeps_partial and probe.name in late:
                facts.update(slot.get("facts", {}))  # what it had read when its children were stopped
            continue
        facts["probes"][probe.name] = slot["record"]
        facts.update(slot.get("facts", {}))
    return facts


#: At the deadline, how long the stopped probes get to hand in what their children had printed.
STOP_GRACE_S = 2.0


def _stop_at_deadline(threads: Sequence[tuple[Probe, threading.Thread, float]],
                      deadline: Optional[float]) -> dict[str, float]:
    """Past the --timeout deadline: stop every child at once, then give the unfinished probes a moment to
    assemble what their children printed before they were stopped (the NVML facts of the GPUs already
    read, say). Returns the probes that were unfinished at the deadline, with when it passed."""
    now = time.monotonic()
    unfinished = [(p, t) for p, t, _ in threads if t.is_alive()]
    if deadline is None or now < deadline or not unfinished:
        return {}
    kill_all()
    end = time.monotonic() + STOP_GRACE_S
    for _, thread in unfinished:
        thread.join(max(0.0, end - time.monotonic()))
    return {p.name: now for p, _ in unfinished}


def _limit(probe: Probe, started: float, deadline: Optional[float]) -> float:
    end = started + probe.timeout_s
    return end if deadline is None else min(end, deadline)


def _run_one(probe: Probe, slot: dict[str, Any], target: Target, scope: RunScope) -> None:
    start = time.monotonic()
    record: dict[str, Any] = {"status": PROBE_OK, "title": probe.title}
    mark(f"probe {probe.name} begins")
    try:
        slot["facts"] = probe.run(target, scope)
    except Exception as exc:  # noqa: BLE001 - any probe failure must become a finding
        record.update(status=PROBE_ERROR, error=f"{type(exc).__name__}: {exc}",
                      traceback_tail=traceback.format_exc()[-1500:])
    record["duration_s"] = round(time.monotonic() - start, 3)
    mark(f"probe {probe.name} ends")
    slot["record"] = record
