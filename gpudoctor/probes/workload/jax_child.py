"""JAX under the diagnosed interpreter (probes/frameworks/children.py): its facts once imported
(probe_jax), what its packages say of its build without importing it (read_jax, for ``check --quick``),
and its workload on one GPU (run_jax): element-wise and matmul checks and a training step, each compiled
by XLA.

A compile holds the GPU's lock only while XLA autotunes on the GPU (locks.xla_compile_lock); the run
reports whether it did (``xla_autotuning``). No GPU: nothing to run. JAX is imported inside the
functions that ask it: a child imports only the framework it was asked for.

Runs in the framework and workload children under the diagnosed interpreter: standard library only at
module level.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Callable, Optional

from gpudoctor.probes.frameworks.asking import _cuda_text, _cudnn_text, _try, stage
from gpudoctor.probes.frameworks.metadata import Package, _Index, _record, dist_version
from gpudoctor.probes.workload.common import (_check, _np_elementwise, _np_matmul, _rand, _step, cuda_index,
                                              host_timed, in_background, reference, rel_err, training_verdict)
from gpudoctor.probes.workload.locks import gpu_lock, xla_autotunes, xla_compile_lock


# --- its facts, once imported (probes/frameworks/worker.py) -------------------------------------------

def probe_jax() -> dict[str, Any]:
    import jax
    import jaxlib

    info: dict[str, Any] = {"version": jax.__version__, "jaxlib_version": getattr(jaxlib, "__version__", None)}
    stage("devices")
    try:
        gpus = jax.devices("gpu")
    except Exception as exc:  # noqa: BLE001 - "Unknown backend: 'gpu'" is how a CPU-only jax answers
        gpus = []
        info["init_error"] = f"{type(exc).__name__}: {exc}"[:800]
    info["default_backend"] = _try(jax.default_backend)
    info["devices"] = [{"index": i, "name": d.device_kind,
                        "compute_capability": getattr(d, "compute_capability", None)} for i, d in enumerate(gpus)]
    info["cuda_available"] = bool(gpus)
    info["cpu_only_build"] = bool(info.get("init_error")) and not _jax_plugins()
    info["plugins"] = _jax_plugins()
    versions = _try(lambda: __import__("jax._src.lib", fromlist=["cuda_versions"]).cuda_versions)
    if versions is not None and not isinstance(versions, dict):
        info["runtime_cuda"] = _try(lambda: _cuda_text(versions.cuda_runtime_get_version()))
        info["runtime_cudnn"] = _try(lambda: _cudnn_text(versions.cudnn_get_version()))
    if gpus:
        import jax.numpy as jnp

        stage("first_kernel")
        info["smoke"] = _try(lambda: float((jnp.ones((2, 2)) @ jnp.ones((2, 2))).sum()))
    return info


def _jax_plugins() -> list[str]:
    from importlib import metadata

    names = {(d.metadata["Name"] or "").lower() for d in metadata.distributions()}
    return sorted(n for n in names if n.startswith(("jax-cuda", "jax_cuda", "jax-rocm", "jax_rocm")))


# --- its package, read without importing it (probes/frameworks/metadata.py, check --quick) ------------

def read_jax(package: Package) -> Optional[str]:
    """Its CUDA is in other distributions than jax's own: the jax-cuda plugins, jaxlib's local tag and
    RECORD, and the jax_plugins modules on the path."""
    index, claims, out = package.environment, package.claims, package.out
    plugins = [n for n in index.names() if re.match(r"^jax-(cuda|rocm)\d*-(plugin|pjrt)$", n)]
    out["plugins"] = plugins
    jaxlib = index.first("jaxlib")
    out["jaxlib_version"] = dist_version(jaxlib) if jaxlib else None
    for plugin in plugins:
        kind = re.match(r"^jax-(cuda|rocm)(\d*)-", plugin)
        assert kind is not None  # plugins holds only names that match it
        dist = index.first(plugin)
        claims.add("cuda" if kind.group(1) == "cuda" else "rocm",
                   f"distribution {plugin} {dist_version(dist) if dist else ''} installed".replace("  ", " "),
                   kind.group(2) if kind.group(1) == "cuda" and kind.group(2) else None)
    if jaxlib is not None:
        local = dist_version(jaxlib).partition("+")[2].lower()
        tagged = re.match(r"cuda(\d+)", local)
        if tagged:
            claims.add("cuda", f"jaxlib local version tag +{local}", tagged.group(1))
        elif local.startswith("rocm"):
            claims.add("rocm", f"jaxlib local version tag +{local}")
    namespace = _jax_plugin_modules(index)
    for module in namespace:
        kind = re.match(r"xla_(cuda|rocm)(\d*)", module)
        if kind and not any(kind.group(1) in p for p in plugins):
            claims.add("cuda" if kind.group(1) == "cuda" else "rocm", f"module jax_plugins.{module} on the path",
                       kind.group(2) if kind.group(1) == "cuda" and kind.group(2) else None)
    if claims.items or jaxlib is None:
        return None
    files = _record(jaxlib)
    if files is None:
        claims.note(f"jaxlib {dist_version(jaxlib)} has no RECORD: whether it carries CUDA kernels is unknown")
        return None
    gpu = next((f for f in files if re.match(r"jaxlib/(cuda|rocm|gpu)/[^/]+\.(so|pyd)$", f)), None)
    if gpu:
        claims.add("cuda" if "/rocm/" not in gpu else "rocm", f"jaxlib's RECORD lists {gpu}")
        return None
    claims.add("cpu", f"jaxlib {dist_version(jaxlib)} has no +cuda tag and no GPU kernels in its RECORD, and no "
                      "jax-cuda*-plugin or jax-cuda*-pjrt distribution or jax_plugins.xla_cuda* module is installed")
    return None


def _jax_plugin_modules(index: _Index) -> list[str]:
    """What the ``jax_plugins`` namespace holds on the path (a plugin installed without metadata)."""
    found = []
    for entry in index.search:
        folder = os.path.join(entry, "jax_plugins")
        try:
            found += [n for n in os.listdir(folder) if n.startswith(("xla_cuda", "xla_rocm"))]
        except OSError:
            continue
    return sorted(set(found))


# --- its workload (worker.py) -------------------------------------------------------------------------

def run_jax(device: str, deep: bool, checks_on: Optional[str] = None) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    out: dict[str, Any] = {"framework": "jax", "device": device, "version": jax.__version__,
                           "xla_autotuning": xla_autotunes()}
    if device == "cpu":
        out["skipped"] = "no GPU"
        return out
    dev = jax.devices("gpu")[cuda_index(device)]
    # XLA compiles the training step, the longest part of this run and all of it CPU work, while the checks
    # below run: it leaves the interpreter lock free while it compiles; a failure is the training step's
    training = in_background(lambda: _jax_training_step(jax, jnp, np, dev, device), "jax-training-compile")
    x, y, ew = reference("np.elementwise", lambda: _np_elementwise(np))
    _step(out, "elementwise", lambda: _check("sin(2.5x+y) float32", rel_err(
        _jax_run(jax, lambda x, y: jnp.sin(2.5 * x + y), dev, device, x, y), ew), 1e-5), lock="own")
    a, b, mm = reference("np.matmul", lambda: _np_matmul(np))
    _step(out, "matmul", lambda: _check("matmul float32 (default precision)", rel_err(
        _jax_run(jax, jnp.matmul, dev, device, a, b), mm), 1e-2), lock="own")
    _step(out, "training", lambda: _jax_training(np, device, *training.result()), lock="own")
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


def _jax_training_step(jax: Any, jnp: Any, np: Any, dev: Any, device: str) -> tuple[Any, list[Any], float, bool, Any]:
    """A two-layer MLP that learns a synthetic task with jax.grad and plain SGD, its step jit-compiled for the
    GPU: the compiled step, the weights on the GPU, how long the compile took, whether it is mixed precision,
    and the device. Mixed precision where the GPU has bf16: the matmuls take bf16 inputs, the weights, their
    updates and the softmax stay float32."""
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

    begun = time.perf_counter()
    with xla_compile_lock(device):
        compiled = step.lower(params).compile()
    return compiled, params, time.perf_counter() - begun, amp, dev


def _jax_training(np: Any, device: str, compiled: Any, params: list[Any], compile_s: float, amp: bool,
                  dev: Any) -> dict[str, Any]:
    """The compiled step (_jax_training_step) trains 30 steps, timed by the host clock."""
    before = [np.asarray(w).copy() for w in params]
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
