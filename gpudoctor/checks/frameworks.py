"""Frameworks: does each installed framework load, is it a GPU build, does it see the GPUs a CUDA
program should see, and does it run with the cuDNN it was built for?

The number of GPUs a framework should see is what NVML lists after CUDA_VISIBLE_DEVICES is
applied (views/visibility.py), so a deliberate selection is not reported as missing GPUs.
Driver-versus-build and architecture verdicts belong to the compatibility checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Optional, cast

from packaging.version import InvalidVersion, Version

from gpudoctor import frameworks_table, versions
from gpudoctor.checks.base import DRIVER_LOG_COMMAND, Check, Facts, NotApplicable, finding, nvml_ready
from gpudoctor.findings import Finding
from gpudoctor.frameworks_table import NAMES
from gpudoctor.snapshot import get, known
from gpudoctor.views.framework_env import steering_cause
from gpudoctor.views.visibility import resolve

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix
    from gpudoctor.compat.model import Stack
    from gpudoctor.facts_types import FrameworkFacts, FrameworkInfo

def _installed(facts: Facts) -> dict[str, FrameworkFacts]:
    found = {n: cast("FrameworkFacts", fw) for n, fw in (facts.get("frameworks") or {}).items()
             if isinstance(fw, dict) and fw.get("installed")}
    if not found:
        raise NotApplicable("no framework is installed")
    return found


def _python(facts: Facts) -> str:
    return str(get(facts, "python.executable") or "python3")


def _driver_cuda(facts: Facts, matrix: Matrix) -> Optional[Version]:
    """The driver's CUDA: as NVML reports it, else from its version by Table 3 (a collect_env paste names
    only the driver version)."""
    from gpudoctor.compat.data import MatrixError
    from gpudoctor.compat.rules import driver_cuda_of

    decoded = versions.cuda(known(get(facts, "nvml.cuda_driver_version")))
    if decoded:
        return Version(decoded)
    driver = known(get(facts, "nvml.driver_version"))
    windows = get(facts, "host.os") == "Windows" or get(facts, "host.wsl") is True
    try:
        cuda = driver_cuda_of(matrix, driver, "windows" if windows else "linux") if isinstance(driver, str) else None
    except MatrixError:
        return None
    return Version(cuda) if cuda else None


def _expected_gpus(facts: Facts) -> int:
    return len(resolve(facts).devices) if nvml_ready(facts) else 0


def check_imports(facts: Facts) -> Iterator[Finding]:
    for name, fw in _installed(facts).items():
        status, label = fw.get("status"), NAMES.get(name, name)
        tail = (fw.get("stderr_tail") or "").strip()[-1200:]
        if status == "crashed" and fw.get("started") is False:
            yield _not_started(facts, name, fw, tail)
        elif status in ("import_error", "crashed"):
            yield _failure(facts, name, fw, tail)
        elif status == "timeout":
            yield finding("FWK005", f"importing {label} did not finish: {fw.get('error')}",
                          detail=f"Last lines it printed:\n{tail}" if tail else "",
                          text="An import that hangs usually waits on a driver call, a network file system, or a lock.",
                          commands=[f"{_python(facts)} -X importtime -c 'import {name}'"])


#: Where a framework failed (probes/frameworks/asking.STAGES), as the finding's title says it.
FAILED_AT = {"import": "fails to import", "cuda_init": "fails to start CUDA", "devices": "fails while listing its GPUs",
             "first_kernel": "fails at its first computation on a GPU",
             "libraries": "fails while listing the libraries it loaded"}
#: Errors of an import that point at the installation itself (missing files, a library that will not load).
INSTALL_ERRORS = ("ImportError", "ModuleNotFoundError", "OSError", "AttributeError")


def _failure(facts: Facts, name: str, fw: FrameworkFacts, tail: str) -> Finding:
    """FWK004 with the step the framework failed at, its own last error line, and advice that follows the
    evidence: the variable that caused it, a broken installation, or a crash in the driver's calls."""
    label, error = NAMES.get(name, name), str(fw.get("error") or "")
    stage = fw.get("stage") or ("import" if fw.get("status") == "import_error" and "stage" not in fw else None)
    last = str(fw.get("last_error") or "")
    parts = [f"Its last error line: {last}"] if last and last not in error else []
    parts += [f"Last lines it printed:\n{tail}"] if tail else []
    title = f"{label} {FAILED_AT.get(stage or '', 'fails')}: {error}"
    cause = _steering(facts, name)
    if cause:
        variable, value, fix = cause
        return finding("FWK004", title, detail="\n".join(parts),
                       text=f"The environment variable {variable}={value!r} makes {label} fail here; the installation "
                            "is not at fault.", commands=[fix])
    stray = _from_pythonpath(facts, name, fw)
    if stray and stage == "import":
        entry, found = stray
        return finding("FWK004", title, detail="\n".join(parts),
                       text=f"PYTHONPATH is the cause: its entry {entry} holds a {name} that import {name} finds first "
                            f"({found}), before any {label} installed in this environment. Unset PYTHONPATH, or remove "
                            f"that folder's {name}; the installation is not at fault.",
                       commands=["unset PYTHONPATH", f"{_python(facts)} -c 'import {name}; print({name}.__file__)'"])
    if stage == "import" and error.split(":")[0].strip() in INSTALL_ERRORS:
        return finding("FWK004", title, detail="\n".join(parts),
                       text=f"Reinstall {label} in this environment; if the error names a CUDA library "
                            "(libnvJitLink, libcudnn, libcusparse), an older copy earlier on LD_LIBRARY_PATH is the usual cause.",
                       commands=[f"{_python(facts)} -c 'import {name}'", "echo $LD_LIBRARY_PATH"])
    if fw.get("signal"):
        return finding("FWK004", title, detail="\n".join(parts),
                       text=f"The process died inside {label} or the driver ({fw['signal']}), "
                            f"{'after' if stage not in (None, 'import') else 'during'} the import: nothing points at the "
                            f"installation. Run {label}'s own step alone to see its message, and look at the driver's log.",
                       commands=[_own_step(facts, name, stage), DRIVER_LOG_COMMAND])
    return finding("FWK004", title, detail="\n".join(parts),
                   text=f"That is {label}'s own error; it names the cause. Run the same step alone to see it in full.",
                   commands=[_own_step(facts, name, stage)])


def _from_pythonpath(facts: Facts, name: str, fw: FrameworkFacts) -> Optional[tuple[str, str]]:
    """(the PYTHONPATH entry, the file found) when ``import name`` found the framework under PYTHONPATH and
    not in a folder an installed distribution lies in (python.distributions' locations), else None."""
    info = fw.get("info") or {}
    entry, found = info.get("pythonpath_entry"), info.get("module_file")
    if not isinstance(entry, str) or not isinstance(found, str):
        return None
    locations = {d.get("location") for d in get(facts, "python.distributions") or [] if isinstance(d, dict)}
    if any(isinstance(loc, str) and found.startswith(f"{loc.rstrip('/')}/{name}/") for loc in locations):
        return None  # an installed copy that happens to lie under PYTHONPATH: what the user installed
    return entry, found


def _not_started(facts: Facts, name: str, fw: FrameworkFacts, tail: str) -> Finding:
    """FWK009: the child ended before its first line, so before it imported the framework (a dependency of
    gpudoctor's missing under the diagnosed Python, an interpreter that will not start, a process that could
    not be started at all): saying the framework fails would be a wrong verdict on it."""
    label = NAMES.get(name, name)
    why = str(fw.get("last_error") or fw.get("error") or "")
    return finding("FWK009", f"gpudoctor could not start its {label} check under {_python(facts)}: {why}",
                   detail=f"Last lines it printed:\n{tail}" if tail else "",
                   text=f"Whether {label} imports and computes here is unknown: the process stopped before importing it. "
                        "Run the command below to see it import, and report the error to gpudoctor.",
                   commands=[f"{_python(facts)} -c 'import {name}'"])


def _own_step(facts: Facts, name: str, stage: Optional[str]) -> str:
    """A one-line program that does what the framework child did up to ``stage``."""
    fw = frameworks_table.get(name)
    step = fw.own_step if fw and stage not in (None, "import") else f"import {name}"
    return f"{_python(facts)} -c '{step}'"


def _steering(facts: Facts, name: str) -> Optional[tuple[str, str, str]]:
    """The environment variable that makes framework ``name`` fail here, with its fix (views/framework_env.py)."""
    return steering_cause(facts, name)


def check_gpu_builds(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    frameworks = _installed(facts)
    expected = _expected_gpus(facts)
    if expected == 0:
        raise NotApplicable("no GPU is visible to CUDA programs here")
    for name, fw in frameworks.items():
        info = fw.get("info") or {}
        if fw.get("status") not in ("ok", "metadata"):
            continue
        label = NAMES.get(name, name)
        vendor = _other_vendor(info)
        if vendor:  # a ROCm or XPU build on NVIDIA GPUs uses them no more than a CPU-only build does
            text, commands = _cuda_install(name, info, facts, matrix)
            yield finding("FWK001", f"{_named(label, info)} is a {vendor} build, not a CUDA build, on a machine "
                                    f"with {expected} NVIDIA GPU(s)", detail=_why_not_cuda(fw, vendor), text=text,
                          commands=commands)
            continue
        if info.get("cpu_only_build") is True:  # proven; null (the package metadata cannot tell) is no verdict
            text, commands = _cuda_install(name, info, facts, matrix)
            yield finding("FWK001", f"{_named(label, info)} is a CPU-only build, on a machine with {expected} GPU(s)",
                          detail=_why_cpu(name, fw), text=text, commands=commands)
            continue
        if fw.get("status") != "ok":
            continue  # metadata only (check --quick): what it sees is unknown
        seen = len(info.get("devices") or [])
        given = 1 if isinstance(info.get("pinned"), dict) else expected  # placement gave its child one GPU
        cause = _steering(facts, name) if seen == 0 else None
        if cause:
            variable, value, fix = cause
            yield finding("FWK002", f"{label} sees no GPU, but CUDA programs here should see {expected}",
                          detail=" ".join(x for x in (_message(info), f"{variable}={value!r} is set.") if x),
                          text=f"The environment variable {variable} is the cause: {label} itself is fine.",
                          commands=[fix])
        elif seen == 0:
            message = _message(info)
            causes = "a driver older than its CUDA build, a library it cannot load, or a GPU its build has no code for"
            yield finding("FWK002", f"{label} sees no GPU, but CUDA programs here should see {expected}",
                          detail=message or "It gave no reason.",
                          text=f"The framework's own message above names the cause: {causes}." if message else
                               f"Run the command below: the framework's own error then names the cause, most often {causes}.",
                          commands=[_own_step(facts, name, "devices")])
        elif seen < given:
            yield finding("FWK003", f"{label} sees {seen} of the {given} GPU(s) CUDA programs should see",
                          detail=_message(info) or "",
                          text="Compare the GPUs it lists (gpudoctor check -v) with nvidia-smi -L; a GPU it skips may be "
                               "one its build has no code for, or one in a bad state.",
                          commands=["nvidia-smi -L"])
        smoke = info.get("smoke")
        if seen and isinstance(smoke, dict) and "error" in smoke:
            yield finding("FWK008", f"{label} sees the GPU but a 2x2 matrix product on it failed: {smoke['error']}",
                          text="The framework cannot run work on the GPU. The error names the cause.")


def _named(label: str, info: FrameworkInfo) -> str:
    """"PyTorch 2.5.1", or where the version is not known (two dist-infos), says so rather than "None"."""
    version = info.get("version")
    return f"{label} {version}" if version else f"{label} (version unknown: {info.get('version_unknown') or 'not recorded'})"


#: Builds for other vendors' GPUs, as the package metadata (backend) or torch.version.hip names them.
_OTHER_VENDORS = {"rocm": "ROCm", "xpu": "Intel XPU"}


def _other_vendor(info: FrameworkInfo) -> Optional[str]:
    """The other GPU vendor a build is for ("ROCm", "Intel XPU"), or None: the package metadata's backend
    (`check --quick`: a +rocm6.2 or +xpu local version, torch/version.py) or torch.version.hip once imported."""
    if info.get("cuda_build") is True or info.get("built_cuda"):
        return None
    if info.get("built_hip") not in (None, "", "None"):
        return _OTHER_VENDORS["rocm"]
    return _OTHER_VENDORS.get(str(info.get("backend")))


def _why_not_cuda(fw: FrameworkFacts, vendor: str) -> str:
    info = fw.get("info") or {}
    if fw.get("status") == "metadata":
        evidence = [str(e) for e in info.get("evidence") or []]
        return "Read from package metadata (nothing was imported): " + ("; ".join(evidence) or "no detail") + "."
    if info.get("built_hip") not in (None, "", "None"):
        return f"torch.version.cuda is None and torch.version.hip is {info.get('built_hip')}: it drives AMD GPUs only."
    return f"It is built for {vendor} GPUs only."


def _why_cpu(name: str, fw: FrameworkFacts) -> str:
    """What was observed, and only that: the imported framework's own answers (an error only where its
    child recorded one), or for `check --quick` the package evidence the verdict rests on."""
    info = fw.get("info") or {}
    error = info.get("init_error")
    if fw.get("status") == "metadata":
        evidence = [str(e) for e in info.get("evidence") or []]
        return "Read from package metadata (nothing was imported): " + ("; ".join(evidence) or "no detail") + "."
    entry = frameworks_table.get(name)
    if entry is None:
        return ""
    return entry.cpu_only_says_error.format(error=error) if error and entry.cpu_only_says_error else entry.cpu_only_says


def _cuda_install(name: str, info: FrameworkInfo, facts: Facts, matrix: Matrix) -> tuple[str, list[str]]:
    """FWK001's advice: (sentence, commands) that install a CUDA build of framework ``name``."""
    fw = frameworks_table.get(name)
    if fw and fw.installs_from_matrix:
        return _torch_install(str(info.get("version") or ""), facts, matrix)
    return f"Install a CUDA build of {NAMES.get(name, name)} for this driver.", _gpu_build_commands(name, facts, matrix)


def _gpu_build_commands(name: str, facts: Facts, matrix: Matrix) -> list[str]:
    """The table's CUDA build of framework ``name`` for this driver: the one for the newest CUDA the
    driver supports, else the one for any driver (a driver of unknown CUDA gets that)."""
    fw = frameworks_table.get(name)
    if fw is None or not fw.installs:
        return []
    cuda = _driver_cuda(facts, matrix)
    fitting = [i for i in fw.installs if i.min_driver_cuda is None or (cuda and cuda >= Version(i.min_driver_cuda))]
    py = _python(facts)
    return [f"{py} -m pip {args}" for args in (fitting or fw.installs)[-1].pip]


def _torch_install(version: str, facts: Facts, matrix: Matrix) -> tuple[str, list[str]]:
    """FWK001's advice for a CPU-only PyTorch: (sentence, commands). The build is the one `matrix check`
    picks (compat/stack.py fitting_torch) for this driver, every GPU a CUDA program sees and the
    diagnosed Python: the user's release when one of its CUDA variants fits them all, else the newest
    release that does. A driver known only by its version (collect_env without nvidia-smi) gets its
    CUDA from Table 3 (rules.driver_cuda_of). Nothing that fits: no command, and the sentence says why,
    since a wheel chosen by the driver alone can lack code for the GPU (sm_120 in 2.6's cu126)."""
    from gpudoctor.compat import rules as compat
    from gpudoctor.compat.data import MatrixError
    from gpudoctor.compat.from_facts import stack_from_facts
    from gpudoctor.compat.stack import fitting_torch
    from gpudoctor.compat.torch_pip import pip_args

    try:
        stack = stack_from_facts(matrix, facts)
        if not isinstance(stack.python, str):
            stack.python = None
        if stack.driver_cuda is None and stack.driver:
            stack.driver_cuda = compat.driver_cuda_of(matrix, stack.driver, stack.driver_os)
        if stack.driver is None and stack.driver_cuda is None:
            return ("Install a CUDA build of PyTorch that this driver runs; the driver's version is not known here, "
                    "so none is named (nvidia-smi shows it)."), []
        release = compat.torch_build(matrix, version)[0] if version else None
        prefer = str(release["version"]) if release and release.get("version") else None
        choice = fitting_torch(matrix, stack, prefer)
        if choice is None:
            return (f"No CUDA build of PyTorch in gpudoctor's matrix runs here: {_torch_blocker(matrix, stack, None)}. "
                    "`gpudoctor matrix suggest` lists what would."), []
        chosen, variant = choice
        why = ("" if prefer is None or chosen.get("version") == prefer else
               f"No CUDA build of PyTorch {prefer} runs here: {_torch_blocker(matrix, stack, prefer)}. ")
    except MatrixError as exc:
        return f"Install a CUDA build of PyTorch for this driver and GPU; gpudoctor's matrix could not be read ({exc}).", []
    what = (f"Install PyTorch {chosen['version']}, the newest release that does" if why else
            f"Install the {variant['name']} build of PyTorch {chosen['version']}")
    runs = compat.driver_runs_cuda(matrix, variant["cuda"], stack.driver, stack.driver_cuda, stack.driver_os).status
    python = compat.major_minor(stack.python) if stack.python else None
    text = f"{why}{what}: it runs on this driver" + (" under minor-version compatibility" if runs == compat.LIMITED else "") \
           + ", has code for every GPU here" \
           + (f" and a wheel for Python {python}." if python else " (the Python version is not known, so its wheel was not checked).")
    unseen = _expected_gpus(facts) - len(stack.gpus)
    if unseen > 0:
        text += (f" The compute capability of {unseen} GPU(s) is not known, so whether it has code for "
                 f"{'them' if unseen > 1 else 'it'} was not checked.")
    args = pip_args(chosen, variant, stack.os)
    return text, [f"{stack.python_executable} -m pip install --force-reinstall {args}"] if args else []


def _torch_blocker(matrix: Matrix, stack: Stack, prefer: Optional[str]) -> str:
    """Why no CUDA build of release ``prefer`` (None: of any release) fits ``stack``, found by dropping one
    constraint at a time: the Python, then the GPUs' architectures; what is left is the driver."""
    from dataclasses import replace

    from gpudoctor.compat import rules
    from gpudoctor.compat.stack import fitting_torch

    def fits(s: Stack) -> bool:
        choice = fitting_torch(matrix, s, prefer)
        return choice is not None and (prefer is None or choice[0].get("version") == prefer)

    if stack.python and fits(replace(stack, python=None)):
        return f"{'it has' if prefer else 'the builds that fit have'} no wheel for Python {rules.major_minor(stack.python)}"
    free = replace(stack, python=None, gpus=[])
    if stack.gpus and fits(free):
        lacking = [g for g in stack.gpus if not fits(replace(free, gpus=[g]))]
        driver = f"driver {stack.driver}" if stack.driver else f"a driver for CUDA {stack.driver_cuda}"
        whose = "none of its CUDA builds" if prefer else "no CUDA build"
        if not lacking:
            return f"{whose} that {driver} runs has code for all of these GPUs together"
        return f"{whose} that {driver} runs has code for " + ", ".join(f"{label}, of compute capability {cc}"
                                                                        for label, cc in lacking)
    driver = f"driver {stack.driver}" + (f" (CUDA {stack.driver_cuda})" if stack.driver_cuda else "") if stack.driver \
        else f"a driver for CUDA {stack.driver_cuda}"
    return f"{driver} runs none of {'its' if prefer else 'the'} CUDA builds, even under minor-version compatibility"


def _message(info: FrameworkInfo) -> str:
    parts = [info.get("init_error")] + list(info.get("warnings") or [])
    return " ".join(str(p) for p in parts if p)[:1200]


def check_cudnn(facts: Facts) -> Iterator[Finding]:
    for name, fw in _installed(facts).items():
        info = fw.get("info") or {}
        built, runtime = _version(info.get("built_cudnn")), _version(info.get("runtime_cudnn"))
        cudnn = info.get("runtime_cudnn")
        refusal = cudnn.get("error") if isinstance(cudnn, dict) else None
        lib = _loaded(info, "libcudnn")
        if runtime is None and lib:
            runtime = _version(lib.get("version"))  # what the loaded library itself reports, in that process
        if built is None or runtime is None:
            continue
        label = NAMES.get(name, name)
        where = f" from {lib['path']}" + _sublibs(info) if lib else ""
        if runtime.major != built.major:
            yield finding("FWK006", f"{label} was built for cuDNN {built} but loaded cuDNN {runtime}{where}",
                          detail=f"{label} says: {refusal}" if refusal else "",
                          text="A different cuDNN major is not compatible. Remove the other copy from LD_LIBRARY_PATH, "
                               "or install the cuDNN major the framework was built for.",
                          commands=["echo $LD_LIBRARY_PATH"])
        elif runtime < Version(f"{built.major}.{built.minor}"):
            yield finding("FWK007", f"{label} was built for cuDNN {built} but loaded the older cuDNN {runtime}{where}",
                          detail=f"{label} refuses it: {refusal}" if refusal else "",
                          severity="error" if refusal else None,
                          text="An older cuDNN than the build's may lack kernels the framework calls. Let the framework "
                               "load the cuDNN its wheel depends on (remove older copies from LD_LIBRARY_PATH).",
                          commands=["echo $LD_LIBRARY_PATH"])


def _version(value: Any) -> Optional[Version]:
    if not isinstance(value, (str, int, float)):
        return None
    try:
        return Version(str(value))
    except InvalidVersion:
        return None


def _loaded(info: FrameworkInfo, family: str) -> Optional[dict[str, Any]]:
    return next((lib for lib in info.get("loaded_libraries") or [] if lib.get("family") == family), None)


def _sublibs(info: FrameworkInfo) -> str:
    """cuDNN 9 is a shim plus sub-libraries the shim loads by name: they may come from elsewhere."""
    subs = sorted({lib["path"] for lib in info.get("loaded_libraries") or [] if lib.get("family") == "libcudnn_sub"})
    return f" (with {', '.join(subs)})" if subs else ""


CHECKS = (
    Check("frameworks.import", "frameworks", "every installed framework imports", ("FWK004", "FWK005", "FWK009"),
          check_imports, ("frameworks",)),
    Check("frameworks.gpu", "frameworks", "every framework is a GPU build that sees the GPUs",
          ("FWK001", "FWK002", "FWK003", "FWK008"), check_gpu_builds, ("frameworks", "nvml"), reads_matrix=True),
    Check("frameworks.cudnn", "frameworks", "frameworks run with the cuDNN they were built for", ("FWK006", "FWK007"),
          check_cudnn, ("frameworks",)),
)
