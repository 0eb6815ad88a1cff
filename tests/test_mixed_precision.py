"""Mixed precision in the training steps of TensorFlow/Keras and JAX (PyTorch's bf16 autocast is held
to the real recordings in test_area_acceleration.py): where it is chosen, and that the Keras bf16 step
really learns. The device image has no TensorFlow, so the Keras bf16 step runs here on the CPU with
tensorflow-cpu (the code path a GPU takes, on another device); JAX's bf16 step ran on real H200s
(tests/fixtures/real/*/workload-report.json records its `mixed_precision`)."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from gpudoctor.probes.workload.jax_child import _jax_bf16
from gpudoctor.probes.workload.tensorflow_child import _tf_bf16
from helpers_builds import installed_or_skip


@pytest.mark.parametrize("capability, expected", [("9.0", True), ("8.0", True), ("7.5", False), (None, False),
                                                  ("n/a", False)])
def test_jax_uses_bf16_from_ampere_on(capability, expected):
    assert _jax_bf16(SimpleNamespace(compute_capability=capability)) is expected


def _fake_tf(capability):
    details = {"compute_capability": capability} if capability else {}
    experimental = SimpleNamespace(get_device_details=lambda gpu: details)
    return SimpleNamespace(config=SimpleNamespace(list_physical_devices=lambda kind: ["GPU:0"], experimental=experimental))


@pytest.mark.parametrize("cuda, device, capability, expected", [
    (True, "0", (9, 0), True), (True, "0", (8, 6), True), (True, "0", (7, 0), False), (True, "0", None, False),
    (True, "1", (9, 0), False),  # no such GPU: full precision rather than a guess
    (False, "cpu", (9, 0), False),
])
def test_tensorflow_uses_bf16_on_gpus_from_ampere_on(cuda, device, capability, expected):
    assert _tf_bf16(_fake_tf(capability), cuda, device) is expected


def test_keras_bf16_step_learns_with_float32_weights():
    installed_or_skip("tensorflow")
    code = (
        "import json, numpy as np, tensorflow as tf\n"
        "from gpudoctor.probes.workload.tensorflow_child import _tf_training\n"
        "layer = tf.keras.layers.Conv2D(4, 3, dtype='mixed_bfloat16')\n"
        "layer.build((None, 8, 8, 3))\n"
        "out = _tf_training(tf, np, 'cpu', '/CPU:0', amp=True)\n"
        "print(json.dumps([layer.compute_dtype, layer.variable_dtype, out]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    compute, variables, out = json.loads(proc.stdout.splitlines()[-1])
    assert (compute, variables) == ("bfloat16", "float32")  # what the per-layer policy asks of Keras
    assert out["mixed_precision"] == "bf16" and out["ok"] is True
    assert out["loss_last"] < 0.7 * out["loss_first"] and out["params_updated"] and out["finite"]
