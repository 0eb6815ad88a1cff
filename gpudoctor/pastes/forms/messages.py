"""The messages frameworks, CUDA, NVML, the container toolkit and the kernel print when GPU work cannot
run, quoted in a ticket: each one found becomes an evidence item with its line and what it names.

Each message is matched on its own fixed words (PyTorch's torch/cuda/__init__.py warnings,
TensorFlow's dso_loader and gpu_device lines, jaxlib's cuDNN check, libnvidia-container's errors, the
NVRM kernel prints), so a line is tested with a substring first and a short anchored expression after.
A line that says the message is no longer seen ("I no longer get ...") is not evidence of it.
"""

from __future__ import annotations

import re
from typing import Any, Optional

_NEGATED = re.compile(r"\b(?:no longer|not|never|without|instead of|don't|doesn't|didn't|won't)\b", re.I)
_SM = re.compile(r"(?:^|:\s)\s*([^:\n]{1,120}?) with CUDA capability sm_(\d{2,3})\s+is not compatible with the current "
                 r"PyTorch installation", re.I)
_SUPPORTS = re.compile(r"supports CUDA capabilities((?:\s+(?:sm|compute)_\d{2,3}[a-z]?){1,40})", re.I)
_OLD_GPU = re.compile(r"Found GPU(\d+) (.{1,120}?) which is of cuda capability (\d+\.\d+)", re.I)
_MIN_CC = re.compile(r"minimum cuda capability (?:supported by this library )?is (\d+\.\d+)", re.I)
_TOO_OLD = re.compile(r"driver on your system is too old \(found version (\d{4,5})\)", re.I)
_DLOPEN = re.compile(r"Could not load dynamic library '([^']{1,120})'", re.I)
# cuDNN's check in TensorFlow and XLA: "7201 (compatibility version 7200) but source was compiled with 7004" in
# older releases, "8.7.0 but source was compiled with: 8.9.4" in newer ones
_JAX_CUDNN = re.compile(r"Loaded runtime CuDNN library: ([\d.]{1,12})(?: \(compatibility version [\d.]{1,12}\))? but source "
                        r"was compiled with:? ([\d.]{1,12}[\d])", re.I)
_CONTAINER_INIT = re.compile(r"nvidia-container-cli: initialization error: (.{0,200})", re.I)
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]{7,16})\): (\d{1,3})\b(.{0,160})")
_NVRM = re.compile(r"NVRM: (.{1,200})")
# jaxlib's CUDA plugin when it cannot start: "CUDA backend failed to initialize: <cause> (Set TF_CPP_MIN_LOG_LEVEL=0 ...)"
# (jax 0.4.x), "Backend 'cuda' failed to initialize: <cause>. Available backends are ['cpu']" (later releases), or
# "Unable to initialize backend 'cuda': <cause>" (when the platform was asked for)
_JAX_BACKEND = re.compile(r"(?:(?:CUDA|cuda|GPU|gpu) backend failed to initialize|Backend '(?:cuda|gpu)' failed to initialize|"
                          r"Unable to initialize backend '(?:cuda|gpu)'\"?):\s{0,4}(.{1,400}?)\s*(?:\(Set TF_CPP_MIN_LOG_LEVEL|"
                          r"\.* ?Available backends are|$)")
# the later releases list each outdated library over the lines that follow the message
_JAX_OUTDATED = re.compile(r"Outdated (\w{2,20}) installation found")
_JAX_INSTALLED = re.compile(r"Installed version: (\d{3,6})")
_JAX_MINIMUM = re.compile(r"Minimum supported: (\d{3,6})")
_JAX_FOUND = re.compile(r"Found (CUDA|cuDNN|cuBLAS|cuSPARSE|cuFFT|cuSOLVER|NCCL|CUPTI) version (\d{3,6}), but JAX was built "
                        r"against version (\d{3,6})", re.I)
#: A row of nvidia-smi's table under the GPU's own row: "| N/A   29C    P0   ERR! / 250W |  593MiB / 16160MiB | ..."
_SMI_GPU_ROW = re.compile(r"^\|\s*(\d{1,3})\s+(.{1,60}?)\s+(?:On|Off|WDDM|TCC|MCDM)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                          r"[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
# nvidia-smi when NVML lists a GPU it cannot open: "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error"
_HANDLE = re.compile(r"Unable to (?:determine|detect) the device handle for GPU ?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])"
                     r":? ?(.{0,80})", re.I)
#: The fields of the first cell of that row, in nvidia-smi's order (every layout since driver 410).
_SMI_FIELDS = ("fan", "temperature", "performance state", "power draw", "/", "power cap")
#: (lowercase words tested first, evidence kind) for the messages that carry no value to extract.
FIXED = (
    ("no kernel image is available for execution on the device", "no_kernel_image"),
    ("cuda driver version is insufficient for cuda runtime version", "driver_insufficient"),
    ("found no nvidia driver on your system", "no_driver"),
    ("cannot dlopen some gpu libraries", "dlopen_failed"),
    ("cuda-enabled jaxlib is not installed", "jaxlib_cpu"),
    ("could not select device driver", "container_no_gpu_driver"),
    ("driver/library version mismatch", "driver_library_mismatch"),
    ("torch not compiled with cuda enabled", "torch_cpu_build"),
)

#: Every word a message above is tested by, for the one scan that passes over lines holding none.
_TRIGGER = re.compile("|".join(re.escape(w) for w in (
    "cuda capability sm_", "which is of cuda capability", "is too old (found version", "could not load dynamic library",
    "loaded runtime cudnn library", "nvidia-container-cli: initialization error", "nvrm:", "failed to initialize", "unable to initialize backend",
    "err!", "the device handle for gpu", *(w for w, _ in FIXED))))


def read(lines: list[str]) -> Optional[dict[str, Any]]:
    """The messages in ``lines`` (1-based line numbers), first occurrence of each; None when there are none."""
    evidence: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    read_lines: set[str] = set()
    for number, line in enumerate(lines, 1):
        lowered = line.lower()
        if not _TRIGGER.search(lowered) or line in read_lines:
            continue  # one scan in C for every message's words; a repeated line says nothing new
        read_lines.add(line)
        for item in _items(line, lowered, lines, number):
            key = (item["kind"], item.get("gpu"), item.get("library"), item.get("xid"))
            if key in seen:
                continue
            seen.add(key)
            item["line"], item["text"] = number, line.strip()[:300]
            evidence.append(item)
    return {"evidence": evidence, "notes": []} if evidence else None


def _items(line: str, lowered: str, lines: list[str], number: int) -> list[dict[str, Any]]:
    out = []
    if "cuda capability sm_" in lowered:
        m = _SM.search(line)
        if m and not _negated(line, m.start(2)):
            gpu = m.group(1).strip().lstrip("-*> ").strip("'\"`").rsplit("UserWarning:", 1)[-1].strip()
            item: dict[str, Any] = {"kind": "gpu_arch_unsupported", "gpu": gpu, "sm": f"sm_{m.group(2)}"}
            supported = _following(_SUPPORTS, lines, number)
            if supported:
                item["supported"] = supported.group(1).split()
            out.append(item)
    if "which is of cuda capability" in lowered:
        m = _OLD_GPU.search(line)
        if m:
            item = {"kind": "gpu_too_old", "gpu": m.group(2).strip(), "compute_capability": m.group(3)}
            minimum = _following(_MIN_CC, lines, number)
            if minimum:
                item["minimum"] = minimum.group(1)
            out.append(item)
    if "is too old (found version" in lowered:
        m = _TOO_OLD.search(line)
        if m and not _negated(line, m.start()):
            found = int(m.group(1))
            out.append({"kind": "driver_too_old", "driver_cuda": f"{found // 1000}.{found % 1000 // 10}"})
    if "could not load dynamic library" in lowered:
        m = _DLOPEN.search(line)
        if m and not _negated(line, m.start()):
            out.append({"kind": "library_not_loaded", "library": m.group(1)})
    if "loaded runtime cudnn library" in lowered:
        m = _JAX_CUDNN.search(line)
        if m:
            out.append({"kind": "cudnn_mismatch", "loaded": m.group(1), "built": m.group(2)})
    if "nvidia-container-cli: initialization error" in lowered:
        m = _CONTAINER_INIT.search(line)
        if m:
            out.append({"kind": "container_init_error", "error": m.group(1).strip()})
    if "nvrm:" in lowered:
        m = _XID.search(line)
        if m:
            out.append({"kind": "xid", "bus_id": m.group(1), "xid": int(m.group(2)), "detail": m.group(3).strip(" ,")})
        elif "api mismatch" in lowered or "version mismatch" in lowered:
            out.append({"kind": "driver_library_mismatch"})
    if "failed to initialize" in lowered or "unable to initialize backend" in lowered:
        out += _jax_backend(line, lines, number)
    if "the device handle for gpu" in lowered:
        m = _HANDLE.search(line)
        if m and not _negated(line, m.start()):
            out.append({"kind": "smi_handle", "gpu": f"GPU {m.group(1)}", "bus_id": m.group(1),
                        "error": m.group(2).strip() or "no reason given"})
    if "err!" in lowered and line.lstrip().startswith("|") and number >= 2:
        out += _smi_err(line, lines[number - 2])
    for words, kind in FIXED:
        at = lowered.find(words)
        if at >= 0 and not _negated(line, at) and not (kind == "driver_library_mismatch" and out):
            out.append({"kind": kind})
    return out


def _jax_backend(line: str, lines: list[str], number: int) -> list[dict[str, Any]]:
    """jaxlib's reason for starting on the CPU instead of the GPU, sorted into the causes it names: a CUDA
    library older than the one JAX was built against, a library it could not load, no GPU it can see, or
    (kept as printed) any other."""
    m = _JAX_BACKEND.search(line)
    if not m or _negated(line, m.start()):
        return []
    said = m.group(1).strip()
    item: dict[str, Any] = {"kind": "jax_backend_failed", "error": said[:300], "cause": "other"}
    found = _JAX_FOUND.search(said)
    lowered = said.lower()
    outdated = _JAX_OUTDATED.search(said) or _following(_JAX_OUTDATED, lines, number, 3)
    if found:
        name = found.group(1)
        item.update(cause="library_too_old", library=name, found=_version_of(name, found.group(2)),
                    built=_version_of(name, found.group(3)), needs="the version it was built against")
    elif outdated:
        name = outdated.group(1)
        installed = _following(_JAX_INSTALLED, lines, number, 8)
        minimum = _following(_JAX_MINIMUM, lines, number, 8)
        item.update(cause="library_too_old", library=name,
                    found=_version_of(name, installed.group(1)) if installed else "an older version",
                    built=_version_of(name, minimum.group(1)) if minimum else "the version", needs="the oldest it supports")
    elif "unable to load" in lowered:
        library = re.search(r"unable to load (\w{2,20})", said, re.I)
        item.update(cause="library_not_loaded", library=library.group(1) if library else "a CUDA library")
    elif "no visible gpu devices" in lowered or "no supported devices found" in lowered:
        item["cause"] = "no_gpu"
    elif "cuda_error_no_device" in lowered:
        item["cause"] = "no_gpu"
    elif "cuda_error_not_initialized" in lowered or "cuda_error_unknown" in lowered:
        item["cause"] = "cuda_not_started"
    return [item]


def _version_of(library: str, encoded: str) -> str:
    """CUDA's integer version (12010 is 12.1) and cuDNN 8's (8906 is 8.9.6: 1000 * major + 100 * minor + patch);
    the other libraries' encodings differ from one library to the next, so their numbers stay as printed."""
    n = int(encoded)
    if library.upper() == "CUDA" and n >= 10000:
        return f"{n // 1000}.{n % 1000 // 10}"
    if library.lower() == "cudnn" and n < 10000:
        return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"
    return encoded


def _smi_err(line: str, above: str) -> list[dict[str, Any]]:
    """A GPU row of nvidia-smi's table whose readings say ERR!: the GPU named by the row above it."""
    row = _SMI_GPU_ROW.match(above.strip())
    if not row:
        return []
    cells = line.strip().strip("|").split("|")
    fields = [name for name, value in zip(_SMI_FIELDS, cells[0].split()) if value.upper().startswith("ERR!")]
    if any("ERR!" in cell.upper() for cell in cells[1:2]):
        fields.append("memory")
    if any("ERR!" in cell.upper() for cell in cells[2:]):
        fields.append("utilisation or compute mode")
    if not fields:
        return []
    return [{"kind": "smi_err", "gpu": f"GPU {row.group(1)} ({row.group(2).strip()}, {row.group(3)})",
             "index": int(row.group(1)), "fields": fields}]


def _negated(line: str, at: int) -> bool:
    """True when the words before the message on its line deny it ("I no longer see ...")."""
    before = line[:at]
    return ":" not in before[-40:] and bool(_NEGATED.search(before[-60:]))


def _following(pattern: re.Pattern[str], lines: list[str], number: int, after: int = 2) -> Optional[re.Match[str]]:
    """``pattern`` on this line or one of the ``after`` next: PyTorch and JAX print a message over several lines."""
    for line in lines[number - 1:number + after]:
        m = pattern.search(line)
        if m:
            return m
    return None
