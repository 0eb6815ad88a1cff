"""PyTorch under the diagnosed interpreter (probes/frameworks/children.py): its facts once imported
(probe_torch), what its package says of its build without importing it (read_torch, for ``check
--quick``), and its workload on one GPU (run_torch): element-wise, matmul and cuDNN convolution checks,
a training step, and throughput.

Throughput is timed with device events after warm-up, median of repeats, on random data, within a
bounded share of the GPU's free memory (common.MEMORY_SHARE); a busy GPU is skipped, not loaded
(common.BUSY_USED_SHARE). Without a GPU only the training step runs, on the CPU, to prove the code
path. PyTorch is imported inside the functions that ask it: a child imports only the framework it was
asked for.

Runs in the framework and workload children under the diagnosed interpreter: standard library only at
module level.
"""

from __future__ import annotations

import os
import re
import statistics
import threading
import time
import traceback
import warnings
from concurrent.futures import Future
from typing import Any, Callable, Optional

from gpudoctor.probes.frameworks.asking import _cudnn_text, _try, _uuid, stage
from gpudoctor.probes.frameworks.metadata import (Package, _Claims, _cuda_requirements, _local_tag, _record, _text,
                                                  dist_version)
from gpudoctor.probes.workload.common import (BUSY_USED_SHARE, MEMORY_SHARE, _check, _step, cuda_index, host_timed,
                                              in_background, reference, rel_err, training_verdict)
from gpudoctor.probes.workload.locks import _DEFAULT_RNG, _TF32, _lock
from gpudoctor.trace import mark


# --- its facts, once imported (probes/frameworks/worker.py) -------------------------------------------

def probe_torch() -> dict[str, Any]:
    import torch

    mark("torch facts: imported")
    stage("cuda_init")
    info: dict[str, Any] = {"version": torch.__version__, "built_cuda": torch.version.cuda,
                            "built_hip": getattr(torch.version, "hip", None)}
    info["cpu_only_build"] = not torch.version.cuda and not info["built_hip"]
    info["built_cudnn"] = _try(lambda: ".".join(map(str, torch._C._cudnn.getCompileVersion())))
    info["arch_list"] = _try(torch.cuda.get_arch_list)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info["cuda_available"] = bool(torch.cuda.is_available())
    info["warnings"] = [str(w.message)[:500] for w in caught]
    try:
        torch.cuda.init()
    except Exception as exc:  # noqa: BLE001 - the message is the fact we want
        info["init_error"] = f"{type(exc).__name__}: {exc}"[:800]
    mark("torch facts: CUDA started")
    devices = []
    # After a failed start (a bad PYTORCH_CUDA_ALLOC_CONF, say) asking for a GPU's properties crashes
    # PyTorch (2.11: SIGSEGV): its own error is the fact, and no GPU is usable.
    if info["cuda_available"] and "init_error" not in info:
        stage("devices")
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            devices.append({"index": i, "name": props.name, "compute_capability": f"{props.major}.{props.minor}",
                            "uuid": _uuid(getattr(props, "uuid", ""))})
        info["runtime_cudnn"] = _try(lambda: _cudnn_text(torch.backends.cudnn.version()))
        info["runtime_nccl"] = _try(lambda: ".".join(map(str, torch.cuda.nccl.version())))
        stage("first_kernel")
        info["smoke"] = _try(lambda: float((torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")).sum()))
    info["devices"] = devices
    return info


# --- its package, read without importing it (probes/frameworks/metadata.py, check --quick) ------------

def read_torch(package: Package) -> Optional[str]:
    """torch/version.py, which ``torch.version.cuda`` reads, and the libraries its RECORD lists, besides
    what every package says (metadata.read_common)."""
    owners, mod_dir, claims = package.owners, package.mod_dir, package.claims
    module_version = None
    text = _text(os.path.join(mod_dir, "version.py")) if mod_dir else None
    if text:
        module_version = _py_str(text, "__version__")
        cuda, hip, rocm, xpu = (_py_value(text, k) for k in ("cuda", "hip", "rocm", "xpu"))
        if cuda is not None and cuda != "None":
            built = re.match(r"(\d+)\.(\d+)", cuda.strip("'\""))
            claims.add("cuda", f"torch/version.py says cuda = {cuda}", built.group(1) if built else None,
                       f"{built.group(1)}.{built.group(2)}" if built else None, file=True)
        elif any(v not in (None, "None") for v in (hip, rocm)):
            claims.add("rocm", f"torch/version.py says cuda = None, hip = {hip}", file=True)
        elif xpu not in (None, "None"):
            claims.add("xpu", f"torch/version.py says cuda = None, xpu = {xpu}", file=True)
        elif cuda == "None":
            claims.add("cpu", "torch/version.py says cuda = None" + (", hip = None" if hip == "None" else ""), file=True)
    for dist in owners:
        _local_tag(dist_version(dist), claims)
        _cuda_requirements(dist, claims)
        _torch_record(dist, claims)
    return module_version


def _torch_record(dist: Any, claims: _Claims) -> None:
    libs = _record(dist, "torch/lib/")
    if libs is None:
        return
    gpu = {"cuda": r"torch/lib/(lib)?(torch_cuda|c10_cuda)\.(so|dll|dylib)$",
           "rocm": r"torch/lib/(lib)?(torch_hip|c10_hip)\.(so|dll)$",
           "xpu": r"torch/lib/(lib)?(torch_xpu|c10_xpu)\.(so|dll)$"}
    for backend, pattern in gpu.items():
        hit = min((f for f in libs if re.match(pattern, f)), key=lambda f: "c10_" in f, default=None)
        if hit:
            major = None
            cudart = next((f for f in libs if re.match(r"torch/lib/libcudart[-.][^/]*\.so\.(\d+)", f)), None)
            if backend == "cuda" and cudart:
                found = re.match(r"torch/lib/libcudart[-.][^/]*\.so\.(\d+)", cudart)  # the pattern cudart was found by
                major = found.group(1) if found else None
            claims.add(backend, f"RECORD lists {hit}" + (f" and {cudart}" if major else ""), major)
            return
    cpu_lib = next((f for f in libs if re.match(r"torch/lib/(lib)?torch_cpu\.(so|dll|dylib)$", f)), None)
    if cpu_lib:  # the CPU/CUDA library split (PyTorch 1.5+): a CUDA build always has libtorch_cuda too
        claims.add("cpu", f"RECORD lists {cpu_lib} but no torch/lib/libtorch_cuda.so")


def _py_value(text: str, key: str) -> Optional[str]:
    """The right-hand side of ``key = ...`` / ``key: Optional[str] = ...`` in a generated file, as written."""
    match = re.search(rf"^{key}\s*(?::[^=\n]*)?=\s*(None|'[^'\n]*'|\"[^\"\n]*\")\s*$", text, re.M)
    return match.group(1) if match else None


def _py_str(text: str, key: str) -> Optional[str]:
    value = _py_value(text, key)
    return value.strip("'\"") if value and value != "None" else None


# --- its workload (worker.py) -------------------------------------------------------------------------

def run_torch(device: str, deep: bool, checks_on: Optional[str] = None) -> dict[str, Any]:
    """``checks_on``: the GPU of the same model whose run makes the element-wise and convolution checks and
    the training step (worker.checks_elsewhere); this GPU then checks its matmuls, whose tensor cores are
    its own, and measures its throughput, and makes the rest only where that GPU did not (it was busy, or
    its run failed before them). Its run says where they were made."""
    import torch

    makes = _makes_checks(device) if checks_on is None else None
    try:
        return _run_torch(torch, device, deep, checks_on, makes)
    finally:
        if makes is not None and not makes.done():
            makes.set_result(False)  # it never came to its checks: the other GPUs of its model make their own


def _run_torch(torch: Any, device: str, deep: bool, checks_on: Optional[str], makes: Optional[Future]) -> dict[str, Any]:
    cuda = device != "cpu"
    dev = torch.device(f"cuda:{cuda_index(device)}" if cuda else "cpu")
    if os.environ.get("GPUDOCTOR_CPU_THREADS"):
        torch.set_num_threads(int(os.environ["GPUDOCTOR_CPU_THREADS"]))
    out: dict[str, Any] = {"framework": "torch", "device": device, "version": torch.__version__}
    cpu = None
    if cuda:
        begun = time.monotonic()
        torch.cuda.set_device(dev)
        free, total = torch.cuda.mem_get_info(dev)  # the first call on the GPU: CUDA starts on it
        out.update(name=torch.cuda.get_device_name(dev), free_bytes=free, total_bytes=total,
                   cuda_start_s=round(time.monotonic() - begun, 3))
        if (total - free) / total > BUSY_USED_SHARE:
            out["skipped"] = f"the GPU is busy: {(total - free) / 2**30:.1f} of {total / 2**30:.1f} GiB in use"
            return out
        if makes is not None:
            if device == "0":  # the same CPU serves every GPU: compared once, on cuda:0, beside its work, not after it
                cpu = in_background(lambda: _cpu_training(torch), "cpu-compare")
            _checks(torch, out, dev)
            if not makes.done():  # once per process: a child runs each GPU once
                makes.set_result(True)
        else:
            _step(out, "matmul", lambda: _torch_matmul(torch, dev))
    if checks_on is None:
        _step(out, "training", lambda: _torch_training(torch, dev, device), lock="own")
    if cuda:
        _step(out, "throughput", lambda: _torch_throughput(torch, dev, out["free_bytes"], deep), lock="alone")
    if checks_on is not None:
        if made_on(checks_on):
            out["checks_on"] = checks_on
        else:
            _checks(torch, out, dev, matmul=False)
            _step(out, "training", lambda: _torch_training(torch, dev, device), lock="own")
    if cpu is not None and "warm_step_s" in out["training"]:
        try:
            _compare_cpu(out["training"], *cpu.result())
        except Exception as exc:  # noqa: BLE001 - as a failing step: the training's finding, the rest still stands
            out["training"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600],
                               "traceback_tail": traceback.format_exc()[-800:]}
    return out


def _checks(torch: Any, out: dict[str, Any], dev: Any, matmul: bool = True) -> None:
    _step(out, "elementwise", lambda: _torch_elementwise(torch, dev))
    if matmul:
        _step(out, "matmul", lambda: _torch_matmul(torch, dev))
    _step(out, "conv", lambda: _torch_conv(torch, dev))


#: GPU -> whether its run made its model's correctness checks (and goes on to the training step), for the
#: other GPUs of that model (``checks_on``): set by its own thread once they are made, or once it ended
#: without them.
_MAKES_CHECKS: dict[str, Future] = {}
_MAKES_CHECKS_LOCK = threading.Lock()
#: How long a GPU waits, after its throughput, to learn whether ``checks_on`` made the checks: that GPU's
#: thread says so once they are made, which a hung driver may hold up; then this GPU makes its own.
CHECKS_WAIT_S = 30.0


def _makes_checks(device: str) -> Future:
    with _MAKES_CHECKS_LOCK:
        return _MAKES_CHECKS.setdefault(device, Future())


def made_on(device: str, wait_s: float = CHECKS_WAIT_S) -> bool:
    """Whether GPU ``device``'s run made its model's checks (waiting ``wait_s`` at most to learn it)."""
    try:
        return bool(_makes_checks(device).result(timeout=wait_s))
    except Exception:  # noqa: BLE001 - it did not say in time: the asking GPU makes its own
        return False


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
    with _TF32:  # tf32 off for the float32 check; another GPU's thread may be timing tf32
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            fp32 = (a.to(dev) @ b.to(dev)).cpu()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    checks = [_check("matmul float32", rel_err(fp32, ref), 1e-5)]
    if _bf16(torch, dev):
        bf16 = rel_err((a.to(dev, torch.bfloat16) @ b.to(dev, torch.bfloat16)).float().cpu(), ref)
        checks.append(_check("matmul bfloat16", bf16, 1e-2))
    return {"ok": all(c["ok"] for c in checks), "checks": checks}


def _bf16(torch: Any, dev: Any) -> bool:
    """Whether ``dev`` computes in bf16 natively (compute capability 8.0 and newer), as JAX's and TensorFlow's
    children ask. Older GPUs have no bf16 matrix units: cuBLAS refuses bf16 matmuls on some of them
    (CUBLAS_STATUS_NOT_SUPPORTED: pytorch/pytorch#57773 on a P100, opendatalab/MinerU#1508 on an M40),
    which is the GPU's age, not a fault, and
    PyTorch's own is_bf16_supported() says yes to them for the element-wise ops it emulates."""
    try:
        return dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] >= 8
    except Exception:  # noqa: BLE001 - a GPU that cannot say: no bf16 work asked of it
        return False


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


def _torch_training(torch: Any, dev: Any, device: str) -> dict[str, Any]:
    """A small CNN learns a synthetic task: the loss must fall, weights must move, nothing may be NaN."""
    cuda = device != "cpu"
    amp = cuda and _bf16(torch, dev)
    losses, times, moved = _train(torch, dev, device, 30, amp)
    return training_verdict(losses, times, moved, str(dev), mixed_precision="bf16" if amp else None)


def _cpu_training(torch: Any) -> tuple[float, list[float]]:
    """The training on the CPU: its seconds in all, and each step's."""
    begun = time.monotonic()
    _, times, _ = _train(torch, torch.device("cpu"), "cpu", 10, False)
    return time.monotonic() - begun, times


def _compare_cpu(training: dict[str, Any], seconds: float, cpu_times: list[float]) -> None:
    """The CPU's training beside the GPU's, added to ``training``: how much faster the GPU's warm step is."""
    training["cpu_compare_s"] = seconds
    training["cpu_warm_step_s"] = statistics.median(cpu_times[3:])
    training["speedup_vs_cpu"] = training["cpu_warm_step_s"] / training["warm_step_s"]


def _train(torch: Any, where: Any, device: str, steps: int, amp: bool) -> tuple[list[float], list[float], bool]:
    """``steps`` steps of the CNN on ``where``: the losses, each step's seconds, and whether weights moved."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(256, 3, 16, 16, generator=g)
    yl = (x[:, 0, :8].mean(dim=(1, 2)) > x[:, 1, 8:].mean(dim=(1, 2))).long()
    x, y = x.to(where), yl.to(where)
    with _DEFAULT_RNG:  # the weights come from PyTorch's one default generator
        torch.manual_seed(5)
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
                                  torch.nn.Flatten(), torch.nn.Linear(256, 2))
    net = net.to(where)
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
    """Dense matmul TFLOP/s (bf16 where the GPU has it, and tf32, which is float32 on GPUs older than
    compute capability 8.0), device-copy bandwidth (bytes read + written), pinned host<->device bandwidth."""
    budget = int(free * MEMORY_SHARE)
    repeats = 30 if deep else 10
    out: dict[str, Any] = {"memory_budget_bytes": budget, "repeats": repeats}
    n = 8192
    while 3 * n * n * 4 > budget and n > 1024:
        n //= 2
    g = torch.Generator(device=dev).manual_seed(6)
    for label, dtype in ((("bf16", torch.bfloat16),) if _bf16(torch, dev) else ()) + (("tf32", torch.float32),):
        a = torch.randn(n, n, device=dev, dtype=dtype, generator=g)
        b = torch.randn(n, n, device=dev, dtype=dtype, generator=g)
        if dtype == torch.bfloat16:
            t = _events_median(torch, lambda: a @ b, 3, repeats, batch=4)  # noqa: F821 - the lambda runs before the del below
        else:
            with _TF32:  # tf32 on for this timing only; another GPU's thread may be checking float32
                old = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = True
                try:
                    t = _events_median(torch, lambda: a @ b, 3, repeats, batch=4)  # noqa: F821 - the lambda runs before the del below
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = old
        out[f"matmul_{label}_tflops"] = 2 * n**3 / t / 1e12
        del a, b
    out["matmul_n"] = n
    size = min(1 << 30, budget // 2)
    src = torch.empty(size, dtype=torch.uint8, device=dev).random_(generator=g)
    dst = torch.empty_like(src)
    t = _events_median(torch, lambda: dst.copy_(src), 3, repeats)  # noqa: F821 - the lambda runs before the del below
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
