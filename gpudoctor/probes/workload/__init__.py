"""Framework workloads on the GPUs CUDA enumerates: correctness, a training step, throughput.

Where each framework runs (placement): PyTorch on every GPU, from one child with a thread per GPU, so
every GPU's throughput is measured; JAX, CuPy and TensorFlow once per GPU model, each on a GPU of its
own where there are enough, its child pinned to that GPU before CUDA starts. The driver starts CUDA
contexts one at a time, within a process and across processes, and each context holds host and GPU
memory: a framework that starts every GPU adds to every other child's start and to the memory the
check takes. A GPU that computes wrong or is slow is still found on every GPU, by the smoke kernel
(probes/smoke) and PyTorch; what a framework's build can run depends on the GPU model, which is why
once per model proves it. The run records the placement and why (``workload.placement``). Children take a per-GPU lock around GPU work so timings never overlap
(see locks._lock). With no GPU, PyTorch and TensorFlow still run the training step on the CPU, so the
code path is proven even where acceleration cannot be shown. Each framework's row in
gpudoctor/frameworks_table.py says how it is placed (``threaded``, ``every_gpu``, ``trains_on_cpu``).

Each framework's own module lies here (NAME_child.py, the row's ``child``): its workload, and with it
the rest of what runs under the diagnosed interpreter for that framework (probes/frameworks/children.py).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, NamedTuple, Optional

from gpudoctor import frameworks_table
from gpudoctor.procs.child import ChildResult, child_env, gpu_lock_dir, pinned, run_module
from gpudoctor.procs.scope import RunScope
from gpudoctor.probes.frameworks import CHILD_ENV, FRAMEWORKS, installed
from gpudoctor.probes.interpreter import Target
from gpudoctor.probes.smoke import count_gpus, pin_uuids

WORKER = "gpudoctor.probes.workload.worker"
#: Frameworks that train on the CPU where there is no GPU.
CPU_CAPABLE = tuple(f.key for f in frameworks_table.FRAMEWORKS if f.trains_on_cpu)
#: Frameworks whose child is started at once, before the GPUs are counted, and is the framework probe's
#: child too; the others have children of their own, pinned to their GPU.
THREADED = tuple(f.key for f in frameworks_table.FRAMEWORKS if f.threaded)
#: Frameworks that run on every GPU.
EVERY_GPU = tuple(f.key for f in frameworks_table.FRAMEWORKS if f.every_gpu)
EVERY_GPU_WHY = "every GPU"
ONCE_PER_MODEL_WHY = "once per GPU model"


class Job(NamedTuple):
    framework: str
    devices: list[str]  # CUDA ordinals, or ["cpu"]
    uuid: Any = None  # the one GPU a one-GPU child is pinned to


def placement(frameworks: list[str], ordinals: list[str], names: dict[str, str]) -> dict[str, list[str]]:
    """Framework -> the GPUs (CUDA ordinals) it runs on: PyTorch on every GPU, the others on one GPU of
    each model. Within a model the others take its GPUs from the last one down, one each while they
    last, so that they do not wait on one GPU's lock, and away from GPU 0, where PyTorch also times
    the CPU comparison."""
    models = gpus_by_model(ordinals, names)
    out: dict[str, list[str]] = {}
    others = [f for f in frameworks if f not in EVERY_GPU]
    for f in frameworks:
        if f in EVERY_GPU:
            out[f] = list(ordinals)
            continue
        rank = others.index(f)
        out[f] = sorted((gpus[-1 - rank % len(gpus)] for gpus in models.values()), key=ordinals.index)
    return out


def gpus_by_model(ordinals: list[str], names: dict[str, str]) -> dict[str, list[str]]:
    """Model name -> its GPUs among ``ordinals``, in their order ("" for a GPU whose model is unknown)."""
    models: dict[str, list[str]] = {}
    for o in ordinals:
        models.setdefault(names.get(o) or "", []).append(o)
    return models


def placement_fact(where: dict[str, list[str]], ordinals: list[str]) -> dict[str, Any]:
    """What ran where, and why, for the report: {framework: {"devices": [...], "why": ...}}."""
    return {f: {"devices": gpus, "why": EVERY_GPU_WHY if gpus == list(ordinals) else ONCE_PER_MODEL_WHY}
            for f, gpus in where.items()}


def plan(frameworks: list[str], ordinals: list[str], uuids: dict[str, Any],
         where: Optional[dict[str, list[str]]] = None) -> list[Job]:
    """The children to start: one per threaded framework for its GPUs (placement), one per GPU for the
    others, and on a machine without a GPU one CPU run per framework that can train on the CPU."""
    if not ordinals:
        return [Job(f, ["cpu"]) for f in frameworks if f in CPU_CAPABLE]
    where = where if where is not None else placement(frameworks, ordinals, {})
    jobs = []
    for f in frameworks:
        if f in THREADED:
            jobs.append(Job(f, list(where[f])))
        else:
            jobs.extend(Job(f, [o], uuids.get(o)) for o in where[f])
    return jobs


def workload_env(target: Target) -> dict[str, str]:
    """The workload children's environment: the per-GPU lock folder, each child's slice of the CPU
    cores for its CPU references and BLAS pools (the children share the CPU: one slice per framework
    ``target``, the diagnosed interpreter, holds), and XLA's flags."""
    threads = str(max(2, (os.cpu_count() or 2) // max(1, sum(installed(f, target) for f in FRAMEWORKS))))
    return child_env({**CHILD_ENV, "GPUDOCTOR_LOCK_DIR": gpu_lock_dir(), "GPUDOCTOR_CPU_THREADS": threads,
                      "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
                      "XLA_FLAGS": xla_flags(os.environ.get("XLA_FLAGS", ""))})


#: XLA (JAX; TensorFlow where it compiles with XLA) times candidate kernels for every new matmul while it
#: compiles: 0.5 s of a first JAX matmul on one H200, 0.9 s with four GPUs compiling at once, all of it on
#: the GPU and under the GPU's shared lock, so PyTorch's timed steps on that GPU waited for it. The
#: workloads prove that a framework computes correctly and trains, not how fast its tuned kernels run.
NO_AUTOTUNE = "--xla_gpu_autotune_level=0"


def xla_flags(current: str) -> str:
    """``current`` XLA_FLAGS with autotuning off, unless the user chose an autotuning level there."""
    return current if autotune_levels(current) else f"{current} {NO_AUTOTUNE}".strip()


def autotune_levels(flags: str) -> list[str]:
    """The autotuning levels XLA_FLAGS ``flags`` sets, in order (XLA takes the last)."""
    return [f for f in flags.split() if f.startswith("--xla_gpu_autotune_level=")]


class FrameworkChild:
    """A threaded framework's one child for this run, started at once: it imports the framework and
    prints the framework probe's facts, then reads the GPUs from stdin once they are counted and runs
    the workloads on them. The framework probe reads the facts as soon as they are printed (facts()),
    the workload probe waits for the end (wait()). One child instead of two: on 4 x H200 every process
    that starts CUDA on all four GPUs delays the others (the driver starts CUDA in one process at a time)."""

    def __init__(self, scope: RunScope, framework: str, deep: bool, timeout_s: float, target: Target,
                 smoke: bool = False):
        self.scope, self.framework, self.timeout_s, self.target = scope, framework, timeout_s, target
        self.result = ChildResult()  # filled while the child runs
        self.began = time.monotonic()
        self.facts_at: Optional[float] = None
        self._facts_printed = threading.Event()
        self._smoke_printed = threading.Condition()
        self._done: Future = Future()
        args = [framework, "-", "--facts", *(["--deep"] if deep else []), *(["--smoke"] if smoke else [])]
        threading.Thread(target=self._run, args=(args,), name=f"child-{framework}", daemon=True).start()

    def _run(self, args: list[str]) -> None:
        try:
            run_module(WORKER, args, timeout_s=self.timeout_s, env=workload_env(self.target), on_line=self._line,
                       result=self.result, python=self.target.executable,
                       feed=lambda: devices_line(self.framework, count_gpus(self.scope), self.target))
        except Exception as exc:  # noqa: BLE001 - both probes report a child that could not run
            self.result.start_error = self.result.start_error or f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set_result(self.result)  # first: facts() woken below must see a child that ended
            self._facts_printed.set()
            with self._smoke_printed:
                self._smoke_printed.notify_all()

    def _line(self, item: dict[str, Any]) -> None:
        if item.get("section") == "framework":
            self.facts_at = time.monotonic()
            self._facts_printed.set()
        elif item.get("section") == "smoke":
            with self._smoke_printed:
                self._smoke_printed.notify_all()

    def facts(self, timeout_s: float) -> ChildResult:
        """For the framework probe: the child as it stood when it printed the facts (as if it had ended
        there); the whole child if it ended first without them (a crash); timed out if neither came
        within ``timeout_s`` (the child goes on, bounded by its own limit, for the workloads)."""
        self._facts_printed.wait(timeout_s)
        if self.facts_at is not None:
            lines = [line for line in list(self.result.lines) if line.get("section") in ("started", "stage", "framework")]
            return ChildResult(lines=lines, returncode=0, stderr_tail=self.result.stderr_so_far(),
                               duration_s=self.facts_at - self.began)
        if self._done.done():
            return self._done.result()
        return ChildResult(lines=list(self.result.lines), timed_out=True, stderr_tail=self.result.stderr_so_far(),
                           duration_s=time.monotonic() - self.began)

    def wait(self) -> ChildResult:
        return self._done.result()

    def smoke_runs(self, ordinals: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
        """The smoke kernel's runs this child printed (it hosts the kernel: worker --smoke), by ordinal,
        once there is one for each of ``ordinals``, the child has ended, or ``timeout_s`` has passed."""
        deadline = time.monotonic() + timeout_s
        with self._smoke_printed:
            while True:
                runs = {str(d.get("ordinal")): d for d in self.result.sections("smoke") if isinstance(d, dict)}
                left = deadline - time.monotonic()
                if all(o in runs for o in ordinals) or self._done.done() or left <= 0:
                    return runs
                self._smoke_printed.wait(left)


#: The framework whose one child runs on every GPU and so can host the smoke kernel (smoke.worker.host).
SMOKE_HOST = next((f for f in THREADED if f in EVERY_GPU), None)


def framework_child(scope: RunScope, framework: str, deep: bool, timeout_s: float, target: Target,
                    smoke: bool = False) -> FrameworkChild:
    """The one child of the run ``scope`` for a threaded framework, started by whichever probe asks first.
    ``smoke``: the run's smoke probe takes its kernel runs from this child where it can host them
    (hosted_smoke); every probe of a run passes the same value."""
    return scope.once(f"framework child {framework}",
                      lambda: FrameworkChild(scope, framework, deep, timeout_s, target, smoke and framework == SMOKE_HOST))


def framework_facts(scope: RunScope, deep: bool, timeout_s: float,
                    smoke: bool = False) -> Callable[[str, float, Target], Optional[ChildResult]]:
    """For the framework probe when the workloads run too: a threaded framework's facts come from its
    workload child (None for the others: TensorFlow keeps its own framework-probe child)."""
    def facts(name: str, wait_s: float, target: Target) -> Optional[ChildResult]:
        if name not in THREADED:
            return None
        try:
            child = framework_child(scope, name, deep, timeout_s, target, smoke)
        except Exception:  # noqa: BLE001 - it could not even be set up: the probe starts its own child
            return None
        return child.facts(wait_s)

    return facts


def hosted_smoke(scope: RunScope, deep: bool, timeout_s: float,
                 target: Target) -> Callable[[list[str], float], dict[str, dict[str, Any]]]:
    """For the smoke probe when the workloads run too: the kernel's runs from PyTorch's workload child,
    which has started CUDA on every GPU anyway, so the kernel costs no process and no context of its own
    (each one the driver starts delays every other child's). Empty where PyTorch is not installed."""
    def runs(ordinals: list[str], wait_s: float) -> dict[str, dict[str, Any]]:
        if SMOKE_HOST is None or not installed(SMOKE_HOST, target):
            return {}
        return framework_child(scope, SMOKE_HOST, deep, timeout_s, target, smoke=True).smoke_runs(ordinals, wait_s)

    return runs


def probe_workload(scope: RunScope, target: Target, timeout_s: float = 90.0, deep: bool = False,
                   smoke: bool = False) -> dict[str, Any]:
    """Count the GPUs while the threaded frameworks' children import (they read their GPUs on stdin:
    1.4 s on 4 x H200); TensorFlow's one-GPU children start once the count has named the GPUs to pin
    them to. ``smoke``: PyTorch's child hosts the smoke kernel too (hosted_smoke)."""
    frameworks = [f for f in FRAMEWORKS if installed(f, target)]
    threaded = {f: framework_child(scope, f, deep, timeout_s, target, smoke) for f in frameworks if f in THREADED}
    counted = count_gpus(scope)  # the smoke probe's count: one child for both
    ordinals, uuids = gpus(counted)
    where = placement(frameworks, ordinals, models(counted))
    jobs = plan(frameworks, ordinals, uuids, where)
    env, args = workload_env(target), ["--deep"] if deep else []
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        children = list(pool.map(lambda job: threaded[job.framework].wait() if job.framework in threaded else
                                 run_module(WORKER, [job.framework, ",".join(job.devices), *args],
                                            timeout_s=timeout_s, env=pinned(env, job.uuid), python=target.executable), jobs))
    runs = [run for job, child in zip(jobs, children) for run in _runs(job, child, timeout_s)]
    out = {"devices": ordinals, "gpu": bool(ordinals), "deep": deep, "runs": runs, "count_s": round(counted.duration_s, 3)}
    if ordinals:
        out["placement"] = placement_fact(where, ordinals)
    return {"workload": out}


def gpus(counted: ChildResult) -> tuple[list[str], dict[str, Any]]:
    """The ordinals the count found, and the UUIDs to pin one-GPU children by."""
    devices = (counted.section("count") or {}).get("devices", [])
    return [str(d["ordinal"]) for d in devices], pin_uuids(devices)


def models(counted: ChildResult) -> dict[str, str]:
    """Ordinal -> the GPU's model name, as CUDA names it."""
    return {str(d["ordinal"]): str(d.get("name") or "") for d in (counted.section("count") or {}).get("devices", [])}


def devices_line(framework: str, counted: ChildResult, target: Target) -> str:
    """What a child started before the count reads: the GPUs placement gives it, and where that is one
    GPU with a UUID, the UUID to pin itself to before CUDA starts ("3 GPU-..."); without a GPU, "cpu"
    for a framework that trains on the CPU, else nothing (the child then exits at once)."""
    ordinals, uuids = gpus(counted)
    if not ordinals:
        return "cpu\n" if framework in CPU_CAPABLE else "\n"
    mine = placement([f for f in FRAMEWORKS if installed(f, target)], ordinals, models(counted)).get(framework, ordinals)
    pin = uuids.get(mine[0]) if len(mine) == 1 and len(ordinals) > 1 else None
    return ",".join(mine) + (f" {pin}" if isinstance(pin, str) else "") + "\n"


def _runs(job: Job, child: ChildResult, timeout_s: float) -> list[dict[str, Any]]:
    """Each of the job's devices' results, in the job's order; a device the child printed nothing for
    (it hung or crashed before that GPU was done) gets the child's failure."""
    printed = {str(d.get("device")): d for d in child.sections("workload") if isinstance(d, dict)}
    what = "the workload" if len(job.devices) == 1 else f"the {job.framework} workload (one process for GPUs {', '.join(job.devices)})"
    runs = []
    for device in job.devices:
        if device in printed:
            runs.append(printed[device])
            continue
        failure = child.failure(what, timeout_s)
        runs.append({"framework": job.framework, "device": device, "error": failure["error"],
                     "stderr_tail": failure["stderr_tail"]})
    return runs
