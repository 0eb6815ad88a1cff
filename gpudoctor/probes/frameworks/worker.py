"""Framework worker: imports ONE framework in this child process and prints what it found as one
JSON line. Run as ``python -m gpudoctor.probes.frameworks.worker torch|tensorflow|jax|cupy``.

It asks each framework the question the framework itself answers (built-for CUDA/cuDNN, compiled
architectures, devices seen, the exact error when it sees none), does the least work that makes
it load its CUDA libraries (a 2x2 product on one GPU), then reads /proc/self/maps: the libraries
listed there are the ones this framework really runs with, not a guess from the loader cache.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
import traceback
import warnings
from typing import Any, Callable

from gpudoctor import versions as codes
from gpudoctor.procs import protocol
from gpudoctor.procs.ending import end_child
from gpudoctor.probes.libnames import describe, mapped_libraries
from gpudoctor.snapshot import unavailable
from gpudoctor.trace import mark


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - every framework call may fail in its own way
        return unavailable("unknown", f"{type(exc).__name__}: {exc}"[:500])


def _uuid(value: Any) -> str:
    text = str(value)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


_stage = "import"


def stage(name: str) -> None:
    """Say which step comes next (STAGES), so that a child that dies in it (a segfault inside a driver
    call, the OOM killer) is reported as having died there, not as a failed import."""
    global _stage
    _stage = name
    protocol.emit("stage", name)


#: The steps a framework child goes through, in order, as ``stage`` names them.
STAGES = ("import", "cuda_init", "devices", "first_kernel", "libraries")


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


def _cudnn_text(v: Any) -> Any:
    """cuDNN's code as text; anything else (None, a string) as the framework gave it."""
    return codes.cudnn(v) or v


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


def _cuda_text(v: Any) -> Any:
    """CUDA's code as text; anything else (0: no driver, None) as the framework gave it."""
    return codes.cuda(v) or v


def probe_cupy() -> dict[str, Any]:
    import cupy

    rt = cupy.cuda.runtime
    info: dict[str, Any] = {"version": cupy.__version__, "cpu_only_build": False}
    info["runtime_cuda"] = _try(lambda: _cuda_text(rt.runtimeGetVersion()))
    info["driver_cuda"] = _try(lambda: _cuda_text(rt.driverGetVersion()))
    devices = []
    stage("devices")
    try:
        count = rt.getDeviceCount()
    except Exception as exc:  # noqa: BLE001
        count = 0
        info["init_error"] = f"{type(exc).__name__}: {exc}"[:800]
    for i in range(count):
        props = rt.getDeviceProperties(i)
        name = props.get("name", b"")
        devices.append({"index": i, "name": name.decode() if isinstance(name, bytes) else str(name),
                        "compute_capability": f"{props.get('major')}.{props.get('minor')}"})
    info["devices"] = devices
    info["cuda_available"] = bool(devices)
    if devices:
        info["runtime_cudnn"] = _try(lambda: _cudnn_text(__import__("cupy.cuda.cudnn", fromlist=["getVersion"]).getVersion()))
        info["runtime_nccl"] = _try(lambda: _nccl_text(__import__("cupy.cuda.nccl", fromlist=["get_version"]).get_version()))
        stage("first_kernel")
        info["smoke"] = _try(lambda: float((cupy.ones((2, 2)) @ cupy.ones((2, 2))).sum()))
    return info


def _nccl_text(v: Any) -> Any:
    """NCCL's code as text; anything else as the framework gave it."""
    return codes.nccl(v) or v


PROBES = {"torch": probe_torch, "tensorflow": probe_tensorflow, "jax": probe_jax, "cupy": probe_cupy}


def import_failure(exc: BaseException, name: str = "") -> dict[str, Any]:
    """The facts of a framework whose import (or the asking after it) raised ``exc``: called in its handler;
    with ``name``, also where ``import name`` found the framework (origin)."""
    return {"import_error": f"{type(exc).__name__}: {exc}"[:800], "traceback_tail": traceback.format_exc()[-2000:],
            "stage": _stage, **(origin(name) if name else {})}


def origin(name: str) -> dict[str, Any]:
    """Where ``import name`` found the framework (``module_file``), and the PYTHONPATH entry that file lies
    under (``pythonpath_entry``): a stray copy there is imported before the installed one, and the
    variable, not the installation, is then what fails. Absolute entries only: a relative one is the
    user's working directory's, which this process does not run in."""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        try:
            spec = importlib.util.find_spec(name)
            path = spec.origin if spec is not None else None
        except (ImportError, ValueError, AttributeError):
            path = None
    out: dict[str, Any] = {"module_file": path if isinstance(path, str) else None}
    if isinstance(path, str):
        real = os.path.realpath(path)
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            if os.path.isabs(entry) and real.startswith(os.path.realpath(entry).rstrip("/") + "/"):
                out["pythonpath_entry"] = entry
                break
    return out


def report(name: str, imported: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Import the framework, ask it, and print the "started" and "framework" lines; returns the facts.
    Also the first thing a workload child does when it is the framework probe's child too
    (workload.FrameworkChild), so a framework is imported once per check. ``imported`` runs between the
    import and the first question, before CUDA starts: a workload child learns there which GPU to pin
    itself to (it must not raise)."""
    start = time.monotonic()
    mark(f"{name} facts: begin")
    protocol.emit("started", name)
    stage("import")
    try:
        importlib.import_module(name)
        imported()
        info = PROBES[name]()
    except BaseException as exc:  # noqa: BLE001 - an import that raises is the finding
        info = import_failure(exc, name)
    if os.environ.get("GPUDOCTOR_PINNED_GPU") and os.environ.get("CUDA_VISIBLE_DEVICES"):
        info["pinned"] = {"uuid": os.environ["CUDA_VISIBLE_DEVICES"]}  # it was given this one GPU, by placement
    info["import_and_probe_s"] = round(time.monotonic() - start, 3)
    stage("libraries")
    info["loaded_libraries"] = _loaded()
    protocol.emit("framework", info, default=str)
    mark(f"{name} facts: printed")
    return info


def main(name: str) -> int:
    report(name)
    return 0


def _loaded() -> list[dict[str, Any]]:
    try:
        with open("/proc/self/maps") as fh:
            paths = mapped_libraries(fh.read())
    except OSError:
        return []
    return [describe(p, read_version=True) for p in paths]


if __name__ == "__main__":
    end_child(main(sys.argv[1]))
