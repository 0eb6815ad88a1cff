"""Environment variables that steer a framework on the GPU (``host.framework_env``): a variable that
hides the GPU from a framework or makes its first GPU call fail is named as the cause, with the exact
fix; one that only slows work down is a note. A variable set to a value the framework accepts is no
finding.

The frameworks' rules for each variable, and how they were measured, are the view
gpudoctor/views/framework_env.py, which the framework checks also ask for the cause of a failure
(``steering_cause``); these checks report what it finds.
"""

from __future__ import annotations

from typing import Iterator

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding, nvml_ready
from gpudoctor.findings import WARNING, Finding
from gpudoctor.frameworks_table import NAMES
from gpudoctor.views.framework_env import (FALLS_BACK, TF_ALLOCATORS, TORCH_ALLOC_VARS, alloc_conf_causes, framework_env,
                                           framework_facts, framework_info, jax_platforms, not_installed, quoted,
                                           xla_client_causes, xla_flags_causes)
from gpudoctor.views.visibility import CUDA_ENV_DOCS, resolve

TORCH_ALLOC_DOCS = "https://pytorch.org/docs/stable/notes/cuda.html#memory-management"
JAX_MEMORY_DOCS = "https://docs.jax.dev/en/latest/gpu_memory_allocation.html"
JAX_PLATFORMS_SOURCE = "https://github.com/jax-ml/jax/blob/main/jax/_src/xla_bridge.py"
TF_ALLOCATOR_SOURCE = ("https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/common_runtime/gpu/"
                       "gpu_process_state.cc")
NCCL_ENV_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
XLA_FLAGS_DOCS = "https://docs.jax.dev/en/latest/xla_flags.html"
LAZY_LOADING_DOCS = "https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/lazy-loading.html"

_TRUE = ("1", "true", "yes", "on", "y")


def _visible_gpus(facts: Facts) -> int:
    if not nvml_ready(facts):
        raise NotApplicable("NVML is not available")
    count = len(resolve(facts).devices)
    if count == 0:
        raise NotApplicable("no GPU is visible to CUDA programs here")
    return count


# --- JAX_PLATFORMS, JAX_PLATFORM_NAME ------------------------------------------------------------------

def check_jax_platforms(facts: Facts) -> Iterator[Finding]:
    _visible_gpus(facts)
    found = jax_platforms(facts)
    if found and found[0] == "error":
        _, title, detail, fix = found
        yield finding("FWK101", title, detail=detail, commands=[fix], links=[JAX_PLATFORMS_SOURCE],
                      text="Let JAX use the GPU: remove the variable, or list cuda in it.")
    elif found:
        _, title, detail, fix = found
        yield finding("FWK102", title, detail=detail, commands=[fix], links=[JAX_PLATFORMS_SOURCE],
                      text="Put the GPU first, so that JAX computes on it by default.")
    name = framework_env(facts).get("JAX_PLATFORM_NAME")
    if name is not None and name.strip().lower() == "cpu" and not not_installed(facts, "jax"):
        jax = framework_facts(facts, "jax")
        yield finding("FWK102", f"JAX_PLATFORM_NAME={name!r} makes the CPU JAX's default device: work runs on the CPU "
                                "unless told otherwise",
                      detail="The variable is deprecated; JAX still lists the GPU but computes on the CPU by default."
                             + (" JAX here chose the default backend 'cpu'."
                                if framework_info(jax).get("default_backend") == "cpu" else ""),
                      text="Remove it, so that JAX computes on the GPU by default.",
                      commands=["unset JAX_PLATFORM_NAME"], links=[JAX_PLATFORMS_SOURCE])


# --- PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF ----------------------------------------------------------

def check_alloc_conf(facts: Facts) -> Iterator[Finding]:
    _visible_gpus(facts)
    both = all(v in framework_env(facts) for v in TORCH_ALLOC_VARS)
    for cause, problems, said in alloc_conf_causes(facts):
        detail = "; ".join(problems) + "."
        detail += quoted("PyTorch", said)
        if both:
            detail += (" Both PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF are set; which one PyTorch reads depends "
                       "on its release (2.11 reads PYTORCH_CUDA_ALLOC_CONF): set one.")
        yield finding("FWK103", f"{cause.variable}={cause.value!r} is refused by PyTorch: its first CUDA call fails",
                      detail=detail,
                      text="PyTorch reads the setting when it starts CUDA and raises (or, for a malformed one, "
                           "aborts). Leave out or correct what it refuses: key:value pairs separated by commas, such as "
                           "expandable_segments:True.",
                      commands=[cause.fix], links=[TORCH_ALLOC_DOCS])


# --- XLA_PYTHON_CLIENT_* (JAX's GPU client) ---------------------------------------------------------------

def check_xla_client(facts: Facts) -> Iterator[Finding]:
    _visible_gpus(facts)
    info = framework_info(framework_facts(facts, "jax"))
    for severity, cause, breaks, why in xla_client_causes(facts):
        detail = why
        if severity == "error" and not info.get("devices"):
            detail += quoted("JAX", info.get("init_error") or "")
        if FALLS_BACK in why:
            detail += (" JAX's own message then blames the install (\"a CUDA-enabled jaxlib is not installed\"): "
                       "reinstalling does not help.")
        yield finding("FWK104", f"{cause.variable}={cause.value!r}: {breaks}", detail=detail,
                      severity=WARNING if severity == "warning" else None,
                      text="Correct or remove the setting; by default JAX reserves 75% of the GPU's memory.",
                      commands=[cause.fix], links=[JAX_MEMORY_DOCS])


# --- XLA_FLAGS ---------------------------------------------------------------------------------------

def check_xla_flags(facts: Facts) -> Iterator[Finding]:
    _visible_gpus(facts)
    for name, cause, said in xla_flags_causes(facts):
        label = NAMES.get(name, name)
        yield finding("FWK107", f"XLA_FLAGS={cause.value!r} holds a flag XLA does not know: {label} stops at start-up",
                      detail=f"XLA ends the process on a flag it does not know, before {label} can say why."
                             + quoted(label, said),
                      text="Remove the flag XLA names (flags change between releases), or unset XLA_FLAGS.",
                      commands=[cause.fix], links=[XLA_FLAGS_DOCS])


# --- TF_GPU_ALLOCATOR ---------------------------------------------------------------------------------

def check_tf_allocator(facts: Facts) -> Iterator[Finding]:
    _visible_gpus(facts)
    value = framework_env(facts).get("TF_GPU_ALLOCATOR")
    if not value or value in TF_ALLOCATORS or not_installed(facts, "tensorflow"):
        return
    yield finding("FWK105", f"TF_GPU_ALLOCATOR={value!r} is not a value TensorFlow knows: it keeps its default allocator",
                  detail=f"TensorFlow acts only on {', '.join(TF_ALLOCATORS)} (the last two are debugging allocators) "
                         "and silently ignores anything else.",
                  text="Set the allocator you meant, or remove the variable.",
                  commands=["export TF_GPU_ALLOCATOR=cuda_malloc_async"], links=[TF_ALLOCATOR_SOURCE])


# --- settings that only slow work down ------------------------------------------------------------------

def _slowing(facts: Facts, gpus: int) -> Iterator[tuple[str, str, str, str]]:
    """(variable, what it does, what that costs, link) for each debugging or workaround setting in force here."""
    env = framework_env(facts)
    if env.get("CUDA_LAUNCH_BLOCKING", "").strip() == "1":
        yield ("CUDA_LAUNCH_BLOCKING", "every kernel launch waits for the kernel to finish",
               "A debugging setting (CUDA's documentation says so): the CPU can no longer queue work ahead of the GPU.",
               CUDA_ENV_DOCS)
    if env.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "").strip().lower() in _TRUE and not not_installed(facts, "torch"):
        yield ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PyTorch bypasses its caching allocator",
               "Every allocation is a cudaMalloc and every free a cudaFree, which waits for the GPU: a setting for "
               "debugging memory errors, much slower.", TORCH_ALLOC_DOCS)
    if env.get("CUDA_MODULE_LOADING", "").strip().upper() == "EAGER":
        yield ("CUDA_MODULE_LOADING", "CUDA loads every kernel at start-up",
               "Lazy loading (the default since CUDA 12.2) loads a kernel when it is first used; eager loading starts "
               "slower and takes more GPU memory per process.", LAZY_LOADING_DOCS)
    if env.get("TF_GPU_ALLOCATOR") in ("cuda_malloc", "memory_guard") and not not_installed(facts, "tensorflow"):
        yield ("TF_GPU_ALLOCATOR", "TensorFlow uses a debugging allocator",
               "Its caching (BFC) allocator is replaced by one meant for finding memory errors: slower.",
               TF_ALLOCATOR_SOURCE)
    if gpus >= 2:
        for var, what, cost in (
                ("NCCL_P2P_DISABLE", "NCCL copies between GPUs through host memory",
                 "NVLink and PCIe peer-to-peer go unused: multi-GPU communication is slower."),
                ("NCCL_SHM_DISABLE", "NCCL does not use shared memory between processes",
                 "Where peer-to-peer is not possible NCCL then goes through the network: multi-GPU communication "
                 "is slower.")):
            if env.get(var, "").strip() == "1":
                yield (var, what, cost + " Keep it only as the workaround for a fault you have seen.", NCCL_ENV_DOCS)


def check_slowing(facts: Facts) -> Iterator[Finding]:
    gpus = _visible_gpus(facts)
    env = framework_env(facts)
    for var, what, cost, link in _slowing(facts, gpus):
        yield finding("FWK106", f"{var}={env[var]!r}: {what}", detail=cost, text="Unset it unless you are debugging.",
                      commands=[f"unset {var}"], links=[link])


# --- the cause, for the framework checks ----------------------------------------------------------------

CHECKS = (
    Check("frameworks.env_jax_platforms", "frameworks", "JAX_PLATFORMS and JAX_PLATFORM_NAME leave JAX the GPU",
          ("FWK101", "FWK102"), check_jax_platforms, ("host", "nvml")),
    Check("frameworks.env_torch_allocator", "frameworks",
          "PyTorch accepts PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF",
          ("FWK103",), check_alloc_conf, ("host", "nvml")),
    Check("frameworks.env_xla_client", "frameworks", "jaxlib accepts the XLA_PYTHON_CLIENT_* memory settings",
          ("FWK104",), check_xla_client, ("host", "nvml")),
    Check("frameworks.env_xla_flags", "frameworks", "XLA accepts every flag in XLA_FLAGS", ("FWK107",), check_xla_flags,
          ("host", "nvml")),
    Check("frameworks.env_tf_allocator", "frameworks", "TensorFlow knows TF_GPU_ALLOCATOR", ("FWK105",),
          check_tf_allocator, ("host", "nvml")),
    Check("frameworks.env_slowing", "frameworks", "no debugging setting slows GPU work", ("FWK106",), check_slowing,
          ("host", "nvml")),
)
