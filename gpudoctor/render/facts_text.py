"""Short human phrases for facts, shared by every renderer (so text and markdown say the same thing).

Each phrase is one line: the facts in it are data (a GPU name, a path, a framework's error), so a
control character or newline in them is shown as an escape (render/safe.py), never printed raw.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, cast

from gpudoctor import frameworks_table
from gpudoctor.findings import ERROR, WARNING
from gpudoctor.render.safe import terminal
from gpudoctor.snapshot import get, gpus, is_unavailable, known
from gpudoctor.views import driver
from gpudoctor.views.topology import link_label, slowest_pair

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix
    from gpudoctor.facts_types import FrameworkInfo, FrameworksFacts, NvmlFacts

MIB = 1024**2
_Phrase = TypeVar("_Phrase", bound=Callable[..., str])


def _one_line(phrase: _Phrase) -> _Phrase:
    """A phrase made of facts, as one line with no control character: safe on any line or table cell."""
    @functools.wraps(phrase)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        return terminal(phrase(*args, **kwargs))
    return wrapper  # type: ignore[return-value]


@_one_line
def show(value: Any, unit: str = "") -> str:
    """A fact as text: an absent one shows as n/a with its reason."""
    if is_unavailable(value):
        return f"n/a ({value['unavailable'].replace('_', ' ')})"
    if value is None:
        return "n/a"
    return f"{value}{unit}"


def cuda_version(raw: Any) -> str:
    """NVML's encoded CUDA version (1000*major + 10*minor): 13000 -> 13.0, 12040 -> 12.4; else n/a."""
    return driver.cuda_version(raw) or show(raw)


def mib(value: Any) -> str:
    return f"{value // MIB} MiB" if isinstance(value, int) else show(value)


def watts(value: Any) -> str:
    return f"{value / 1000:.0f} W" if isinstance(value, int) else show(value)


@_one_line
def driver_line(facts: dict[str, Any]) -> str:
    nvml = cast("NvmlFacts", facts.get("nvml") or {})
    module = get(facts, "driver.kernel_module") or {}
    if not (nvml.get("init") or {}).get("ok"):
        if module.get("loaded"):
            return f"kernel module {show(module.get('version'))} loaded, NVML unavailable"
        return "not available"
    flavour = known(module.get("flavour"))
    kind = f", {flavour} kernel module" if flavour else ""
    cuda = nvml.get("cuda_driver_version")
    if known(cuda) is None:  # a paste that names the driver but not its CUDA (collect_env): say no more
        return f"{show(nvml.get('driver_version'))}{kind}; the newest CUDA it can run is not stated"
    return (f"{show(nvml.get('driver_version'))}{kind}; supports CUDA up to "
            f"{cuda_version(cuda)} (the newest CUDA it can run, not an installed toolkit)")


@_one_line
def gpus_line(facts: dict[str, Any]) -> str:
    found = list(gpus(facts))
    if not found:
        return "none listed"
    names: dict[str, int] = {}
    for g in found:
        key = f"{known(g.get('name')) or 'unreadable GPU'}"
        total = known(get(g, "memory.total_bytes"))
        if isinstance(total, int):
            key += f" ({total // MIB} MiB)"
        names[key] = names.get(key, 0) + 1
    return f"{len(found)}: " + ", ".join(f"{n} x {name}" for name, n in names.items())


@_one_line
def topology_line(facts: dict[str, Any]) -> str:
    pairs = (facts.get("topology") or {}).get("pairs") or []
    if not pairs:
        return "single GPU" if len(list(gpus(facts))) == 1 else "no GPU pairs"
    labels = sorted({link_label(p) for p in pairs})
    return f"{len(pairs)} GPU pair(s), links {', '.join(labels)}"


@_one_line
def container_line(facts: dict[str, Any]) -> str:
    container = get(facts, "host.container") or {}
    if container.get("detected"):
        return "yes (" + ", ".join(container.get("markers", [])) + ")"
    return "not detected"


#: The facts an area's headline describes. A paste that holds none of them (only prose or an error message,
#: which the area's message check reads) must not be shown as "driver not available" or "no GPU listed":
#: the paste did not look, and the user's own `torch.cuda.is_available()` may well have said True.
PASTE_FACTS = {"driver": ("nvml", "driver.kernel_module"), "gpus": ("nvml", "gpus"), "container": ("host.container",)}


@_one_line
def area_headline(area: str, facts: dict[str, Any], matrix: Matrix, findings: Optional[list[dict[str, Any]]] = None) -> str:
    """The phrase after an area's mark: what was found there, judged or not; compat reads its stack by
    ``matrix``, the one the report was judged by. ``findings`` (the report's) let an area say its result
    rather than describe its check (compat)."""
    nc = (facts.get("paste") or {}).get("not_checked") or {}
    if isinstance(nc, dict) and area in nc:  # judged from a paste, which cannot tell this area
        return "not checked: " + str(nc[area])
    if isinstance(facts.get("paste"), dict) and area in PASTE_FACTS and not any(get(facts, k) for k in PASTE_FACTS[area]):
        return "not shown in the pastes; only their messages were judged"
    if area == "driver":
        return driver_line(facts)
    if area == "gpus":
        return gpus_line(facts)
    if area == "topology":
        return topology_line(facts)
    if area == "container":
        return container_line(facts)
    if area == "toolkit":
        return toolkit_line(facts)
    if area == "libraries":
        return libraries_line(facts)
    if area == "python":
        return python_line(facts)
    if area == "frameworks":
        return frameworks_line(facts)
    if area == "acceleration":
        return acceleration_line(facts)
    if area == "compat":
        return compat_line(facts, matrix, findings)
    if area == "visibility":
        mask = ((facts.get("host") or {}).get("env") or {}).get("CUDA_VISIBLE_DEVICES")
        return "CUDA_VISIBLE_DEVICES not set" if mask is None else f"CUDA_VISIBLE_DEVICES={mask!r}"
    return "probes and checks"


@_one_line
def acceleration_line(facts: dict[str, Any]) -> str:
    """What ran on the GPUs, counted; the figures are in the proof table (render/proof.py)."""
    smoke = facts.get("smoke")
    if not isinstance(smoke, dict):
        return "no GPU work run (--quick)"
    runs = [r for r in smoke.get("runs") or [] if isinstance(r, dict)]
    good = sum(1 for r in runs if r.get("ok") is True)
    from gpudoctor.render.proof import count_failure

    failed = count_failure(smoke)
    parts = [f"smoke kernel correct on {good} of {len(runs)} GPU(s)" if runs
             else f"smoke kernel {failed}" if failed else "no GPU to run on"]
    work = [r for r in (facts.get("workload") or {}).get("runs") or [] if isinstance(r, dict) and r.get("device") != "cpu"] \
        if isinstance(facts.get("workload"), dict) else []
    if work:
        trained = [t for t in (r.get("training") for r in work) if isinstance(t, dict)]
        parts.append(_results_phrase(work)
                     + (f", training learned in {sum(1 for t in trained if t.get('ok') is True)} of {len(trained)}"
                        if trained else ""))
    return "; ".join([*parts, *placement_phrases(facts), *checked_once_phrases(work), *multigpu_phrases(facts),
                      *cluster_phrases(facts)])


def checked_once_phrases(work: list[dict[str, Any]]) -> list[str]:
    """"PyTorch checked and trained once per GPU model, its matmuls and throughput on every GPU" where some
    of its runs left those steps to another GPU of their model that made them (``checks_on``)."""
    from gpudoctor.render.proof import elsewhere

    names = []
    for run in work:
        label = frameworks_table.label(str(run.get("framework")))
        if elsewhere(run, work) and label not in names:
            names.append(label)
    return [f"{' and '.join(names)} checked and trained once per GPU model, its matmuls and throughput on every GPU"] if names else []


def placement_phrases(facts: dict[str, Any]) -> list[str]:
    """Where the frameworks ran, when some ran on fewer than every GPU on purpose: "JAX on cuda:3, CuPy
    on cuda:2 (once per GPU model), PyTorch on every GPU"."""
    placement = (facts.get("workload") or {}).get("placement") if isinstance(facts.get("workload"), dict) else None
    if not isinstance(placement, dict):
        return []
    some, every = [], []
    for name, where in placement.items():
        if not isinstance(where, dict):
            continue
        label = frameworks_table.NAMES.get(name, str(name))
        if where.get("why") == "every GPU":
            every.append(label)
        elif isinstance(where.get("devices"), list):
            some.append(f"{label} on " + ", ".join(f"cuda:{d}" for d in where["devices"]))
    if not some:
        return []
    return [", ".join(some) + " (once per GPU model)" + (f", {' and '.join(every)} on every GPU" if every else "")]


def _results_phrase(work: list[dict[str, Any]]) -> str:
    """The proof table's "Results vs CPU" column summed in its own unit, the comparison ("results vs CPU
    correct in 10 of 10" over rows of 6, 2 and 2), with the runs that made none counted apart."""
    from gpudoctor.render.proof import comparisons, elsewhere

    made = [c for r in work if not (r.get("error") or r.get("skipped")) for _, c in comparisons(r)]
    correct = sum(1 for c in made if "error" not in c and c.get("ok") is True)
    silent = sum(1 for r in work if r.get("error") or r.get("skipped") or not (comparisons(r) or elsewhere(r, work)))
    phrase = f"results vs CPU correct in {correct} of {len(made)}" if made else "no results vs CPU"
    return phrase + (f" ({silent} of {len(work)} framework run(s) gave none)" if silent else "")


@_one_line
def compat_line(facts: dict[str, Any], matrix: Matrix, findings: Optional[list[dict[str, Any]]] = None) -> str:
    """The compatibility verdict in words: each build with the CUDA and architectures it carries, the GPUs'
    compute capabilities and the newest CUDA the driver runs ("torch 2.11.0+cu130 (CUDA 13.0, sm_75-sm_120)
    runs on cc 9.0; driver 580.159.04 runs CUDA up to 13.0"), read as the compat checks read them
    (compat/from_facts.py stack_from_facts, on the GPUs CUDA programs see). "runs on" only where those checks found no problem."""
    from gpudoctor.compat.data import MatrixError
    from gpudoctor.compat.from_facts import stack_from_facts

    try:
        stack = stack_from_facts(matrix, facts)
    except (MatrixError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return "the compatibility matrix could not be read"
    mine = [f for f in findings or [] if isinstance(f, dict) and str(f.get("check", "")).startswith("compat.")]
    problems = [f for f in mine if f.get("severity") in (ERROR, WARNING)]
    unknown = [f for f in mine if f.get("code") == "CMP008"]
    builds = [_build_phrase(b) for b in stack.builds]
    ccs = sorted({cc for _, cc in stack.gpus}, key=_version_key)
    on = f"cc {', '.join(ccs)}" if ccs else "no GPU with a known compute capability"
    driver = (f"driver {stack.driver} runs CUDA up to {stack.driver_cuda}" if stack.driver and stack.driver_cuda
              else f"driver {stack.driver}, CUDA version unknown" if stack.driver else "driver unknown")
    toolkit = [f"nvcc {stack.toolkit_cuda}"] if stack.toolkit_cuda else []
    if not builds and not toolkit:
        return f"no framework build or toolkit to judge; {driver}"
    if problems:
        codes = ", ".join(dict.fromkeys(str(f.get("code")) for f in problems))
        return f"{len(problems)} problem(s) ({codes}): " + ", ".join(builds + toolkit) + f" on {on}; {driver}"
    if unknown:  # the matrix does not know a build or its architectures: "runs" would be a guess
        return ", ".join(builds + toolkit) + f" on {on}: whether all run is unknown (CMP008); {driver}"
    verb = "runs" if len(builds) + len(toolkit) == 1 else "run"
    return ", ".join(builds + toolkit) + f" {verb} on {on}; {driver}"


def _build_phrase(build: Any) -> str:
    """"torch 2.11.0+cu130 (CUDA 13.0, sm_75-sm_120)": the build as the compat checks see it."""
    name = frameworks_table.module(build.framework)
    if build.cpu_only:
        return f"{name} {build.version} (CPU-only)"
    if not build.cuda:
        return f"{name} {build.version} (CUDA build unknown: not judged)"
    what = [f"CUDA {build.cuda}"]
    sass = sorted({a.lower() for a in build.sass or []}, key=_arch_key)
    if sass:
        what.append(sass[0] if len(sass) == 1 else f"{sass[0]}-{sass[-1]}")
    ptx = sorted({a.lower() for a in build.ptx or []}, key=_arch_key)
    if ptx:
        what.append(f"PTX {ptx[-1]}")
    if build.min_cc and not sass:
        what.append(f"cc {build.min_cc}+")
    if build.arch_by_toolkit and not sass:
        what.append("kernels compiled at run time")
    return f"{name} {build.version} ({', '.join(what)})"


def _arch_key(arch: str) -> tuple[int, str]:
    digits = "".join(c for c in arch.split("_", 1)[-1] if c.isdigit())
    return (int(digits) if digits else 0, arch)


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in str(text).split("."))


@_one_line
def python_line(facts: dict[str, Any]) -> str:
    """The interpreter diagnosed, and plainly so when it is not the one gpudoctor runs in."""
    py = facts.get("python") or {}
    diagnosed = py.get("diagnosed") or {}
    if "unavailable" in py:
        return f"{py.get('executable', '?')} could not be read: {py.get('error') or py['unavailable']}"
    env = "virtualenv" if py.get("virtualenv") else "conda" if py.get("conda_prefix") else "system"
    line = f"{py.get('version', '?')} ({env}) at {py.get('executable', '?')}"
    if diagnosed and not diagnosed.get("own", True):
        line = f"diagnosing {diagnosed.get('executable')}, not gpudoctor's own: {diagnosed.get('reason')}; {line}"
    for broken in py.get("environments") or []:
        if isinstance(broken, dict) and broken.get("problem"):  # the active environment named but not used
            line += f"; {'/'.join(broken.get('as') or ['?'])} {broken.get('prefix')} skipped: {broken['problem']}"
    others = _other_active(py)
    if others and diagnosed.get("own", True) and diagnosed.get("reason"):
        line += f" ({diagnosed['reason']})"  # why not the active one: gpudoctor's own holds a framework
    for other in others:
        names = "/".join(a for a in other.get("as") or [] if a.startswith("$"))
        line += f"; not the active environment {names}={other['prefix']} (--python {other['prefix']} diagnoses it)"
    return line


def _other_active(py: dict[str, Any]) -> list[dict[str, Any]]:
    """The activated environments ($VIRTUAL_ENV, or a conda env other than conda's base) that are not the
    diagnosed Python's: a user who activated one expects it diagnosed, and only -v would show otherwise."""
    diagnosed = py.get("prefix")
    out = []
    for env in py.get("environments") or []:
        if not isinstance(env, dict) or env.get("problem") or not isinstance(env.get("prefix"), str):
            continue
        named = env.get("as") or []
        active = "$VIRTUAL_ENV" in named or ("$CONDA_PREFIX" in named and "conda base" not in named)
        if active and isinstance(diagnosed, str) and env["prefix"].rstrip("/") != diagnosed.rstrip("/"):
            out.append(env)
    return out


def multigpu_phrases(facts: dict[str, Any]) -> list[str]:
    """What `check --deep` measured between the GPUs, for the acceleration headline."""
    multigpu = facts.get("multigpu")
    if not isinstance(multigpu, dict) or multigpu.get("skipped"):
        return []
    out = []
    found = slowest_pair(multigpu.get("p2p"))
    if found:
        slow, median, count = found
        out.append(f"P2P median {median:.0f} GB/s over {count} pairs, slowest cuda:{slow['src']} -> cuda:{slow['dst']} "
                   f"{slow['gbs']:.0f} GB/s")
    allreduce = multigpu.get("allreduce") or {}
    if isinstance(allreduce.get("busbw_gbs"), (int, float)):
        out.append(f"NCCL all-reduce on {allreduce.get('world_size')} GPUs {allreduce['busbw_gbs']:.0f} GB/s busbw")
    return out


def cluster_phrases(facts: dict[str, Any]) -> list[str]:
    """What `check --deep` under torchrun measured across the job, for the acceleration headline."""
    cluster = facts.get("cluster")
    if not isinstance(cluster, dict):
        return []
    nodes = cluster.get("nodes") or []
    job = f"torchrun job of {cluster.get('world_size')} ranks on {len(nodes) or '?'} node(s)"
    allreduce = cluster.get("allreduce") or {}
    if isinstance(allreduce.get("busbw_gbs"), (int, float)):
        over = ", ".join(allreduce.get("transports") or allreduce.get("networks") or [])
        return [f"{job}: NCCL all-reduce {allreduce['busbw_gbs']:.1f} GB/s busbw" + (f" via {over}" if over else "")]
    if allreduce.get("skipped"):
        return [f"{job}: all-reduce not measured"]
    return [f"{job}: all-reduce failed"]


@_one_line
def toolkit_line(facts: dict[str, Any]) -> str:
    nvcc = get(facts, "toolkit.nvcc") or {}
    installs = get(facts, "toolkit.installs") or []
    versions = sorted({str(known(i.get("version"))) for i in installs})
    where = f"nvcc {show(nvcc.get('version'))} at {nvcc.get('path')}" if nvcc.get("found") else "no nvcc on PATH"
    home = get(facts, "toolkit.env.CUDA_HOME")
    home_text = f"CUDA_HOME={home.get('path')}" if isinstance(home, dict) else "CUDA_HOME not set"
    return f"{where}; installed toolkits: {', '.join(versions) or 'none'}; {home_text}"


@_one_line
def libraries_line(facts: dict[str, Any]) -> str:
    """Each library's distinct versions and where they come from: "libcudnn 9.14.0 (system), 9.19.0 (pip)"."""
    copies = get(facts, "libraries.copies") or []
    if not copies:
        return "no CUDA library found on the search paths"
    seen: dict[str, dict[str, set[str]]] = {}
    for c in copies:
        if c.get("family") in (None, "libcudnn_sub") or c.get("stub"):
            continue
        version = known(c.get("version"))
        if not isinstance(version, str):
            version = (c.get("distribution") or {}).get("version") or _soname(c.get("version_from_name")) or "?"
        origin = "pip" if "pip" in c.get("origins", []) else (c.get("origins") or ["?"])[0]
        seen.setdefault(c["family"], {}).setdefault(version, set()).add(origin)
    return "; ".join(fam + ("" if next(iter(sorted(vs))).startswith(".") else " ")
                     + ", ".join(f"{v} ({'/'.join(sorted(o))})" for v, o in sorted(vs.items()))
                     for fam, vs in sorted(seen.items()))


def _soname(named: Any) -> Optional[str]:
    """A version read from a file name, as it was read: "13.0.96" from libcudart.so.13.0.96, but ".so.13" from
    a bare libcudart.so.13, whose 13 is the library's interface number (the 1 of libcuda.so.1), not its
    version: shown as "13" it reads as, and differs from, the 13.0 the library itself reports."""
    if not isinstance(named, str) or not named:
        return None
    return named if "." in named else f".so.{named}"


def _metadata_build(info: FrameworkInfo) -> str:
    """A build as its package metadata says it (probes/frameworks/metadata.py): null is unknown."""
    if info.get("cpu_only_build") is True:
        return "CPU-only"
    if info.get("cuda_build") is True or ("cuda_build" not in info and info.get("built_cuda")):
        return f"CUDA {info.get('built_cuda') or info.get('cuda_major') or '?'}"
    backend = info.get("backend")
    if backend in ("rocm", "xpu"):
        return {"rocm": "ROCm", "xpu": "XPU"}[backend]
    return "build unknown"


def _version(info: FrameworkInfo) -> str:
    """A framework's version, or why it is not known (probes/frameworks/metadata.py says), never "None"."""
    version = known(info.get("version"))
    if version not in (None, ""):
        return str(version)
    return f"(version unknown: {info.get('version_unknown') or 'not recorded'})"


@_one_line
def frameworks_line(facts: dict[str, Any]) -> str:
    parts = []
    for name, fw in cast("FrameworksFacts", facts.get("frameworks") or {}).items():
        if not (fw or {}).get("installed"):
            continue
        info = fw.get("info") or {}
        if fw.get("status") == "metadata":
            build = _metadata_build(info)
            where = "from the paste" if fw.get("source") in ("collect_env", "gpudoctor-markdown") else "from package metadata"
            parts.append(f"{name} {_version(info)} ({build}, {where})")
            continue
        if fw.get("status") != "ok":
            parts.append(f"{name} ({fw.get('status')})")
            continue
        built = info.get("built_cuda") or info.get("runtime_cuda")
        build = "CPU-only" if info.get("cpu_only_build") else f"CUDA {built}" if built else "CUDA"
        given = ", given one GPU" if isinstance(info.get("pinned"), dict) else ""  # placement pinned its child
        parts.append(f"{name} {_version(info)} ({build}, sees {len(info.get('devices') or [])} GPU(s){given})")
    if parts:
        return "; ".join(parts)
    why = frameworks_unread(facts)
    return f"unknown: {why}" if why else f"none of {', '.join(frameworks_table.NAMES.values())} installed"


def frameworks_unread(facts: dict[str, Any]) -> Optional[str]:
    """Why no framework was looked for, or None: "none installed" is a finding of the probe, so it is
    said only when the probe finished and could read the diagnosed Python's search path."""
    if isinstance(facts.get("paste"), dict):  # judged from a ticket: no probe looked, so nothing says none is installed
        return "the pastes name no framework version"
    record = get(facts, "probes.frameworks") or {}
    if isinstance(record, dict) and record.get("status") in ("timeout", "error"):
        what = "did not finish" if record["status"] == "timeout" else "failed"
        return f"the framework probe {what} ({record.get('error') or record['status']})"
    python = facts.get("python")
    if isinstance(python, dict) and "unavailable" in python:
        return (f"the Python it would run under ({python.get('executable') or '?'}) could not be read "
                f"({python.get('error') or python.get('unavailable')})")
    return None
