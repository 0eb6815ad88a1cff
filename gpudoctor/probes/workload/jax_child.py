"""JAX's workload on one GPU: element-wise and matmul checks and a training step, each compiled by XLA.

A compile holds the GPU's lock only while XLA autotunes on the GPU (locks.xla_compile_lock); the run
reports whether it did (``xla_autotuning``). No GPU: nothing to run. JAX is imported inside run_jax:
the child imports only the framework it was asked for.

Runs in the workload child under the diagnosed interpreter: standard library only at module level.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from gpudoctor.probes.workload.common import (_check, _np_elementwise, _np_matmul, _rand, _step, cuda_index,
                                              host_timed, reference, rel_err, training_verdict)
from gpudoctor.probes.workload.locks import gpu_lock, xla_autotunes, xla_compile_lock


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
