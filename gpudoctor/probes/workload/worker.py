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
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib
import math
import os
import statistics
import sys
import threading
import time
import traceback
from typing import Any, Callable, Iterator, Optional

from gpudoctor.probes import protocol
from gpudoctor.probes.ending import end_child
from gpudoctor.probes.frameworks.worker import import_failure, report
from gpudoctor.probes.workload import NO_AUTOTUNE, THREADED, autotune_levels, sharing
from gpudoctor.trace import mark

MEMORY_SHARE = 0.25  # never take more than this share of the GPU's free memory
BUSY_USED_SHARE = 0.5  # a GPU with more than half its memory in use is someone else's: skip the heavy work
#: Held around framework state that is global to the process, not the thread (PyTorch's tf32 switch, its
#: default random generator): one GPU's thread must not change it under another's feet.
_GLOBAL_STATE = threading.Lock()
#: Held around the loops timed by the host clock (the training steps): threads of one process share the
#: interpreter, and two GPUs' timed loops interleaved would each be timed too slow. It does not keep the
#: other threads' untimed work off the interpreter: a warm step can still read somewhat slow.
_HOST_TIMED = threading.Lock()

_references: dict[str, list[Any]] = {}
_references_lock = threading.Lock()


@contextlib.contextmanager
def _lock(name: str, shared: bool = False) -> Iterator[None]:
    """Keep measurements on a GPU apart from any other work on it: timed work holds the GPU's lock alone,
    untimed work (a correctness check, a first step that compiles) holds it ``shared`` with other untimed
    work, so compilations in different frameworks overlap each other but never a measurement. A compile
    that runs nothing on the GPU (XLA without autotuning: xla_autotunes) takes no lock: it may share the
    CPU, never the GPU, with a measurement (the CPU machines here have 16-64 cores). Also
    serialises pinned host copies between GPUs (they share host memory bandwidth), and is taken by the
    multi-GPU tests. The parent passes the folder.

    The rule that keeps this free of deadlocks, between threads (flock locks of one process do not nest:
    each acquisition opens the file anew) and with the multi-GPU ranks (each holds its GPU's lock while
    it blocks in a collective): a thread holds at most one GPU's lock; it never asks for a GPU's lock
    while holding _GLOBAL_STATE, _HOST_TIMED or a reference() lock; and it lets go of a shared lock
    before asking for the same GPU alone (host_timed)."""
    folder = os.environ.get("GPUDOCTOR_LOCK_DIR")
    if not folder:
        yield
        return
    with open(os.path.join(folder, f"{name}.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cuda_index(device: str) -> int:
    """The index a framework in this child gives the GPU that ``device`` (a CUDA ordinal in gpudoctor's
    environment) names. The parent may start a one-GPU child with only that GPU visible
    (GPUDOCTOR_PINNED_GPU, CUDA_VISIBLE_DEVICES set to its UUID), so that the framework initialises that
    GPU alone: the GPU is then 0 in here. Reports and locks keep the ordinal."""
    return 0 if os.environ.get("GPUDOCTOR_PINNED_GPU") else int(device)


def reference(key: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, once per process: every GPU is checked against the same float64 CPU reference
    (the same seeds), so with one thread per GPU the CPU works it out once, not once per GPU. A
    failed computation is not kept; the next GPU tries again."""
    with _references_lock:
        entry = _references.setdefault(key, [threading.Lock(), None, False])
    with entry[0]:
        if not entry[2]:
            entry[1], entry[2] = compute(), True
        return entry[1]


_uuids: dict[str, Optional[str]] = {}


def _uuid(device: str) -> Optional[str]:
    """The UUID of the GPU ``device`` names, asked of CUDA once the framework has started it."""
    if _uuids.get(device) is None:
        _uuids[device] = sharing.cuda_uuid(cuda_index(device))
    return _uuids[device]


def gpu_lock(device: str, shared: bool = False) -> Any:
    """The GPU's lock (see _lock); the CPU has none."""
    return _lock(f"gpu{device}", shared) if device != "cpu" else contextlib.nullcontext()


def _step(results: dict[str, Any], name: str, fn: Callable[[], dict[str, Any]], lock: str = "shared") -> None:
    """Run one step into ``results[name]`` holding its GPU's lock ``lock``: "alone" for a step timed with
    device events (throughput), "shared" for untimed work, "own" for a step that takes it itself (the
    training step, timed by the host clock: see host_timed)."""
    start = time.monotonic()
    device = results.get("device", "cpu")
    what = f"{results.get('framework')} {device} {name}"
    timed = lock != "shared" and device != "cpu"
    before: dict[str, Any] = {}
    try:
        mark(f"{what}: asks for the GPU ({lock})")
        with gpu_lock(device, shared=lock == "shared") if lock != "own" else contextlib.nullcontext():
            mark(f"{what}: has it")
            before = sharing.sample(_uuid(device)) if timed else {}
            results[name] = fn()
    except Exception as exc:  # noqa: BLE001 - a failing step is the finding, the others still run
        results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600],
                         "traceback_tail": traceback.format_exc()[-800:]}
    if timed and isinstance(results[name], dict):  # who else was on the GPU: a shared GPU is not a slow one
        results[name]["sharing"] = sharing.judged(before, sharing.sample(_uuid(device)))
    results[name]["duration_s"] = round(time.monotonic() - start, 3)  # waiting for locks included
    mark(f"{what}: done")


def rel_err(got: Any, ref: Any) -> float:
    """||got - ref|| / ||ref|| in float64; NaN anywhere gives inf."""
    import numpy as np

    g, r = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(g)):
        return float("inf")
    return float(np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-300))


def training_verdict(losses: list[float], times: list[float], moved: bool, device: str, **extra: Any) -> dict[str, Any]:
    """One rule for every framework's training step: the loss falls below 0.7 of its start, the weights
    move, nothing is NaN or infinite; the step time is the median of the warm steps (the first five
    include compilation and allocation)."""
    finite = all(math.isfinite(l) for l in losses)
    return {"ok": finite and moved and losses[-1] < 0.7 * losses[0], "loss_first": losses[0], "loss_last": losses[-1],
            "steps": len(losses), "params_updated": moved, "finite": finite, "device": device,
            "warm_step_s": statistics.median(times[5:]), "first_step_s": times[0], "steps_s": sum(times), **extra}


def _check(name: str, err: float, tol: float) -> dict[str, Any]:
    return {"ok": err <= tol, "rel_error": err, "tolerance": tol, "what": name}


# --- PyTorch -----------------------------------------------------------------------------------------

def run_torch(device: str, deep: bool) -> dict[str, Any]:
    import torch

    cuda = device != "cpu"
    dev = torch.device(f"cuda:{cuda_index(device)}" if cuda else "cpu")
    if os.environ.get("GPUDOCTOR_CPU_THREADS"):
        torch.set_num_threads(int(os.environ["GPUDOCTOR_CPU_THREADS"]))
    out: dict[str, Any] = {"framework": "torch", "device": device, "version": torch.__version__}
    if cuda:
        begun = time.monotonic()
        torch.cuda.set_device(dev)
        free, total = torch.cuda.mem_get_info(dev)  # the first call on the GPU: CUDA starts on it
        out.update(name=torch.cuda.get_device_name(dev), free_bytes=free, total_bytes=total,
                   cuda_start_s=round(time.monotonic() - begun, 3))
        if (total - free) / total > BUSY_USED_SHARE:
            out["skipped"] = f"the GPU is busy: {(total - free) / 2**30:.1f} of {total / 2**30:.1f} GiB in use"
            return out
        _step(out, "elementwise", lambda: _torch_elementwise(torch, dev))
        _step(out, "matmul", lambda: _torch_matmul(torch, dev))
        _step(out, "conv", lambda: _torch_conv(torch, dev))
    _step(out, "training", lambda: _torch_training(torch, dev, device, compare_cpu=device == "0"), lock="own")
    if cuda:
        _step(out, "throughput", lambda: _torch_throughput(torch, dev, out["free_bytes"], deep), lock="alone")
    return out


def _torch_elementwise(torch: Any, dev: Any) -> dict[str, Any]:
    def inputs() -> tuple[Any, Any, Any]:
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(1 << 20, generator=g), torch.randn(1 << 20, generator=g)
        return x, y, torch.sin(x.double() * 2.5 + y.double())

    x, y, ref = reference("torch.elementwise", inputs)
    got = torch.sin(x.to(dev) * 2.5 + y.to(dev)).cpu()
    return _check("sin(2.5x+y) float32", rel_err(got, ref), 1e-5)


def _torch_matmul(torch: Any, dev: Any) -> dict[str, Any]:
    def inputs() -> tuple[Any, Any, Any]:
        g = torch.Generator().manual_seed(2)
        a, b = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)
        return a, b, a.double() @ b.double()

    a, b, ref = reference("torch.matmul", inputs)
    with _GLOBAL_STATE:  # tf32 off for the float32 check; another GPU's thread may be timing tf32
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            fp32 = (a.to(dev) @ b.to(dev)).cpu()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    bf16 = rel_err((a.to(dev, torch.bfloat16) @ b.to(dev, torch.bfloat16)).float().cpu(), ref)
    checks = [_check("matmul float32", rel_err(fp32, ref), 1e-5), _check("matmul bfloat16", bf16, 1e-2)]
    return {"ok": all(c["ok"] for c in checks), "checks": checks}


def _torch_conv(torch: Any, dev: Any) -> dict[str, Any]:
    """A cuDNN convolution, forward and backward, against float64 on the CPU (cuDNN may use tf32)."""
    def inputs() -> tuple[Any, ...]:
        g = torch.Generator().manual_seed(3)
        x, w = torch.randn(8, 16, 32, 32, generator=g), torch.randn(32, 16, 3, 3, generator=g)
        xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
        yr = torch.nn.functional.conv2d(xr, wr, padding=1)
        (yr * yr).sum().backward()
        return x, w, yr.detach(), xr.grad, wr.grad

    x, w, yr, gxr, gwr = reference("torch.conv", inputs)
    xd, wd = x.to(dev).requires_grad_(), w.to(dev).requires_grad_()
    yd = torch.nn.functional.conv2d(xd, wd, padding=1)
    (yd * yd).sum().backward()
    checks = [_check("conv2d forward", rel_err(yd.detach().cpu(), yr), 1e-2),
              _check("conv2d grad input", rel_err(xd.grad.cpu(), gxr), 1e-2),
              _check("conv2d grad weight", rel_err(wd.grad.cpu(), gwr), 1e-2)]
    return {"ok": all(c["ok"] for c in checks), "checks": checks, "cudnn": bool(torch.backends.cudnn.is_available())}


def _torch_training(torch: Any, dev: Any, device: str, compare_cpu: bool = False) -> dict[str, Any]:
    """A small CNN learns a synthetic task: the loss must fall, weights must move, nothing may be NaN."""
    def data(device: Any) -> tuple[Any, Any]:
        g = torch.Generator().manual_seed(4)
        x = torch.randn(256, 3, 16, 16, generator=g)
        yl = (x[:, 0, :8].mean(dim=(1, 2)) > x[:, 1, 8:].mean(dim=(1, 2))).long()
        return x.to(device), yl.to(device)

    def model(device: Any) -> Any:
        with _GLOBAL_STATE:  # the weights come from PyTorch's one default generator
            torch.manual_seed(5)
            net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
                                      torch.nn.Flatten(), torch.nn.Linear(256, 2))
        return net.to(device)

    def train(where: Any, steps: int, amp: bool) -> tuple[list[float], list[float], bool]:
        net, (x, y) = model(where), data(where)
        before = [p.detach().clone() for p in net.parameters()]
        adam = _TorchAdam(torch, list(net.parameters()), lr=1e-2)
        losses: list[float] = []
        times: list[float] = []

        def one_step() -> None:
            t = time.perf_counter()
            with torch.autocast(device_type=where.type, dtype=torch.bfloat16, enabled=amp):
                loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            adam.step()
            losses.append(float(loss.detach()))  # float() synchronises, so the step time is real
            times.append(time.perf_counter() - t)

        host_timed(one_step, steps, device if where.type == "cuda" else "cpu")
        moved = any(not torch.equal(a, b.detach()) for a, b in zip(before, net.parameters()))
        return losses, times, moved

    cuda = device != "cpu"
    amp = cuda and torch.cuda.is_bf16_supported()
    losses, times, moved = train(dev, 30, amp)
    out = training_verdict(losses, times, moved, str(dev), mixed_precision="bf16" if amp else None)
    if cuda and compare_cpu:  # the same CPU serves every GPU: compare once (on cuda:0), not once per GPU
        begun = time.monotonic()
        _, cpu_times, _ = train(torch.device("cpu"), 10, False)
        out["cpu_compare_s"] = time.monotonic() - begun
        out["cpu_warm_step_s"] = statistics.median(cpu_times[3:])
        out["speedup_vs_cpu"] = out["cpu_warm_step_s"] / out["warm_step_s"]
    return out


class _TorchAdam:
    """Adam (Kingma & Ba; PyTorch's defaults), written out: ``torch.optim`` imports TorchDynamo and
    Triton the first time an optimizer is made, 1.3 s on a laptop CPU and 3 s on the H200 machines,
    a compiler start-up that proves nothing about the GPU and was the largest part of the step."""

    def __init__(self, torch: Any, params: list[Any], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.torch, self.params, self.lr, self.betas, self.eps, self.t = torch, params, lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def step(self) -> None:
        """One update from the gradients ``backward()`` left, which it then clears."""
        self.t += 1
        b1, b2 = self.betas
        with self.torch.no_grad():
            for p, m, v in zip(self.params, self.m, self.v):
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                denom = (v / (1 - b2**self.t)).sqrt_().add_(self.eps)
                p.addcdiv_(m, denom, value=-self.lr / (1 - b1**self.t))
                p.grad = None


def host_timed(step: Callable[[], None], steps: int, device: str) -> None:
    """``steps`` calls of ``step``, each timed by the host clock: the first (compilation, allocation,
    library loading) shares the GPU with other untimed work; the rest hold the GPU's lock alone
    (``device``: an ordinal, or "cpu"), not interleaved with another GPU's timed loop of this process
    (_HOST_TIMED, taken after the GPU's lock: the rule in _lock)."""
    with gpu_lock(device, shared=True):
        mark(f"{device} first step: has the GPU (shared)")
        step()
    mark(f"{device} timed steps: ask for the GPU alone")
    with gpu_lock(device), _HOST_TIMED:
        mark(f"{device} timed steps: have it")
        for _ in range(steps - 1):
            step()


def _events_median(torch: Any, fn: Callable[[], Any], warmup: int, repeats: int, batch: int = 1) -> float:
    """Seconds per call: device events around ``batch`` back-to-back calls, median over ``repeats``."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0 / batch)
    return statistics.median(times)


#: The pinned host<->device copy, by --deep: a PCIe link runs at full speed long before 64 MiB
#: (benchmarks/throughput_reference.py sets it beside a 1 GiB copy), and these copies hold one lock for
#: all GPUs (they share the host's memory), so on four GPUs each GPU's copy time is paid four times.
PINNED_BYTES = {False: 64 << 20, True: 256 << 20}
#: An idle GPU runs its PCIe link at a lower speed and raises it under load: host-to-device copies of
#: 64 MiB after two warm-up copies read 44-55 GB/s on an H200 whose link gives 55, device-to-host copies
#: right after them 55 every time. The link is kept busy this long first (do_bench warms up 25 ms too).
LINK_WARMUP_S = 0.025


def _busy_for(torch: Any, fn: Callable[[], Any], seconds: float) -> None:
    """``fn()`` again and again, each waited for, until ``seconds`` have passed."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        fn()
        torch.cuda.synchronize()


def _torch_throughput(torch: Any, dev: Any, free: int, deep: bool) -> dict[str, Any]:
    """Dense matmul TFLOP/s, device-copy bandwidth (bytes read + written), pinned host<->device bandwidth."""
    budget = int(free * MEMORY_SHARE)
    repeats = 30 if deep else 10
    out: dict[str, Any] = {"memory_budget_bytes": budget, "repeats": repeats}
    n = 8192
    while 3 * n * n * 4 > budget and n > 1024:
        n //= 2
    g = torch.Generator(device=dev).manual_seed(6)
    for label, dtype in (("bf16", torch.bfloat16), ("tf32", torch.float32)):
        a = torch.randn(n, n, device=dev, dtype=dtype, generator=g)
        b = torch.randn(n, n, device=dev, dtype=dtype, generator=g)
        if dtype == torch.bfloat16:
            t = _events_median(torch, lambda: a @ b, 3, repeats, batch=4)
        else:
            with _GLOBAL_STATE:  # tf32 on for this timing only; another GPU's thread may be checking float32
                old = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = True
                try:
                    t = _events_median(torch, lambda: a @ b, 3, repeats, batch=4)
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = old
        out[f"matmul_{label}_tflops"] = 2 * n**3 / t / 1e12
        del a, b
    out["matmul_n"] = n
    size = min(1 << 30, budget // 2)
    src = torch.empty(size, dtype=torch.uint8, device=dev).random_(generator=g)
    dst = torch.empty_like(src)
    t = _events_median(torch, lambda: dst.copy_(src), 3, repeats)
    out["device_copy_gbs"] = 2 * size / t / 1e9  # bytes read + bytes written
    out["device_copy_bytes"] = size
    del src, dst
    size = min(PINNED_BYTES[deep], budget // 2)
    host = torch.empty(size, dtype=torch.uint8).pin_memory()
    devbuf = torch.empty(size, dtype=torch.uint8, device=dev)
    def h2d() -> Any:
        return devbuf.copy_(host, non_blocking=True)

    with _lock("host_copies"):
        _busy_for(torch, h2d, LINK_WARMUP_S)
        out["h2d_gbs"] = size / _events_median(torch, h2d, 2, repeats) / 1e9
        out["d2h_gbs"] = size / _events_median(torch, lambda: host.copy_(devbuf, non_blocking=True), 2, repeats) / 1e9
    out["pinned_bytes"] = size
    out["ok"] = True
    return out


# --- TensorFlow / Keras ------------------------------------------------------------------------------

def run_tensorflow(device: str, deep: bool) -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf

    cuda = device != "cpu"
    name = f"/GPU:{cuda_index(device)}" if cuda else "/CPU:0"
    out: dict[str, Any] = {"framework": "tensorflow", "device": device, "version": tf.__version__}
    with tf.device(name):
        if cuda:
            x, y, ew = reference("np.elementwise", lambda: _np_elementwise(np))
            _step(out, "elementwise", lambda: _check("sin(2.5x+y) float32", rel_err(
                tf.sin(2.5 * tf.constant(x) + tf.constant(y)).numpy(), ew), 1e-5))
            _step(out, "matmul", lambda: _tf_matmul(tf, np))
            _step(out, "conv", lambda: _tf_conv(tf, np))
        _step(out, "training", lambda: _tf_training(tf, np, device, name, amp=_tf_bf16(tf, cuda, device)), lock="own")
    return out


def _rand(np: Any, seed: int, *shape: int) -> Any:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _np_elementwise(np: Any) -> tuple[Any, Any, Any]:
    x, y = _rand(np, 1, 1 << 20), _rand(np, 2, 1 << 20)
    return x, y, np.sin(2.5 * x.astype(np.float64) + y)


def _np_matmul(np: Any) -> tuple[Any, Any, Any]:
    a, b = _rand(np, 3, 1024, 1024), _rand(np, 4, 1024, 1024)
    return a, b, a.astype(np.float64) @ b


def _tf_matmul(tf: Any, np: Any) -> dict[str, Any]:
    a, b, ref = reference("np.matmul", lambda: _np_matmul(np))
    got = tf.matmul(tf.constant(a), tf.constant(b)).numpy()  # TF may use tf32 on Ampere and newer
    return _check("matmul float32 (tf32 allowed)", rel_err(got, ref), 1e-2)


def _tf_conv(tf: Any, np: Any) -> dict[str, Any]:
    x, w = _rand(np, 5, 8, 32, 32, 16), _rand(np, 6, 3, 3, 16, 32)
    xv, wv = tf.Variable(x), tf.Variable(w)
    with tf.GradientTape() as tape:
        y = tf.nn.conv2d(xv, wv, 1, "SAME")
        loss = tf.reduce_sum(y * y)
    gx, gw = tape.gradient(loss, [xv, wv])
    with tf.device("/CPU:0"):
        xr, wr = tf.Variable(x.astype(np.float64)), tf.Variable(w.astype(np.float64))
        with tf.GradientTape() as tape:
            yr = tf.nn.conv2d(xr, wr, 1, "SAME")
            lr = tf.reduce_sum(yr * yr)
        rx, rw = tape.gradient(lr, [xr, wr])
    checks = [_check("conv2d forward", rel_err(y.numpy(), yr.numpy()), 1e-2),
              _check("conv2d grad input", rel_err(gx.numpy(), rx.numpy()), 1e-2),
              _check("conv2d grad weight", rel_err(gw.numpy(), rw.numpy()), 1e-2)]
    return {"ok": all(c["ok"] for c in checks), "checks": checks}


def _tf_bf16(tf: Any, cuda: bool, device: str) -> bool:
    """bf16 mixed precision where the GPU computes in bf16 natively (compute capability 8.0 and newer)."""
    if not cuda:
        return False
    try:
        gpu = tf.config.list_physical_devices("GPU")[cuda_index(device)]
        major = (tf.config.experimental.get_device_details(gpu).get("compute_capability") or (0, 0))[0]
    except (IndexError, ValueError, RuntimeError):
        return False
    return major >= 8


def _tf_training(tf: Any, np: Any, device: str, name: str, amp: bool = False) -> dict[str, Any]:
    """A small CNN learns the synthetic task with Keras; with ``amp`` its layers compute in bf16 and keep
    float32 weights (Keras's "mixed_bfloat16" policy, per layer, so no global state changes), and the
    logits come out in float32 for the loss."""
    x = _rand(np, 7, 256, 16, 16, 3)
    y = (x[:, :8, :, 0].mean(axis=(1, 2)) > x[:, 8:, :, 1].mean(axis=(1, 2))).astype(np.int64)
    tf.keras.utils.set_random_seed(8)
    policy = "mixed_bfloat16" if amp else "float32"
    model = tf.keras.Sequential([tf.keras.Input((16, 16, 3)),
                                 tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu", dtype=policy),
                                 tf.keras.layers.GlobalAveragePooling2D(dtype=policy), tf.keras.layers.Dense(2, dtype=policy),
                                 tf.keras.layers.Activation("linear", dtype="float32")])
    opt = tf.keras.optimizers.Adam(1e-2)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    before = [w.numpy().copy() for w in model.trainable_weights]
    losses: list[float] = []
    times: list[float] = []

    def one_step() -> None:
        t = time.perf_counter()
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        opt.apply_gradients(zip(grads, model.trainable_weights))
        losses.append(float(loss))
        times.append(time.perf_counter() - t)

    host_timed(one_step, 30, device)
    moved = any(not np.array_equal(a, w.numpy()) for a, w in zip(before, model.trainable_weights))
    return training_verdict(losses, times, moved, name, mixed_precision="bf16" if amp else None)


# --- JAX and CuPy: element-wise and matmul -----------------------------------------------------------

def run_jax(device: str, deep: bool) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    out: dict[str, Any] = {"framework": "jax", "device": device, "version": jax.__version__,
                           "xla_autotuning": xla_autotunes()}
    if device == "cpu":
        out["skipped"] = "no GPU"
        return out
    dev = jax.devices("gpu")[cuda_index(device)]
    x, y, ew = reference("np.elementwise", lambda: _np_elementwise(np))
    _step(out, "elementwise", lambda: _check("sin(2.5x+y) float32", rel_err(
        _jax_run(jax, lambda x, y: jnp.sin(2.5 * x + y), dev, device, x, y), ew), 1e-5), lock="own")
    a, b, mm = reference("np.matmul", lambda: _np_matmul(np))
    _step(out, "matmul", lambda: _check("matmul float32 (default precision)", rel_err(
        _jax_run(jax, jnp.matmul, dev, device, a, b), mm), 1e-2), lock="own")
    _step(out, "training", lambda: _jax_training(jax, jnp, np, dev, device), lock="own")
    return out


def _jax_run(jax: Any, fn: Callable[..., Any], dev: Any, device: str, *host: Any) -> Any:
    """``fn(*host)`` on the GPU ``dev`` as one compiled program, back on the host. The compile takes no
    lock unless XLA autotunes (xla_autotunes); the copies and the run share the GPU's lock."""
    import numpy as np

    on_dev = jax.sharding.SingleDeviceSharding(dev)
    with xla_compile_lock(device):
        compiled = jax.jit(fn).lower(*(jax.ShapeDtypeStruct(h.shape, h.dtype, sharding=on_dev) for h in host)).compile()
    with gpu_lock(device, shared=True):
        return np.asarray(compiled(*(jax.device_put(h, dev) for h in host)))


def _jax_bf16(dev: Any) -> bool:
    """bf16 where the GPU computes in it natively (compute capability 8.0 and newer; JAX says "9.0")."""
    try:
        return float(getattr(dev, "compute_capability", 0) or 0) >= 8.0
    except (TypeError, ValueError):
        return False


def _jax_training(jax: Any, jnp: Any, np: Any, dev: Any, device: str) -> dict[str, Any]:
    """A two-layer MLP learns the same synthetic task with jax.grad and plain SGD, jit-compiled on the GPU.
    Mixed precision where the GPU has bf16: the matmuls take bf16 inputs, the weights, their updates
    and the softmax stay float32."""
    x = _rand(np, 7, 256, 64)
    y = (x[:, :32].mean(axis=1) > x[:, 32:].mean(axis=1)).astype(np.int32)
    rng = np.random.default_rng(9)
    params = [jax.device_put(p, dev) for p in (rng.standard_normal((64, 32)).astype(np.float32) * 0.1,
                                               np.zeros(32, np.float32),
                                               rng.standard_normal((32, 2)).astype(np.float32) * 0.1,
                                               np.zeros(2, np.float32))]
    xd, yd = jax.device_put(x, dev), jax.device_put(y, dev)
    amp = _jax_bf16(dev)
    low = jnp.bfloat16 if amp else jnp.float32

    def mm(a: Any, b: Any) -> Any:  # lax.dot: jnp.matmul took preferred_element_type only from JAX 0.4.14 on
        return jax.lax.dot(a.astype(low), b.astype(low), preferred_element_type=jnp.float32)

    def loss_fn(p: list[Any]) -> Any:
        logits = mm(jnp.maximum(mm(xd, p[0]) + p[1], 0), p[2]) + p[3]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(yd.shape[0]), yd])

    @jax.jit
    def step(p: list[Any]) -> tuple[list[Any], Any]:
        loss, grads = jax.value_and_grad(loss_fn)(p)
        return [w - 0.5 * g for w, g in zip(p, grads)], loss

    before = [np.asarray(w).copy() for w in params]
    begun = time.perf_counter()
    with xla_compile_lock(device):
        compiled = step.lower(params).compile()
    compile_s = time.perf_counter() - begun
    losses: list[float] = []
    times: list[float] = []

    def one_step() -> None:
        nonlocal params
        t = time.perf_counter()
        params, loss = compiled(params)
        losses.append(float(loss))  # float() waits for the device
        times.append(time.perf_counter() - t)

    host_timed(one_step, 30, device)
    moved = any(not np.array_equal(a, np.asarray(w)) for a, w in zip(before, params))
    return training_verdict(losses, times, moved, str(dev), mixed_precision="bf16" if amp else None,
                            compile_s=compile_s)


def xla_autotunes() -> bool:
    """Whether XLA will time candidate kernels on the GPU while it compiles (its default): then a compile
    is GPU work and holds the GPU's lock shared. Without autotuning (workload.xla_flags turns it off
    unless the user chose a level) it is CPU work: it takes no lock, so another framework's measurement on
    the same GPU need not wait the 0.8 s that compiling the training step takes."""
    levels = autotune_levels(os.environ.get("XLA_FLAGS", ""))
    return not levels or levels[-1] != NO_AUTOTUNE


def xla_compile_lock(device: str) -> Any:
    """What an XLA compile holds: the GPU's lock shared while XLA autotunes on the GPU, else nothing."""
    return gpu_lock(device, shared=True) if xla_autotunes() else contextlib.nullcontext()


def run_cupy(device: str, deep: bool) -> dict[str, Any]:
    import cupy
    import numpy as np

    out: dict[str, Any] = {"framework": "cupy", "device": device, "version": cupy.__version__}
    if device == "cpu":
        out["skipped"] = "no GPU"
        return out
    x, y, ew = reference("np.elementwise", lambda: _np_elementwise(np))
    a, b, mm = reference("np.matmul", lambda: _np_matmul(np))
    with cupy.cuda.Device(cuda_index(device)):  # the current device is this thread's own
        _step(out, "elementwise", lambda: _check("sin(2.5x+y) float32", rel_err(
            cupy.asnumpy(cupy.sin(2.5 * cupy.asarray(x) + cupy.asarray(y))), ew), 1e-5))
        _step(out, "matmul", lambda: _check("matmul float32", rel_err(
            cupy.asnumpy(cupy.asarray(a) @ cupy.asarray(b)), mm), 1e-5))
    return out


RUNNERS = {"torch": run_torch, "tensorflow": run_tensorflow, "jax": run_jax, "cupy": run_cupy}


def emit(section: str, data: dict[str, Any]) -> None:
    protocol.emit(section, data, default=float)


def run_device(framework: str, device: str, deep: bool, started: float, import_s: Optional[float]) -> None:
    """One GPU's whole workload, printed when done. ``import_s``: how long importing the framework took
    this process (shared by its GPUs), None where the import failed before."""
    begun = time.monotonic()
    try:
        result = RUNNERS[framework](device, deep)
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
    emit("workload", result)
    mark(f"{framework} {device}: printed")


def contexts_early(facts_done: threading.Event) -> None:
    """Make every GPU's CUDA context while the framework still reports its facts, not after: PyTorch makes
    a GPU's context at that GPU's first use, holding the interpreter lock while the driver works (0.1-0.6 s
    a GPU on 4 x H200), so each GPU's thread waited for the others' contexts before it could do anything.
    Through ctypes the lock is free while the driver works, and PyTorch later finds the contexts made.
    Only once the framework has loaded libcuda and started CUDA itself (RTLD_NOLOAD: this never loads a
    libcuda, nor picks one the framework would not have); never, where it does not by the end of its facts
    (no GPU, a CPU-only build). Threads, one per GPU: they end with the process."""
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
    for ordinal in range(count.value):
        threading.Thread(target=_retain_context, args=(cuda, ordinal), name=f"context{ordinal}", daemon=True).start()


def _retain_context(cuda: Any, ordinal: int) -> None:
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    if cuda.cuDeviceGet(ctypes.byref(dev), ordinal) == 0 and cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0:
        mark(f"contexts early: GPU {ordinal} has its context")


def read_devices(arg: str) -> list[str]:
    """The GPUs to run on: ``arg`` itself, or with "-" the line the parent writes to stdin once its count
    of the GPUs is done (it starts this child before, so the import overlaps the count); an empty line
    or none: nothing to run."""
    line = sys.stdin.readline().strip() if arg == "-" else arg
    return [d for d in line.split(",") if d]


def main(argv: list[str]) -> int:
    framework, deep = argv[0], "--deep" in argv
    started = time.monotonic()
    mark(f"{framework} workload: begins")
    import_s: Optional[float] = None
    facts_done = threading.Event()
    if framework == "torch":
        threading.Thread(target=contexts_early, args=(facts_done,), name="contexts", daemon=True).start()
    try:  # once, before the threads: their time is their GPU's own
        if "--facts" in argv:  # the framework probe's child too: say what the framework is and sees first
            if "import_error" not in report(framework):
                import_s = time.monotonic() - started
        else:
            importlib.import_module(framework)
            import_s = time.monotonic() - started
    except BaseException as exc:  # noqa: BLE001 - each GPU's run meets the same error and reports it
        if "--facts" in argv:  # report() itself failed: the framework probe must not wait for a line that never comes
            emit("framework", import_failure(exc))
    facts_done.set()
    mark(f"{framework} workload: imported")
    devices = read_devices(argv[1])
    mark(f"{framework} workload: read its GPUs {devices}")
    if framework not in THREADED or len(devices) == 1:
        for device in devices:
            run_device(framework, device, deep, started, import_s)
        return 0
    threads = [threading.Thread(target=run_device, args=(framework, d, deep, started, import_s), name=f"gpu{d}")
               for d in devices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    end_child(main(sys.argv[1:]))
