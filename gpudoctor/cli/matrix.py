"""`gpudoctor matrix`: the bundled compatibility matrix without the stack installed. The commands
validate their options and print; what they ask of the matrix is gpudoctor/compat/queries.py. An overlay
(--matrix) and --gpu are untrusted text, so every line goes out through render/safe.py."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import click

from gpudoctor.cli.base import EXIT_CODES_HELP, LISTING, MATRIX_OPTION, cli
from gpudoctor.cli.errors import BadInput
from gpudoctor.frameworks_table import FRAMEWORKS, KEYS
from gpudoctor.render.safe import json_text, terminal

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix
    from gpudoctor.compat.model import Stack

OS_CHOICE = click.Choice(("linux", "windows", "wsl", "macos"), case_sensitive=False)
#: The framework options whose value may name a build after the version.
BUILD_OPTIONS = tuple(f"--{fw.key}" for fw in FRAMEWORKS if fw.option_build)
#: What `matrix check` needs at least one of, in its options' order.
STACK_OPTIONS = ("--driver", "--driver-cuda", "--gpu", "--cc", *(f"--{fw.key}" for fw in FRAMEWORKS), "--cuda", "--cudnn",
                 "--python")


def framework_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--KEY VER` for each framework, in the table's order, as its row describes it: a framework added to
    gpudoctor/frameworks_table.py is an option of `matrix check` at once."""
    for fw in reversed(FRAMEWORKS):  # click lists the options in the order their decorators stand
        command = click.option(f"--{fw.key}", metavar=fw.option_metavar,
                               help=fw.option_help or f"{fw.label} version.")(command)
    return command


@cli.group("matrix", short_help="Judge a stack against the bundled compatibility matrix.")
def matrix_group() -> None:
    """Query the bundled compatibility matrix without the stack installed."""


@matrix_group.command("check", epilog=EXIT_CODES_HELP, short_help="Judge a stack before installing it.")
@click.option("--driver", metavar="VER", help="NVIDIA driver version, e.g. 535.104.05.")
@click.option("--driver-cuda", metavar="X.Y", help="The CUDA version the driver supports, instead of --driver: what "
                                                   "nvidia-smi prints as 'CUDA Version' (12.2), or the number in PyTorch's "
                                                   "'found version 11040' (11.4).")
@click.option("--gpu", metavar="NAME", help="GPU model as NVML names it, e.g. 'NVIDIA L4'.")
@click.option("--cc", metavar="X.Y", help="GPU compute capability, instead of --gpu.")
@framework_options
@click.option("--cuda", metavar="VER", help="CUDA toolkit version (nvcc).")
@click.option("--cudnn", metavar="VER", help="The cuDNN in use, judged against what TensorFlow and JAX (-local) were built "
                                             "with (PyTorch wheels bring their own).")
@click.option("--python", metavar="X.Y", help="Python version: an error when no wheel of a build exists for it.")
@click.option("--os", "os_name", type=OS_CHOICE, help="Operating system (Windows-only and macOS rules apply; "
                                                       "WSL runs the Windows driver). Default: judged as Linux.")
@click.option("--json", "as_json", is_flag=True, help="Print {verdict, stack, findings} as JSON.")
@MATRIX_OPTION
def matrix_check(as_json: bool, matrix: Matrix, **options: Optional[str]) -> None:
    """Judge a hypothetical stack: exit 1 on an error verdict, 2 on bad input, else 0."""
    from gpudoctor.compat import queries

    if not any(value for name, value in options.items() if name != "os_name"):  # --os alone describes no stack
        raise BadInput("give at least one of " + ", ".join(STACK_OPTIONS))
    driver, gpu, cc, os_name = options["driver"], options["gpu"], options["cc"], options["os_name"]
    parsed = check_inputs(**{name: value for name, value in options.items() if name not in ("gpu", "os_name")})
    _matrix_call(lambda: one_gpu(matrix, gpu, cc))
    asked = {**options, "driver_cuda": parsed, "os_name": os_name and os_name.lower()}
    stack = _matrix_call(lambda: queries.stack_from_args(matrix, **asked))
    notes = [n for n in [_matrix_call(lambda: driver_cuda_note(matrix, driver, parsed, os_name))] if n]
    sys.exit(_matrix_call(lambda: _print_check(matrix, stack, as_json, notes)))


@matrix_group.command("suggest", short_help="The newest builds that will work here, with install commands.")
@click.option("--driver", metavar="VER", required=True, help="NVIDIA driver version.")
@click.option("--driver-cuda", metavar="X.Y", help="The CUDA version the driver supports, if it differs from the matrix's.")
@click.option("--gpu", metavar="NAME", help="GPU model as NVML names it.")
@click.option("--cc", metavar="X.Y", help="GPU compute capability, instead of --gpu.")
@click.option("--python", metavar="X.Y", help="Python version.")
@click.option("--os", "os_name", type=OS_CHOICE, help="Operating system. Default: Linux.")
@MATRIX_OPTION
def matrix_suggest(driver, driver_cuda, gpu, cc, python, os_name, matrix) -> None:
    """The newest PyTorch and TensorFlow builds that will work here, with their install commands."""
    from gpudoctor.compat import queries, rules

    if not (gpu or cc):
        raise BadInput("give --gpu NAME or --cc X.Y")
    parsed = check_inputs(driver=driver, cc=cc, python=python, driver_cuda=driver_cuda)
    _matrix_call(lambda: one_gpu(matrix, gpu, cc))
    note = _matrix_call(lambda: driver_cuda_note(matrix, driver, parsed, os_name))
    if note:
        click.echo(terminal(note))
    if cc is None:
        row = _matrix_call(lambda: rules.gpu_entry(matrix, gpu))
        if row is None:
            raise BadInput(f"--gpu {gpu!r} is not in gpudoctor's matrix; give --cc X.Y instead")
        cc = row["compute_capability"]
    lines = _matrix_call(lambda: queries.suggest(matrix, driver, cc, python, os_name and os_name.lower(), parsed))
    for line in lines or ["nothing in the matrix fits this driver and GPU"]:
        click.echo(terminal(line))


@matrix_group.command("show", short_help="The matrix data as tables, with their sources.")
@click.argument("topic", required=False)
@MATRIX_OPTION
def matrix_show(topic, matrix) -> None:
    """The matrix data as tables, with sources (TOPIC: one of the compat_matrix files)."""
    from gpudoctor.compat.data import topics
    from gpudoctor.render import matrix_table

    click.get_current_context().meta[LISTING] = True
    if topic and topic not in topics():
        raise BadInput(f"unknown topic {topic!r}; topics: {', '.join(topics())}")
    click.echo(terminal(_matrix_call(lambda: matrix_table.show(matrix, topic)), newlines=True))


def _print_check(matrix: Matrix, stack: Stack, as_json: bool, notes: Sequence[str] = ()) -> int:
    """Print the verdict and every finding with its remediation (text or JSON); exit 1 on error. Each
    finding's parts are read by render/finding.py, as in every report format."""
    from gpudoctor.compat import queries
    from gpudoctor.render import finding
    from gpudoctor.status import matrix_exit_code

    verdict, findings = queries.verdict(matrix, stack)
    if as_json:
        click.echo(json_text({"verdict": verdict, "stack": queries.stack_json(stack),
                              "findings": [f.to_dict() for f in findings], **({"notes": list(notes)} if notes else {})}))
    else:
        click.echo(f"verdict: {verdict}")
        for note in notes:
            click.echo(terminal(note))
        for f in findings:
            for line in finding.lines(finding.parts(f), "  {severity:<7} {code} {title}", detail="          why: {}",
                                      fix="          fix: {}", command="          $ {}", link="          see {}"):
                click.echo(terminal(line))
    return matrix_exit_code(verdict)


def _need_version(value: Optional[str], option: str, what: str = "a version") -> None:
    from gpudoctor.compat.rules import version

    # a local version ("+cu128") or a conda build string ("=py3.9_cuda11.3_cudnn8.2.0_0", --torch) follows the version
    base = re.split(r"[+=]", value, maxsplit=1)[0] if value is not None and option in BUILD_OPTIONS else value
    if value is not None and version(base) is None:
        raise BadInput(f"{option}: {value!r} is not {what}")


def _need_ascii(value: Optional[str], option: str) -> None:
    """Versions are written in ASCII: Python's ``\\d`` and ``str.isdigit`` also take Arabic-Indic or
    full-width digits ("٩.٠", "８.６"), which no NVIDIA tool or wheel prints, so such a value would be judged
    as a number it only looks like, or fall through to "unknown" instead of the usage error "abc" gets."""
    if value is not None and not (value.isascii() and value.strip().isprintable()):
        raise BadInput(f"{option}: {value!r} is not a version: use ASCII digits (0-9)")


def check_inputs(*, driver: Optional[str] = None, cc: Optional[str] = None, python: Optional[str] = None,
                 cuda: Optional[str] = None, cudnn: Optional[str] = None, driver_cuda: Optional[str] = None,
                 **versions: Optional[str]) -> Optional[str]:
    """Every value that must be a version is one, or a one-line usage error (exit 2). ``versions`` are the
    frameworks' (--torch ...), by their keys in gpudoctor/frameworks_table.py. Returns the driver's CUDA
    version, normalised ("11040" -> "11.4")."""
    from gpudoctor.compat.rules import parse_driver_cuda

    builds = [(versions.get(key), f"--{key}") for key in KEYS]
    for value, option in [(driver, "--driver"), (cc, "--cc"), (python, "--python"), (cuda, "--cuda"), (cudnn, "--cudnn"),
                          (driver_cuda, "--driver-cuda"), *builds]:
        _need_ascii(value, option)
    for value, option in [(driver, "--driver"), (python, "--python"), (cuda, "--cuda"), (cudnn, "--cudnn"), *builds]:
        _need_version(value, option)
    if cc is not None and not re.fullmatch(r"\d{1,2}\.\d", cc.strip(), re.ASCII):
        raise BadInput(f"--cc: {cc!r} is not a compute capability (X.Y, e.g. 8.6)")
    if python is not None and not re.fullmatch(r"3\.\d{1,2}(\.\d+)?", python.strip(), re.ASCII):
        raise BadInput(f"--python: {python!r} is not a Python 3 version (X.Y, e.g. 3.12)")
    if driver is not None and not re.fullmatch(r"\d{2,4}(\.\d{1,3}){1,2}", driver.strip(), re.ASCII):
        raise BadInput(f"--driver: {driver!r} is not an NVIDIA driver version (e.g. 535.104.05)")
    if driver_cuda is None:
        return None
    parsed = parse_driver_cuda(driver_cuda)
    if parsed is None:
        raise BadInput(f"--driver-cuda: {driver_cuda!r} is not a CUDA version (12.2, as nvidia-smi prints it, or 12020)")
    return parsed


def one_gpu(matrix: Matrix, gpu: Optional[str], cc: Optional[str]) -> None:
    """--gpu and --cc describe one GPU: both may be given (--cc for a model the matrix does not know),
    but a model the matrix knows with another compute capability is a contradiction no verdict can settle."""
    from gpudoctor.compat.rules import gpu_entry, version

    row = gpu_entry(matrix, gpu) if gpu and cc else None
    if row is not None and version(row["compute_capability"]) != version(cc):
        raise BadInput(f"--gpu {gpu!r} is compute capability {row['compute_capability']} in gpudoctor's matrix, "
                       f"--cc says {str(cc).strip()}: give one of them")


def driver_cuda_note(matrix: Matrix, driver: Optional[str], driver_cuda: Optional[str], os_name: Optional[str]) -> Optional[str]:
    """--driver-cuda is what the driver itself reports, so it is judged; where the matrix gives --driver
    another CUDA, the output says so, rather than one of the two being dropped unseen."""
    from gpudoctor.compat.rules import driver_cuda_of

    if not (driver and driver_cuda):
        return None
    implied = driver_cuda_of(matrix, driver, (os_name or "linux").lower(), bounded=True)
    if implied is None or implied == driver_cuda:
        return None
    return (f"note: judged with --driver-cuda {driver_cuda}; gpudoctor's matrix gives driver {driver} CUDA {implied}, "
            "so check what nvidia-smi prints as 'CUDA Version'")


def _matrix_call(fn: Callable[[], Any]) -> Any:
    from gpudoctor.compat.data import MatrixError

    try:
        return fn()
    except MatrixError as exc:
        raise BadInput(str(exc)) from None
