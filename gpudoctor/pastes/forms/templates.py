"""Issue templates and environment reports: TensorFlow's bug template (old ``- TensorFlow version: ...``
bullets and the newer ``### TensorFlow version`` issue form), its tf_env_collect.sh
(``tf.version.VERSION = ...``), Hugging Face's ``transformers env`` and ``accelerate env``, JAX's
``jax.print_environment_info()`` and CuPy's ``cupy.show_config()``.

A template's answers are what the user typed or a script printed; each is kept with its line. A line
counts only under a key the reader knows, and only when the body holds one of the keys that mark a
template (so collect_env's own "Python version" is left to collect_env).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from gpudoctor import versions

#: normalised key -> field
KEYS = {
    "tensorflow version": "tensorflow_version",
    "tf.version.version": "tensorflow_version",
    "tensorflow version (gpu?)": "tensorflow_version_gpu",
    "pytorch version (gpu?)": "torch_version_gpu",
    "pytorch version": "torch_version",
    "python version": "python_version",
    "cuda/cudnn version": "cuda_cudnn",
    "gpu model and memory": "gpu_model",
    "os platform and distribution": "os",
    "os platform": "os",
    "platform": "platform",
    "transformers version": "transformers_version",
    "accelerate version": "accelerate_version",
    "jax": "jax_version",
    "jaxlib": "jaxlib_version",
    "cupy version": "cupy_version",
    "cuda build version": "cupy_build_cuda",
    "cuda driver version": "cupy_driver_cuda",
    "cuda runtime version": "cupy_runtime_cuda",
    "cuda root": "cupy_cuda_root",
    "cudnn version": "cupy_cudnn",
    "os": "os",
    "device 0 name": "cupy_device_name",
    "device 0 compute capability": "cupy_device_cc",
    "gpu type": "gpu_model",
}
#: The first word of every key: a line starting otherwise is no template answer.
FIRST_WORDS = {key.split(" ", 1)[0] for key in KEYS}
#: Fields only a template has: one of them must be present.
MARKERS = {"tensorflow_version", "tensorflow_version_gpu", "torch_version_gpu", "transformers_version",
           "accelerate_version", "jaxlib_version", "cupy_version", "cuda_cudnn", "gpu_model"}
_LINE = re.compile(r"^\s{0,8}(?:[-*+]\s{1,4})?(?:\*\*)?`?([A-Za-z][\w./ ?()`-]{0,60}?)`?(?:\*\*)?\s{0,30}(?::|=)\s{0,40}(.{0,300}?)\s*$")
_HEADING = re.compile(r"^\s{0,3}#{2,4}\s{1,4}([A-Za-z][\w./ ?()-]{0,60}?)\s*$")
_PAREN = re.compile(r"\s*\((?:use command below|e\.g\.[^)]*|if compiling from source|if applicable)\)\s*")
_JAX_DEVICES = re.compile(r"^\s{0,8}jax\.devices \(\d{1,5} total, \d{1,5} local\):\s{0,8}(\[.{0,300})$")
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[.+][\w.]{1,20})?")


def read(lines: list[str]) -> Optional[dict[str, Any]]:
    """The template answers in ``lines``; None when no template is there."""
    raw: dict[str, tuple[str, int]] = {}
    heading: Optional[tuple[str, int]] = None
    done: set[str] = set()
    for number, line in enumerate(lines, 1):
        if heading and line.strip():
            raw.setdefault(heading[0], (line.strip(), number))
            heading = None
            continue
        if line in done:
            continue  # a line seen before adds nothing (the first answer to a key is kept)
        done.add(line)
        if "#" in line[:8]:
            m = _HEADING.match(line)
            if m and _key(m.group(1)) in KEYS:
                heading = (KEYS[_key(m.group(1))], number)
                continue
        if "jax.devices (" in line:
            m = _JAX_DEVICES.match(line)
            if m:
                raw.setdefault("jax_devices", (m.group(1), number))
            continue
        if ":" not in line and "=" not in line:
            continue
        head = line.split(":", 1)[0].split("=", 1)[0].strip(" \t-*+>`").lower()
        if len(head) > 80 or head.split(" ", 1)[0].strip("`*") not in FIRST_WORDS:
            continue  # no template key starts this way: the expression below is not tried
        m = _LINE.match(line)
        if m and _key(m.group(1)) in KEYS and m.group(2):
            raw.setdefault(KEYS[_key(m.group(1))], (m.group(2), number))
    if not MARKERS & raw.keys():
        return None
    return _values(raw)


def _key(text: str) -> str:
    return re.sub(r"\s+", " ", _PAREN.sub(" ", text.replace("`", "")).strip().lower())


def _values(raw: dict[str, tuple[str, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {"notes": [], "evidence": [], "lines": {k: n for k, (_, n) in raw.items()}}
    for field, (text, number) in raw.items():
        text = text.strip().strip("`").strip()
        if field in ("torch_version_gpu", "tensorflow_version_gpu"):
            m = re.match(r"^(\S+)\s*\((True|False)\)", text)
            if m and _VERSION.match(m.group(1)):
                name = field.split("_")[0]
                out[f"{name}_version"] = m.group(1)
                out[f"{name}_cuda_available"] = m.group(2) == "True"
                out["evidence"].append({"kind": f"{name}_cuda_available", "value": m.group(2) == "True",
                                        "line": number, "text": text[:300]})
        elif field == "cuda_cudnn":
            found = re.findall(r"\d+(?:\.\d+){0,2}", text)
            if found:
                out["cuda"] = found[0] if "." in found[0] else None
                if len(found) > 1:
                    out["cudnn"] = found[1]
        elif field in ("cupy_build_cuda", "cupy_driver_cuda", "cupy_runtime_cuda"):
            m = re.match(r"^(\d{4,5})\b", text)
            if m and int(m.group(1)) > 0:  # a driver version of 0: CUDA found no driver
                out[field] = versions.cuda(int(m.group(1)))
        elif field == "cupy_cudnn":
            m = re.match(r"^(\d{4,5})\b", text)
            if m and int(m.group(1)) > 0:  # cuDNN's own encoding: 7500 is 7.5.0 (before 9), 90100 is 9.1.0
                out[field] = versions.cudnn(int(m.group(1)))
        elif field == "jax_devices":
            out["jax_devices"] = "cpu" if re.match(r"^\[\s*(?:Cpu|TFRT_CPU)", text) else "gpu" if re.match(
                r"^\[\s*(?:Cuda|cuda|gpu|Gpu|StreamExecutorGpu)", text) else None
            if out["jax_devices"]:
                out["evidence"].append({"kind": "jax_devices", "value": out["jax_devices"], "line": number, "text": text[:300]})
        elif field.endswith("_version") and field != "python_version":
            m = _VERSION.search(text)
            if m and text.lower() not in ("not installed", "n/a"):
                out[field] = m.group(0)
        elif field == "python_version":
            m = re.search(r"\d+\.\d+(?:\.\d+)?", text)
            if m:
                out[field] = m.group(0)
        elif text and text.lower() not in ("n/a", "na", "none", "-", "_no response_"):
            out[field] = text[:200]
    return out
