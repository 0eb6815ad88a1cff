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

from gpudoctor import versions
from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.nvrm import parse_xid

_NEGATED = re.compile(r"\b(?:no longer|not|never|without|instead of|don't|doesn't|didn't|won't)\b", re.I)
_SM = re.compile(r"(?:^|:\s)\s*([^:\n]{1,120}?) with CUDA capability sm_(\d{2,3})\s+is not compatible with the current "
                 r"PyTorch installation", re.I)
_SUPPORTS = re.compile(r"supports CUDA capabilities((?:\s+(?:sm|compute)_\d{2,3}[a-z]?){1,40})", re.I)
# the warning's last line, which names the GPU again: "If you want to use the NVIDIA GeForce RTX 3060 GPU with PyTorch"
_WANT_GPU = re.compile(r"If you want to use the (.{1,120}?) GPU with PyTorch")
#: The kernel's words for a library of another version than its module (NVRM: API mismatch), often over two lines.
_NVRM_CLIENT = re.compile(r"the client(?: '[^'\n]{0,64}')?(?: \(pid \d{1,10}\))? has the version (\d{3}\.\d{1,3}(?:\.\d{1,3})?)")
_NVRM_MODULE = re.compile(r"this kernel module has the version (\d{3}\.\d{1,3}(?:\.\d{1,3})?)")
#: TensorFlow leaving a GPU out that its build has no code for (gpu_device.cc, every release since 1.0).
_TF_IGNORED = re.compile(r"Ignoring visible gpu device \(device: \d{1,3}, name: ([^,\n]{1,120}),[^)\n]{0,200}\) with Cuda "
                         r"compute capability (\d{1,2}\.\d)\. The minimum required Cuda capability is (\d{1,2}\.\d)")
#: vLLM refusing bfloat16 on a GPU without it.
_BF16_REFUSED = re.compile(r"Bfloat16 is only supported on GPUs with compute capability of at least (\d{1,2}\.\d)\. "
                           r"Your (.{1,80}?) GPU has compute capability (\d{1,2}\.\d)")
#: cuDNN failing to start: TensorFlow's and XLA's handle creation, and PyTorch's error for the same.
# (PyTorch's INTERNAL_ERROR and ALLOC_FAILED come mid-run, from a kernel, not from cuDNN starting)
_CUDNN_START = re.compile(r"Could not create cudnn handle: (CUDNN_STATUS_(?:INTERNAL_ERROR|NOT_INITIALIZED|ALLOC_FAILED))|"
                          r"cuDNN error: (CUDNN_STATUS_NOT_INITIALIZED)")
#: XLA's words for a ptxas that does not know the GPU, or is older than XLA needs (asm_compiler.cc).
_PTXAS = (re.compile(r"ptxas does not support CC (?P<cc>\d{1,2}\.\d)"),
          # XLA's own prefix: Triton's bundled ptxas says the same words, and is not XLA's
          re.compile(r"The ptxas error was: ptxas fatal\s*:\s*Value '(?P<sm>sm_\d{2,3}[a-z]?)' is not defined for option 'gpu-name'"),
          re.compile(r"You are using ptxas (?P<found>\d+(?:\.\d+)+), which is older than (?P<needs>\d+\.\d+)"))
_OLD_GPU = re.compile(r"Found GPU(\d+) (.{1,120}?) which is of cuda capability (\d+\.\d+)", re.I)
_MIN_CC = re.compile(r"minimum cuda capability (?:supported by this library )?is (\d+\.\d+)", re.I)
_TOO_OLD = re.compile(r"driver on your system is too old \(found version (\d{4,5})\)", re.I)
_DLOPEN = re.compile(r"Could not load dynamic library '([^']{1,120})'", re.I)
# cuDNN's check in TensorFlow and XLA: "7201 (compatibility version 7200) but source was compiled with 7004" in
# older releases, "8.7.0 but source was compiled with: 8.9.4" in newer ones
_JAX_CUDNN = re.compile(r"Loaded runtime CuDNN library: ([\d.]{1,12})(?: \(compatibility version [\d.]{1,12}\))? but source "
                        r"was compiled with:? ([\d.]{1,12}[\d])", re.I)
_CONTAINER_INIT = re.compile(r"nvidia-container-cli: initialization error: (.{0,200})", re.I)
_NVRM = re.compile(r"NVRM: (.{1,200})")
# jaxlib's CUDA plugin when it cannot start: "CUDA backend failed to initialize: <cause> (Set TF_CPP_MIN_LOG_LEVEL=0 ...)"
# (jax 0.4.x), "Backend 'cuda' failed to initialize: <cause>. Available backends are ['cpu']" (later releases), or
# "Unable to initialize backend 'cuda': <cause>" (when the platform was asked for)
_JAX_BACKEND = re.compile(r"(?:(?:CUDA|cuda|GPU|gpu) backend failed to initialize|Backend '(?:cuda|gpu)' failed to initialize|"
                          r"Unable to initialize backend '(?:cuda|gpu)'\"?):\s{0,4}(.{1,400}?)\s*(?:\(Set TF_CPP_MIN_LOG_LEVEL|"
                          r"\.* ?Available backends are|$)")
# a jaxlib that registered no CUDA platform: the CPU-only jaxlib (the message wraps onto the next line)
_NO_CUDA_PLATFORM = re.compile(r"registered platform with name:\s*\"?(?:cuda|gpu)\b")
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
# work that reached the GPU and failed there for the program's own reasons: CUDA started, allocated or ran kernels
_TORCH_OOM = re.compile(r"Tried to allocate ([\d.]{1,12} [KMGT]i?B)(?:[.;]?\s{0,3}\(?GPU (\d{1,3})(?:; | has a total capacity of )"
                        r"([\d.]{1,12} [KMGT]i?B))?")
_MISMATCH = re.compile(r"found at least two devices, ([\w:]{1,12}) and ([\w:]{1,12})")
# the values before a long tensor repr's closing "device='cuda:0')": "         [ 8.6392]]], "
_TENSOR_TAIL = re.compile(r"\s*[-\d\s.,eE+\[\]]*\],\s*")
# TensorFlow once it made a GPU device of its own: "Created device /job:.../device:GPU:0 with 9620 MB memory:  -> device: 0,
# name: NVIDIA GeForce RTX 3060, pci bus id: 0000:01:00.0, compute capability: 8.6" (older: "Created TensorFlow device")
_TF_DEVICE = re.compile(r"Created (?:TensorFlow )?device \(?/job:[^ ]{1,80}device:GPU:(\d{1,2}).{0,120}?name: ([^,]{1,80}), "
                        r"pci bus id: [^,]{1,20}, compute capability: (\d{1,2}\.\d)")
#: (lowercase words tested first, how the program reached the GPU) for work that ran on it and failed for the
#: program's own reasons: proof that CUDA started there, never a fault of the stack.
GPU_WORKED = (
    ("cuda out of memory", "out_of_memory"),  # PyTorch's caching allocator
    ("cuda error: out of memory", "out_of_memory"),
    ("oom when allocating tensor", "out_of_memory"),  # TensorFlow, with device:GPU on the line
    ("resource_exhausted: out of memory", "out_of_memory"),  # XLA (JAX, TensorFlow)
    ("resource_exhausted: failed to allocate request", "out_of_memory"),
    ("tokens that can be stored in kv cache", "out_of_memory"),  # vLLM: the model's context does not fit beside it
    ("no available memory for the cache blocks", "out_of_memory"),
    ("# gpu blocks:", "device_used"),  # vLLM sized its KV cache after a profiling run on the GPU
    ("expected all tensors to be on the same device", "device_mismatch"),
    ("device-side assert triggered", "device_assert"),
    ("an illegal memory access was encountered", "illegal_address"),
    ("loaded cudnn version", "device_used"),  # TensorFlow and XLA print it once cuDNN started on the GPU
)
#: What nvidia-smi prints when it cannot start, as words quoted in prose ("I get `NVML: Unknown Error`"): the
#: reason each means, as nvidia_smi.FAILURES gives for its own lines. "No devices were found" alone is too
#: common a phrase: it counts with nvidia-smi named on the line.
SMI_QUOTED = (
    ("couldn't communicate with the nvidia driver", "driver_not_loaded"),
    ("nvml: unknown error", "unknown"),
    ("nvml: insufficient permissions", "no_permission"),
    ("couldn't find libnvidia-ml.so", "library_not_found"),
    ("no devices were found", "no_devices"),
)
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
    # CUDA_ERROR_NO_BINARY_FOR_GPU (209): the module holds no SASS or PTX this GPU runs
    ("no_binary_for_gpu", "no_binary_for_gpu"),
    ("no binary for gpu", "no_binary_for_gpu"),
    ("nobinaryforgpu", "no_binary_for_gpu"),  # the same error as a binding's enum names it (rust-gpu-tools)
    # CUDA_ERROR_SYSTEM_NOT_READY (802): a daemon the driver needs is not running (Fabric Manager on NVSwitch systems)
    ("system_not_ready", "system_not_ready"),
    ("system not yet initialized", "system_not_ready"),
    # cuInit's other failures: 803 (libcuda and the kernel module differ), 804 (the forward-compatibility package on a
    # GPU that does not support it), and PyTorch's report of 999 (most often after suspend and resume)
    ("system has unsupported display driver / cuda driver combination", "system_driver_mismatch"),
    ("cuda_error_system_driver_mismatch", "system_driver_mismatch"),
    ("forward compatibility was attempted on non supported hw", "compat_not_supported"),
    ("cuda_error_compat_not_supported_on_device", "compat_not_supported"),
    ("cuda initialization: cuda unknown error", "cuda_unknown_error"),
    # PyTorch's words for cudaErrorInitializationError (3): the driver did not start CUDA (no usable GPU, a driver
    # that is not loaded or is broken, device files it may not open)
    ("cuda driver initialization failed", "cuda_init_error"),
    # PyTorch when CUDA started and counts no GPU (CUDA_VISIBLE_DEVICES, a container without GPUs)
    ("no cuda gpus are available", "no_gpu_visible"),
)

#: Every word a message above is tested by, for the one scan that passes over lines holding none.
TRIGGER_WORDS = ("cuda capability sm_", "ptxas", "cudnn_status_", "bfloat16 is only supported", "ignoring visible gpu device", "which is of cuda capability", "is too old (found version", "could not load dynamic library",
                 "loaded runtime cudnn library", "nvidia-container-cli: initialization error", "nvrm:", "failed to initialize",
                 "unable to initialize backend", "err!", "the device handle for gpu", "gpu with pytorch", "assertion `",
                 "device='cuda:", "created tensorflow device", "created device",
                 *(w for w, _ in FIXED), *(w for w, _ in GPU_WORKED), *(w for w, _ in SMI_QUOTED))


def _alternation(words: tuple[str, ...]) -> str:
    """One expression matching any of ``words``, their common prefixes factored out: at each position of a line
    the engine tries one branch per distinct next character instead of one per word."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(trie)


_TRIGGER = re.compile(_alternation(TRIGGER_WORDS))


def read(lines: list[str], matrix: Matrix = BUNDLED) -> Optional[dict[str, Any]]:
    """The messages in ``lines`` (1-based line numbers), first occurrence of each; None when there are none. A
    GPU that PyTorch's warning names without its architecture is looked up in ``matrix``."""
    evidence: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    read_lines: set[str] = set()
    for number, line in enumerate(lines, 1):
        lowered = line.lower()
        if not _TRIGGER.search(lowered) or line in read_lines:
            continue  # one scan in C for every message's words; a repeated line says nothing new
        read_lines.add(line)
        for item in _items(line, lowered, lines, number, matrix):
            key = (item["kind"], item.get("gpu"), item.get("library"), item.get("xid"), item.get("how"))
            if key in seen:
                continue
            seen.add(key)
            item["line"], item["text"] = number, line.strip()[:300]
            evidence.append(item)
    return {"evidence": evidence, "notes": []} if evidence else None


def _items(line: str, lowered: str, lines: list[str], number: int, matrix: Matrix) -> list[dict[str, Any]]:
    out = []
    if "cuda capability sm_" in lowered:
        m = _SM.search(line)
        if m and not _negated(line, m.start(2)):
            gpu = _gpu_name(m.group(1))
            item: dict[str, Any] = {"kind": "gpu_arch_unsupported", "gpu": gpu, "sm": f"sm_{m.group(2)}"}
            supported = _following(_SUPPORTS, lines, number)
            if supported:
                item["supported"] = supported.group(1).split()
            out.append(item)
    if "gpu with pytorch" in lowered and not out:
        out += _wanted_gpu(line, lines, number, matrix)
    if "which is of cuda capability" in lowered:
        m = _OLD_GPU.search(line)
        if m:
            item = {"kind": "gpu_too_old", "gpu": m.group(2).strip(), "compute_capability": m.group(3)}
            minimum = _following(_MIN_CC, lines, number)
            if minimum:
                item["minimum"] = minimum.group(1)
            out.append(item)
    if "ptxas" in lowered:
        out += _ptxas(line)
    if "ignoring visible gpu device" in lowered:
        m = _TF_IGNORED.search(line)
        if m:
            out.append({"kind": "gpu_too_old", "gpu": m.group(1).strip(), "compute_capability": m.group(2),
                        "minimum": m.group(3), "framework": "TensorFlow"})
    if "bfloat16 is only supported" in lowered:
        m = _BF16_REFUSED.search(line)
        if m:
            out.append({"kind": "bf16_refused", "gpu": m.group(2).strip(), "compute_capability": m.group(3),
                        "minimum": m.group(1)})
    if "cudnn_status_" in lowered:
        m = _CUDNN_START.search(line)
        if m and not _negated(line, m.start()):
            out.append({"kind": "cudnn_did_not_start", "status": m.group(1) or m.group(2)})
    if "is too old (found version" in lowered:
        m = _TOO_OLD.search(line)
        if m and not _negated(line, m.start()):
            found = int(m.group(1))
            out.append({"kind": "driver_too_old", "driver_cuda": versions.cuda(found) or str(found)})
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
        xid = parse_xid(line)
        if xid:
            out.append({"kind": "xid", "bus_id": xid["bus_id"], "xid": xid["xid"], "detail": xid["detail"]})
        elif "api mismatch" in lowered or "version mismatch" in lowered:
            client, module = _NVRM_CLIENT.search(line), _following(_NVRM_MODULE, lines, number, 1)
            out.append({"kind": "driver_library_mismatch", **({"client": client.group(1), "module": module.group(1)}
                                                            if client and module else {})})
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
        if at >= 0 and not _negated(line, at) and not (kind == "driver_library_mismatch" and out) \
                and not any(o["kind"] == kind for o in out):
            out.append({"kind": kind})
    out += _gpu_worked(line, lowered)
    out += _smi_quoted(line, lowered)
    return out


def _gpu_worked(line: str, lowered: str) -> list[dict[str, Any]]:
    """Work that reached the GPU on this line (an out-of-memory, tensors on two devices, a kernel's assertion):
    the program's fault or its size, and proof that CUDA started there."""
    for words, how in GPU_WORKED:
        at = lowered.find(words)
        if at < 0 or _negated(line, at) or (words == "oom when allocating tensor" and "device:gpu" not in lowered):
            continue
        item: dict[str, Any] = {"kind": "gpu_worked", "how": how}
        if how == "out_of_memory":
            m = _TORCH_OOM.search(line) if "tried to allocate" in lowered else None
            if m:
                item["asked"] = m.group(1)
                if m.group(2):
                    item["gpu"], item["total"] = f"GPU {m.group(2)}", m.group(3)
        elif how == "device_mismatch":
            m = _MISMATCH.search(line)
            if m:
                item["devices"] = [m.group(1), m.group(2)]
        return [item]
    if "assertion `" in lowered and ".cu:" in lowered and "failed" in lowered:
        return [{"kind": "gpu_worked", "how": "device_assert"}]  # the kernel's own line: file.cu, block and thread
    if "device='cuda:" in lowered:
        gpu = _tensor_on_gpu(line, lowered)
        if gpu:
            return [{"kind": "gpu_worked", "how": "device_used", "gpu": gpu}]
    if "created tensorflow device" in lowered or ("created device" in lowered and "device:gpu" in lowered):
        m = _TF_DEVICE.search(line)
        if m:
            return [{"kind": "gpu_worked", "how": "device_used", "gpu": m.group(2).strip(), "compute_capability": m.group(3),
                     "framework": "tensorflow"}]
    return []


def _tensor_on_gpu(line: str, lowered: str) -> Optional[str]:
    """``cuda:N`` where the line prints a tensor on the GPU ("tensor([...], device='cuda:0')", or the last line of
    a long repr), not where code makes one ("torch.tensor(x, device='cuda:0')"). Only the 400 characters before
    the device are looked at, so a long line costs no more than a short one."""
    at = lowered.find("device='cuda:")
    index = re.match(r"(\d{1,2})'", line[at + 13:at + 16])
    if not index:
        return None
    before = line[max(0, at - 400):at]
    opened = before.rfind("tensor(")
    printed = opened >= 0 and not (opened and (before[opened - 1].isalnum() or before[opened - 1] in "._")) \
        and "=" not in before[opened:]
    if printed or (at <= 400 and _TENSOR_TAIL.fullmatch(before)):
        return f"cuda:{index.group(1)}"
    return None


def _smi_quoted(line: str, lowered: str) -> list[dict[str, Any]]:
    """nvidia-smi's failure quoted in a sentence or inline code ("nvidia-smi says `No devices were found`")."""
    for words, reason in SMI_QUOTED:
        at = lowered.find(words)
        if at < 0 or _negated(line, at) or (reason == "no_devices" and "nvidia-smi" not in lowered and "nvidia smi" not in lowered):
            continue
        opened = max(line.rfind("`", 0, at), line.rfind('"', 0, at))
        start = opened + 1 if 0 <= opened and at - opened <= 60 else at  # the quoted words, else the message's own
        ends = [i for i in (line.find("`", at), line.find('"', at)) if i >= 0]
        return [{"kind": "smi_failure", "reason": reason, "message": line[start:min(ends, default=len(line))].strip()[:200]}]
    return []


#: What a log puts before the message: a worker's tag ("(VllmWorker rank=0 pid=1) "), after docker compose's
#: service column ("vllm-1  | ") or a quoting "> ". A GPU's name holds neither a "|" nor a leading "(".
_LOG_TAG = re.compile(r"^\s*\([^()]*\)\s*")


def _gpu_name(said: str) -> str:
    """The GPU's name from what precedes "with CUDA capability" on its line, without the log's own columns."""
    name = said.rsplit("|", 1)[-1].strip().lstrip("-*> ")
    return _LOG_TAG.sub("", name).strip("'\"`").rsplit("UserWarning:", 1)[-1].strip()


def _ptxas(line: str) -> list[dict[str, Any]]:
    """XLA saying its ptxas is too old: for the GPU's compute capability, for its architecture, or by version."""
    for pattern in _PTXAS:
        m = pattern.search(line)
        if m and not _negated(line, m.start()):
            return [{"kind": "ptxas_too_old", **{k: v for k, v in m.groupdict().items() if v}}]
    return []


def _wanted_gpu(line: str, lines: list[str], number: int, matrix: Matrix) -> list[dict[str, Any]]:
    """PyTorch's architecture warning quoted without its first line (the ticket's title held it): the GPU its
    last line names, with the supported list printed just above, is the same finding when the matrix gives the
    GPU's architecture and the list lacks it."""
    m = _WANT_GPU.search(line)
    supported = next((s for s in (_SUPPORTS.search(x) for x in lines[max(0, number - 3):number]) if s), None)
    if not m or not supported:
        return []
    from gpudoctor.pastes.gpu_names import matrix_gpu

    gpu = m.group(1).strip()
    entry = matrix_gpu(matrix, gpu)
    cc = str((entry or {}).get("compute_capability") or "")
    has = supported.group(1).split()
    if not re.fullmatch(r"\d{1,2}\.\d", cc) or f"sm_{cc.replace('.', '')}" in has:
        return []
    return [{"kind": "gpu_arch_unsupported", "gpu": gpu, "sm": f"sm_{cc.replace('.', '')}", "supported": has}]


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
    elif _following(_NO_CUDA_PLATFORM, lines, number, 1):
        item["cause"] = "no_cuda_platform"
    return [item]


def _version_of(library: str, encoded: str) -> str:
    """CUDA's integer version (12010 is 12.1) and cuDNN 8's (8906 is 8.9.6: 1000 * major + 100 * minor + patch);
    the other libraries' encodings differ from one library to the next, so their numbers stay as printed."""
    n = int(encoded)
    if library.upper() == "CUDA" and n >= 10000:
        return versions.cuda(n) or encoded
    if library.lower() == "cudnn" and n < 10000:
        return versions.cudnn(n) or encoded
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
