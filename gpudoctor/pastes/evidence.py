"""What the other ticket forms (gpudoctor/pastes/forms/) add to the merged snapshot: the evidence list
(what the paste shows happened, each item with its line), and, where collect_env did not say them, the
framework builds, the toolkit and the OS those forms state, in the facts' normal shape.

Evidence outranks inference: a Python session's or a template's ``is_available()`` answer is kept as the
framework's own answer, and two interpreters that answer differently are recorded as a contradiction
(``evidence`` kind ``contradiction``) instead of being merged into one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Optional

from gpudoctor import versions
from gpudoctor.pastes.detect import Paste
from gpudoctor.pastes.gpu_names import matrix_gpu
from gpudoctor.pastes.wsl import WSL1_KERNEL

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix

FORMS = ("messages", "session", "template", "tools", "prose", "observed")
#: The source every fact read from prose carries: checks and renderers can tell it is the weakest.
PROSE = "prose"


def merge_forms(facts: dict[str, Any], matrix: Matrix, pastes: list[Paste], notes: list[str]) -> None:
    """Add the forms' evidence and stated versions to ``facts`` (collect_env's, already there, win); a GPU they
    name is looked up in ``matrix``."""
    forms = {p.kind: p for p in pastes if p.kind in FORMS}
    evidence = [_where(item, p) for p in forms.values() for item in p.parsed.get("evidence") or []]
    stated = _torch_stated(forms)
    torch = (facts.get("frameworks") or {}).get("torch")
    if torch and stated:
        evidence += _contradictions(torch, stated, notes)
    elif stated and stated.get("version"):
        facts.setdefault("frameworks", {})["torch"] = _torch_fact(stated)
    _tensorflow(facts, forms)
    _jax(facts, forms)
    _cupy(facts, forms)
    _toolkit(facts, forms.get("tools"))
    _smi_quoted(facts, evidence)
    _wsl(facts, forms.get("tools"))
    _host(facts, forms.get("template"))
    _stated_gpu(facts, matrix, forms.get("template"))
    if "prose" in forms:
        _prose(facts, matrix, forms["prose"])
    _runtime_wheel(facts, forms.get("tools"))
    _started(facts, evidence)
    _prose_toolkit_after_work(facts, evidence, notes)
    if evidence:
        facts["evidence"] = evidence
    _rocm(facts, next((p for p in pastes if p.kind == "rocm"), None), notes)


def _rocm(facts: dict[str, Any], paste: Optional[Paste], notes: list[str]) -> None:
    """An AMD ROCm stack (pastes/forms/rocm.py) where the pastes show no NVIDIA driver or GPU: kept as ``rocm`` with
    where each sign was read, so that no NVIDIA rule judges it (pastes/to_facts.py). Beside an NVIDIA driver or GPU
    the machine is judged as NVIDIA's: a ROCm build there is a finding of its own (FWK001)."""
    if paste is None:
        return
    name = paste.where.rsplit(", line ", 1)[0]
    signs = [{"what": s["what"], "text": s["text"], "where": f"{name}, line {s['line']}"} for s in paste.parsed["signs"]]
    packages_only = all(s["what"].endswith("-rocm package") for s in signs)
    if _nvidia_shown(facts) or (packages_only and _cuda_build_shown(facts)):
        notes.append(f"the pastes show an AMD ROCm stack ({signs[0]['what']}, {signs[0]['where']}) beside an NVIDIA "
                     "driver or GPU, or a CUDA build: judged as an NVIDIA machine")
        return
    facts["rocm"] = {"signs": signs, "source": signs[0]["where"]}


def _nvidia_shown(facts: dict[str, Any]) -> bool:
    """Whether a paste other than prose shows an NVIDIA driver version or lists a GPU through nvidia-smi."""
    nvml = facts.get("nvml") or {}
    if isinstance(nvml.get("driver_version"), str) and not str(nvml.get("source") or "").startswith(PROSE):
        return True
    return any(isinstance(g, dict) and not g.get("stated") for g in facts.get("gpus") or [])


def _cuda_build_shown(facts: dict[str, Any]) -> bool:
    """Whether a paste other than prose shows a PyTorch built for CUDA (a +cu wheel, collect_env's CUDA build).
    Beside a ROCm package alone its torch.cuda is CUDA's; beside an AMD GPU or ROCm's tools it is the wrong build
    on an AMD machine, which stays outside the NVIDIA checks."""
    torch = ((facts.get("frameworks") or {}).get("torch") or {}).get("info") or {}
    return torch.get("backend") == "cuda" and bool(torch.get("built_cuda")) and not str(torch.get("source") or "").startswith(PROSE)


#: The frameworks whose own messages say their CUDA started (an out-of-memory in PyTorch's allocator, tensors on
#: cuda:0, a kernel's assertion): vLLM runs on PyTorch, so its cache that did not fit says the same of PyTorch.
_TORCH_WORDS = ("cuda out of memory", "same device", "device-side assert", "device='cuda:", "kv cache", "cache blocks",
                "# gpu blocks", "assertion `")


def _started(facts: dict[str, Any], evidence: list[dict[str, Any]]) -> None:
    """PyTorch's CUDA started where its own messages show work on the GPU; kept as its is_available() answer
    when no paste gave one (the driver runs this build, whatever the matrix infers)."""
    torch = ((facts.get("frameworks") or {}).get("torch") or {}).get("info")
    if not torch or torch.get("cuda_available") is not None or torch.get("cpu_only_build"):
        return
    item = next((e for e in evidence if e.get("kind") == "gpu_worked" and e.get("how") != "illegal_address"
                 and any(w in str(e.get("text") or "").lower() for w in _TORCH_WORDS)), None)
    if item:
        torch["cuda_available"] = True
        torch.setdefault("evidence", []).append(f"{item['where']} shows PyTorch's work on the GPU")


def _prose_toolkit_after_work(facts: dict[str, Any], evidence: list[dict[str, Any]], notes: list[str]) -> None:
    """A "CUDA 12.1" in prose is read as the toolkit only for want of better; where the paste shows work on the GPU,
    that CUDA is most likely the framework's, which the work proves runs, so it is not judged as a toolkit."""
    nvcc = (facts.get("toolkit") or {}).get("nvcc") or {}
    if str(nvcc.get("source") or "").startswith(PROSE) and any(e.get("kind") == "gpu_worked" for e in evidence):
        del facts["toolkit"]
        notes.append(f"the prose's CUDA {nvcc.get('release')} is not judged as a toolkit: the paste shows CUDA work on "
                     "the GPU, so it is most likely the framework's")


def _runtime_wheel(facts: dict[str, Any], tools: Optional[Paste]) -> None:
    """The CUDA runtime NVIDIA's wheel brings (``nvidia-cuda-runtime-cu12==12.1.105``: CUDA 12.1) is the one a
    PyPI PyTorch wheel loads (it pins it exactly), not an installed toolkit: it gives PyTorch's CUDA where the
    version line did not, and is never taken for nvcc."""
    torch = ((facts.get("frameworks") or {}).get("torch") or {}).get("info")
    if tools is None or not torch or torch.get("built_cuda") or torch.get("cpu_only_build") or torch.get("backend") == "rocm":
        return
    wheel = next((p for p in tools.parsed.get("packages") or [] if p["name"].startswith("nvidia-cuda-runtime-cu")), None)
    m = re.match(r"^(\d{2})\.(\d{1,2})\.", str((wheel or {}).get("version") or ""))
    if not wheel or not m or not wheel["name"].endswith(f"cu{m.group(1)}"):
        return
    cuda = f"{m.group(1)}.{m.group(2)}"
    torch.update(cpu_only_build=False, cuda_build=True, backend="cuda", built_cuda=cuda, cuda_major=m.group(1), runtime_cuda=cuda)
    torch.setdefault("evidence", []).append(f"{tools.where}: {wheel['name']} {wheel['version']} brings the CUDA {cuda} runtime")


def _smi_quoted(facts: dict[str, Any], evidence: list[dict[str, Any]]) -> None:
    """nvidia-smi's failure quoted in prose, as the facts its own paste gives, where no nvidia-smi paste said more."""
    item = next((e for e in evidence if e.get("kind") == "smi_failure"), None)
    if item is None or facts.get("nvml"):
        return
    source = f"messages ({item['where']})"
    if item["reason"] == "no_devices":
        facts["nvml"] = {"init": {"ok": True}, "device_count": 0, "source": source}
    else:
        facts["nvml"] = {"init": {"ok": False, "reason": item["reason"], "message": item["message"], "code": None},
                         "source": source}


def _wsl(facts: dict[str, Any], tools: Optional[Paste]) -> None:
    """A WSL 2 kernel (``5.15.133.1-microsoft-standard-WSL2``) or its driver folder ``/usr/lib/wsl/lib`` in the
    paste: Linux under WSL, whatever the prose or a template calls the machine ("Windows 11")."""
    if tools is None or not tools.parsed.get("wsl"):
        return
    host = facts.get("host") or {}
    if host.get("wsl") or host.get("os") == "Darwin":
        return
    facts["host"] = {**host, "os": "Linux", "wsl": True, "source": f"{tools.where} (WSL 2 kernel or driver folder)"}


def _where(item: dict[str, Any], paste: Paste) -> dict[str, Any]:
    name = paste.where.rsplit(", line ", 1)[0]
    return {**item, "where": f"{name}, line {item['line']}", "form": paste.kind}


def _torch_stated(forms: dict[str, Paste]) -> dict[str, Any]:
    """PyTorch's version, CUDA, is_available() and architectures as a session, a template or a package list
    states them, each with where it was read."""
    out: dict[str, Any] = {}
    for kind in ("session", "template"):
        values = forms[kind].parsed if kind in forms else {}
        for field, key in (("torch_version", "version"), ("torch_cuda", "cuda"), ("torch_cuda_available", "available"),
                           ("torch_arch_list", "arch_list"), ("torch_device_count", "device_count")):
            if values.get(field) is not None and key not in out:
                out[key], out[f"{key}_from"] = values[field], f"{forms[kind].where.rsplit(', line ', 1)[0]} ({kind})"
    tools = forms["tools"].parsed if "tools" in forms else {}
    for package in tools.get("packages") or []:
        if package["name"] in ("torch", "pytorch") and "version" not in out:
            out["version"], out["version_from"] = package["version"], f"{forms['tools'].where} (package list)"
            if package.get("cuda"):
                out["cuda"] = package["cuda"]
            if package.get("cpu"):
                out["cuda"] = "None"
    return out


def cuda_of(version: str, cuda: Any) -> Optional[str]:
    """The CUDA a PyTorch build targets: ``torch.version.cuda``, else its local tag (``+cu118`` -> 11.8)."""
    if isinstance(cuda, str) and re.match(r"^\d+\.\d+", cuda):
        return cuda
    m = re.search(r"\+cu(\d{2,3})$", version)
    if m:
        digits = m.group(1)
        return f"{digits[:-1]}.{digits[-1]}"
    return None


def _torch_fact(stated: dict[str, Any]) -> dict[str, Any]:
    version = str(stated["version"])
    cuda = cuda_of(version, stated.get("cuda"))
    info: dict[str, Any] = {"version": version, "source": stated["version_from"],
                            "evidence": [f"{stated['version_from']} says PyTorch {version}"]}
    if version.endswith("+cpu") or stated.get("cuda") == "None":
        info.update(cpu_only_build=True, cuda_build=False, backend="cpu", built_cuda=None)
    elif cuda:
        info.update(cpu_only_build=False, cuda_build=True, backend="cuda", built_cuda=cuda, cuda_major=cuda.split(".")[0])
    else:
        info.update(cpu_only_build=None, built_cuda=None)
    if isinstance(stated.get("arch_list"), list) and stated["arch_list"]:
        info["arch_list"] = [a for a in stated["arch_list"] if a.startswith("sm_")] + \
            [a for a in stated["arch_list"] if a.startswith("compute_")]
        info["arch_list_source"] = f"torch.cuda.get_arch_list() in {stated['arch_list_from']}"
    fw: dict[str, Any] = {"installed": True, "source": stated["version_from"], "info": info, "status": "metadata"}
    available = stated.get("available")
    if available is not None:
        info["cuda_available"] = available
    if available is False or info.get("cpu_only_build") is True:
        fw["status"], info["devices"] = "ok", []  # PyTorch's own answer: it sees no GPU
    elif available is True and isinstance(stated.get("device_count"), int):
        fw["status"], info["devices"] = "ok", [{"index": i} for i in range(stated["device_count"])]
    return fw


def _contradictions(torch: dict[str, Any], stated: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    """collect_env's PyTorch against a session's or a template's: two interpreters when they disagree."""
    info = torch.get("info") or {}
    out = []
    said = info.get("version")
    if stated.get("version") and said and stated["version"] != said:
        out.append(("version", said, stated["version"], stated["version_from"]))
    if stated.get("available") is not None and info.get("cuda_available") is not None \
            and stated["available"] != info["cuda_available"]:
        out.append(("torch.cuda.is_available()", info["cuda_available"], stated["available"], stated["available_from"]))
    items = []
    for what, first, second, where in out:
        text = f"PyTorch {what}: {first} in {torch.get('source')}, {second} in {where}"
        notes.append(f"two Python environments? {text}; each is reported as pasted")
        items.append({"kind": "contradiction", "what": what, "text": text, "where": where, "form": "session",
                      "line": 0})
    return items


def _tensorflow(facts: dict[str, Any], forms: dict[str, Paste]) -> None:
    if "tensorflow" in (facts.get("frameworks") or {}):
        return
    template = forms["template"].parsed if "template" in forms else {}
    session = forms["session"].parsed if "session" in forms else {}
    version = template.get("tensorflow_version") or session.get("tensorflow_version")
    if not version or not re.match(r"^\d+\.\d+", str(version)):
        return
    where = forms["template" if template.get("tensorflow_version") else "session"].where
    info = {"version": str(version), "source": where, "evidence": [f"{where} says TensorFlow {version}"]}
    facts.setdefault("frameworks", {})["tensorflow"] = {"installed": True, "source": where, "info": info,
                                                         "status": "metadata"}


def _package(forms: dict[str, Paste], name: str) -> Optional[dict[str, Any]]:
    tools = forms["tools"].parsed if "tools" in forms else {}
    return next((p for p in tools.get("packages") or [] if p["name"] == name), None)


def _jax(facts: dict[str, Any], forms: dict[str, Paste]) -> None:
    """JAX as ``jax.print_environment_info()``, a session or a package list states it: its version, the CUDA
    major a ``+cuda12`` jaxlib names, and the devices it listed (its own answer: on the CPU or a GPU)."""
    if "jax" in (facts.get("frameworks") or {}):
        return
    template = forms["template"].parsed if "template" in forms else {}
    session = forms["session"].parsed if "session" in forms else {}
    jax_pkg, jaxlib_pkg = _package(forms, "jax"), _package(forms, "jaxlib")
    version = template.get("jax_version") or session.get("jax_version") or (jax_pkg or {}).get("version")
    if not version or not re.match(r"^\d+\.\d+", str(version)):
        return
    where = next(forms[k].where for k, said in (("template", template.get("jax_version")), ("session", session.get("jax_version")),
                                               ("tools", jax_pkg)) if said)
    jaxlib = str(template.get("jaxlib_version") or (jaxlib_pkg or {}).get("version") or "")
    info: dict[str, Any] = {"version": str(version), "source": where, "evidence": [f"{where} says jax {version}"]}
    if jaxlib:
        info["jaxlib_version"] = jaxlib
        info["evidence"].append(f"jaxlib {jaxlib}")
    major = re.search(r"\+cuda(\d{2})\b", jaxlib)
    if major:  # 0.4.26+cuda12.cudnn89: a CUDA wheel for that major
        info.update(cuda_build=True, cpu_only_build=False, cuda_major=major.group(1))
    fw: dict[str, Any] = {"installed": True, "source": where, "info": info, "status": "metadata"}
    devices = template.get("jax_devices") or session.get("jax_devices")
    if devices in ("cpu", "gpu"):  # JAX's own answer; why it ran on the CPU (a CPU jaxlib, no GPU) is another message's
        info["cuda_available"] = devices == "gpu"
    facts.setdefault("frameworks", {})["jax"] = fw


def _cupy(facts: dict[str, Any], forms: dict[str, Paste]) -> None:
    """CuPy as ``cupy.show_config()`` states it: version, the CUDA it was built for and the runtime it loaded,
    cuDNN, the CUDA root; and the driver's CUDA (cudaDriverGetVersion) when no nvidia-smi paste gave one."""
    if "cupy" in (facts.get("frameworks") or {}) or "template" not in forms:
        return
    template, where = forms["template"].parsed, forms["template"].where
    version = template.get("cupy_version")
    if not version:
        return
    info: dict[str, Any] = {"version": str(version), "source": f"cupy.show_config() ({where})",
                            "evidence": [f"cupy.show_config() in {where} says CuPy {version}"]}
    if template.get("cupy_build_cuda"):
        info.update(cuda_build=True, cpu_only_build=False, built_cuda=template["cupy_build_cuda"],
                    cuda_major=template["cupy_build_cuda"].split(".")[0])
    if template.get("cupy_runtime_cuda"):
        info["runtime_cuda"] = template["cupy_runtime_cuda"]
    if template.get("cupy_cudnn"):
        info["runtime_cudnn"] = template["cupy_cudnn"]
    if template.get("cupy_cuda_root"):
        info["cuda_root"] = str(template["cupy_cuda_root"])[:200]
    facts.setdefault("frameworks", {})["cupy"] = {"installed": True, "source": info["source"], "info": info,
                                                   "status": "metadata"}
    driver_cuda = template.get("cupy_driver_cuda")
    if driver_cuda and not facts.get("nvml"):
        major, minor = (int(x) for x in str(driver_cuda).split(".")[:2])
        facts["nvml"] = {"init": {"ok": True}, "driver_version": {"unavailable": "not_found"},
                         "cuda_driver_version": 1000 * major + 10 * minor, "source": CUPY_SOURCE + f" ({where})"}


#: The source of a driver's CUDA read from CuPy: the driver answered CUDA, not NVML.
CUPY_SOURCE = "cupy.show_config()"


def _toolkit(facts: dict[str, Any], tools: Optional[Paste]) -> None:
    if tools is None or facts.get("toolkit") or not tools.parsed.get("nvcc"):
        return
    facts["toolkit"] = {"nvcc": {"found": True, "version": tools.parsed["nvcc_full"], "release": tools.parsed["nvcc"],
                                 "source": f"nvcc --version ({tools.where})"}}


_NVIDIA_WORDS = re.compile(r"\b(?:nvidia|geforce|rtx|gtx|tesla|quadro|titan|[ahlv]\d{2,3}\b|\d{3,4}\s?ti\b)", re.I)


def _stated_gpu(facts: dict[str, Any], matrix: Matrix, template: Optional[Paste]) -> None:
    """The GPU a template names ("GPU model and memory: RTX 3060 12GB") when nothing else listed one: a GPU is
    there, which a combination known bad on GPUs needs; its compute capability only where the matrix knows
    the name. Never the driver's facts: the template says nothing of the driver."""
    if template is None or facts.get("gpus"):
        return
    text = str(template.parsed.get("gpu_model") or "").strip()
    if not text or not _NVIDIA_WORDS.search(text) or re.search(r"\b(?:no gpu|none|cpu only|intel|amd|radeon)\b", text, re.I):
        return

    entry = matrix_gpu(matrix, text.split(",")[0].strip())
    gpu: dict[str, Any] = {"index": 0, "name": text[:120], "source": f"template ({template.where})", "stated": True,
                           "compute_capability": entry["compute_capability"] if entry else {"unavailable": "not_found"}}
    if entry:
        gpu["compute_capability_source"] = f"gpudoctor's matrix, by the name ({entry['model']})"
    facts["gpus"] = [gpu]


def _prose(facts: dict[str, Any], matrix: Matrix, paste: Paste) -> None:
    """What the prose states, each value only where no other paste gave that fact: it never contradicts
    a stronger form. A GPU only when the matrix knows its name; CUDA as the toolkit only when it is not the
    driver's own CUDA that an nvidia-smi paste printed; Python only as the host's, never judged against a
    release (a stated Python and a stated release name no one interpreter)."""
    values, where = paste.parsed, f"{PROSE} ({paste.where})"
    frameworks = facts.setdefault("frameworks", {})
    if values.get("torch_version") and "torch" not in frameworks:
        frameworks["torch"] = _torch_fact({"version": values["torch_version"], "version_from": where})
    if values.get("tensorflow_version") and "tensorflow" not in frameworks:
        version = values["tensorflow_version"]
        frameworks["tensorflow"] = {"installed": True, "source": where, "status": "metadata",
                                    "info": {"version": version, "source": where, "evidence": [f"{where} says TensorFlow {version}"]}}
    if not frameworks:
        del facts["frameworks"]
    if values.get("gpu") and not facts.get("gpus"):
        entry = matrix_gpu(matrix, values["gpu"])
        if entry:
            facts["gpus"] = [{"index": 0, "name": entry["model"], "source": where, "stated": True,
                              "compute_capability": entry["compute_capability"],
                              "compute_capability_source": f"gpudoctor's matrix, by the name ({entry['model']})"}]
    if values.get("driver_version") and not facts.get("nvml"):
        facts["nvml"] = {"init": {"ok": True}, "driver_version": values["driver_version"],
                         "cuda_driver_version": {"unavailable": "not_found"}, "source": where}
    driver_cuda = (facts.get("nvml") or {}).get("cuda_driver_version")
    cuda = values.get("cuda")
    if cuda and not facts.get("toolkit") and not (isinstance(driver_cuda, int) and versions.cuda(driver_cuda) == cuda):
        facts["toolkit"] = {"nvcc": {"found": True, "version": cuda, "release": cuda, "source": where}}
    host = facts.get("host") or {}
    if values.get("os") and not host.get("os"):
        family = values["os"]
        host = {**host, "source": where, "os": {"windows": "Windows", "macos": "Darwin"}.get(family, "Linux")}
        if family == "wsl":
            host["wsl"] = True
    if values.get("python_version") and not host.get("python"):
        host = {**host, "python": {"version": values["python_version"], "source": where}}
    if host:
        facts["host"] = host


def _host(facts: dict[str, Any], template: Optional[Paste]) -> None:
    if template is None or (facts.get("host") or {}).get("os"):
        return
    values = template.parsed
    text = f"{values.get('os') or ''} {values.get('platform') or ''}".strip()
    lowered = text.lower()
    host: dict[str, Any] = {"source": f"template ({template.where})", "distro": text[:120]}
    if "wsl" in lowered or "microsoft-standard" in lowered:
        host.update(os="Linux", wsl=True)
    elif "microsoft" in lowered and WSL1_KERNEL.search(text):
        host.update(os="Linux", wsl=True, wsl_version=1)
    elif re.search(r"\bwindows\b|\bwin ?1[01]\b", lowered):
        host["os"] = "Windows"
    elif re.search(r"\b(?:macos|mac os|darwin)\b", lowered):
        host["os"] = "Darwin"
    elif re.search(r"\b(?:linux|ubuntu|debian|centos|fedora|rhel|rocky)\b", lowered):
        host["os"] = "Linux"
    if values.get("python_version"):
        host["python"] = {"version": values["python_version"]}
    if host.get("os"):
        facts["host"] = {**(facts.get("host") or {}), **host}
