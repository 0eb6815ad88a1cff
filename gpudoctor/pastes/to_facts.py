"""Merge what several pastes say into one snapshot in the normal shape (docs/report-format.md), each
fact marked with the paste it came from, and say which checks those facts can feed.

Which source wins: nvidia-smi's XML, then ``-q``, then its table, then collect_env (which itself ran
``nvidia-smi``), for the driver and the GPUs; collect_env alone knows the framework build, the nvcc on
PATH and Python. Two pastes that disagree (a driver upgraded between two comments) keep the first
and say so in a note. A GPU's compute capability is in few pastes (`nvidia-container-cli info`): else it is
looked up by model name in the matrix the pastes are judged with (the bundled one, with any --matrix file over it), and stays unknown
when the name is not there (or was truncated past recognition).

What a paste cannot show is not judged: a check runs only when the facts it reads are in the pastes
(``RUNNABLE``); every other one is reported skipped with the reason for its area (``NOT_TOLD``),
never passed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Optional

from gpudoctor.pastes.detect import Paste
from gpudoctor.pastes.gpu_names import matrix_gpu
from gpudoctor.pastes.markdown_report import MAX_GPUS
from gpudoctor.pastes.wsl import WSL1_KERNEL

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix

#: Why each area (or check) cannot be judged from a paste: the report's skip reasons.
NOT_TOLD = {
    "doctor": "no gpudoctor probe ran: the facts come from a paste",
    "driver": "a paste does not show the kernel module, nouveau or the device files",
    "gpus": "a paste does not show each GPU's health here (errors, throttling, PCIe, modes, memory held)",
    "topology": "a paste does not show the links between GPUs",
    "visibility": "a paste does not show CUDA_VISIBLE_DEVICES",
    "container": "a paste does not show the container's settings",
    "toolkit": "a paste does not show CUDA_HOME or every installed toolkit",
    "libraries": "a paste does not show which CUDA libraries are installed or which ones a framework loaded",
    "python": "collect_env lists only some packages, so conflicts cannot be ruled out",
    "frameworks": "a paste does not show this",
    "frameworks.cudnn": "a paste does not show which cuDNN the framework loaded (collect_env lists the files the "
                        "loader can find, not the one PyTorch uses)",
    "compat": "the pastes do not say the driver and a framework build or toolkit",
    "acceleration": "nothing ran on a GPU: a paste cannot show that work runs and gives correct results",
}
SMI_RANK = {"nvidia-smi -q -x": 0, "nvidia-smi -q": 1, "nvidia-smi": 2, "gpudoctor-markdown": 3, "collect_env": 4,
            "nvidia-container-cli info": 5, "nvidia-smi -L": 6}
MIB = 1024**2


def merge(matrix: Matrix, pastes: list[Paste]) -> tuple[dict[str, Any], set[str]]:
    """(facts, the ids of the checks those facts can feed); a GPU or a PyTorch wheel a paste names is looked
    up in ``matrix``."""
    facts: dict[str, Any] = {"pastes": [{"kind": p.kind, "where": p.where, "values": _public(p.parsed)} for p in pastes]}
    notes = [n for p in pastes for n in p.parsed.get("notes") or []]
    smi = sorted((p for p in pastes if p.kind in SMI_RANK), key=lambda p: SMI_RANK[p.kind])
    _driver(facts, smi, notes)
    _kernel_module(facts, next((p for p in pastes if p.kind == "tools" and p.parsed.get("kernel_module")), None))
    _gpus(facts, matrix, smi, notes)
    envs = [p for p in pastes if p.kind == "collect_env"] + [p for p in pastes if p.kind == "gpudoctor-markdown"]
    if len({(p.parsed.get("torch_version"), p.parsed.get("driver_version")) for p in envs if p.kind == "collect_env"}) > 1:
        notes.append("the collect_env pastes disagree (two environments?); the first is used")
    if envs:
        _host_and_python(facts, envs[0])
        _toolkit(facts, envs[0])
        _frameworks(facts, matrix, envs[0])
    from gpudoctor.pastes.evidence import merge_forms

    merge_forms(facts, matrix, pastes, notes)
    run = runnable(facts)
    told = not_checked(run)
    if facts.get("rocm"):  # AMD's stack: no NVIDIA rule applies, so only the check that says so runs
        run = {ROCM_CHECK}
        told = {area: NOT_TOLD["doctor"] if area == "doctor" else ROCM_NOT_TOLD for area in not_checked(set())}
    facts["paste"] = {"kinds": sorted({p.kind for p in pastes}), "notes": notes, "judged": sorted(run),
                      "not_checked": told}
    return facts, run


#: The check that names an AMD ROCm stack (checks/messages.py), and why every area is left unjudged beside it.
ROCM_CHECK = "frameworks.rocm"
ROCM_NOT_TOLD = "an AMD ROCm stack: gpudoctor's checks judge NVIDIA drivers, GPUs and CUDA builds only"


def skip_reasons(facts: dict[str, Any]) -> dict[str, str]:
    """Why each check the pastes cannot feed is skipped, by check id or area: NOT_TOLD, or for an AMD ROCm
    stack the one reason that holds for every area."""
    if facts.get("rocm"):
        return {area: reason for area, reason in (facts.get("paste") or {}).get("not_checked", {}).items()}
    return NOT_TOLD


def not_checked(run: set[str]) -> dict[str, str]:
    """Each area none of whose checks the pastes can feed, with the reason: what a renderer shows for it."""
    from gpudoctor.checks.registry import CHECKS

    areas = {c.area for c in CHECKS} - {c.area for c in CHECKS if c.id in run}
    return {a: NOT_TOLD.get(a, "not checked") for a in sorted(areas)}


def _public(parsed: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in parsed.items() if k != "notes"}


def cuda_int(text: Any) -> Optional[int]:
    """"12.2" -> 12020, NVML's encoding (1000 * major + 10 * minor)."""
    m = re.match(r"^(\d+)\.(\d+)", str(text or ""))
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10 if m else None


def _driver(facts: dict[str, Any], smi: list[Paste], notes: list[str]) -> None:
    failed = next((p for p in smi if p.parsed.get("failure")), None)
    told = [p for p in smi if p.parsed.get("driver_version")]
    if failed and failed.parsed["failure"]["reason"] != "no_devices":
        # a failure wins over a working run in another paste: the thread is about the failure (a container that
        # lost its GPUs after `systemctl daemon-reload` while the host's nvidia-smi still works)
        failure = failed.parsed["failure"]
        facts["nvml"] = {"init": {"ok": False, "reason": failure["reason"], "message": failure["message"], "code": None,
                                  **({"library_version": failure["library_version"]} if failure.get("library_version") else {})},
                         "source": failed.kind}
        if told:
            facts["nvml"]["driver_version"] = told[0].parsed["driver_version"]
            notes.append(f"nvidia-smi failed in one paste ({failure['message']}) and ran in another "
                         f"({told[0].kind}, driver {told[0].parsed['driver_version']}); the failure is judged")
        return
    if not told:  # collect_env's GPU list is `nvidia-smi -L`: it ran, even when the driver line is missing
        listed = next((p for p in smi if p.kind in ("collect_env", "nvidia-smi -L")
                       and any(isinstance(g.get("index"), int) for g in p.parsed.get("gpus") or [])), None)
        if listed:
            facts["nvml"] = {"init": {"ok": True}, "driver_version": {"unavailable": "not_found"},
                             "cuda_driver_version": {"unavailable": "not_found"}, "source": listed.kind}
            return
    if told:
        first = told[0]
        others = {p.parsed["driver_version"] for p in told} - {first.parsed["driver_version"]}
        if others:
            notes.append(f"the pastes name different drivers ({first.parsed['driver_version']} from {first.kind}; "
                         f"also {', '.join(sorted(others))}); {first.parsed['driver_version']} is used")
        cuda = next((cuda_int(p.parsed.get("cuda_version")) for p in told if cuda_int(p.parsed.get("cuda_version"))), None)
        facts["nvml"] = {"init": {"ok": True}, "driver_version": first.parsed["driver_version"],
                         "cuda_driver_version": cuda if cuda else {"unavailable": "not_found"},
                         "source": first.kind}
    elif failed:
        failure = failed.parsed["failure"]
        if failure["reason"] == "no_devices":
            facts["nvml"] = {"init": {"ok": True}, "device_count": 0, "source": failed.kind}
        else:
            facts["nvml"] = {"init": {"ok": False, "reason": failure["reason"], "message": failure["message"],
                                      "code": None}, "source": failed.kind}




#: The source of a driver version read from the kernel module alone: NVML itself was not seen to start.
PROC_VERSION = "/proc/driver/nvidia/version"


def _kernel_module(facts: dict[str, Any], tools: Optional[Paste]) -> None:
    """``/proc/driver/nvidia/version``: the loaded kernel module, and the driver version when no nvidia-smi
    or collect_env paste gave one (the module and the libraries share one version on a working driver; a
    mismatch between them is a message of its own, DRV003 or DRV020)."""
    if tools is None:
        return
    version = tools.parsed["kernel_module"]
    where = f"{PROC_VERSION} ({tools.where})"
    facts["driver"] = {"kernel_module": {"loaded": True, "version": version,
                                         "flavour": "open" if tools.parsed.get("open_kernel_module") else "proprietary"},
                       "source": where}
    nvml = facts.get("nvml")
    if not nvml:
        facts["nvml"] = {"init": {"ok": True}, "driver_version": version,
                         "cuda_driver_version": {"unavailable": "not_found"}, "source": where}
    elif (nvml.get("init") or {}).get("ok") and not isinstance(nvml.get("driver_version"), str):
        nvml["driver_version"] = version  # nvidia-smi -L listed the GPUs without the driver line


def _gpus(facts: dict[str, Any], matrix: Matrix, smi: list[Paste], notes: list[str]) -> None:
    listed = [p for p in smi if p.parsed.get("gpus")]
    if not listed or not (facts.get("nvml") or {}).get("init", {}).get("ok"):
        return
    best = listed[0]
    names = next((p.parsed["gpus"] for p in listed[1:] if len(p.parsed["gpus"]) == len(best.parsed["gpus"])
                  and not any(str(g.get("name", "")).endswith("...") for g in p.parsed["gpus"])), None)
    gpus = []
    for i, raw in enumerate(best.parsed["gpus"]):
        name = str(raw.get("name") or "")
        if name.endswith("...") and names:  # the table truncates; a full name from another paste of the same GPUs
            name = str(names[i].get("name") or name)
        index = raw.get("index") if isinstance(raw.get("index"), int) else i
        gpu: dict[str, Any] = {"index": index, "name": name, "source": best.kind}
        cc = raw.get("compute_capability")
        entry = None if cc else matrix_gpu(matrix, name)
        if cc:
            gpu["compute_capability"] = cc
        elif entry:
            gpu["compute_capability"] = entry["compute_capability"]
            gpu["architecture"] = entry.get("architecture")
            gpu["compute_capability_source"] = f"gpudoctor's matrix, by the name ({entry['model']})"
        else:
            gpu["compute_capability"] = {"unavailable": "not_found"}
        for key in ("uuid", "persistence_mode"):
            if raw.get(key):
                gpu[key] = raw[key]
        if raw.get("architecture") and "architecture" not in gpu:
            gpu["architecture"] = raw["architecture"]
        if raw.get("bus_id"):
            gpu["pci"] = {"bus_id": raw["bus_id"]}
        memory = {k: raw[f"memory_{k}_mib"] * MIB for k in ("total", "used") if isinstance(raw.get(f"memory_{k}_mib"), int)}
        if memory:
            gpu["memory"] = {f"{k}_bytes": v for k, v in memory.items()}
        gpus.append(gpu)
    facts["gpus"] = gpus
    facts["nvml"]["device_count"] = len(gpus)
    counts = {p.kind: len(p.parsed["gpus"]) for p in listed}
    if len(set(counts.values())) > 1:
        notes.append("the pastes list different numbers of GPUs (" + ", ".join(f"{k}: {v}" for k, v in counts.items())
                     + f"); {best.kind}'s list is used")


def _host_and_python(facts: dict[str, Any], paste: Paste) -> None:
    values, kind = paste.parsed, paste.kind
    os_text, platform = str(values.get("os") or ""), str(values.get("python_platform") or "")
    host: dict[str, Any] = {"source": kind}
    if os_text.lower().startswith(("microsoft windows", "windows")) or platform.startswith("Windows"):
        host["os"] = "Windows"
    elif os_text.lower().startswith(("macos", "mac os", "os x")) or platform.startswith(("macOS", "Darwin")):
        host["os"] = "Darwin"
    elif platform.startswith("Linux") or re.match(r"^(ubuntu|debian|centos|red hat|rocky|alma|fedora|arch|opensuse|"
                                                  r"amazon linux|oracle linux|linux|pop!_os|manjaro)", os_text.lower()):
        host["os"] = "Linux"
    if os_text:
        m = re.match(r"^(.*?)\s*\(([\w-]+)\)\s*$", os_text)
        host["distro"], machine = (m.group(1), m.group(2)) if m else (os_text, None)
        if machine:
            host["machine"] = machine
    if "microsoft" in platform.lower() or "wsl" in platform.lower():
        host["wsl"] = True
        if WSL1_KERNEL.search(platform):
            host["wsl_version"] = 1
    if values.get("python_version"):
        host["python"] = {"version": values["python_version"]}
    if len(host) > 1:
        facts["host"] = host
    if values.get("python_version") or values.get("pip"):
        py: dict[str, Any] = {"source": kind}
        if values.get("python_version"):
            py["version"] = values["python_version"]
        if values.get("python_executable"):
            py["executable"] = values["python_executable"]
        if values.get("pip"):
            py["distributions"] = [{"name": d["name"].lower().replace("_", "-"), "version": d["version"],
                                    "location": "collect_env's pip list"} for d in values["pip"]]
        facts["python"] = py


def _toolkit(facts: dict[str, Any], paste: Paste) -> None:
    nvcc = paste.parsed.get("cuda_runtime")
    m = re.match(r"^(\d+\.\d+)", str(nvcc or ""))
    if m:  # collect_env's "CUDA runtime version" is `nvcc --version` (torch/utils/collect_env.py)
        facts["toolkit"] = {"nvcc": {"found": True, "version": nvcc, "release": m.group(1), "source": paste.kind}}


def _frameworks(facts: dict[str, Any], matrix: Matrix, paste: Paste) -> None:
    values = paste.parsed
    if paste.kind == "gpudoctor-markdown":
        _frameworks_shown(facts, matrix, values)
        return
    version = values.get("torch_version")
    if not version:
        return
    info: dict[str, Any] = {"version": version, "source": f"{paste.kind} ({paste.where})"}
    cuda, rocm = values.get("cuda_build"), values.get("rocm_build")
    stated = "cuda_build" in values
    evidence = [f"collect_env says PyTorch version {version}"]
    if version.endswith("+cpu") or (stated and not cuda and not rocm and "+cu" not in version and "+rocm" not in version):
        info.update(cpu_only_build=True, cuda_build=False, backend="cpu", built_cuda=None)
        evidence.append(f"CUDA used to build PyTorch: {cuda or 'None'}")
    elif cuda:
        info.update(cpu_only_build=False, cuda_build=True, backend="cuda", built_cuda=cuda,
                    cuda_major=cuda.split(".")[0])
        evidence.append(f"CUDA used to build PyTorch: {cuda}")
        arch = _torch_arch(matrix, version, cuda)
        if arch:
            info["arch_list"], info["arch_list_source"] = arch
    elif rocm or "+rocm" in version:
        info.update(cpu_only_build=False, cuda_build=False, backend="rocm", built_cuda=None)
    else:
        info.update(cpu_only_build=None, built_cuda=None)  # the paste was cut before the build line
    info["evidence"] = evidence
    available = values.get("cuda_available")
    info["cuda_available"] = available
    fw: dict[str, Any] = {"installed": True, "source": paste.kind, "info": info}
    if available is False or info.get("cpu_only_build") is True:
        # PyTorch's own answer: torch.cuda.is_available() is False, so it sees no GPU
        fw["status"] = "ok"
        info["devices"] = []
    else:
        fw["status"] = "metadata"  # how many GPUs it sees is not in the paste
    facts["frameworks"] = {"torch": fw}


def _torch_arch(matrix: Matrix, version: str, cuda: str) -> Optional[tuple[list[str], str]]:
    """The architectures of a PyTorch wheel the matrix knows, only when the version names that exact wheel
    (``+cu121``, or a plain PyPI version whose default variant is the stated CUDA): a conda or source build
    may carry others."""
    from gpudoctor.compat import rules
    from gpudoctor.compat.data import MatrixError

    try:
        release, variant, name = rules.torch_build(matrix, version)
    except MatrixError:
        return None
    local = version.partition("+")[2]
    if release is None or variant is None or (local and local != name) or re.search(r"[a-z]", version.partition("+")[0]):
        return None
    if rules.major_minor(variant.get("cuda")) != rules.major_minor(cuda):
        return None
    arch = list(variant.get("arch_list") or []) + list(variant.get("ptx") or [])
    return (arch, f"gpudoctor's matrix: PyTorch {release['version']} {name} wheel") if arch else None


def _frameworks_shown(facts: dict[str, Any], matrix: Matrix, values: dict[str, Any]) -> None:
    """The Frameworks cell of a gpudoctor Markdown report: ``torch 2.11.0+cu130 (CUDA 13.0, sees 1 GPU(s))``."""
    out = {}
    for fw in values.get("frameworks") or []:
        build = fw["build"]
        info: dict[str, Any] = {"version": fw["version"], "source": "gpudoctor Markdown report"}
        m = re.match(r"CUDA ([\d.]+)", build)
        if build.startswith("CPU-only"):
            info.update(cpu_only_build=True, cuda_build=False, built_cuda=None)
        elif m and fw["name"] in ("jax", "cupy"):  # the CUDA their process loaded; the wheel names only its major
            info.update(cpu_only_build=False, cuda_build=True, runtime_cuda=m.group(1), cuda_major=m.group(1).split(".")[0])
        elif m:
            info.update(cpu_only_build=False, cuda_build=True, built_cuda=m.group(1), cuda_major=m.group(1).split(".")[0])
            if fw["name"] == "torch":
                arch = _torch_arch(matrix, fw["version"], m.group(1))
                if arch:
                    info["arch_list"], info["arch_list_source"] = arch
        seen = re.search(r"sees (\d+) GPU", build)
        entry: dict[str, Any] = {"installed": True, "source": "gpudoctor-markdown", "info": info, "status": "metadata"}
        if seen:
            shown = min(int(seen.group(1)), MAX_GPUS)  # a claim is bounded: the work follows what was pasted
            entry["status"], info["devices"] = "ok", [{"index": i} for i in range(shown)]
        out[fw["name"]] = entry
    if out:
        facts["frameworks"] = out


def runnable(facts: dict[str, Any]) -> set[str]:
    """The checks whose facts the pastes hold; all others are reported as not checked."""
    run: set[str] = set()
    nvml = facts.get("nvml") or {}
    ok = bool((nvml.get("init") or {}).get("ok"))
    frameworks = bool(facts.get("frameworks"))
    if nvml and not str(nvml.get("source") or "").startswith((PROC_VERSION, "cupy.show_config()", "prose")):
        # a loaded kernel module, or CUDA answering CuPy, is not NVML seen to start
        run.add("driver.nvml")
    if ok and nvml.get("device_count") == 0:  # nvidia-smi's "No devices were found": DRV012, as in a report
        run.add("driver.gpu_count")
    if facts.get("evidence"):  # what the pastes show happened: messages, sessions, templates
        run.update(("frameworks.messages", "container.messages", "driver.messages", "gpus.messages"))
    if frameworks:
        run.add("frameworks.import")
        if nvml:
            run.add("frameworks.gpu")
        if (facts.get("host") or {}).get("os"):
            run.add("compat.known_bad")
    stated = any(isinstance(g, dict) and g.get("stated") for g in facts.get("gpus") or [])
    if (ok or stated) and (frameworks or facts.get("toolkit")):  # a named GPU is judged against the builds
        run.add("compat.stack")
    if ok and isinstance(nvml.get("cuda_driver_version"), int) and isinstance(nvml.get("driver_version"), str):
        run.add("compat.forward")  # the driver and the CUDA it reports are all it reads
    if (facts.get("host") or {}).get("wsl_version") == 1:  # WSL 1 has no GPU at all: the check that says so runs
        run.add("driver.wsl1")
    if (facts.get("host") or {}).get("os") == "Darwin":  # no CUDA on macOS: a CUDA stack there is judged by
        run -= {"compat.stack", "frameworks.gpu"}  # compat.known_bad alone (CMP009), never as Linux CUDA
    return run
