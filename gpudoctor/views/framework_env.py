"""Environment variables that steer a framework on the GPU (``host.framework_env``), read by the
frameworks' own rules: which settings a framework refuses, and the one that keeps it off the GPU
(``steering_cause``). The environment checks (checks/framework_env.py) report the variables
themselves; the framework checks (checks/frameworks.py) name one as the cause of a failure they
found. Both read this one model, so they agree.

The rules follow the frameworks' own parsers, and were measured on 1 x H100 (driver 580.159.04,
PyTorch 2.11.0+cu130, JAX 0.11.2; 2026-11-23; ``tools/device/env_steering.py``, one child process
per value, and a full ``check`` per fault: ``tests/fixtures/real/h100x1-20261123/env-faults``):

- ``JAX_PLATFORMS`` is a comma-separated list of platform names, in lower case; the first one JAX can
  start becomes its default (jax/_src/xla_bridge.py, ``backends()``; empty means unset). Without
  ``cuda`` or ``gpu`` JAX has no GPU: ``cpu`` runs everything on the CPU ("Unknown backend: 'gpu'
  requested, but no platforms that are instances of gpu are present"), and a name JAX cannot start
  (``CUDA``, ``rocm`` without ROCm, ``tpu`` without libtpu) stops JAX altogether ("Unable to
  initialize backend 'CUDA'"). ``cpu,cuda`` lists the GPU but makes the CPU the default, and so does
  ``JAX_PLATFORM_NAME=cpu``. ``gpu`` also asks for ROCm, and JAX 0.11.2's first call then failed with
  "Unable to initialize backend 'rocm'".
- ``PYTORCH_CUDA_ALLOC_CONF`` and ``PYTORCH_ALLOC_CONF`` are ``key:value`` pairs separated by commas, a
  list value in brackets, spaces ignored (c10/core/AllocatorConfig.h, ``ConfigTokenizer``). PyTorch
  reads them when it starts CUDA: an unknown key raises "ValueError: Unrecognized key 'bogus_option'
  in CUDA allocator config." (in gpudoctor's framework child the process died of SIGSEGV instead,
  saying nothing), ``true`` for ``True`` and an unknown backend raise too, and a pair without its
  ``:`` (``max_split_size_mb=128``, ``;`` or a space between pairs) aborts the process ("Index out of
  bounds in ConfigTokenizer"). With both set, 2.11 read PYTORCH_CUDA_ALLOC_CONF.
- A memory fraction (``XLA_PYTHON_CLIENT_MEM_FRACTION``, or its newer name ``XLA_CLIENT_MEM_FRACTION``)
  that is not a number, both names at once, or an ``XLA_PYTHON_CLIENT_ALLOCATOR`` jaxlib does not know
  keep JAX's GPU backend from starting: JAX falls back to the CPU, saying "a CUDA-enabled jaxlib is not
  installed" (jaxlib/xla_client.py, ``generate_pjrt_gpu_plugin_options``). A fraction of 0 makes every
  allocation fail ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4B"); 1.5 and -0.5 did
  not stop JAX 0.11.2.
- ``TF_GPU_ALLOCATOR``: TensorFlow compares it with ``cuda_malloc_async``, ``cuda_malloc`` and
  ``memory_guard`` and ignores anything else (tensorflow/core/common_runtime/gpu/gpu_process_state.cc).
- ``XLA_FLAGS`` with a flag XLA does not know stops the process ("F... parse_flags_from_env.cc:234]
  Unknown flag in XLA_FLAGS: --xla_gpu_bogus_flag=true", exit status 1); the flag list is XLA's own, so
  only a framework's own error naming XLA_FLAGS makes it the cause.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, NamedTuple, Optional

from gpudoctor.snapshot import get

Facts = dict[str, Any]

TORCH_ALLOC_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")  # the order PyTorch 2.11 reads them in
#: Every key of PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF that some PyTorch release accepts: a key is called
#: unknown only when no release knows it. From pytorch/pytorch: c10/core/AllocatorConfig.h @b42fb116
#: (AcceleratorAllocatorConfig::getMutableKeys), c10/cuda/CUDAAllocatorConfig.cpp @01f9ef32 (parseArgs, which raises
#: "Unrecognized key '...' in CUDA allocator config." for any key outside the registered ones),
#: CUDAAllocatorConfig::getKeys in c10/cuda/CUDAAllocatorConfig.h (the newest copies found add pinned_free_catch_all,
#: throw_on_cudamalloc_oom and the expandable_segments_reserve keys), c10/core/AllocatorConfig.cpp @0ac71663 and
#: @065861fb, and the 1.13 / 2.0 parser in c10/cuda/CUDACachingAllocator.cpp (roundup_bypass_threshold_mb, which 2.11
#: refuses: measured, and a report shows it through PyTorch's own error). The hip spellings are the ROCm build's.
TORCH_ALLOC_KEYS = frozenset({
    "backend", "max_split_size_mb", "max_non_split_rounding_mb", "garbage_collection_threshold",
    "roundup_power2_divisions", "roundup_bypass_threshold_mb", "expandable_segments", "large_segment_size_mb",
    "release_lock_on_cudamalloc", "release_lock_on_hipmalloc", "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register", "pinned_num_register_threads", "pinned_use_background_threads",
    "pinned_reserve_segment_size_mb", "pinned_free_catch_all", "graph_capture_record_stream_reuse",
    "per_process_memory_fraction", "throw_on_cudamalloc_oom", "expandable_segments_reserve",
    "expandable_segments_reserve_by_class",
})
#: Keys whose value must be exactly True or False: ConfigTokenizer::toBool, and the explicit comparisons of
#: the older parsers ("Expected a single True/False argument for expandable_segments").
TORCH_BOOL_KEYS = frozenset({
    "expandable_segments", "release_lock_on_cudamalloc", "release_lock_on_hipmalloc", "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register", "pinned_use_background_threads", "graph_capture_record_stream_reuse",
})
TORCH_BACKENDS = ("native", "cudaMallocAsync", "hipMallocAsync")
#: What PyTorch's refusal of an allocator setting says (its ValueError, or the assertion before an abort).
_ALLOC_REFUSAL = re.compile(r"allocator config|CachingAllocator|ConfigTokenizer|allocator backend|"
                            r"garbage_collect(?:ion)?_threshold is invalid|Expected a single True/False")
#: XLA_PYTHON_CLIENT_ALLOCATOR values some jaxlib accepts (lower-cased as jaxlib does): "default", "platform",
#: "bfc" always, "cuda_async" since 2023, "vmm" and "address" in jaxlib 0.11.2's own error message.
XLA_ALLOCATORS = ("default", "platform", "bfc", "cuda_async", "vmm", "address")
XLA_FRACTION_VARS = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION")
#: TF_GPU_ALLOCATOR values TensorFlow acts on (gpu_process_state.cc); the last two are its debugging allocators.
TF_ALLOCATORS = ("cuda_malloc_async", "cuda_malloc", "memory_guard")


class Cause(NamedTuple):
    """An environment variable named as the cause: its name, its value as recorded, the shell command that fixes it."""

    variable: str
    value: str
    fix: str


def framework_env(facts: Facts) -> dict[str, str]:
    """The recorded framework-steering variables that hold a string (a variable recorded as unset is left out)."""
    env = get(facts, "host.framework_env")
    return {k: v for k, v in env.items() if isinstance(v, str)} if isinstance(env, dict) else {}


def framework_facts(facts: Facts, name: str) -> Optional[dict[str, Any]]:
    """The framework's facts, or None when the report has none (no frameworks probe, or an older report)."""
    fw = get(facts, f"frameworks.{name}")
    return fw if isinstance(fw, dict) else None


def not_installed(facts: Facts, name: str) -> bool:
    """The framework is known not to be installed: a variable that steers only it steers nothing here."""
    fw = framework_facts(facts, name)
    return fw is not None and fw.get("installed") is False


def framework_info(fw: Optional[dict[str, Any]]) -> dict[str, Any]:
    info = (fw or {}).get("info")
    return info if isinstance(info, dict) else {}


def _gpu_worked(fw: Optional[dict[str, Any]]) -> bool:
    """The framework ran its 2x2 product on a GPU in gpudoctor's child, which had this same environment."""
    info = framework_info(fw)
    return ((fw or {}).get("status") == "ok" and bool(info.get("devices"))
            and isinstance(info.get("smoke"), (int, float)))


def _said(fw: Optional[dict[str, Any]]) -> str:
    """Everything the framework said when it failed: import error, init error, warnings, smoke error, stderr."""
    fw = fw or {}
    info = framework_info(fw)
    smoke = info.get("smoke")
    parts = [fw.get("error"), info.get("import_error"), info.get("init_error"), *(info.get("warnings") or []),
             smoke.get("error") if isinstance(smoke, dict) else None, fw.get("stderr_tail")]
    return "\n".join(str(p) for p in parts if p)


def _first_line(text: str, pattern: re.Pattern[str]) -> str:
    """The first line of ``text`` that matches, cut to a readable length."""
    line = next((ln.strip() for ln in text.splitlines() if pattern.search(ln)), "")
    return line[:300]


def quoted(who: str, message: str) -> str:
    """`` JAX here: "<message>".``: what the framework itself said, as one sentence of a detail."""
    return f' {who} here: "{message.strip().rstrip(".")}".' if message and message.strip() else ""


def export_command(variable: str, value: str) -> str:
    return f"export {variable}={shlex.quote(value)}" if value else f"unset {variable}"


# --- JAX_PLATFORMS, JAX_PLATFORM_NAME ------------------------------------------------------------------

def jax_platforms(facts: Facts) -> Optional[tuple[str, str, str, str]]:
    """(severity, title, detail, fix) when JAX_PLATFORMS keeps JAX off the GPU or puts the CPU first; None otherwise."""
    value = framework_env(facts).get("JAX_PLATFORMS")
    if value is None or not value.strip() or not_installed(facts, "jax"):
        return None
    entries = [e.strip() for e in value.split(",") if e.strip()]
    gpu = [e for e in entries if e in ("cuda", "gpu")]
    jax = framework_facts(facts, "jax")
    said = framework_info(jax).get("init_error") or ""
    seen = quoted("JAX", said) if not framework_info(jax).get("devices") else ""
    shown = f"JAX_PLATFORMS={value!r}"
    if not gpu:
        cased = [e for e in entries if e.lower() in ("cuda", "gpu")]
        if cased:
            return ("error", f"{shown} names no platform JAX knows for the GPU: JAX cannot use the GPU",
                    f"JAX's platform names are lower case: 'cuda', not {cased[0]!r}.{seen}",
                    "export JAX_PLATFORMS=cuda")
        what = ("everything runs on the CPU" if set(entries) <= {"cpu"}
                else "one it cannot start stops JAX altogether")
        return ("error", f"{shown} leaves JAX no GPU platform: JAX cannot use the GPU",
                f"Without 'cuda' (or 'gpu') in the list JAX starts only the platforms named: {what}.{seen}",
                "unset JAX_PLATFORMS")
    if entries[0] == "cpu":
        order = gpu + [e for e in entries if e not in gpu]
        chose = " JAX here chose the default backend 'cpu'." if framework_info(jax).get("default_backend") == "cpu" else ""
        return ("warning", f"{shown} puts the CPU first: JAX runs work on the CPU unless told otherwise",
                "JAX makes the first platform of the list its default; the GPU is used only where code places work "
                f"on it explicitly.{chose}", f"export JAX_PLATFORMS={','.join(order)}")
    if "cuda" not in entries and not framework_info(jax).get("devices") and "'rocm'" in said:
        return ("error", f"{shown} makes JAX start ROCm too, which fails here: JAX's first call raises",
                f"'gpu' stands for both 'cuda' and 'rocm'.{seen}", "export JAX_PLATFORMS=cuda")
    return None


# --- PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF ----------------------------------------------------------

def alloc_conf_tokens(value: str) -> list[str]:
    """PyTorch's ConfigTokenizer: ',', ':', '[' and ']' are tokens of their own, whitespace is dropped."""
    tokens: list[str] = []
    word = ""
    for ch in value:
        if ch in ",:[]":
            if word:
                tokens.append(word)
                word = ""
            tokens.append(ch)
        elif not ch.isspace():
            word += ch
    if word:
        tokens.append(word)
    return tokens


def parse_alloc_conf(value: str) -> tuple[list[tuple[str, str]], Optional[str]]:
    """The ``key:value`` pairs of an allocator setting, and what breaks its syntax (None when nothing does)."""
    tokens = alloc_conf_tokens(value)
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        key = tokens[i]
        if key in ",:[]":
            return pairs, f"{key!r} stands where a key should"
        if i + 1 >= len(tokens) or tokens[i + 1] != ":":
            return pairs, f"{key!r} is not followed by ':' and a value"
        if i + 2 >= len(tokens) or tokens[i + 2] in ",:]":
            return pairs, f"{key!r} has no value after its ':'"
        if tokens[i + 2] == "[":
            end = next((j for j in range(i + 3, len(tokens)) if tokens[j] == "]"), None)
            if end is None:
                return pairs, f"the list after {key!r} has no closing ']'"
            pairs.append((key, "".join(tokens[i + 2:end + 1])))
            i = end + 1
        else:
            pairs.append((key, tokens[i + 2]))
            i += 3
        if i < len(tokens):
            if tokens[i] != ",":
                key, val = pairs[-1]
                return pairs, f"{key}:{val} is followed by {tokens[i]!r}, not by the ',' between pairs"
            i += 1
    return pairs, None


def alloc_conf_problems(value: str) -> tuple[list[str], Optional[str]]:
    """What PyTorch refuses in an allocator setting, certainly in every release known here, and the value with
    the refused pairs left out or corrected (None when the syntax is broken and nothing can be kept)."""
    pairs, broken = parse_alloc_conf(value)
    if broken:
        return [f"it is not a list of key:value pairs separated by commas: {broken}"], None
    problems, kept = [], []
    for key, val in pairs:
        if key not in TORCH_ALLOC_KEYS:
            problems.append(f"PyTorch does not know the key {key!r}")
        elif key in TORCH_BOOL_KEYS and val not in ("True", "False"):
            problems.append(f"{key} takes True or False (capitalised), not {val!r}")
            if val.lower() in ("true", "false"):
                kept.append((key, val.capitalize()))
        elif key == "backend" and val not in TORCH_BACKENDS:
            problems.append(f"backend takes native or cudaMallocAsync, not {val!r}")
        elif key == "garbage_collection_threshold" and not _fraction_between(val, 0.0, 1.0):
            problems.append(f"garbage_collection_threshold takes a number between 0 and 1 (both excluded), not {val!r}")
        else:
            kept.append((key, val))
    return problems, ",".join(f"{k}:{v}" for k, v in kept)


def _fraction_between(text: str, low: float, high: float) -> bool:
    try:
        return low < float(text) < high
    except ValueError:
        return False


def alloc_conf_causes(facts: Facts) -> list[tuple[Cause, list[str], str]]:
    """Each allocator variable PyTorch refuses here: (cause, the reasons, what PyTorch itself said)."""
    env = framework_env(facts)
    present = [v for v in TORCH_ALLOC_VARS if v in env]
    torch = framework_facts(facts, "torch")
    if not present or not_installed(facts, "torch"):
        return []
    if _gpu_worked(torch):
        return []  # this PyTorch ran on the GPU with these settings: it accepted them
    said = _first_line(_said(torch), _ALLOC_REFUSAL)
    quoted = re.findall(r"'([^']+)'", said)
    judged = {var: alloc_conf_problems(env[var]) for var in present}
    blamed = {var for var in present if said and (len(present) == 1 or judged[var][0]
                                                  or any(q in env[var] for q in quoted))}
    if said and not blamed:
        blamed = {present[0]}  # PyTorch refused one of the two; 2.11 reads PYTORCH_CUDA_ALLOC_CONF first
    refused = re.search(r"Unrecognized (?:key '([^']+)'|CachingAllocator option: (\S+))", said)
    refused_key = (refused.group(1) or refused.group(2)) if refused else None
    out = []
    for var in present:
        problems, fixed = judged[var]
        if not problems and var not in blamed:
            continue
        if not problems and refused_key:  # a key some older release knew, that this PyTorch refuses
            problems = [f"this PyTorch does not know the key {refused_key!r}"]
            fixed = ",".join(f"{k}:{v}" for k, v in parse_alloc_conf(env[var])[0] if k != refused_key)
        elif not problems:
            problems = ["PyTorch here refused it"]
        out.append((Cause(var, env[var], export_command(var, fixed) if fixed is not None else f"unset {var}"), problems,
                    said if var in blamed else ""))
    return out


# --- XLA_PYTHON_CLIENT_* (JAX's GPU client) ---------------------------------------------------------------

FALLS_BACK = "jaxlib cannot start JAX's GPU backend, and JAX falls back to the CPU"


def xla_client_causes(facts: Facts) -> list[tuple[str, Cause, str, str]]:
    """(severity, cause, what it breaks, why) for each XLA client setting that jaxlib refuses, or that is no
    fraction of the GPU's memory."""
    env = framework_env(facts)
    if not_installed(facts, "jax"):
        return []
    out = []
    fractions = [v for v in XLA_FRACTION_VARS if env.get(v)]  # jaxlib ignores an empty value
    for var in fractions:
        value = env[var]
        try:
            number = float(value)
        except ValueError:
            percent = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", value)
            fix = export_command(var, f"{float(percent.group(1)) / 100:g}") if percent else f"unset {var}"
            out.append(("error", Cause(var, value, fix), "JAX cannot use the GPU",
                        f"It is not a number, so {FALLS_BACK}."))
            continue
        if number == 0:
            out.append(("error", Cause(var, value, f"unset {var}"), "every JAX allocation on the GPU fails",
                        "A fraction of 0 leaves JAX no GPU memory: every allocation fails with RESOURCE_EXHAUSTED."))
        elif not 0 < number <= 1:
            out.append(("warning", Cause(var, value, f"unset {var}"), "not a fraction of the GPU's memory",
                        "A memory fraction lies in (0, 1], such as .75; JAX 0.11.2 started anyway, and what it "
                        "then reserves is not documented."))
    if len(fractions) == 2:
        var = "XLA_PYTHON_CLIENT_MEM_FRACTION"
        out.append(("error", Cause(var, env[var], f"unset {var}"), "JAX cannot use the GPU",
                    f"XLA_CLIENT_MEM_FRACTION is set too, and jaxlib refuses the two together (this name is the "
                    f"deprecated one), so {FALLS_BACK}."))
    allocator = env.get("XLA_PYTHON_CLIENT_ALLOCATOR")
    if allocator is not None and allocator.lower() not in XLA_ALLOCATORS:
        out.append(("error", Cause("XLA_PYTHON_CLIENT_ALLOCATOR", allocator, "unset XLA_PYTHON_CLIENT_ALLOCATOR"),
                    "JAX cannot use the GPU",
                    f"jaxlib accepts {', '.join(XLA_ALLOCATORS)} (case aside), so {FALLS_BACK}."))
    if _gpu_worked(framework_facts(facts, "jax")):
        out = [o for o in out if o[0] != "error"]  # this jaxlib started its GPU backend with them: it accepted them
    return out


# --- XLA_FLAGS ---------------------------------------------------------------------------------------

_UNKNOWN_XLA_FLAG = re.compile(r"Unknown flags? in XLA_FLAGS: *(\S*)")


def xla_flags_causes(facts: Facts) -> list[tuple[str, Cause, str]]:
    """(framework, cause, what it said) for each framework whose own error says XLA_FLAGS holds a flag XLA refuses."""
    value = framework_env(facts).get("XLA_FLAGS")
    if value is None:
        return []
    out = []
    for name in ("jax", "tensorflow"):
        said = _first_line(_said(framework_facts(facts, name)), _UNKNOWN_XLA_FLAG)
        if not said:
            continue
        found = _UNKNOWN_XLA_FLAG.search(said)  # _first_line kept only a line it matches
        flag = found.group(1) if found else None
        kept = " ".join(f for f in value.split() if flag and f != flag and f.split("=")[0] != flag.split("=")[0])
        out.append((name, Cause("XLA_FLAGS", value, export_command("XLA_FLAGS", kept)), said))
    return out


# --- the cause, for the framework checks ----------------------------------------------------------------

def steering_cause(facts: Facts, framework: str) -> Optional[Cause]:
    """The environment variable that keeps ``framework`` off the GPU or makes its GPU work fail, or None.

    ``framework`` is a key of ``facts["frameworks"]``: ``torch``, ``tensorflow``, ``jax`` or ``cupy``. The answer
    is a ``Cause``, a tuple ``(variable, value, fix)``: the variable's name, its value as recorded in
    ``host.framework_env``, and one shell command that fixes it (``unset JAX_PLATFORMS``,
    ``export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``). It is judged by the same rules as the environment
    checks (checks/framework_env.py) judge it, so a framework check that names it agrees with the FWK1xx finding the same report carries:

    - jax: JAX_PLATFORMS without a GPU platform (FWK101), an XLA client setting jaxlib refuses (FWK104 errors);
    - torch: a PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF PyTorch refuses (FWK103);
    - jax, tensorflow: XLA_FLAGS, when the framework's own error says "Unknown flag in XLA_FLAGS" (FWK107: XLA
      stops the process on a flag it does not know, and only XLA knows its flags).

    Settings that only slow work or change JAX's default device are never a cause. Where the framework's facts
    show it ran its product on the GPU with the setting, the setting was accepted and is no cause; where the
    report has no facts of the framework (``check --quick``, a failed probe), the parsers' rules alone decide.

    Pure: reads ``host.framework_env`` and ``frameworks.<framework>`` only, not the GPUs (the caller has already
    established that the framework should see one). Returns None when the report has no ``host.framework_env``
    (written before gpudoctor recorded it), when the framework is not installed, or when no such variable is set.
    Meant for a check that has found the symptom (a framework that sees no GPU, fails to import, or fails its
    smoke product): name the variable as the cause and give ``fix`` instead of advising a reinstall; the FWK1xx
    finding of checks/framework_env.py reports the variable itself in any case.
    """
    env = framework_env(facts)
    if not env or not_installed(facts, framework):
        return None
    if framework == "jax":
        found = jax_platforms(facts)
        if found and found[0] == "error":
            return Cause("JAX_PLATFORMS", env["JAX_PLATFORMS"], found[3])
        for severity, cause, _, _ in xla_client_causes(facts):
            if severity == "error":
                return cause
    if framework == "torch":
        for cause, _, _ in alloc_conf_causes(facts):
            return cause
    for name, cause, _ in xla_flags_causes(facts):
        if name == framework:
            return cause
    return None
