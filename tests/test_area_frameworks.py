"""The frameworks area: frameworks.import, frameworks.gpu and frameworks.cudnn (checks/frameworks.py: FWK001-FWK008)
and the environment variables that steer a framework on the GPU, frameworks.env_* (``host.framework_env``,
checks/framework_env.py: FWK101-FWK107). FWK001's install command is held to the matrix in test_fwk001_command.py;
imports that fail (FWK004, FWK005) are made for real in test_framework_faults.py and test_framework_failures.py.

Environment faults are derived from the real 2 x H200 recording one variable at a time, with the framework facts the
framework itself gave for that value where it refuses it (messages measured on 1 x H100, PyTorch
2.11.0+cu130, JAX 0.11.2: tests/fixtures/real/h100x1-20261123/env-faults/env-steering.jsonl). Each asserts the
exact findings of the environment checks, and that adding the variable changes nothing else; healthy values
stay quiet. Then the same rules are held to every value measured there, to the faults recorded for real
(env-faults/*.json), and to every healthy recording. Last, frameworks that see no GPU, fewer GPUs, fail
their smoke test, load another cuDNN or are CPU-only builds, derived from the same recording one fact at a time.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import pipeline
from gpudoctor.checks import framework_env, registry
from gpudoctor.checks.messages import PASTE_ONLY
from gpudoctor.probes.system import ENV_NAMES, FRAMEWORK_ENV_MAX_CHARS, FRAMEWORK_ENV_NAMES, probe_host
from gpudoctor.redact import MARK, redact_report
from helpers_facts import with_fact
from gpudoctor.views.framework_env import Cause, alloc_conf_problems, parse_alloc_conf, steering_cause

from conftest import REAL, REAL_DIRS
from helpers_judge import codes as code_set, findings, lib_index, only, statuses

ENV_CHECKS = framework_env.CHECKS
ENV_IDS = {c.id for c in ENV_CHECKS}
ENV_CODES = {code for c in ENV_CHECKS for code in c.codes}
ENV_FAULTS = REAL / "h100x1-20261123" / "env-faults"
MEASURED = [json.loads(line) for line in (ENV_FAULTS / "env-steering.jsonl").read_text().splitlines() if line.strip()]
REPORT_FORMAT = Path(__file__).resolve().parents[1] / "docs" / "report-format.md"

# What the frameworks said, as measured (env-steering.jsonl) or recorded by gpudoctor (env-faults/*.json)
JAX_NO_GPU = ("RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present. "
              "Platforms present are: cpu")
JAX_CUDA_CAPS = ("RuntimeError: Unable to initialize backend 'CUDA': Backend 'CUDA' is not in the list of known backends: "
                 "['cpu', 'tpu', 'cuda']. (set JAX_PLATFORMS='' to automatically choose an available backend)")
JAX_ROCM = ("RuntimeError: Unable to initialize backend 'rocm': Backend 'rocm' is not in the list of known backends: "
            "['cpu', 'tpu', 'cuda']. (set JAX_PLATFORMS='' to automatically choose an available backend)")
JAX_OOM = ("JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4B with allocator GPU_0_bfc on "
           "device 0. [tf-allocator-allocation-error='']")
XLA_FLAG_STDERR = ("F1123 15:14:58.739388    6620 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: "
                   "--xla_gpu_bogus_flag=true\n")
TORCH_UNKNOWN_KEY = "ValueError: Unrecognized key '{}' in CUDA allocator config."
TORCH_BOOL = "ValueError: Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'"
TORCH_BACKEND = "ValueError: Unknown allocator backend, options are native and cudaMallocAsync"
TORCH_GC = "ValueError: garbage_collect_threshold is invalid, set it in (0.0, 1.0)"


# --- helpers ------------------------------------------------------------------------------------------

def env_findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """What the environment checks report on ``facts``, in registry order."""
    return [f.to_dict() for c in ENV_CHECKS for f in registry.run_check(c, copy.deepcopy(facts)).findings]


def with_env(facts: dict[str, Any], **values: str) -> dict[str, Any]:
    for name, value in values.items():
        facts = with_fact(facts, f"host.framework_env.{name}", value)
    return facts


def torch_refused(facts: dict[str, Any], message: str) -> dict[str, Any]:
    """PyTorch refusing its allocator setting when gpudoctor's child starts CUDA (env-faults/torch-alloc-unknown-key)."""
    facts = with_fact(facts, "frameworks.torch.info.init_error", message)
    facts = with_fact(facts, "frameworks.torch.info.devices", [])
    return with_fact(facts, "frameworks.torch.info.smoke", None)


def torch_crashed(facts: dict[str, Any]) -> dict[str, Any]:
    """PyTorch's child killed by a malformed allocator setting (env-faults/torch-alloc-malformed): no word on why."""
    return with_fact(facts, "frameworks.torch", {"installed": True, "status": "crashed",
                                                 "error": "its process ended (killed by SIGABRT) while importing it",
                                                 "stderr_tail": "Fatal Python error: Aborted\n"})


def jax_without_gpu(facts: dict[str, Any], message: str = JAX_NO_GPU) -> dict[str, Any]:
    facts = with_fact(facts, "frameworks.jax.info.devices", [])
    facts = with_fact(facts, "frameworks.jax.info.init_error", message)
    facts = with_fact(facts, "frameworks.jax.info.default_backend", "cpu")
    return with_fact(facts, "frameworks.jax.info.smoke", None)


def jax_smoke_failed(facts: dict[str, Any], message: str) -> dict[str, Any]:
    return with_fact(facts, "frameworks.jax.info.smoke", {"unavailable": "unknown", "error": message})


def jax_default_cpu(facts: dict[str, Any]) -> dict[str, Any]:
    return with_fact(facts, "frameworks.jax.info.default_backend", "cpu")


def jax_crashed(facts: dict[str, Any], stderr: str) -> dict[str, Any]:
    return with_fact(facts, "frameworks.jax", {"installed": True, "status": "crashed", "stderr_tail": stderr,
                                               "error": "its process ended (exit status 1) while listing its GPUs"})


def with_tensorflow(facts: dict[str, Any]) -> dict[str, Any]:
    return with_fact(facts, "frameworks.tensorflow", {"installed": True, "status": "metadata",
                                                      "info": {"version": "2.21.0"}})


def codes(facts: dict[str, Any]) -> list[str]:
    return sorted(f["code"] for f in pipeline.judge(facts)["findings"])


def _same(facts: dict[str, Any]) -> dict[str, Any]:
    return facts


# --- healthy: nothing set, and normal values set ------------------------------------------------------

def test_the_healthy_recording_passes_every_environment_check(h200x2):
    assert "framework_env" not in h200x2["host"]  # recorded before it existed: nothing set, as far as is known
    results = [registry.run_check(c, copy.deepcopy(h200x2)) for c in ENV_CHECKS]
    assert [(r.id, r.status, r.findings) for r in results] == [(c.id, "pass", []) for c in ENV_CHECKS]
    assert env_findings(with_fact(h200x2, "host.framework_env", {})) == []


HEALTHY = [
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"),
    ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,garbage_collection_threshold:0.6"),
    ("PYTORCH_CUDA_ALLOC_CONF", "roundup_power2_divisions:[256:1,512:2,>:4]"),
    ("PYTORCH_CUDA_ALLOC_CONF", " expandable_segments : True , max_split_size_mb : 128 "),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,"),
    ("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"),
    ("PYTORCH_CUDA_ALLOC_CONF", ""),
    ("PYTORCH_ALLOC_CONF", "expandable_segments:True,pinned_use_background_threads:True"),
    ("PYTORCH_NO_CUDA_MEMORY_CACHING", "0"),
    ("CUDA_LAUNCH_BLOCKING", "0"),
    ("CUDA_MODULE_LOADING", "LAZY"),
    ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
    ("JAX_PLATFORMS", "cuda"),
    ("JAX_PLATFORMS", "cuda,cpu"),
    ("JAX_PLATFORMS", "gpu"),
    ("JAX_PLATFORMS", ""),
    ("JAX_PLATFORM_NAME", "gpu"),
    ("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", ".5"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", "1"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", ""),
    ("XLA_CLIENT_MEM_FRACTION", "0.9"),
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "platform"),
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async"),
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "BFC"),
    ("XLA_FLAGS", "--xla_gpu_autotune_level=0"),
    ("TF_FORCE_GPU_ALLOW_GROWTH", "true"),
    ("TF_GPU_ALLOCATOR", "cuda_malloc_async"),
    ("TF_CUDA_PATHS", "/usr/local/cuda"),
    ("TF_ENABLE_ONEDNN_OPTS", "0"),
    ("NCCL_DEBUG", "INFO"),
    ("NCCL_SOCKET_IFNAME", "eth0"),
    ("NCCL_IB_DISABLE", "1"),
    ("NCCL_P2P_DISABLE", "0"),
    ("NCCL_SHM_DISABLE", "0"),
]


@pytest.mark.parametrize("name, value", HEALTHY, ids=[f"{n}={v}" for n, v in HEALTHY])
def test_a_normal_value_is_no_finding(h200x2, name, value):
    facts = with_env(h200x2, **{name: value})
    if name == "TF_GPU_ALLOCATOR":
        facts = with_tensorflow(facts)
    assert env_findings(facts) == []
    assert all(steering_cause(facts, fw) is None for fw in ("torch", "tensorflow", "jax", "cupy"))


def test_all_the_healthy_values_at_once_are_no_finding(h200x2):
    facts = with_tensorflow(with_env(h200x2, **{n: v for n, v in HEALTHY if n != "PYTORCH_ALLOC_CONF"}))
    assert env_findings(facts) == []


# --- faults, one variable at a time ---------------------------------------------------------------------

#: (variable, value, how the framework's facts change with it, code, severity, the fix, words of the title)
FAULTS = [
    ("JAX_PLATFORMS", "cpu", jax_without_gpu, "FWK101", "error", "unset JAX_PLATFORMS", "leaves JAX no GPU platform"),
    ("JAX_PLATFORMS", "tpu", lambda f: jax_without_gpu(f, "RuntimeError: Unable to initialize backend 'tpu'"),
     "FWK101", "error", "unset JAX_PLATFORMS", "leaves JAX no GPU platform"),
    ("JAX_PLATFORMS", "CUDA", lambda f: jax_without_gpu(f, JAX_CUDA_CAPS), "FWK101", "error",
     "export JAX_PLATFORMS=cuda", "names no platform JAX knows for the GPU"),
    ("JAX_PLATFORMS", "gpu", lambda f: jax_without_gpu(f, JAX_ROCM), "FWK101", "error", "export JAX_PLATFORMS=cuda",
     "makes JAX start ROCm too"),
    ("JAX_PLATFORMS", "cpu,cuda", jax_default_cpu, "FWK102", "warning", "export JAX_PLATFORMS=cuda,cpu",
     "puts the CPU first"),
    ("JAX_PLATFORM_NAME", "cpu", jax_default_cpu, "FWK102", "warning", "unset JAX_PLATFORM_NAME",
     "makes the CPU JAX's default device"),
    ("JAX_PLATFORM_NAME", "CPU", jax_default_cpu, "FWK102", "warning", "unset JAX_PLATFORM_NAME",
     "makes the CPU JAX's default device"),
    ("PYTORCH_CUDA_ALLOC_CONF", "bogus_option:1", lambda f: torch_refused(f, TORCH_UNKNOWN_KEY.format("bogus_option")),
     "FWK103", "error", "unset PYTORCH_CUDA_ALLOC_CONF", "is refused by PyTorch"),
    ("PYTORCH_ALLOC_CONF", "bogus_option:1", lambda f: torch_refused(f, TORCH_UNKNOWN_KEY.format("bogus_option")),
     "FWK103", "error", "unset PYTORCH_ALLOC_CONF", "is refused by PyTorch"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:true", lambda f: torch_refused(f, TORCH_BOOL), "FWK103", "error",
     "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "is refused by PyTorch"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,bogus_option:1",
     lambda f: torch_refused(f, TORCH_UNKNOWN_KEY.format("bogus_option")), "FWK103", "error",
     "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "is refused by PyTorch"),
    ("PYTORCH_CUDA_ALLOC_CONF", "backend:bogus", lambda f: torch_refused(f, TORCH_BACKEND), "FWK103", "error",
     "unset PYTORCH_CUDA_ALLOC_CONF", "is refused by PyTorch"),
    ("PYTORCH_CUDA_ALLOC_CONF", "garbage_collection_threshold:1.5", lambda f: torch_refused(f, TORCH_GC), "FWK103",
     "error", "unset PYTORCH_CUDA_ALLOC_CONF", "is refused by PyTorch"),
    ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb=128", torch_crashed, "FWK103", "error",
     "unset PYTORCH_CUDA_ALLOC_CONF", "is refused by PyTorch"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments", torch_crashed, "FWK103", "error",
     "unset PYTORCH_CUDA_ALLOC_CONF", "is refused by PyTorch"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True;max_split_size_mb:128", torch_crashed, "FWK103", "error",
     "unset PYTORCH_CUDA_ALLOC_CONF", "is refused by PyTorch"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True garbage_collection_threshold:0.6", torch_crashed, "FWK103",
     "error", "unset PYTORCH_CUDA_ALLOC_CONF", "is refused by PyTorch"),
    # known to the 1.13 / 2.0 parser, so only PyTorch's own refusal makes it a finding
    ("PYTORCH_CUDA_ALLOC_CONF", "roundup_bypass_threshold_mb:64",
     lambda f: torch_refused(f, TORCH_UNKNOWN_KEY.format("roundup_bypass_threshold_mb")), "FWK103", "error",
     "unset PYTORCH_CUDA_ALLOC_CONF", "is refused by PyTorch"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", "75%", jax_without_gpu, "FWK104", "error",
     "export XLA_PYTHON_CLIENT_MEM_FRACTION=0.75", "JAX cannot use the GPU"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0", lambda f: jax_smoke_failed(f, JAX_OOM), "FWK104", "error",
     "unset XLA_PYTHON_CLIENT_MEM_FRACTION", "every JAX allocation on the GPU fails"),
    ("XLA_PYTHON_CLIENT_MEM_FRACTION", "1.5", _same, "FWK104", "warning", "unset XLA_PYTHON_CLIENT_MEM_FRACTION",
     "not a fraction of the GPU's memory"),
    ("XLA_CLIENT_MEM_FRACTION", "-0.5", _same, "FWK104", "warning", "unset XLA_CLIENT_MEM_FRACTION",
     "not a fraction of the GPU's memory"),
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "bogus", jax_without_gpu, "FWK104", "error", "unset XLA_PYTHON_CLIENT_ALLOCATOR",
     "JAX cannot use the GPU"),
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "", jax_without_gpu, "FWK104", "error", "unset XLA_PYTHON_CLIENT_ALLOCATOR",
     "JAX cannot use the GPU"),
    ("XLA_FLAGS", "--xla_gpu_bogus_flag=true", lambda f: jax_crashed(f, XLA_FLAG_STDERR), "FWK107", "error",
     "unset XLA_FLAGS", "holds a flag XLA does not know"),
    ("TF_GPU_ALLOCATOR", "cuda_malloc_asnyc", with_tensorflow, "FWK105", "warning",
     "export TF_GPU_ALLOCATOR=cuda_malloc_async", "is not a value TensorFlow knows"),
    ("CUDA_LAUNCH_BLOCKING", "1", _same, "FWK106", "info", "unset CUDA_LAUNCH_BLOCKING", "every kernel launch waits"),
    ("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", _same, "FWK106", "info", "unset PYTORCH_NO_CUDA_MEMORY_CACHING",
     "bypasses its caching allocator"),
    ("CUDA_MODULE_LOADING", "EAGER", _same, "FWK106", "info", "unset CUDA_MODULE_LOADING", "loads every kernel"),
    ("TF_GPU_ALLOCATOR", "cuda_malloc", with_tensorflow, "FWK106", "info", "unset TF_GPU_ALLOCATOR",
     "a debugging allocator"),
    ("NCCL_P2P_DISABLE", "1", _same, "FWK106", "info", "unset NCCL_P2P_DISABLE", "through host memory"),
    ("NCCL_SHM_DISABLE", "1", _same, "FWK106", "info", "unset NCCL_SHM_DISABLE", "does not use shared memory"),
]


@pytest.mark.parametrize("name, value, change, code, severity, fix, words", FAULTS,
                         ids=[f"{f[0]}={f[1]}" for f in FAULTS])
def test_a_variable_that_steers_a_framework_is_named_with_its_fix(h200x2, name, value, change, code, severity, fix,
                                                                     words):
    unset = change(h200x2)  # what the framework would show without the variable: nothing for these checks
    assert env_findings(unset) == []
    facts = with_env(unset, **{name: value})
    found = env_findings(facts)
    assert [(f["code"], f["severity"]) for f in found] == [(code, severity)], [f["title"] for f in found]
    f = found[0]
    assert f["title"].startswith(f"{name}={value!r}") and words in f["title"]
    assert f["remediation"]["commands"] == [fix]
    assert f["remediation"]["links"]
    # adding the variable adds the environment finding and changes nothing else
    assert codes(facts) == sorted(codes(unset) + [code])


def test_the_frameworks_own_message_is_quoted(h200x2):
    facts = with_env(jax_without_gpu(h200x2), JAX_PLATFORMS="cpu")
    assert f'JAX here: "{JAX_NO_GPU}".' in env_findings(facts)[0]["detail"]
    facts = with_env(torch_refused(h200x2, TORCH_UNKNOWN_KEY.format("bogus_option")), PYTORCH_CUDA_ALLOC_CONF="bogus_option:1")
    detail = env_findings(facts)[0]["detail"]
    assert detail.startswith("PyTorch does not know the key 'bogus_option'.")
    assert "PyTorch here: \"ValueError: Unrecognized key 'bogus_option' in CUDA allocator config\"." in detail
    facts = with_env(jax_without_gpu(h200x2), XLA_PYTHON_CLIENT_ALLOCATOR="bogus")
    assert "a CUDA-enabled jaxlib is not installed" in env_findings(facts)[0]["detail"]  # JAX's misleading words, named


def test_nccl_settings_are_no_note_on_one_gpu(h200x2):
    one = with_fact(h200x2, "host.env.CUDA_VISIBLE_DEVICES", "0")
    assert env_findings(with_env(one, NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1")) == []


def test_several_notes_at_once(h200x2):
    facts = with_env(h200x2, CUDA_LAUNCH_BLOCKING="1", PYTORCH_NO_CUDA_MEMORY_CACHING="true", CUDA_MODULE_LOADING="eager")
    assert [(f["code"], f["title"].split("=")[0]) for f in env_findings(facts)] == [
        ("FWK106", "CUDA_LAUNCH_BLOCKING"), ("FWK106", "PYTORCH_NO_CUDA_MEMORY_CACHING"), ("FWK106", "CUDA_MODULE_LOADING")]


# --- when the framework's own facts decide --------------------------------------------------------------

def test_a_setting_the_framework_accepted_here_is_no_finding(h200x2):
    """A key no release known here has, that this PyTorch accepted (it ran on the GPU with it): quiet."""
    assert h200x2["frameworks"]["torch"]["info"]["smoke"] == 8.0
    assert env_findings(with_env(h200x2, PYTORCH_CUDA_ALLOC_CONF="some_future_key:1")) == []
    assert steering_cause(with_env(h200x2, PYTORCH_CUDA_ALLOC_CONF="some_future_key:1"), "torch") is None
    # a jaxlib that does not know the newer name takes the old one alone, and ran
    assert env_findings(with_env(h200x2, XLA_CLIENT_MEM_FRACTION=".5", XLA_PYTHON_CLIENT_MEM_FRACTION=".5")) == []


def test_without_the_frameworks_facts_the_rules_alone_decide(h200x2):
    """check --quick (the frameworks from package metadata) or no frameworks probe: the parser's rules decide."""
    quick = with_fact(h200x2, "frameworks.torch", {"installed": True, "status": "metadata",
                                                   "info": {"version": "2.11.0+cu130"}})
    found = env_findings(with_env(quick, PYTORCH_CUDA_ALLOC_CONF="bogus_option:1"))
    assert [f["code"] for f in found] == ["FWK103"] and "PyTorch here" not in found[0]["detail"]
    bare = {k: v for k, v in h200x2.items() if k != "frameworks"}
    assert [f["code"] for f in env_findings(with_env(bare, JAX_PLATFORMS="cpu"))] == ["FWK101"]
    assert [f["code"] for f in env_findings(with_env(bare, TF_GPU_ALLOCATOR="bogus"))] == ["FWK105"]


def test_a_variable_for_a_framework_that_is_not_installed_is_no_finding(h200x2):
    for fw, values in (("jax", {"JAX_PLATFORMS": "cpu", "XLA_PYTHON_CLIENT_ALLOCATOR": "bogus"}),
                       ("torch", {"PYTORCH_CUDA_ALLOC_CONF": "bogus_option:1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
                       ("tensorflow", {"TF_GPU_ALLOCATOR": "cuda_malloc"})):
        facts = with_env(with_fact(h200x2, f"frameworks.{fw}", {"installed": False}), **values)
        assert env_findings(facts) == [], fw


def test_both_allocator_variables_set(h200x2):
    """PyTorch 2.11 read PYTORCH_CUDA_ALLOC_CONF and ran, ignoring a bad PYTORCH_ALLOC_CONF (measured): quiet;
    without facts both are judged, and the finding says to set one."""
    both = with_env(h200x2, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True", PYTORCH_ALLOC_CONF="bogus_option:1")
    assert env_findings(both) == []
    quick = with_fact(both, "frameworks.torch", {"installed": True, "status": "metadata"})
    found = env_findings(quick)
    assert [f["title"].split("=")[0] for f in found] == ["PYTORCH_ALLOC_CONF"]
    assert "set one" in found[0]["detail"]


def test_no_gpu_no_judgement(h200x2):
    facts = with_env(with_fact(h200x2, "nvml.init", {"ok": False, "reason": "driver_not_loaded"}), JAX_PLATFORMS="cpu")
    assert {registry.run_check(c, facts).status for c in ENV_CHECKS} == {"skip"}
    hidden = with_env(with_fact(h200x2, "host.env.CUDA_VISIBLE_DEVICES", ""), CUDA_LAUNCH_BLOCKING="1")
    assert {registry.run_check(c, hidden).status for c in ENV_CHECKS} == {"skip"}


# --- the allocator setting's syntax ---------------------------------------------------------------------

@pytest.mark.parametrize("value, pairs, broken", [
    ("expandable_segments:True", [("expandable_segments", "True")], None),
    (" a : 1 , b:[1:2,>:4] ,", [("a", "1"), ("b", "[1:2,>:4]")], None),
    ("", [], None),
    ("expandable_segments", [], "'expandable_segments' is not followed by ':' and a value"),
    ("max_split_size_mb=128", [], "'max_split_size_mb=128' is not followed by ':' and a value"),
    ("a:1;b:2", [("a", "1;b")], "a:1;b is followed by ':', not by the ',' between pairs"),
    ("a:", [], "'a' has no value after its ':'"),
    (",a:1", [], "',' stands where a key should"),
    ("b:[1:2", [], "the list after 'b' has no closing ']'"),
])
def test_alloc_conf_syntax(value, pairs, broken):
    assert parse_alloc_conf(value) == (pairs, broken)


def test_alloc_conf_corrections():
    assert alloc_conf_problems("expandable_segments:false,max_split_size_mb:128") == (
        ["expandable_segments takes True or False (capitalised), not 'false'"],
        "expandable_segments:False,max_split_size_mb:128")
    assert alloc_conf_problems("bogus:1") == (["PyTorch does not know the key 'bogus'"], "")
    assert alloc_conf_problems("a:1;b:2")[1] is None


# --- the helper the framework checks call ----------------------------------------------------------------

def test_steering_cause_contract(h200x2):
    assert steering_cause(h200x2, "jax") is None  # no host.framework_env: an older report
    facts = with_env(jax_without_gpu(h200x2), JAX_PLATFORMS="cpu")
    cause = steering_cause(facts, "jax")
    assert cause == Cause("JAX_PLATFORMS", "cpu", "unset JAX_PLATFORMS") == ("JAX_PLATFORMS", "cpu", "unset JAX_PLATFORMS")
    variable, value, fix = cause
    assert (variable, value, fix) == tuple(cause)
    assert steering_cause(facts, "torch") is None and steering_cause(facts, "cupy") is None
    torch = with_env(torch_refused(h200x2, TORCH_BOOL), PYTORCH_CUDA_ALLOC_CONF="expandable_segments:true")
    assert steering_cause(torch, "torch") == ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:true",
                                              "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    xla = with_env(jax_without_gpu(h200x2), XLA_PYTHON_CLIENT_MEM_FRACTION="abc")
    assert steering_cause(xla, "jax") == ("XLA_PYTHON_CLIENT_MEM_FRACTION", "abc", "unset XLA_PYTHON_CLIENT_MEM_FRACTION")
    flags = with_env(jax_crashed(h200x2, XLA_FLAG_STDERR), XLA_FLAGS="--xla_gpu_autotune_level=0 --xla_gpu_bogus_flag=true")
    assert steering_cause(flags, "jax") == ("XLA_FLAGS", "--xla_gpu_autotune_level=0 --xla_gpu_bogus_flag=true",
                                            "export XLA_FLAGS=--xla_gpu_autotune_level=0")


@pytest.mark.parametrize("values", [
    {"JAX_PLATFORM_NAME": "cpu"}, {"JAX_PLATFORMS": "cpu,cuda"}, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "1.5"},
    {"CUDA_LAUNCH_BLOCKING": "1"}, {"XLA_FLAGS": "--xla_gpu_bogus_flag=true"}, {"TF_GPU_ALLOCATOR": "bogus"}])
def test_what_only_slows_or_moves_work_is_never_the_cause(h200x2, values):
    facts = with_tensorflow(with_env(h200x2, **values))
    assert all(steering_cause(facts, fw) is None for fw in ("torch", "tensorflow", "jax", "cupy"))


# --- held to what the frameworks really did (1 x H100, PyTorch 2.11.0+cu130, JAX 0.11.2) -------------------

def _measured_facts(base: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """``base`` with the framework's facts as gpudoctor's child would have recorded this measured case."""
    res, name = case["result"], case["framework"]
    if res is None or case["returncode"] != 0:
        fw = {"installed": True, "status": "crashed", "error": "its process ended", "stderr_tail": case["stderr_tail"]}
    elif name == "torch":
        info = {"version": res["version"], "devices": [{"index": i} for i in range(res["device_count"])],
                "smoke": res["smoke"] if "smoke" in res else {"unavailable": "unknown", "error": res["error"]}}
        fw = {"installed": True, "status": "ok", "info": info}
    else:
        info = {"version": res["version"], "devices": [{"index": i, "name": n} for i, n in enumerate(res["gpus"])],
                "default_backend": res.get("default_backend")}
        if res.get("devices_error"):
            info["init_error"] = res["devices_error"]
        if res["gpus"]:
            info["smoke"] = res["smoke"] if "error" not in res else {"unavailable": "unknown", "error": res["error"]}
        fw = {"installed": True, "status": "ok", "info": info}
    return with_fact(with_fact(base, f"frameworks.{name}", fw), "host.framework_env", case["env"])


def _outcome(case: dict[str, Any]) -> str:
    """What the framework did: ran on the GPU, ran on the CPU by default while listing the GPU, or had no GPU."""
    res = case["result"]
    if res is None or case["returncode"] != 0 or "error" in res:
        return "no GPU"
    if case["framework"] == "torch":
        return "GPU"
    if not res["gpus"]:
        return "no GPU"
    return "GPU" if res.get("smoke_device", "").startswith("cuda") else "CPU by default"


@pytest.mark.parametrize("case", MEASURED, ids=[f"{c['framework']}:{c['env']}" for c in MEASURED])
def test_the_verdict_agrees_with_what_the_framework_did(h200x2, case):
    facts = _measured_facts(h200x2, case)
    found = env_findings(facts)
    errors = [f for f in found if f["severity"] == "error"]
    outcome = _outcome(case)
    assert bool(errors) == (outcome == "no GPU"), (outcome, [f["title"] for f in found])
    assert any(f["code"] == "FWK102" for f in found) == (outcome == "CPU by default")
    cause = steering_cause(facts, case["framework"])
    assert (cause is not None) == (outcome == "no GPU")
    if cause:
        assert cause.variable in case["env"]


def test_the_measurements_cover_every_rule():
    """The recorded cases still exercise each kind of outcome (a shortened file would weaken the test above)."""
    outcomes = {(c["framework"], _outcome(c)) for c in MEASURED}
    assert outcomes == {("torch", "GPU"), ("torch", "no GPU"), ("jax", "GPU"), ("jax", "no GPU"),
                        ("jax", "CPU by default")}


# --- the recordings ---------------------------------------------------------------------------------------

def _reports(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.json") if isinstance(json.loads(p.read_text()), dict)
                  and "facts" in json.loads(p.read_text()))


def _all_facts(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """A report's facts, and those of every other node a torchrun job's report carries."""
    nodes = (facts.get("cluster") or {}).get("nodes") or []
    return [facts] + [n["report"]["facts"] for n in nodes if isinstance(n, dict) and isinstance(n.get("report"), dict)]


HEALTHY_RECORDINGS = [p for d in REAL_DIRS for p in _reports(d)]


@pytest.mark.parametrize("path", HEALTHY_RECORDINGS, ids=[str(p.relative_to(REAL)) for p in HEALTHY_RECORDINGS])
def test_every_recorded_report_is_quiet(path):
    for facts in _all_facts(json.loads(path.read_text())["facts"]):
        assert env_findings(facts) == []
        assert all(steering_cause(facts, fw) is None for fw in ("torch", "tensorflow", "jax", "cupy"))


RECORDED_FAULTS = {
    # file: (the environment checks' codes, the cause steering_cause names and for which framework)
    "jax-platforms-cpu": (["FWK101"], "jax", "JAX_PLATFORMS"),
    "torch-alloc-unknown-key": (["FWK103"], "torch", "PYTORCH_CUDA_ALLOC_CONF"),
    "torch-alloc-malformed": (["FWK103"], "torch", "PYTORCH_CUDA_ALLOC_CONF"),
    "xla-allocator-unknown": (["FWK104"], "jax", "XLA_PYTHON_CLIENT_ALLOCATOR"),
    "xla-flags-unknown": (["FWK107"], "jax", "XLA_FLAGS"),
    "slowing": (["FWK106", "FWK106", "FWK106"], None, None),
    "healthy-values": ([], None, None),
}


def _cases() -> dict[str, dict[str, str]]:
    """cases.txt: each recording's variables as the script set them."""
    out = {}
    for line in (ENV_FAULTS / "cases.txt").read_text().splitlines():
        name, _, rest = line.partition(": ")
        if rest:
            out[name] = dict(pair.split("=", 1) for pair in rest.split())
    return out


@pytest.mark.parametrize("name", sorted(RECORDED_FAULTS))
def test_the_faults_recorded_for_real(name):
    report = json.loads((ENV_FAULTS / f"{name}.json").read_text())
    facts = report["facts"]
    assert facts["host"]["framework_env"] == _cases()[name]  # the probe read what the script set, nothing else
    expected, framework, variable = RECORDED_FAULTS[name]
    found = env_findings(facts)
    assert [f["code"] for f in found] == expected, [f["title"] for f in found]
    if name != "xla-flags-unknown":  # recorded before FWK107 existed
        assert sorted(f["code"] for f in report["findings"] if f["code"] in ENV_CODES) == expected  # as the run said
    for fw in ("torch", "tensorflow", "jax", "cupy"):
        cause = steering_cause(facts, fw)
        assert (cause.variable if cause else None) == (variable if fw == framework else None), fw


def test_the_recorded_unknown_key_quotes_pytorch():
    facts = json.loads((ENV_FAULTS / "torch-alloc-unknown-key.json").read_text())["facts"]
    assert "Unrecognized key 'bogus_option' in CUDA allocator config" in env_findings(facts)[0]["detail"]


# --- the probe and the report ---------------------------------------------------------------------------

def test_the_probe_reads_the_variables_that_are_set(monkeypatch):
    for name in FRAMEWORK_ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    assert probe_host()["framework_env"] == {}
    values = {"JAX_PLATFORMS": "cpu", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_DEBUG": "INFO",
              "XLA_PYTHON_CLIENT_MEM_FRACTION": "", "XLA_FLAGS": "--x" * 600}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SOME_OTHER_VARIABLE", "1")
    env = probe_host()["framework_env"]
    assert env == {**values, "XLA_FLAGS": values["XLA_FLAGS"][:FRAMEWORK_ENV_MAX_CHARS]}
    assert list(env) == [n for n in FRAMEWORK_ENV_NAMES if n in values]  # in the list's order


def test_every_variable_is_recorded_once_and_documented():
    assert set(FRAMEWORK_ENV_NAMES).isdisjoint(ENV_NAMES)
    assert len(set(FRAMEWORK_ENV_NAMES)) == len(FRAMEWORK_ENV_NAMES)
    text = REPORT_FORMAT.read_text(encoding="utf-8")
    assert "`framework_env`" in text
    assert [n for n in FRAMEWORK_ENV_NAMES if f"`{n}`" not in text] == []


def test_redaction_keeps_only_the_listed_variables_and_no_secret():
    report = {"facts": {"host": {"hostname": "h", "env": {}, "framework_env": {
        "XLA_FLAGS": "--xla_dump_to=/home/alice/dumps --xla_gpu_autotune_level=0",
        "NCCL_SOCKET_IFNAME": "https://bob:hunter2pass@example.com",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}}}}
    for identities in (True, False):
        env = redact_report(report, identities=identities)["facts"]["host"]["framework_env"]
        assert list(env) == ["XLA_FLAGS", "NCCL_SOCKET_IFNAME"]
        assert env["NCCL_SOCKET_IFNAME"] == f"https://{MARK}@example.com"
        home = "~/dumps" if identities else "/home/alice/dumps"
        assert env["XLA_FLAGS"] == f"--xla_dump_to={home} --xla_gpu_autotune_level=0"


# --- frameworks.gpu and frameworks.cudnn on the real 2 x H200 recording, one fact changed at a time -------
# Each fault asserts the exact codes over every check: the one expected, and nothing else starting to complain.

def test_the_healthy_recording_passes_every_frameworks_check(h200x2):
    """The real 2 x H200 recording: every frameworks check had its facts to judge (each framework's devices, its build and the cuDNN it loaded) and passes,
    and no check at all finds anything."""
    judged = {k: v for k, v in statuses(h200x2, "frameworks").items() if k not in PASTE_ONLY}
    assert judged == {c.id: "pass" for c in registry.CHECKS if c.area == "frameworks" and c.id not in PASTE_ONLY}
    assert {statuses(h200x2, "frameworks").get(c) for c in PASTE_ONLY if c.startswith("frameworks.")} <= {"skip", None}  # nothing pasted
    assert code_set(h200x2) == set()


TORCH_REFUSAL = ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 19, 0) but found runtime "
                 "version (9, 14, 0). PyTorch already comes bundled with cuDNN.")


def test_torch_seeing_no_gpu_quotes_its_message(h200x2):
    message = ("RuntimeError: The NVIDIA driver on your system is too old (found version 12020). Please update your "
               "GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx")
    facts = with_fact(h200x2, "frameworks.torch.info.devices", [])
    facts = with_fact(facts, "frameworks.torch.info.init_error", message)
    f = only(facts, "FWK002")
    assert f["severity"] == "error"
    assert f["title"] == "PyTorch sees no GPU, but CUDA programs here should see 2"
    assert message in f["detail"]


def test_torch_seeing_one_of_two(h200x2):
    facts = with_fact(h200x2, "frameworks.torch.info.devices", h200x2["frameworks"]["torch"]["info"]["devices"][:1])
    f = only(facts, "FWK003")
    assert f["severity"] == "warning"
    assert "1 of the 2" in f["title"]


def test_jax_seeing_one_of_two_with_one_gpu_selected_is_fine(h200x2):
    """CUDA_VISIBLE_DEVICES=1 leaves one GPU: a framework seeing one is not missing any."""
    facts = with_fact(h200x2, "host.env.CUDA_VISIBLE_DEVICES", "1")
    for name in ("torch", "jax", "cupy"):
        facts = with_fact(facts, f"frameworks.{name}.info.devices", facts["frameworks"][name]["info"]["devices"][:1])
    assert code_set(facts) == {"VIS004"}


def test_smoke_failure(h200x2):
    error = "AcceleratorError: CUDA error: an illegal memory access was encountered"
    facts = with_fact(h200x2, "frameworks.torch.info.smoke", {"unavailable": "unknown", "error": error})
    f = only(facts, "FWK008")
    assert f["severity"] == "error"
    assert error in f["title"]


def test_cudnn_major_differs(h200x2):
    f = only(with_fact(h200x2, "frameworks.torch.info.runtime_cudnn", "8.9.7"), "FWK006")
    assert f["severity"] == "error"
    assert "9.19.0" in f["title"] and "8.9.7" in f["title"]


def test_older_cudnn_minor_without_refusal_is_a_warning(h200x2):
    f = only(with_fact(h200x2, "frameworks.torch.info.runtime_cudnn", "9.14.0"), "FWK007")
    assert f["severity"] == "warning"
    assert f["detail"] == ""


def test_older_cudnn_minor_refused_is_an_error(h200x2):
    facts = with_fact(h200x2, "frameworks.torch.info.runtime_cudnn", {"unavailable": "unknown", "error": TORCH_REFUSAL})
    i = lib_index(facts, "torch", "libcudnn")
    facts = with_fact(facts, f"frameworks.torch.info.loaded_libraries.{i}.version", "9.14.0")
    f = only(facts, "FWK007")
    assert f["severity"] == "error"
    assert TORCH_REFUSAL in f["detail"]
    assert "9.19.0" in f["title"] and "9.14.0" in f["title"]


def test_newer_cudnn_minor_is_fine(h200x2):
    assert code_set(with_fact(h200x2, "frameworks.torch.info.runtime_cudnn", "9.20.1")) == set()


CPU_JAX = {
    "version": "0.11.2", "jaxlib_version": "0.11.2", "default_backend": "cpu", "devices": [], "cuda_available": False,
    "init_error": "RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present. "
                  "Platforms present are: cpu",
    "cpu_only_build": True, "plugins": [], "import_and_probe_s": 1.2, "loaded_libraries": [],
}


def test_cpu_only_jax(h200x2):
    f = only(with_fact(h200x2, "frameworks.jax.info", CPU_JAX), "FWK001")
    assert f["severity"] == "error"
    assert f["title"].startswith("JAX 0.11.2 is a CPU-only build")
    assert "Unknown backend" in f["detail"]
    assert f["remediation"]["commands"] == [f"{h200x2['python']['executable']} -m pip install -U 'jax[cuda13]'"]


def test_cpu_only_jax_on_a_cuda_12_driver_gets_cuda12(h200x2):
    facts = with_fact(with_fact(h200x2, "frameworks.jax.info", CPU_JAX), "nvml.cuda_driver_version", 12080)
    (f,) = [f for f in findings(facts) if f["code"] == "FWK001"]
    assert f["remediation"]["commands"][0].endswith("'jax[cuda12]'")


# --- FWK009: gpudoctor's own child did not start (frameworks.import) ---------------------------------

BARE_VENV = REAL / "h100x1-20261123" / "hostile-1844" / "bare-venv"


def test_a_child_that_never_started_is_not_a_framework_failure():
    """Recorded on 1 x H100 (2026-11-23, tools/device/bare_venv.sh) with the code before the fix: a venv holding
    torch, JAX and CuPy but not psutil, checked by a gpudoctor whose children needed psutil. Each child died
    importing gpudoctor's own modules, and the old record could not tell: three FWK004 "PyTorch fails", a wrong
    verdict on healthy frameworks. The probe now records ``started: false`` for such a child; with it (one fact
    per framework), the same report gives FWK009, a warning that gpudoctor could not look, naming psutil."""
    facts = json.loads((BARE_VENV / "before-fw-venv.json").read_text())["facts"]
    assert sorted(f["code"] for f in pipeline.judge(facts)["findings"]) == ["FWK004"] * 3  # as recorded: wrong
    for name in ("torch", "jax", "cupy"):
        facts = with_fact(facts, f"frameworks.{name}.started", False)
    found = pipeline.judge(facts)["findings"]
    assert [(f["code"], f["severity"]) for f in found] == [("FWK009", "warning")] * 3
    assert all("ModuleNotFoundError: No module named 'psutil'" in f["title"] for f in found)
    assert found[0]["title"].startswith("gpudoctor could not start its PyTorch check under /tmp/fw-venv/bin/python")
    assert found[0]["remediation"]["commands"] == ["/tmp/fw-venv/bin/python -c 'import torch'"]


def test_the_fixed_code_on_the_same_venv_finds_nothing():
    """The same venv, the fixed code (same machine, minutes later): every framework imported and computed."""
    report = json.loads((BARE_VENV / "after-fw-venv.json").read_text())
    assert pipeline.judge(report["facts"])["findings"] == []
    assert {n: fw.get("status") for n, fw in report["facts"]["frameworks"].items() if fw.get("installed")} == \
        {"torch": "ok", "jax": "ok", "cupy": "ok"}
