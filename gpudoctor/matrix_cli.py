"""`gpudoctor matrix ...`: judge a hypothetical stack, suggest builds, show the data. Thin: the
rules are gpudoctor/compat.py and checks/compat.py, the same ones `check` applies."""

from __future__ import annotations

import json
from typing import Any, Optional

import click

from gpudoctor import compat, matrix
from gpudoctor.checks.compat import Build, Stack, judge_stack
from gpudoctor.findings import ERROR, WARNING

VERDICT_RANK = {"ok": 0, "warning": 1, "unknown": 2, "error": 3}


class BadInput(click.ClickException):
    exit_code = 2


def stack_from_args(driver: Optional[str], gpu: Optional[str], cc: Optional[str], torch: Optional[str],
                    tensorflow: Optional[str], cuda: Optional[str], cudnn: Optional[str], python: Optional[str]) -> Stack:
    stack = Stack(driver=driver, python=python)
    for value, what in ((driver, "driver"), (cuda, "CUDA"), (cudnn, "cuDNN"), (python, "Python"), (cc, "compute capability")):
        if value is not None and compat.version(value) is None:
            raise BadInput(f"--{what.lower().replace(' ', '-') if what != 'compute capability' else 'cc'}: {value!r} is not a version")
    if driver:
        stack.driver_cuda = _driver_cuda(driver)
        if stack.driver_cuda is None:
            stack.unknown.append(f"driver {driver} (which CUDA it supports)")
    if gpu:
        row = compat.gpu_entry(gpu)
        if row is None:
            stack.unknown.append(f"GPU {gpu!r}")
        else:
            stack.gpus.append((f"{gpu} ({row['model']})", row["compute_capability"]))
    if cc:
        stack.gpus.append((f"compute capability {cc}", cc))
    if torch:
        stack.builds.append(_torch(torch, stack))
    if tensorflow:
        release = compat.tensorflow_release(tensorflow)
        if release is None:
            stack.unknown.append(f"TensorFlow {tensorflow}")
        else:
            stack.builds.append(Build(f"TensorFlow {tensorflow}", "tensorflow", release.get("cuda"),
                                      list(release.get("compute_capabilities") or []), release.get("python")))
    if cuda:
        stack.toolkit_cuda = cuda
        if compat.toolkit_entry(cuda) is None:
            stack.unknown.append(f"CUDA {cuda}")
    return stack


def _torch(text: str, stack: Stack) -> Build:
    release, variant, name = compat.torch_build(text)
    if release is None:
        stack.unknown.append(f"PyTorch {text}")
        return Build(f"PyTorch {text}", "torch", None)
    if name == "cpu":
        raise BadInput(f"--torch {text}: a CPU-only build uses no CUDA; nothing to judge")
    if variant is None:
        stack.unknown.append(f"PyTorch {text} variant {name!r}")
        return Build(f"PyTorch {text}", "torch", None, [], release.get("python"))
    label = f"PyTorch {text}" + ("" if "+" in text else f" (plain PyPI wheel: {name})")
    arch = list(variant.get("arch_list") or []) + list(variant.get("ptx") or [])
    return Build(label, "torch", variant.get("cuda"), arch, release.get("python"))


def _driver_cuda(driver: str) -> Optional[str]:
    """The newest CUDA whose toolkit minimum driver this driver meets (Table 3, Linux)."""
    have = compat.version(driver)
    best = None
    for row in matrix.load_topic("cuda_toolkits")["entries"]:
        need, cuda = compat.version(row.get("min_driver_linux")), compat.major_minor(row.get("version"))
        if have and need and cuda and have >= need and (best is None or cuda > best):
            best = cuda
    return str(best) if best else None


def verdict_of(findings: list[Any], stack: Stack) -> str:
    if any(f.severity == ERROR for f in findings):
        return "error"
    if stack.unknown or any(f.code == "CMP008" for f in findings):
        return "unknown"
    return "warning" if any(f.severity == WARNING for f in findings) else "ok"


def run_check(stack: Stack, as_json: bool) -> int:
    findings = judge_stack(stack)
    verdict = verdict_of(findings, stack)
    if as_json:
        click.echo(json.dumps({"verdict": verdict, "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        click.echo(f"verdict: {verdict}")
        for f in findings:
            click.echo(f"  {f.severity:<7} {f.code} {f.title}")
            if f.detail:
                click.echo(f"          {f.detail}")
            for cmd in f.remediation.commands:
                click.echo(f"          $ {cmd}")
    return 1 if verdict == "error" else 0


def suggest(driver: str, cc: str, python: Optional[str]) -> list[str]:
    """The newest builds that will work here, each with its install command, and the driver to unlock newer ones."""
    lines = []
    driver_cuda = _driver_cuda(driver)
    for release in sorted(matrix.load_topic("pytorch")["entries"], key=lambda r: compat.version(r["version"]), reverse=True):
        if python and compat.python_in(release.get("python"), python) is False:
            continue
        for variant in sorted(release.get("variants", []), key=lambda v: compat.version(v.get("cuda")) or compat.version("0"), reverse=True):
            if _works(variant.get("cuda"), driver, driver_cuda) and \
                    compat.arch_runs(cc, list(variant.get("arch_list") or []) + list(variant.get("ptx") or [])).status == compat.OK:
                lines.append(f"PyTorch {release['version']} ({variant['name']}{_mvc(variant.get('cuda'), driver, driver_cuda)}): "
                             f"pip install 'torch=={release['version']}.*' --index-url https://download.pytorch.org/whl/{variant['name']}")
                break
        if lines:
            break
    for release in sorted(matrix.load_topic("tensorflow")["entries"], key=lambda r: compat.version(r["version"]), reverse=True):
        if python and compat.python_in(release.get("python"), python) is False:
            continue
        if release.get("cuda") and _works(release["cuda"], driver, driver_cuda):
            extra = "[and-cuda]" if release.get("and_cuda_extra") else ""
            lines.append(f"TensorFlow {release['version']} (CUDA {release['cuda']}{_mvc(release['cuda'], driver, driver_cuda)}): "
                         f"pip install 'tensorflow{extra}=={release['version']}.*'")
            break
    newest = _newest_with_driver()
    if newest and driver_cuda and compat.version(driver_cuda) < compat.version(newest["version"]):
        lines.append(f"Driver {newest['min_driver_linux']} or newer unlocks builds for CUDA {newest['version']}.")
    return lines


def _newest_with_driver() -> Optional[dict[str, Any]]:
    """The newest toolkit whose minimum Linux driver the matrix knows (the newest may not have one yet)."""
    rows = [r for r in matrix.load_topic("cuda_toolkits")["entries"] if r.get("min_driver_linux") and compat.version(r.get("version"))]
    return max(rows, key=lambda r: compat.version(r["version"]), default=None)


def _mvc(cuda: Optional[str], driver: str, driver_cuda: Optional[str]) -> str:
    status = compat.driver_runs_cuda(cuda or "", driver, driver_cuda).status
    return ", under minor-version compatibility" if status == compat.LIMITED else ""


def _works(cuda: Optional[str], driver: str, driver_cuda: Optional[str]) -> bool:
    return bool(cuda) and compat.driver_runs_cuda(cuda, driver, driver_cuda).status in (compat.OK, compat.LIMITED)


def show(topic: Optional[str]) -> str:
    names = [topic] if topic else matrix.topics()
    out = []
    for name in names:
        data = matrix.load_topic(name)
        out.append(f"== {name}: {data.get('title', '')} (as of {data.get('as_of')})")
        for entry in data["entries"]:
            fields = ", ".join(f"{k}={_short(v)}" for k, v in entry.items() if k != "source")
            out.append(f"  {fields}  [{entry['source']}]")
        out.append("  sources:")
        out += [f"    {k}: {v}" for k, v in data["sources"].items()]
    return "\n".join(out)


def _short(value: Any) -> str:
    if isinstance(value, list):
        if value and isinstance(value[0], dict):
            return "[" + "; ".join(v.get("name", "?") for v in value) + "]"
        return "[" + " ".join(map(str, value)) + "]"
    return str(value)
