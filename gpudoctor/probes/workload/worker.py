"""Workload worker: proves a framework computes on one GPU, and measures how fast.

Run as ``python -m gpudoctor.probes.workload.worker FRAMEWORK DEVICES [--deep] [--facts]`` where
DEVICES is a comma-separated list of CUDA ordinals, "cpu" (on a machine without a GPU the training
step still runs on the CPU, to prove the code path), or "-": read them from stdin once the parent
has counted the GPUs. With --facts it first prints what the framework probe's worker prints (it is
that probe's child too, so the framework is imported once per check). The framework is imported once and every GPU gets
its own thread, so four GPUs cost one import and one set of CPU references, not four; each GPU's
result is printed as its own JSON line the moment it is ready, so a GPU that hangs does not take
the others' results with it (the parent keeps every complete line). Every result is checked
against a float64 CPU reference with a tolerance fit for the precision (float32 ~1e-5, tf32 and
bf16 ~1e-2; NaN never passes). Throughput is timed with device events after warm-up, median of
repeats, on random data, within a bounded share of the GPU's free memory; a busy GPU is skipped,
not loaded.

This module is the entry point only: each framework's work is in the module its row in
gpudoctor/frameworks_table.py names (probes/frameworks/children.py), what they share in common.py,
the GPU and process locks in locks.py. Those modules import their framework inside their run_KEY
function, so the child imports only the framework it was asked for.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
import threading
import time
import traceback
from concurrent.futures import Future
from typing import Any, Callable, Optional

from gpudoctor import frameworks_table
from gpudoctor.procs import protocol
from gpudoctor.procs.ending import end_child
from gpudoctor.probes.frameworks import children
from gpudoctor.probes.frameworks.asking import beside
from gpudoctor.probes.frameworks.worker import import_failure, report
from gpudoctor.probes.libnames import family_of, mapped_libraries
from gpudoctor.probes.smoke import worker as smoke_worker
from gpudoctor.probes.workload import EVERY_GPU, THREADED, gpus_by_model
from gpudoctor.probes.workload.locks import gpu_lock
from gpudoctor.trace import mark


def run_device(framework: str, device: str, deep: bool, started: float, import_s: Optional[float],
               checks_on: Optional[str] = None) -> None:
    """One GPU's whole workload, printed when done. ``import_s``: how long importing the framework took
    this process (shared by its GPUs), None where the import failed before. ``checks_on``: see
    checks_elsewhere."""
    begun = time.monotonic()
    try:
        result = children.run(framework)(device, deep, checks_on)
    except BaseException as exc:  # noqa: BLE001 - the import or CUDA init failing is the finding
        result = {"framework": framework, "device": device, "error": f"{type(exc).__name__}: {exc}"[:800],
                  "traceback_tail": traceback.format_exc()[-1200:]}
    now = time.monotonic()
    result.update(duration_s=round(now - started, 3), work_s=round(now - begun, 3))
    if import_s is not None:
        result["import_s"] = round(import_s, 3)
    training = result.get("training")
    if os.environ.get("GPUDOCTOR_PINNED_GPU") and isinstance(training, dict) and device != "cpu":
        training["device"] = f"cuda:{device}"  # the framework called its only GPU 0; the report says which it is
    protocol.emit("workload", result, default=float)
    mark(f"{framework} {device}: printed")


#: How long a child waits for the smoke kernel's hosted runs before it exits: the smoke probe's own limit
#: for a child of its own (runner.SMOKE_TIMEOUT_S).
HOSTED_WAIT_S = 30.0


class SmokeHost:
    """The smoke kernel's runs from this child (``--smoke``): started on the GPUs placement gives the child
    once the framework has started CUDA and every GPU's context is made or under way (contexts_early: during
    the import, or once the facts are out), or after the facts where it never starts CUDA (a CPU-only build,
    a failed import); started once, joined before exit."""

    def __init__(self, wanted: bool):
        self.wanted = wanted
        self._lock = threading.Lock()
        self._threads: Optional[list[threading.Thread]] = None
        self._began = 0.0

    def start(self, devices: list[str]) -> None:
        with self._lock:
            if not self.wanted or self._threads is not None:
                return
            self._began = time.monotonic()
            self._threads = smoke_worker.host([d for d in devices if d != "cpu"], lambda o: gpu_lock(o, shared=True))

    def join(self) -> None:
        """Wait for the runs, at most HOSTED_WAIT_S from their start: a kernel that hangs must not hold the
        child, and the workloads' results with it, to the workload's own limit; its GPU then gets a smoke
        child of its own, bounded by the smoke probe's limit."""
        end = self._began + HOSTED_WAIT_S
        for thread in self._threads or []:
            thread.join(max(0.0, end - time.monotonic()))


def cuda_early(module: str, facts_done: threading.Event) -> None:
    """Start CUDA as the framework's own first question does (cudaGetDeviceCount, through the CUDA runtime
    its extension ``module`` loaded), as soon as that module is in and while the rest of the framework still
    imports: cuInit takes longer the more GPUs are visible, and ctypes leaves the interpreter lock free
    meanwhile. The runtime then loads libcuda by its own search, as it would have for the framework, and the
    framework's own call later finds CUDA started or its error kept. Nothing where that module never loads (a
    failed or CPU-only import), or where not exactly one libcudart is in the process: a runtime linked in
    statically, or two, are left to the framework."""
    while module not in sys.modules:
        if facts_done.wait(0.01):
            return
    path = mapped_one("libcudart")
    if path is None:
        return
    try:
        cudart = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        mark(f"cuda early: starting CUDA through {path}")
        with beside("cuda_init", "import"):  # a driver that kills the child here: it died starting CUDA
            cudart.cudaGetDeviceCount(ctypes.byref(ctypes.c_int()))
    except (OSError, AttributeError):  # not loaded after all, or not a runtime that has the call
        return


def mapped_one(family: str) -> Optional[str]:
    """The one file of library ``family`` (libnames) that this process has mapped; None for none, or for
    two different ones."""
    try:
        with open("/proc/self/maps") as fh:
            found = [p for p in mapped_libraries(fh.read()) if family_of(os.path.basename(p)) == family]
    except OSError:
        return None
    return found[0] if len(found) == 1 else None


def contexts_early(imported: threading.Event, facts_done: threading.Event,
                   then: Callable[[], None] = lambda: None) -> None:
    """Make the GPUs' CUDA contexts through ctypes, ahead of the framework's first use of each: PyTorch makes
    a GPU's context at that GPU's first use, holding the interpreter lock while the driver works (0.1-0.6 s
    a GPU on 4 x H200), so each GPU's thread waited for the others' contexts before it could do anything.
    Through ctypes the lock is free while the driver works, and PyTorch later finds the contexts made.
    GPU 0's first, as soon as the framework has started CUDA; then the other GPUs' one by one while the
    framework still imports (``imported`` not yet set), when the driver has nothing else of this child's to
    do. Those left once the import is done wait until the facts are out, then get a thread each (they end
    with the process): the driver makes one context at a time, across processes, so they would hold back
    the facts' first kernel on GPU 0 and the other frameworks' CUDA starts (0.9 s on 4 x H200), though those
    GPUs have less to do than GPU 0, which makes the checks once per model. Only once the framework has
    loaded libcuda and started CUDA itself (RTLD_NOLOAD: this never loads a libcuda, nor picks one the
    framework would not have); never, where it does not by the end of its facts (no GPU, a CPU-only build).
    ``then``: called once every context is made or under way (the smoke kernel's host starts, whose runs
    would make the GPUs' contexts themselves)."""
    cuda, count = None, ctypes.c_int()
    while True:
        if cuda is None:
            try:
                cuda = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
            except OSError:
                pass
        if cuda is not None and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0:  # before cuInit: not initialised
            break
        if facts_done.wait(0.01):
            return
    mark(f"contexts early: CUDA started, {count.value} GPUs")
    if count.value:  # GPU 0's first: the framework's own first kernel runs there
        _retain_context(cuda, 0)
    left = list(range(1, count.value))
    while left and not imported.is_set():
        _retain_context(cuda, left.pop(0))
    if left:
        facts_done.wait()
        mark(f"contexts early: GPUs {left} after the facts")
    for ordinal in left:
        threading.Thread(target=_retain_context, args=(cuda, ordinal), name=f"context{ordinal}", daemon=True).start()
    then()


def _retain_context(cuda: Any, ordinal: int) -> None:
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    with beside("cuda_init", "import"):
        made = cuda.cuDeviceGet(ctypes.byref(dev), ordinal) == 0 and cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    if made:
        mark(f"contexts early: GPU {ordinal} has its context")


def checks_elsewhere(devices: list[str], seen: list[Any]) -> dict[str, str]:
    """GPU -> the GPU of the same model whose run makes the correctness checks and the training step for
    it: the first of each model in ``devices``, by the model names the framework's facts gave (``seen``,
    its "devices"). Each further GPU of a model then measures only what differs from GPU to GPU, its
    throughput: every added GPU costs a CUDA context, cuBLAS and cuDNN handles and interpreter time in this
    one process, and a second GPU of one model adds no proof that the framework computes correctly.
    Empty (every GPU makes them all) where a GPU's model is unknown."""
    names = {str(d.get("index")): d.get("name") for d in seen if isinstance(d, dict)}
    if not all(isinstance(names.get(d), str) and names[d] for d in devices):
        return {}
    return {d: gpus[0] for gpus in gpus_by_model(devices, {d: str(names[d]) for d in devices}).values() for d in gpus[1:]}


def read_devices(arg: str) -> list[str]:
    """The GPUs to run on: ``arg`` itself, or with "-" the line the parent writes to stdin once its count
    of the GPUs is done (it starts this child before, so the import overlaps the count); an empty line
    or none: nothing to run. A line that also names a UUID ("3 GPU-..."): the one GPU placement gave
    this child, which pins itself to it (pin) before CUDA starts."""
    line = sys.stdin.readline().strip() if arg == "-" else arg
    ordinals, _, uuid = line.partition(" ")
    if uuid:
        pin(uuid.strip())
    return [d for d in ordinals.split(",") if d]


def pin(uuid: str) -> None:
    """Make ``uuid`` the only GPU CUDA shows this process, as child.pinned does for a child it starts,
    so that the framework starts CUDA on that GPU alone. Only before CUDA has started here: after,
    the variable is read no more, and the child stays on the GPU by its ordinal."""
    if not uuid.upper().startswith(("GPU-", "MIG-")) or cuda_started():
        return
    os.environ["CUDA_VISIBLE_DEVICES"] = uuid
    os.environ["GPUDOCTOR_PINNED_GPU"] = "1"
    mark(f"pinned to {uuid}")


def cuda_started() -> bool:
    """Whether this process has called cuInit: libcuda is loaded (RTLD_NOLOAD never loads it) and
    answers the count instead of CUDA_ERROR_NOT_INITIALIZED."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        return False
    try:
        return cuda.cuDeviceGetCount(ctypes.byref(ctypes.c_int())) != 3
    except AttributeError:  # not a libcuda that can say: assume the worst
        return True


def main(argv: list[str]) -> int:
    framework, deep = argv[0], "--deep" in argv
    started = time.monotonic()
    mark(f"{framework} workload: begins")
    import_s: Optional[float] = None
    facts_done = threading.Event()
    smoke = SmokeHost("--smoke" in argv)
    told: Future = Future()  # the GPUs, read from the parent as soon as it writes them, by a smoke host
    if smoke.wanted:
        threading.Thread(target=_read_told, args=(argv[1], told), name="devices", daemon=True).start()
    imported = threading.Event()  # the framework's import is done (or failed): its facts ask it next
    runtime = getattr(frameworks_table.get(framework), "cuda_runtime_module", "")
    if runtime and framework in EVERY_GPU:  # never pinned to a GPU, which must happen before CUDA starts
        threading.Thread(target=cuda_early, args=(runtime, facts_done), name="cuda-early", daemon=True).start()
        then = (lambda: smoke.start(told.result())) if smoke.wanted else (lambda: None)
        threading.Thread(target=contexts_early, args=(imported, facts_done, then), name="contexts", daemon=True).start()
    early: list[list[str]] = []  # a framework placed once per GPU model learns its GPU before CUDA starts

    def placed() -> None:
        imported.set()
        if framework not in EVERY_GPU and argv[1] == "-" and not smoke.wanted:
            try:
                early.append(read_devices("-"))
            except Exception:  # noqa: BLE001 - never an import failure of the framework's: no GPU is read
                early.append([])

    seen: list[Any] = []  # the GPUs the framework's facts name, with their models
    try:  # once, before the threads: their time is their GPU's own
        if "--facts" in argv:  # the framework probe's child too: say what the framework is and sees first
            info = report(framework, placed)
            if "import_error" not in info:
                import_s = time.monotonic() - started
                seen = info.get("devices") or []
        else:
            importlib.import_module(frameworks_table.module(framework))
            imported.set()
            import_s = time.monotonic() - started
    except BaseException as exc:  # noqa: BLE001 - each GPU's run meets the same error and reports it
        if "--facts" in argv:  # report() itself failed: the framework probe must not wait for a line that never comes
            protocol.emit("framework", import_failure(exc, framework), default=float)
    facts_done.set()
    mark(f"{framework} workload: imported")
    devices = told.result() if smoke.wanted else early[0] if early else read_devices(argv[1])
    mark(f"{framework} workload: read its GPUs {devices}")
    smoke.start(devices)
    elsewhere = checks_elsewhere(devices, seen) if framework in EVERY_GPU and not deep else {}
    if framework not in THREADED or len(devices) == 1:
        for device in devices:
            run_device(framework, device, deep, started, import_s)
    else:
        threads = [threading.Thread(target=run_device, args=(framework, d, deep, started, import_s, elsewhere.get(d)),
                                    name=f"gpu{d}") for d in devices]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    smoke.join()
    return 0


def _read_told(arg: str, told: Future) -> None:
    """The GPUs the parent names, then the smoke kernel's inputs, made while the framework still imports."""
    try:
        told.set_result(read_devices(arg))
    except Exception:  # noqa: BLE001 - as placed(): no GPU is read
        told.set_result([])
    smoke_worker.inputs()


if __name__ == "__main__":
    end_child(main(sys.argv[1:]))
