"""What a pasted ticket shows happened, judged in its own right: the framework's, CUDA's, the container
toolkit's and the kernel's own messages (facts ``evidence``, read by gpudoctor/pastes/forms/).

A message is evidence, not inference: PyTorch saying a GPU's architecture is not in its build is the
finding, naming the GPU, the architectures the build has and the fix, even when nothing else was
pasted. Each finding quotes the line it came from. A live `check` has no evidence facts, so these
checks are skipped there.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from gpudoctor.checks.base import DRIVER_LOG_COMMAND, Check, Facts, NotApplicable, finding
from gpudoctor.compat import xid as xid_catalogue
from gpudoctor.compat.data import Matrix
from gpudoctor.findings import ERROR, INFO, WARNING, Finding, Subject

TORCH_INSTALL = "https://pytorch.org/get-started/locally/"
ARCH_LIST = 'python -c "import torch; print(torch.__version__, torch.cuda.get_arch_list())"'
#: NVIDIA's Xid catalogue, which says what each Xid number means.
XID_DOCS = "https://docs.nvidia.com/deploy/xid-errors/"
#: NVIDIA's Fabric Manager guide: NVSwitch systems need it running, at the driver's version, before CUDA starts.
FABRIC_MANAGER_DOCS = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"
TOOLKIT_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"


def _evidence(facts: Facts, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """The pasted items of these kinds; a check with none is not run (a paste that quotes no kernel log
    says nothing of the kernel log), so it is never passed on silence."""
    items = facts.get("evidence")
    if not isinstance(items, list):
        raise NotApplicable("no pasted messages to judge (a live check has none)")
    return [e for e in items if isinstance(e, dict) and e.get("kind") in kinds]


def _any(facts: Facts, kinds: tuple[str, ...]) -> None:
    if not _evidence(facts, kinds):
        raise NotApplicable("the pastes quote no such message")


def _quote(item: dict[str, Any]) -> str:
    return f"{item.get('where')}: {str(item.get('text') or '')[:240]}"


FRAMEWORK_KINDS = ("gpu_arch_unsupported", "gpu_too_old", "no_kernel_image", "driver_too_old", "driver_insufficient",
                   "no_driver", "library_not_loaded", "dlopen_failed", "cudnn_mismatch", "torch_cpu_build", "jaxlib_cpu",
                   "contradiction", "jax_backend_failed", "no_binary_for_gpu", "gpu_worked", "no_gpu_visible",
                   "ptxas_too_old", "cudnn_did_not_start", "bf16_refused")
JAX_CHECK = 'python -c "import jax; print(jax.__version__, jax.devices())"'
JAX_INSTALL = "https://docs.jax.dev/en/latest/installation.html"


def check_framework_messages(facts: Facts) -> Iterator[Finding]:
    if not _evidence(facts, FRAMEWORK_KINDS) and not _no_gpu_answers(facts):
        raise NotApplicable("the pastes quote no such message")
    for found in _no_gpu_findings(facts):
        yield found
    for item in _evidence(facts, ("gpu_arch_unsupported", "gpu_too_old", "no_kernel_image", "no_binary_for_gpu")):
        yield _arch_finding(item)
    for item in _evidence(facts, ("ptxas_too_old",))[:1]:
        yield _ptxas_finding(item)
    for item in _evidence(facts, ("bf16_refused",))[:1]:
        yield finding("FWK214", f"the program asked for bfloat16, which {item['gpu']} (compute capability "
                                f"{item['compute_capability']}) does not have", detail=_quote(item),
                      text="Not a fault of the driver, CUDA or the framework: bfloat16 needs compute capability "
                           f"{item['minimum']} or newer. Run the model in float16 (vLLM: --dtype half), or on a newer GPU.")
    cudnn_named = any(e["kind"] == "cudnn_mismatch" or "cudnn" in str(e.get("library") or "").lower()
                      for e in _evidence(facts, ("cudnn_mismatch", "library_not_loaded", "dlopen_failed")))
    for item in _evidence(facts, ("cudnn_did_not_start",))[:1] if not cudnn_named else ():
        yield finding("FWK213", f"cuDNN could not start on the GPU ({item['status']})", detail=_quote(item),
                      text="Most often the GPU's memory was already taken when cuDNN started: TensorFlow and JAX reserve "
                           "most of it up front, and another process may hold the rest. Let them grow instead "
                           "(TF_FORCE_GPU_ALLOW_GROWTH=true for TensorFlow, XLA_PYTHON_CLIENT_PREALLOCATE=false for JAX) "
                           "and look for other processes in nvidia-smi. If it still fails, the cuDNN loaded is not the one "
                           "the framework was built for (another copy first on LD_LIBRARY_PATH, or one another package's "
                           "install replaced), or the driver is older than that cuDNN needs.",
                      commands=["nvidia-smi", "python -m pip list 2>/dev/null | grep -i cudnn", "echo $LD_LIBRARY_PATH"],
                      links=[CUDNN_START_THREAD])
    wsl = (facts.get("host") or {}).get("wsl") is True
    for item in _evidence(facts, ("driver_too_old", "driver_insufficient")):
        supports = f" (the driver supports CUDA up to {item['driver_cuda']})" if item.get("driver_cuda") else ""
        yield finding("FWK202", f"the framework says the NVIDIA driver is too old for its CUDA{supports}", detail=_quote(item),
                      text=(WSL_DRIVER + " Update it on Windows to one that supports the CUDA the framework was built with, "
                            "or install a framework build for an older CUDA.") if wsl else
                           "Install a newer NVIDIA driver (one that supports the CUDA the framework was built with), "
                           "or install a framework build for an older CUDA.",
                      commands=["nvidia-smi"], links=["https://docs.nvidia.com/deploy/cuda-compatibility/"] + ([WSL_DOCS] if wsl else []))
    mac = (facts.get("host") or {}).get("os") == "Darwin"
    for item in _evidence(facts, ("no_driver", "torch_cpu_build", "jaxlib_cpu")) if mac else ():
        yield _on_macos(item)
    for item in _evidence(facts, ("no_driver",)) if not mac else ():
        yield finding("FWK203", "the framework found no NVIDIA driver", detail=_quote(item),
                      text=(WSL_DRIVER + " Install or update it on Windows, then restart WSL (wsl --shutdown in Windows); "
                            "/usr/lib/wsl/lib/libcuda.so.1 must then exist.") if wsl else
                           "Install the NVIDIA driver and check that it loads (nvidia-smi must list the GPU); in a container, "
                           "run it with the GPU runtime (docker run --gpus all).",
                      commands=["ls -l /usr/lib/wsl/lib/", "nvidia-smi"] if wsl else ["nvidia-smi", DRIVER_LOG_COMMAND],
                      links=[WSL_DOCS] if wsl else [])
    for item in _evidence(facts, ("no_gpu_visible",))[:1]:
        yield finding("FWK209", "CUDA started but the framework sees no GPU ('No CUDA GPUs are available')", detail=_quote(item),
                      text="CUDA_VISIBLE_DEVICES hides every GPU (empty, -1, or a number this machine does not have: "
                           "nvidia-smi -L lists the valid ones), or the container was started without GPUs "
                           "(docker run --gpus all); set it before the program starts CUDA.",
                      commands=["echo $CUDA_VISIBLE_DEVICES", "nvidia-smi -L"])
    for how, items in _by_how(_evidence(facts, ("gpu_worked",))).items():
        yield _worked_finding(how, items)
    for item in _evidence(facts, ("library_not_loaded", "dlopen_failed", "cudnn_mismatch")):
        yield _library_finding(item)
    for item in _evidence(facts, ("torch_cpu_build", "jaxlib_cpu")) if not mac else ():
        torch = item["kind"] == "torch_cpu_build"
        yield finding("FWK205", f"{'PyTorch' if torch else 'jaxlib'} is a build without CUDA", detail=_quote(item),
                      text="Install the CUDA build: for PyTorch the command for your CUDA at " + TORCH_INSTALL if torch
                      else 'Install JAX with its CUDA plugin: pip install -U "jax[cuda12]" (or cuda13).',
                      commands=[ARCH_LIST] if torch else ['python -c "import jax; print(jax.devices())"'])
    for item in _evidence(facts, ("jax_backend_failed",)):
        yield _jax_finding(item, facts)
    for item in _evidence(facts, ("contradiction",)):
        yield finding("FWK206", f"the pastes contradict each other: {item['text']}",
                      detail="two interpreters (or two environments) answered; each is reported as pasted, none is judged",
                      text="Run both commands with the same interpreter (python -m torch.utils.collect_env, then the "
                           "failing script, in one shell) and paste both.")


#: The messages that say why a framework sees no GPU: where one is pasted, its own finding names the cause, so the
#: framework's bare "no GPU" answer adds nothing.
_CAUSES = ("gpu_arch_unsupported", "gpu_too_old", "no_kernel_image", "driver_too_old", "driver_insufficient", "no_driver",
           "library_not_loaded", "dlopen_failed", "cudnn_mismatch", "torch_cpu_build", "jaxlib_cpu", "jax_backend_failed",
           "no_binary_for_gpu", "no_gpu_visible", "system_not_ready", "system_driver_mismatch", "compat_not_supported",
           "cuda_unknown_error", "cuda_init_error", "container_no_gpu_driver", "container_init_error", "driver_library_mismatch",
           "smi_failure", "contradiction", "gpu_worked", "gpu_lost_said", "xid")
#: The frameworks' own one-liners that print what they see, to paste back.
_SEES = {"PyTorch": 'python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"',
         "TensorFlow": 'python -c "import tensorflow as tf; print(tf.__version__, tf.config.list_physical_devices(\'GPU\'))"'}
_FACT_NAMES = {"PyTorch": "torch", "TensorFlow": "tensorflow"}
#: The session expressions whose answer an item of that kind is (pastes/forms/session.py).
_EXPRESSIONS = {"torch_cuda_available": "torch.cuda.is_available()", "tensorflow_gpus": "tf.config.list_physical_devices('GPU')",
                "tensorflow_gpu_available": "tf.test.is_gpu_available()"}


def _no_gpu_answers(facts: Facts) -> list[dict[str, Any]]:
    """The frameworks' own "no GPU" answers the pastes show: a session's is_available() False or empty GPU list, and
    what the reporter says or printed (pastes/forms/observed.py), as items with ``framework``."""
    out = [{**e, "framework": "PyTorch"} for e in _evidence(facts, ("torch_cuda_available",)) if e.get("value") is False]
    out += [{**e, "framework": "TensorFlow"} for e in _evidence(facts, ("tensorflow_gpus", "tensorflow_gpu_available"))
            if e.get("value") is False or (e.get("kind") == "tensorflow_gpus" and e.get("value") == 0)]
    return out + _evidence(facts, ("no_gpu_seen",))


def _no_gpu_findings(facts: Facts) -> Iterator[Finding]:
    """FWK211 for each framework that says it sees no GPU, where nothing else in the pastes says why: an error when
    the pastes show an NVIDIA GPU there, a warning when they do not (a machine without one answers the same). The
    reporter's own words never outrank a paste's answer, and a run that reached the GPU outranks them all."""
    host = facts.get("host") or {}
    if host.get("os") == "Darwin" or host.get("wsl_version") == 1 or _evidence(facts, _CAUSES):
        return  # macOS has no CUDA and WSL 1 no GPU (their own findings); a pasted cause has its own finding
    nvml = facts.get("nvml") or {}
    if nvml and not (nvml.get("init") or {}).get("ok"):
        return  # nvidia-smi's failure is the cause, judged by driver.nvml
    listed = [g for g in facts.get("gpus") or [] if isinstance(g, dict)]
    present = _evidence(facts, ("gpu_present",))
    shown = bool(listed) or bool(nvml.get("device_count")) or bool(present)
    seen_by = {"XLA_GPU": " on a machine whose CUDA driver lists a GPU (TensorFlow's XLA_GPU)",
               "TensorFlow found the device": " on a machine whose CUDA driver lists a GPU (TensorFlow's 'Found device')"}.get(
        str((present or [{}])[0].get("how")), " on a machine where PyTorch sees a GPU") if present else ""
    done: set[str] = set()
    for item in _no_gpu_answers(facts):
        name = str(item.get("framework"))
        fw = (facts.get("frameworks") or {}).get(_FACT_NAMES.get(name, "")) or {}
        info = fw.get("info") or {}
        if name in done or (item.get("how") == "said" and info.get("cuda_available") is True):
            continue  # the paste's own True answer outranks a sentence
        if fw.get("status") == "ok" and any(not g.get("stated") for g in listed) and nvml.get("init"):
            continue  # frameworks.gpu judges a framework that answered beside nvidia-smi's list (FWK002)
        done.add(name)
        yield _no_gpu_finding(name, item, info, listed, seen_by if shown and not listed else "", shown,
                              str(host.get("os") or ""))


def _no_gpu_finding(name: str, item: dict[str, Any], info: dict[str, Any], listed: list[dict[str, Any]], seen_by: str,
                    shown: bool, system: str) -> Finding:
    said = {"said": "the reporter says", "printed": "the paste prints"}.get(str(item.get("how")), "a session shows")
    gpu = f" on a machine with {listed[0].get('name')}" if listed and listed[0].get("name") else seen_by
    build = ""
    if info.get("version"):
        build = f" PyTorch {info['version']} is a CPU-only build." if info.get("cpu_only_build") is True else \
            f" {name} {info['version']}" + (f" was built for CUDA {info['built_cuda']}." if info.get("built_cuda") else ".")
    text = ("The usual causes: a build without CUDA (pip's default on Windows, a +cpu wheel), a driver older than the "
            "build's CUDA, or a GPU the build has no code for; the command below shows which. Install the CUDA build for "
            f"this driver from {TORCH_INSTALL}.") if name == "PyTorch" else \
        ("After 2.10 TensorFlow uses a GPU on Linux and WSL 2 only, and it loads the CUDA and cuDNN versions its "
         "tested-build table names: install tensorflow[and-cuda] on Linux, or run it under WSL 2.")
    if name == "TensorFlow" and system == "Windows" and _release(info.get("version")) >= (2, 11):
        text = (f"TensorFlow {info['version']} has no GPU build for native Windows (2.10 was the last): run it under WSL 2 "
                "(pip install 'tensorflow[and-cuda]' there), or use TensorFlow 2.10 with CUDA 11.2 and cuDNN 8.1.")
    expression = _EXPRESSIONS.get(str(item.get("kind")))
    quoted = f"{item.get('where')}: {expression} printed {item.get('text')}" if expression else _quote(item)
    return finding("FWK211", f"{name} sees no GPU ({said} so){gpu}", detail=quoted + build,
                   severity=ERROR if shown else WARNING,
                   text=text + ("" if shown else " If this machine has no NVIDIA GPU, the CPU is all it can use."),
                   commands=[_SEES[name], "nvidia-smi"])


def _release(version: Any) -> tuple[int, int]:
    """(major, minor) of a version string, (0, 0) when it has none."""
    m = re.match(r"^(?:tf\s?)?(\d{1,3})\.(\d{1,3})", str(version or ""))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


#: Under WSL 2 the GPU driver is the Windows one: NVIDIA's CUDA on WSL guide says no Linux driver may be installed
#: inside WSL, where the Windows driver's libcuda is mapped into /usr/lib/wsl/lib.
WSL_DOCS = "https://docs.nvidia.com/cuda/wsl-user-guide/"
WSL_DRIVER = "Under WSL 2 the driver is the Windows NVIDIA driver; never install a Linux NVIDIA driver inside WSL."
#: What each kind of work that reached the GPU says, and what the program (not the stack) should change.
_WORKED = {
    "out_of_memory": ("the GPU ran out of memory{where}: CUDA started and allocated on it, so the driver and the build work",
                      "The work needs more GPU memory than was free: lower the batch size, sequence length or model size, "
                      "use mixed precision or gradient checkpointing, and stop other processes holding GPU memory "
                      "(nvidia-smi lists them). For vLLM, lower max_model_len or raise gpu_memory_utilization."),
    "device_mismatch": ("the program mixed tensors on {devices} in one operation: CUDA works, the fault is in the program",
                        "Move the model and every input tensor to the same device (.to(device)) before the operation."),
    "device_assert": ("a kernel's own assertion failed on the GPU (device-side assert): kernels run there, so the stack works",
                      "The program gave a kernel bad input, most often an index out of range (a label past the number of "
                      "classes, an embedding index past its table). Run with CUDA_LAUNCH_BLOCKING=1, or on the CPU, to see "
                      "the operation and its plain error."),
    "illegal_address": ("a kernel accessed memory it does not own (illegal memory access): kernels run on this GPU",
                        "This is most often a bug in the program or a library (try the newest release); only if it recurs "
                        "across programs, with Xid errors in the kernel log, suspect the GPU."),
    "device_used": ("the paste shows work on the GPU{where}: CUDA started there",
                    "Nothing in the driver or the build stops work on this GPU; look for the problem in the program."),
}


#: NVIDIA's CUDA 10.2 release notes: "the last release to support macOS for developing and running CUDA applications".
CUDA_MACOS_END = "https://docs.nvidia.com/cuda/archive/10.2/cuda-toolkit-release-notes/index.html"


def _on_macos(item: dict[str, Any]) -> Finding:
    """A framework that asked for CUDA on macOS: there is no CUDA build to install there, so the fix is the Apple
    GPU's own backend or a machine with an NVIDIA GPU, never a CUDA wheel."""
    code = "FWK203" if item["kind"] == "no_driver" else "FWK205"
    return finding(code, "the program asks for CUDA on macOS, which has none", detail=_quote(item),
                   text="CUDA 10.2 was NVIDIA's last release for macOS, and no framework ships CUDA builds for it. On Apple "
                        "silicon use PyTorch's MPS backend (torch.device('mps') instead of 'cuda'); for CUDA, run on Linux "
                        "or Windows with an NVIDIA GPU.",
                   commands=['python3 -c "import torch; print(torch.__version__, torch.backends.mps.is_available())"'],
                   links=[CUDA_MACOS_END])


def _by_how(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        out.setdefault(str(item.get("how")), []).append(item)
    return out


def _worked_finding(how: str, items: list[dict[str, Any]]) -> Finding:
    """One note per kind of work the pastes show on the GPU, quoting the first line: evidence that CUDA works,
    never a fault of the stack (an info finding)."""
    item = items[0]
    title, text = _WORKED.get(how, _WORKED["device_used"])
    gpu = f" ({item['gpu']}{', ' + item['total'] + ' total' if item.get('total') else ''})" if item.get("gpu") else ""
    devices = " and ".join(item.get("devices") or []) or "two devices"
    more = f" ({len(items) - 1} more such line(s))" if len(items) > 1 else ""
    return finding("FWK208", title.format(where=gpu, devices=devices), detail=_quote(item) + more, text=text)


def _arch_finding(item: dict[str, Any]) -> Finding:
    gpu = item.get("gpu") or "this GPU"
    if item["kind"] == "gpu_arch_unsupported":
        has = " ".join(item.get("supported") or []) or "a list the message did not include"
        title = f"PyTorch says {gpu} ({item['sm']}) is not supported by this build, which has {has}"
        text = (f"Install a PyTorch build whose architecture list includes {item['sm']} (pick the CUDA variant at "
                f"{TORCH_INSTALL}); the command below must then list {item['sm']}.")
    elif item["kind"] == "gpu_too_old" and item.get("framework") == "TensorFlow":
        title = (f"TensorFlow leaves {gpu} out: its compute capability {item['compute_capability']} is below this "
                 f"build's minimum, {item.get('minimum')}")
        text = ("This TensorFlow build has no code for the GPU, so it runs on the CPU. Install a TensorFlow build that "
                "includes its compute capability (`gpudoctor matrix suggest` lists the pip builds that do; the "
                "prebuilt C library that tfjs-node-gpu and other bindings load has its own minimum), or build "
                "TensorFlow from source with TF_CUDA_COMPUTE_CAPABILITIES including it.")
    elif item["kind"] == "gpu_too_old":
        minimum = f" (this build's minimum is {item['minimum']})" if item.get("minimum") else ""
        title = f"PyTorch says {gpu} (compute capability {item['compute_capability']}) is too old for this build{minimum}"
        text = ("Install a PyTorch build that still includes this GPU's architecture: often another CUDA variant of "
                "the same release (PyTorch 2.7's cu126 and cu118 builds have sm_70, its cu128 build starts at sm_75; "
                f"{TORCH_INSTALL} lists the variants), else an older release, or build PyTorch from source for it.")
    elif item["kind"] == "no_binary_for_gpu":
        title = "CUDA says the program holds no code for this GPU (CUDA_ERROR_NO_BINARY_FOR_GPU)"
        text = ("The binary, or the code a library compiles at run time (CuPy with NVRTC), was built for other "
                "architectures: install a build compiled for this GPU's compute capability, or a CUDA toolkit new "
                "enough to know the GPU for run-time compilation (CUDA 12.8 or newer for Blackwell).")
    else:
        title = "CUDA says no kernel image is available for this GPU: the build lacks its architecture"
        text = ("The code that ran was compiled without this GPU's architecture. If the first command below lists "
                "it (sm_XY for compute capability X.Y), PyTorch has it and the kernel came from a package built on "
                "top of it (vLLM, flash-attn, xformers, a custom extension): install that package's build for this "
                "GPU if it has one, or build it from source with TORCH_CUDA_ARCH_LIST set to the GPU's compute "
                "capability, as the second command prints it. Otherwise install a PyTorch build "
                f"that lists it ({TORCH_INSTALL}).")
    tensorflow = item.get("framework") == "TensorFlow"
    return finding("FWK201", title, detail=_quote(item), text=text,
                   commands=[TF_BUILD if tensorflow else ARCH_LIST, "nvidia-smi --query-gpu=name,compute_cap --format=csv"],
                   links=[TF_INSTALL if tensorflow else TORCH_INSTALL])


TF_BUILD = 'python -c "import tensorflow as tf; print(tf.__version__, tf.sysconfig.get_build_info())"'
TF_INSTALL = "https://www.tensorflow.org/install/pip"


def _ptxas_finding(item: dict[str, Any]) -> Finding:
    """XLA's ptxas too old. For the GPU (its compute capability or architecture unknown to ptxas), XLA falls back to
    the driver's PTX compiler: the program still runs, slower to start, and kernels may fail to load. By version
    ("older than 11.1"), XLA still compiles with it and warns that it miscompiles, so results may be wrong. A warning,
    with where the right ptxas comes from."""
    source = ("XLA (JAX, TensorFlow) compiles its kernels with the first ptxas it finds: the CUDA compiler wheel its "
              "CUDA extra installs, or PATH's. ")
    fix = (" Install the framework's CUDA extra (pip install -U \"jax[cuda12]\", or tensorflow[and-cuda]), or put a "
           "CUDA toolkit new enough (11.8 for Ada and Hopper, 12.8 for Blackwell) first on PATH; an old toolkit's bin "
           "directory early on PATH is the usual cause.")
    if item.get("found"):
        title = f"XLA compiles with ptxas {item['found']}, older than {item.get('needs')}, which it warns miscompiles its code"
        text = source + "XLA warns that a ptxas this old miscompiles its code, so results may be wrong." + fix
    else:
        what = f"compute capability {item['cc']}" if item.get("cc") else str(item.get("sm") or "this GPU")
        title = f"XLA says the ptxas it found does not know {what}, so it compiles with the driver instead"
        text = (source + "This one does not know the GPU, so XLA falls back to the driver's own compiler: slower to "
                "start, and kernels may fail to load." + fix)
    return finding("FWK212", title, detail=_quote(item), text=text, commands=["which -a ptxas", "ptxas --version", "echo $PATH"])


def _jax_finding(item: dict[str, Any], facts: Facts) -> Finding:
    """JAX's CUDA plugin did not start, so JAX runs on the CPU: the cause it printed, and its fix."""
    cause, library = item.get("cause"), item.get("library") or "a CUDA library"
    pip_extra = 'python -m pip install -U "jax[cuda12]"  # or jax[cuda13]: the CUDA major of your jaxlib'
    severity = None
    listed = bool(facts.get("gpus")) or bool(((facts.get("nvml") or {}).get("device_count") or 0))  # a GPU is shown
    if cause == "library_too_old":
        title = (f"JAX runs on the CPU: it found {library} {item.get('found')}, older than {item.get('built')}, "
                 f"{item.get('needs') or 'the version it was built against'}")
        text = (f"Let pip install the {library} JAX was built for: the jax[cudaNN] extra brings NVIDIA's wheels at least "
                "that new. An older copy found first (a system CUDA or conda's cudatoolkit on LD_LIBRARY_PATH, or "
                "nvidia-* wheels pinned by another package) must be removed from LD_LIBRARY_PATH or upgraded.")
        commands = [pip_extra, "python -m pip list 2>/dev/null | grep -i nvidia", "echo $LD_LIBRARY_PATH", JAX_CHECK]
    elif cause == "library_not_loaded":
        title = f"JAX runs on the CPU: it could not load {library}"
        text = (f"Install JAX with its CUDA extra, which brings {library} as NVIDIA's pip wheels; a system copy must "
                "be on the loader's path (LD_LIBRARY_PATH or ldconfig).")
        commands = [pip_extra, "ldconfig -p | grep -E 'libcud|libcublas'", JAX_CHECK]
    elif cause == "no_gpu":
        severity = None if listed else WARNING  # on a machine without a GPU, JAX on the CPU is what it can do
        title = "JAX's CUDA plugin sees no GPU, so JAX runs on the CPU"
        text = ("Check that nvidia-smi lists the GPU in the same environment, that CUDA_VISIBLE_DEVICES does not hide "
                "it, and that a container was started with GPU access (docker run --gpus all).")
        commands = ["nvidia-smi", "echo $CUDA_VISIBLE_DEVICES", JAX_CHECK]
    elif cause == "no_cuda_platform":
        severity = None if listed else WARNING  # older JAX said it on every machine without a GPU
        title = "JAX runs on the CPU: no CUDA platform is registered (a CPU-only jaxlib, or no CUDA plugin beside it)"
        text = ("jaxlib found no CUDA platform: a CPU-only jaxlib is installed, or left over from an earlier install, or "
                "its CUDA plugin is missing or of another release. Uninstall jax, jaxlib and any jax-cuda plugin the "
                "first command lists, then install JAX with its CUDA extra, which brings a matching set.")
        commands = ["python -m pip list 2>/dev/null | grep -i jax", "python -m pip uninstall -y jax jaxlib", pip_extra, JAX_CHECK]
    else:
        title = f"JAX's CUDA backend failed to start, so JAX runs on the CPU: {str(item.get('error') or '')[:160]}"
        text = ("Install jax and its CUDA plugin at one version with the jax[cudaNN] extra (a jaxlib or plugin of "
                "another release, or one built without CUDA, fails this way), and check that nvidia-smi works.")
        commands = [pip_extra, "nvidia-smi", JAX_CHECK]
    return finding("FWK207", title, detail=_quote(item), severity=severity, text=text, commands=commands,
                   links=[JAX_INSTALL])


def _library_finding(item: dict[str, Any]) -> Finding:
    if item["kind"] == "cudnn_mismatch":
        title = f"the framework loaded cuDNN {item['loaded']} but was built with {item['built']}"
        text = "Install the cuDNN the framework was built for (JAX's and TensorFlow's pip CUDA extras bring it), " \
               "or remove the other cuDNN from LD_LIBRARY_PATH."
    elif item["kind"] == "library_not_loaded":
        title = f"the framework could not load {item['library']}"
        text = "Install the CUDA library the framework was built for (for TensorFlow the versions its tested-build table names), " \
               "or put its folder on LD_LIBRARY_PATH."
    else:
        title = "TensorFlow could not load its GPU libraries, so it skips the GPU"
        text = "Install the CUDA and cuDNN versions this TensorFlow was built for (pip install tensorflow[and-cuda] on Linux)."
    return finding("FWK204", title, detail=_quote(item), text=text, commands=["ldconfig -p | grep -E 'libcud|libcublas'"])


def check_container_messages(facts: Facts) -> Iterator[Finding]:
    _any(facts, ("container_no_gpu_driver", "container_init_error"))
    for item in _evidence(facts, ("container_no_gpu_driver", "container_init_error")):
        what = "Docker has no GPU runtime (could not select device driver)" if item["kind"] == "container_no_gpu_driver" \
            else f"the NVIDIA container toolkit failed to start: {item.get('error') or 'initialization error'}"
        text, links = _toolkit_fix(str(item.get("error") or "").lower() if item["kind"] == "container_init_error" else "")
        yield finding("CTR007", what, detail=_quote(item), text=text, commands=["nvidia-smi", "nvidia-ctk --version"],
                      links=links)


#: TensorFlow's thread on cuDNN failing to start, where letting the memory grow was the fix for most.
CUDNN_START_THREAD = "https://github.com/tensorflow/tensorflow/issues/24496"
#: An NVIDIA maintainer on the toolkit failing to load libnvidia-ml.so.1 where nvidia-smi works on the host.
TOOLKIT_NVML_THREAD = "https://github.com/NVIDIA/nvidia-docker/issues/1711"


def _toolkit_fix(error: str) -> tuple[str, list[str]]:
    """What to do about the toolkit's start-up error ``error`` (lower case; empty for Docker without the runtime):
    the toolkit runs, and what failed under it is the driver or Docker itself, or the toolkit is missing."""
    if "driver/library version mismatch" in error:
        return ("The toolkit is installed; NVML failed under it because the host's NVIDIA kernel module and driver "
                "libraries are different versions (a driver upgraded without a reboot). Reboot the host, or stop every "
                "GPU process and reload the nvidia kernel modules.", [TOOLKIT_DOCS])
    if "load library failed" in error and "libnvidia-ml" in error:
        return ("The toolkit could not load the driver's NVML library, libnvidia-ml.so.1. If nvidia-smi works on the "
                "host, Docker cannot reach the host's libraries: Docker installed as a snap, or Docker Desktop (its "
                "containers run in a virtual machine), are the usual causes; use Docker Engine from Docker's own "
                "repository. If nvidia-smi fails on the host too, install the driver first.",
                [TOOLKIT_NVML_THREAD, TOOLKIT_DOCS])
    if error:
        return ("The toolkit is installed (this is its own error): the driver under it failed. Run nvidia-smi on the "
                "host, which must work first; its error names the driver's problem.", [TOOLKIT_DOCS])
    return ("Install the NVIDIA Container Toolkit and register it with Docker (nvidia-ctk runtime configure "
            "--runtime=docker, then restart Docker); if it is installed, the host's driver must work first "
            "(nvidia-smi on the host).", [TOOLKIT_DOCS])


def check_driver_messages(facts: Facts, matrix: Matrix) -> Iterator[Finding]:

    _any(facts, ("driver_library_mismatch", "xid", "system_not_ready", "gpu_lost_said", *_CUDA_INIT))
    wsl = (facts.get("host") or {}).get("wsl") is True
    for kind, (title, text, commands, link) in _CUDA_INIT.items():
        for item in _evidence(facts, (kind,))[:1]:
            yield finding("DRV023", title, detail=_quote(item), commands=[] if wsl else commands, links=[link],
                          text="Under WSL 2, update the Windows NVIDIA driver and restart WSL (wsl --shutdown in Windows)."
                          if wsl and kind == "cuda_unknown_error" else text)
    for item in _evidence(facts, ("system_not_ready",))[:1]:
        yield finding("DRV022", "CUDA says the system is not ready (CUDA_ERROR_SYSTEM_NOT_READY, error 802)", detail=_quote(item),
                      text="A daemon the driver needs is not running. On NVSwitch systems (HGX and DGX A100, H100, H200, "
                           "B200) that is NVIDIA Fabric Manager: install the nvidia-fabricmanager package of exactly the "
                           "driver's version and start it; CUDA then starts once the fabric is trained.",
                      commands=["systemctl status nvidia-fabricmanager", "nvidia-smi -q | grep -i -A2 fabric",
                                "cat /proc/driver/nvidia/version"], links=[FABRIC_MANAGER_DOCS])
    reason = (((facts.get("nvml") or {}).get("init")) or {}).get("reason")
    for item in _evidence(facts, ("driver_library_mismatch",)):
        if reason == "driver_library_mismatch":
            continue  # nvidia-smi's own failure says it (driver.nvml)
        said = f" (libraries {item['client']}, kernel module {item['module']})" if item.get("client") else ""
        yield finding("DRV020", f"the driver reports that its kernel module and libraries are different versions{said}",
                      detail=_quote(item), severity=ERROR,
                      text="Reboot, or stop every GPU process and reload the nvidia kernel modules.", commands=[DRIVER_LOG_COMMAND])
    xids = [int(e.get("xid") or 0) for e in _evidence(facts, ("xid",))]
    for item in _evidence(facts, ("gpu_lost_said",))[:1] if 79 not in xids else ():
        yield finding("DRV024", "the reporter says the GPU fell off the bus: it stops computing until it is reset",
                      detail=_quote(item),
                      text="A GPU that falls off the bus (the kernel log's Xid 79) is lost to the driver until the machine "
                           f"reboots or the GPU is reset. {FELL_OFF_CAUSES}",
                      commands=[DRIVER_LOG_COMMAND, "nvidia-smi -q -d TEMPERATURE,POWER"], links=[XID_DOCS])
    for item in _evidence(facts, ("xid",)):
        xid = int(item.get("xid") or 0)
        entry = xid_catalogue.entry(matrix, xid) or {}
        # the catalogue's error Xids (the GPU needs a reset, a reboot or its hardware checked) are errors in a
        # ticket too; one whose immediate action the catalogue gives as IGNORE (43 after a program's fault, 63 a
        # successful row remap) is a note; any other Xid the ticket quotes is a warning about what happened to its program
        judged = xid_catalogue.severity(matrix, xid, str(item.get("detail") or ""))
        ignore = judged == INFO and entry.get("immediate_action") == "IGNORE"
        yield finding("DRV020", f"the kernel log shows {xid_catalogue.describe(matrix, xid)} on the GPU at {item.get('bus_id')}",
                      detail=_quote(item), severity=ERROR if judged == ERROR else INFO if ignore else None,
                      text=str(entry.get("action") or "Look the Xid up in NVIDIA's catalogue: hardware Xids (GPU fallen "
                                                      "off the bus, ECC, NVLink) need a reset or a reboot and, if they "
                                                      "recur, the hardware checked; others point at the program.")
                      + (f" {FELL_OFF_CAUSES}" if xid == 79 else ""),
                      commands=[DRIVER_LOG_COMMAND], links=[xid_catalogue.XID_DOCS])


#: Why a GPU falls off the bus (Xid 79), as NVIDIA's Xid catalogue gives the causes.
FELL_OFF_CAUSES = ("NVIDIA's catalogue names overheating, power (the supply, its cables, transients) and the PCIe slot "
                   "or system BIOS as the causes; check them if it recurs.")


#: cuInit's failures other than 802, each with what it means and its fix (the CUDA driver API's error list; NVIDIA's
#: compatibility guide for 804: forward compatibility runs on data-center GPUs only).
_CUDA_INIT = {
    "system_driver_mismatch": (
        "CUDA cannot start: its driver library (libcuda) and the kernel module are different versions (error 803)",
        "Make libcuda match the loaded kernel module: reboot after a driver upgrade, and take a CUDA forward-compatibility "
        "package (cuda-compat, /usr/local/cuda/compat on LD_LIBRARY_PATH) that does not match it off the loader path.",
        ["cat /proc/driver/nvidia/version", "ldconfig -p | grep libcuda.so", "echo $LD_LIBRARY_PATH"],
        "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html"),
    "compat_not_supported": (
        "CUDA cannot start: the forward-compatibility package is in use on a GPU that does not support it (error 804)",
        "Forward compatibility runs only on data-center GPUs: take the cuda-compat libraries off the loader path (a "
        "container image's /usr/local/cuda/compat), and use a CUDA no newer than the host driver supports, or upgrade "
        "the host driver.",
        ["nvidia-smi", "echo $LD_LIBRARY_PATH", "ldconfig -p | grep libcuda.so"],
        "https://docs.nvidia.com/deploy/cuda-compatibility/"),
    "cuda_init_error": (
        "CUDA's driver failed to initialise (error 3), so the framework sees no GPU",
        "The driver could not start CUDA: check that nvidia-smi lists the GPU in the same environment (a container needs "
        "--gpus), that the user may open /dev/nvidia* (the video group), and that the kernel log holds no NVRM or Xid "
        "errors; a driver upgraded without a reboot fails this way too.",
        ["nvidia-smi", "ls -l /dev/nvidia*", DRIVER_LOG_COMMAND],
        "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"),
    "cuda_unknown_error": (
        "CUDA failed to start with an unknown error (999), so the framework sees no GPU",
        "Most often after suspend and resume: reload the nvidia_uvm module with no GPU program running, or reboot; if it "
        "persists, look for Xid errors in the kernel log.",
        ["sudo modprobe -r nvidia_uvm && sudo modprobe nvidia_uvm", DRIVER_LOG_COMMAND],
        "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html"),
}


def check_gpu_messages(facts: Facts) -> Iterator[Finding]:
    _any(facts, ("smi_err", "smi_handle"))
    for item in _evidence(facts, ("smi_handle",)):
        yield finding("GPU104", f"nvidia-smi could not open {item.get('gpu')}: {item.get('error')}", detail=_quote(item),
                      severity=ERROR,
                      text="The driver lists this GPU but cannot open it, usually because it fell off the bus or hung "
                           "(Xid 79 or another hardware Xid in the kernel log): work on it fails until the GPU is reset or "
                           "the machine rebooted. Check its power, cooling and seating if it recurs.",
                      commands=[DRIVER_LOG_COMMAND, "lspci -nn | grep -i nvidia"], links=[XID_DOCS])
    for item in _evidence(facts, ("smi_err",)):
        fields = ", ".join(item.get("fields") or []) or "a reading"
        index = item.get("index") if isinstance(item.get("index"), int) else None
        yield finding("GPU104", f"nvidia-smi could not read the {fields} of {item.get('gpu')} (ERR!)", detail=_quote(item),
                      subject=Subject(kind="gpu", gpu_index=index) if index is not None else None,
                      text="The driver failed to read this GPU's sensors, as it does for a GPU in a bad state: look for Xid "
                           "errors on it in the kernel log. If there are none and the GPU works, the reading failed once; "
                           "if there are, reset it or reboot, and check its power, cooling and seating if it recurs.",
                      commands=[DRIVER_LOG_COMMAND, "nvidia-smi -q -i " + str(item.get("index", 0))], links=[XID_DOCS])


#: AMD's list of the GPUs, operating systems and framework releases each ROCm release supports.
ROCM_MATRIX = "https://rocm.docs.amd.com/en/latest/compatibility/compatibility-matrix.html"
ROCM_ONE_LINER = 'python -c "import torch; print(torch.__version__, torch.version.hip, torch.cuda.is_available())"'


def check_rocm(facts: Facts) -> Iterator[Finding]:
    """A ticket from an AMD ROCm stack: said plainly, as a note, instead of a verdict no NVIDIA rule can give. Its
    area shows as not checked (status.NOTHING_MEASURED), so nothing reads as passed."""
    stack = facts.get("rocm")
    if not isinstance(stack, dict) or not stack.get("signs"):
        raise NotApplicable("no pasted AMD ROCm stack to name (a live check has none)")
    signs = [s for s in stack["signs"] if isinstance(s, dict)]
    shown = "; ".join(f"{s.get('where')}: {s.get('what')} ({str(s.get('text') or '')[:120]})" for s in signs[:3])
    yield finding("FWK210", "an AMD GPU stack (ROCm): outside gpudoctor's NVIDIA CUDA checks, so none of it is judged",
                  detail=f"Read as ROCm from {shown}.",
                  text="gpudoctor judges NVIDIA drivers, GPUs and CUDA builds only. A ROCm PyTorch answers through torch.cuda, "
                       "so its messages look like CUDA's; judge it with AMD's compatibility matrix (the GPU's gfx target "
                       "and the ROCm release the build names) and ROCm's own tools.",
                  commands=["rocminfo", "rocm-smi", ROCM_ONE_LINER], links=[ROCM_MATRIX])


def check_wsl1(facts: Facts) -> Iterator[Finding]:
    """A paste from WSL 1, whose kernel release says so: it has no GPU for CUDA to find, whatever is installed."""
    host = facts.get("host") or {}
    if host.get("wsl_version") != 1:
        raise NotApplicable("no pasted WSL 1 kernel release (a live check does not tell WSL 1 apart)")
    yield finding("DRV025", "this is WSL 1, which has no GPU: CUDA runs under WSL 2 only",
                  detail=f"{host.get('source') or 'the paste'} names a WSL 1 kernel (4.4.0-NNNNN-Microsoft); WSL 2's "
                         "kernel release ends in microsoft-standard.",
                  text="Convert the distribution to WSL 2 in Windows (wsl --set-version <distribution> 2), keep the "
                       "Windows NVIDIA driver current, and install no Linux NVIDIA driver inside it.",
                  commands=["wsl -l -v", "wsl --set-version Ubuntu 2"], links=[WSL_DOCS])


CHECKS = (
    Check("driver.messages", "driver", "the pasted kernel log shows no driver error", ("DRV020", "DRV022", "DRV023", "DRV024"),
          check_driver_messages,
          (), reads_matrix=True),
    Check("driver.wsl1", "driver", "the pasted Linux is not WSL 1", ("DRV025",), check_wsl1, ()),
    Check("container.messages", "container", "the pasted container errors", ("CTR007",), check_container_messages,
          ()),
    Check("frameworks.messages", "frameworks", "the frameworks' own pasted messages",
          ("FWK201", "FWK202", "FWK203", "FWK204", "FWK205", "FWK206", "FWK207", "FWK208", "FWK209", "FWK211", "FWK212",
           "FWK213", "FWK214"),
          check_framework_messages, ()),
    Check("gpus.messages", "gpus", "the pasted nvidia-smi readings", ("GPU104",), check_gpu_messages, ()),
    Check("frameworks.rocm", "frameworks", "the pasted stack is NVIDIA's CUDA, not AMD's ROCm", ("FWK210",), check_rocm, ()),
)
#: The checks that judge only what a ticket shows: a live check has nothing for them, and skips them.
PASTE_ONLY = frozenset(c.id for c in CHECKS)
