"""TensorFlow's (Keras's) workload on one GPU: element-wise, matmul and convolution checks, a training step.

Without a GPU only the training step runs, on the CPU, to prove the code path. TensorFlow is imported
inside run_tensorflow: the child imports only the framework it was asked for. TensorFlow keeps one
child per GPU, pinned to it (workload.THREADED says why).

Runs in the workload child under the diagnosed interpreter: standard library only at module level.
"""

from __future__ import annotations

import time
from typing import Any

from gpudoctor.probes.workload.common import (_check, _np_elementwise, _np_matmul, _rand, _step, cuda_index,
                                              host_timed, reference, rel_err, training_verdict)


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
