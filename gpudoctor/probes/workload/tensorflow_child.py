"""TensorFlow under the diagnosed interpreter (probes/frameworks/children.py): its facts once imported
(probe_tensorflow), what its package says of its build without importing it (read_tensorflow, for
``check --quick``), and its (Keras's) workload on one GPU (run_tensorflow): element-wise, matmul and
convolution checks, a training step.

Without a GPU only the training step runs, on the CPU, to prove the code path. TensorFlow is imported
inside the functions that ask it: a child imports only the framework it was asked for. TensorFlow keeps
one child per GPU, pinned to it (its row in gpudoctor/frameworks_table.py says why).

Runs in the framework and workload children under the diagnosed interpreter: standard library only at
module level.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Optional

from gpudoctor.probes.frameworks.asking import _try, stage
from gpudoctor.probes.frameworks.metadata import (Package, _Claims, _Index, _installed_note, _norm, _text, _wheel_tags,
                                                  dist_version, header)
from gpudoctor.probes.workload.common import (_check, _np_elementwise, _np_matmul, _rand, _step, cuda_index,
                                              host_timed, reference, rel_err, training_verdict)


# --- its facts, once imported (probes/frameworks/worker.py) -------------------------------------------

def probe_tensorflow() -> dict[str, Any]:
    import tensorflow as tf

    build = dict(_try(tf.sysconfig.get_build_info) or {})
    known_build = "is_cuda_build" in build or "is_rocm_build" in build  # else unknown, not CPU-only
    info: dict[str, Any] = {
        "version": tf.__version__,
        "built_cuda": build.get("cuda_version"),
        "built_cudnn": build.get("cudnn_version"),
        "arch_list": build.get("cuda_compute_capabilities") or [],
        "cpu_only_build": (not build.get("is_cuda_build") and not build.get("is_rocm_build")) if known_build else None,
    }
    stage("devices")
    gpus = _try(lambda: tf.config.list_physical_devices("GPU"))
    devices = []
    if isinstance(gpus, list):
        for i, gpu in enumerate(gpus):
            details = _try(lambda: tf.config.experimental.get_device_details(gpu))
            cc = details.get("compute_capability") if isinstance(details, dict) else None
            devices.append({"index": i, "name": details.get("device_name") if isinstance(details, dict) else gpu.name,
                            "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None})
        if devices:
            stage("first_kernel")
            with tf.device("/GPU:0"):
                info["smoke"] = _try(lambda: float(tf.reduce_sum(tf.matmul(tf.ones((2, 2)), tf.ones((2, 2))))))
    else:
        info["init_error"] = gpus.get("error")
    info["cuda_available"] = bool(devices)
    info["devices"] = devices
    return info


# --- its package, read without importing it (probes/frameworks/metadata.py, check --quick) ------------

def read_tensorflow(package: Package) -> Optional[str]:
    """TensorFlow's build_info.py, which ``tf.sysconfig.get_build_info()`` reads, and the distribution's
    name (tensorflow-cpu, tensorflow-gpu), wheel tag and extras."""
    owners, mod_dir, claims = package.owners, package.mod_dir, package.claims
    index, out = package.environment, package.out
    text = _text(os.path.join(mod_dir, "python", "platform", "build_info.py")) if mod_dir else None
    if text:
        cuda = re.search(r"""['"]?is_cuda_build['"]?\s*[,:=]\s*(True|False)""", text)
        rocm = re.search(r"""['"]?is_rocm_build['"]?\s*[,:=]\s*(True|False)""", text)
        version = re.search(r"""['"]?cuda_version['"]?\s*[,:=]\s*['"](\d+)\.(\d+)""", text)
        where = "tensorflow/python/platform/build_info.py says"
        if cuda and cuda.group(1) == "True":
            built = f"{version.group(1)}.{version.group(2)}" if version else None
            claims.add("cuda", f"{where} is_cuda_build = True" + (f", cuda_version {built}" if built else ""),
                       version.group(1) if version else None, built, file=True)
        elif rocm and rocm.group(1) == "True":
            claims.add("rocm", f"{where} is_rocm_build = True", file=True)
        elif cuda:
            claims.add("cpu", f"{where} is_cuda_build = False" + (", is_rocm_build = False" if rocm else ""), file=True)
    for dist in owners:
        name = _norm(header(dist, "Name"))
        if name in ("tensorflow-cpu", "tensorflow-cpu-aws"):
            claims.add("cpu", f"distribution name {name}")
        elif name == "tensorflow-gpu":
            claims.add("cuda", "distribution name tensorflow-gpu", _installed_note(dist, "and-cuda", index)[1])
        elif name == "tensorflow-rocm":
            claims.add("rocm", "distribution name tensorflow-rocm")
        elif name == "tensorflow":
            _plain_tensorflow(dist, index, claims, out)
    return None


def _plain_tensorflow(dist: Any, index: _Index, claims: _Claims, out: dict[str, Any]) -> None:
    """Since 2.1 the ``tensorflow`` wheel for Linux x86_64 is a CUDA build (``tensorflow-gpu`` before),
    which loads the CUDA libraries from the ``and-cuda`` extra's nvidia-* packages if installed, else
    from the system. On other platforms the name says nothing certain."""
    version = dist_version(dist)
    release = re.match(r"(\d+)\.(\d+)", version)
    tags = _wheel_tags(dist)
    linux_x86 = [t for t in tags if "manylinux" in t and t.endswith("x86_64")]
    complete, major, sentence = _installed_note(dist, "and-cuda", index)
    if release and (int(release.group(1)), int(release.group(2))) < (2, 1):
        claims.add("cpu", f"distribution name tensorflow {version} (before 2.1 the GPU build was tensorflow-gpu)")
    elif linux_x86:
        claims.add("cuda", f"distribution name tensorflow {version}, a {linux_x86[0].split('-')[-1]} wheel "
                           "(the Linux x86_64 tensorflow wheel is a CUDA build since 2.1)", major)
        if sentence:
            out["cuda_packages_installed"] = complete
            claims.note(sentence)
    elif tags:
        claims.note(f"distribution tensorflow {version}, a {tags[0].split('-')[-1]} wheel: whether it is a CUDA build "
                    "depends on the platform, and its name does not say")


# --- its workload (worker.py) -------------------------------------------------------------------------

def run_tensorflow(device: str, deep: bool, checks_on: Optional[str] = None) -> dict[str, Any]:
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
