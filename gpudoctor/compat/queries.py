"""What `gpudoctor matrix check / suggest / show` ask of the matrix, without printing: the stack the
options describe, its verdict, the builds to suggest, the data as tables. The command-line layer
(cli/matrix.py) validates the options and prints; the rules are compat/rules.py and compat/stack.py,
the same ones `check` applies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, cast

from gpudoctor import status
from gpudoctor.compat import branches, rules
from gpudoctor.compat.data import Matrix
from gpudoctor.compat.model import Stack
from gpudoctor.compat.stack import build_from_matrix, fitting_torch, judge_stack
from gpudoctor.compat.torch_pip import pip_args
from gpudoctor.findings import ERROR, Finding
from gpudoctor.frameworks_table import KEYS

if TYPE_CHECKING:
    from packaging.version import Version


def stack_from_args(matrix: Matrix, *, driver: Optional[str] = None, driver_cuda: Optional[str] = None, gpu: Optional[str] = None,
                    cc: Optional[str] = None, cuda: Optional[str] = None, cudnn: Optional[str] = None,
                    python: Optional[str] = None, os_name: Optional[str] = None, **versions: Optional[str]) -> Stack:
    """The hypothetical stack the options describe, once they are known to be versions (cli/matrix.py
    checks them; ``driver_cuda`` is already "X.Y"); what the matrix does not know goes to stack.unknown.
    ``versions`` holds each framework's version as `matrix check` takes it, by its key in
    gpudoctor/frameworks_table.py (torch="2.5.1+cu121"), so a new framework needs no new parameter."""
    strange = sorted(set(versions) - set(KEYS))
    if strange:
        raise TypeError(f"stack_from_args() got unknown framework(s): {', '.join(strange)}")
    stack = Stack(driver=driver, python=python, cudnn=cudnn, os=os_name)
    if driver_cuda:
        stack.driver_cuda = driver_cuda
    elif driver:
        # past the newest Table 3 row of its OS (R580 on Windows, whose 13.x column is N/A) a driver may run a
        # newer CUDA than that row's: no CUDA is claimed, and each build is judged by the driver version alone
        stack.driver_cuda = rules.driver_cuda_of(matrix, driver, stack.driver_os, bounded=True)
        if rules.driver_cuda_of(matrix, driver, stack.driver_os) is None:
            stack.unknown.append(f"driver {driver} (which CUDA it supports)")
    if gpu:
        row = rules.gpu_entry(matrix, gpu)
        if row is None and cc:  # --cc gives the capability of a model the matrix does not know
            stack.gpus.append((f"{gpu} (compute capability {cc}, from --cc)", cc))
        elif row is None:
            stack.unknown.append(f"GPU {gpu!r}")
        else:
            stack.gpus.append((f"{gpu} ({row['model']})", row["compute_capability"]))
        cc = None  # one GPU: cli/matrix.py refuses a --cc that contradicts the matrix's row
    if cc:
        stack.gpus.append((f"compute capability {cc}", cc))
    for framework in KEYS:
        text = versions.get(framework)
        if text:
            build = build_from_matrix(matrix, framework, text.strip(), stack)
            if build is not None:
                stack.builds.append(build)
    if cuda:
        stack.toolkit_cuda = cuda
        if rules.toolkit_entry(matrix, cuda) is None:
            stack.unknown.append(f"CUDA {cuda}")
    return stack


def verdict(matrix: Matrix, stack: Stack) -> tuple[str, list[Finding]]:
    """The stack's verdict (error, unknown, warning or ok) and every finding the one judge gives it."""
    findings = judge_stack(matrix, stack)
    return verdict_of(findings, stack), findings


def verdict_of(findings: list[Finding], stack: Stack) -> str:
    return status.matrix_verdict([f.severity for f in findings], bool(stack.unknown) or any(f.code == "CMP008" for f in findings))


def stack_json(stack: Stack) -> dict[str, Any]:
    """What was judged, as the matrix read the options (the GPU's compute capability, the driver's CUDA,
    each build's CUDA and architectures)."""
    return {
        "driver": stack.driver, "driver_cuda": stack.driver_cuda, "os": stack.os, "python": stack.python,
        "cuda": stack.toolkit_cuda, "cudnn": stack.cudnn,
        "gpus": [{"label": label, "compute_capability": cc} for label, cc in stack.gpus],
        "builds": [{"label": b.label, "framework": b.framework, "cuda": b.cuda, "cpu_only": b.cpu_only,
                    "sass": b.sass, "ptx": b.ptx, "min_compute_capability": b.min_cc} for b in stack.builds],
        "unknown": list(stack.unknown),
    }


def suggest(matrix: Matrix, driver: str, cc: str, python: Optional[str], os_name: Optional[str] = None,
            driver_cuda: Optional[str] = None) -> list[str]:
    """The newest builds that will work here, each with its install command, and the driver that would
    unlock newer ones (only where a newer CUDA still targets this GPU: toolkits drop old architectures)."""
    lines = []
    branch = branches.last_branch(matrix, cc) if os_name not in ("windows", "wsl", "macos") else None
    if branch and branch.newest_driver and branches.drives(matrix, driver, cc).status == rules.FAIL:
        lines.append(branches.wrong_branch_line(driver, cc, branch))  # never suggest for a driver that cannot drive the GPU
        driver, driver_cuda = branch.newest_driver, None
    first = branches.first_branch(matrix, cc) if os_name != "macos" else None
    oldest = branches.first_driver(matrix, cc, "windows" if os_name in ("windows", "wsl") else "linux")
    if first and oldest and branches.too_old(matrix, driver, cc).status == rules.FAIL:
        lines.append(branches.too_old_line(driver, cc, first, oldest))  # never suggest for a driver that predates the GPU
        driver, driver_cuda = oldest, None
    stack = Stack(driver=driver, python=python, os=os_name, gpus=[(f"compute capability {cc}", cc)])
    stack.driver_cuda = driver_cuda or rules.driver_cuda_of(matrix, driver, stack.driver_os)
    if os_name != "macos":
        choice = fitting_torch(matrix, stack)
        args = pip_args(*choice, os_name) if choice else None
        if choice and args:
            release, variant = choice
            lines.append(f"PyTorch {release['version']} ({variant['name']}{_mvc(matrix, variant.get('cuda'), stack)}): pip install {args}")
    for release in sorted(matrix.topic("tensorflow")["entries"], key=lambda r: rules.known_version(r["version"]), reverse=True):
        if os_name in ("windows", "macos") and not (os_name == "windows" and release.get("windows_native_gpu") is True):
            continue
        if python and rules.python_in(release.get("python"), python) is False:
            continue
        probe = Stack(driver=driver, driver_cuda=stack.driver_cuda, python=python, os=os_name, gpus=stack.gpus)
        build = build_from_matrix(matrix, "tensorflow", release["version"], probe)
        if build and release.get("cuda") and _works(matrix, release["cuda"], stack) and \
                not any(f.severity == ERROR or f.code in ("CMP008",) for f in judge_stack(matrix, _with(probe, build))):
            extra = "[and-cuda]" if release.get("and_cuda_extra") else ""
            package = "tensorflow" if os_name == "windows" else f"tensorflow{extra}"
            lines.append(f"TensorFlow {release['version']} (CUDA {release['cuda']}{_mvc(matrix, release['cuda'], stack)}): "
                         f"pip install '{package}=={release['version']}.*'")
            break
    unlock = _unlock(matrix, stack, cc)
    if unlock:
        lines.append(unlock)
    if branch and branch.newest_driver:
        lines.append(branches.ceiling_line(matrix, branch, cc, stack.driver_os))
    return lines


def _with(stack: Stack, build: Any) -> Stack:
    stack.builds = [build]
    return stack


def _unlock(matrix: Matrix, stack: Stack, cc: str) -> Optional[str]:
    """The driver for the newest CUDA that is newer than this driver's and still compiles for this GPU
    (cuda_targets: CUDA 12 dropped 3.5/3.7, CUDA 13 everything before 7.5); None when there is none."""
    if not stack.driver_cuda:
        return None
    column = "min_driver_windows" if stack.driver_os == "windows" else "min_driver_linux"
    have = rules.known_version(stack.driver_cuda)
    rows = [r for r in matrix.topic("cuda_toolkits")["entries"] if r.get(column) and rules.major_minor(r.get("version"))]
    rows = [r for r in rows if cast("Version", rules.major_minor(r["version"])) > have and rules.toolkit_targets(matrix, r["version"], cc).status == rules.OK
            and (stack.driver_os == "windows" or branches.drives(matrix, r[column], cc).status != rules.FAIL)
            and branches.too_old(matrix, r[column], cc).status != rules.FAIL]
    best = max(rows, key=lambda r: rules.known_version(r["version"]), default=None)
    if best is None:
        return None
    return f"Driver {best[column]} or newer unlocks builds for CUDA {rules.major_minor(best['version'])}, the newest CUDA that still targets compute capability {cc}."


def _mvc(matrix: Matrix, cuda: Optional[str], stack: Stack) -> str:
    status = rules.driver_runs_cuda(matrix, cuda or "", stack.driver, stack.driver_cuda, stack.driver_os).status
    return ", under minor-version compatibility" if status == rules.LIMITED else ""


def _works(matrix: Matrix, cuda: Optional[str], stack: Stack) -> bool:
    return bool(cuda) and rules.driver_runs_cuda(matrix, cuda or "", stack.driver, stack.driver_cuda, stack.driver_os).status in (rules.OK, rules.LIMITED)
