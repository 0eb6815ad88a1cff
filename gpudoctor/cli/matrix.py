"""`gpudoctor matrix`: the bundled compatibility matrix without the stack installed."""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from gpudoctor.cli.base import EXIT_CODES_HELP, MATRIX_OPTION, BadInput, cli

OS_CHOICE = click.Choice(("linux", "windows", "wsl", "macos"), case_sensitive=False)


@cli.group("matrix")
def matrix_group() -> None:
    """Query the bundled compatibility matrix without the stack installed."""


@matrix_group.command("check", epilog=EXIT_CODES_HELP)
@click.option("--driver", metavar="VER", help="NVIDIA driver version, e.g. 535.104.05.")
@click.option("--driver-cuda", metavar="X.Y", help="The CUDA version the driver supports, instead of --driver: what "
                                                   "nvidia-smi prints as 'CUDA Version' (12.2), or the number in PyTorch's "
                                                   "'found version 11040' (11.4).")
@click.option("--gpu", metavar="NAME", help="GPU model as NVML names it, e.g. 'NVIDIA L4'.")
@click.option("--cc", metavar="X.Y", help="GPU compute capability, instead of --gpu.")
@click.option("--torch", metavar="VER[+cuXXX|+cpu]", help="PyTorch version; without +cuXXX, the plain PyPI wheel (CUDA on "
                                                          "Linux, CPU-only on Windows and macOS).")
@click.option("--tensorflow", metavar="VER", help="TensorFlow version (the pip wheel; tensorflow[and-cuda] from 2.14).")
@click.option("--jax", metavar="VER[+cudaNN[-local]]", help="JAX version; without +cudaNN, its newest CUDA extra, e.g. jax[cuda13].")
@click.option("--cupy", metavar="VER[+cudaNNx]", help="CuPy version; without +cudaNNx, its newest cupy-cudaNNx package.")
@click.option("--cuda", metavar="VER", help="CUDA toolkit version (nvcc).")
@click.option("--cudnn", metavar="VER", help="The cuDNN in use, judged against what TensorFlow and JAX (-local) were built "
                                             "with (PyTorch wheels bring their own).")
@click.option("--python", metavar="X.Y", help="Python version: an error when no wheel of a build exists for it.")
@click.option("--os", "os_name", type=OS_CHOICE, help="Operating system (Windows-only and macOS rules apply; "
                                                       "WSL runs the Windows driver). Default: judged as Linux.")
@click.option("--json", "as_json", is_flag=True, help="Print {verdict, stack, findings} as JSON.")
@MATRIX_OPTION
def matrix_check(driver, driver_cuda, gpu, cc, torch, tensorflow, jax, cupy, cuda, cudnn, python, os_name, as_json) -> None:
    """Judge a hypothetical stack: exit 1 on an error verdict, 2 on bad input, else 0."""
    from gpudoctor import matrix_cli

    if not any((driver, driver_cuda, gpu, cc, torch, tensorflow, jax, cupy, cuda, cudnn, python)):
        raise BadInput("give at least one of --driver, --driver-cuda, --gpu, --cc, --torch, --tensorflow, --jax, --cupy, "
                       "--cuda, --cudnn, --python")
    stack = _matrix_call(lambda: matrix_cli.stack_from_args(driver, gpu, cc, torch, tensorflow, cuda, cudnn, python,
                                                            os_name and os_name.lower(), jax, cupy, driver_cuda))
    sys.exit(_matrix_call(lambda: matrix_cli.run_check(stack, as_json)))


@matrix_group.command("suggest")
@click.option("--driver", metavar="VER", required=True, help="NVIDIA driver version.")
@click.option("--driver-cuda", metavar="X.Y", help="The CUDA version the driver supports, if it differs from the matrix's.")
@click.option("--gpu", metavar="NAME", help="GPU model as NVML names it.")
@click.option("--cc", metavar="X.Y", help="GPU compute capability, instead of --gpu.")
@click.option("--python", metavar="X.Y", help="Python version.")
@click.option("--os", "os_name", type=OS_CHOICE, help="Operating system. Default: Linux.")
@MATRIX_OPTION
def matrix_suggest(driver, driver_cuda, gpu, cc, python, os_name) -> None:
    """The newest PyTorch and TensorFlow builds that will work here, with their install commands."""
    from gpudoctor import compat, matrix_cli

    if not (gpu or cc):
        raise BadInput("give --gpu NAME or --cc X.Y")
    parsed = _matrix_call(lambda: matrix_cli.check_inputs(driver=driver, cc=cc, python=python, driver_cuda=driver_cuda))
    if cc is None:
        row = _matrix_call(lambda: compat.gpu_entry(gpu))
        if row is None:
            raise BadInput(f"--gpu {gpu!r} is not in gpudoctor's matrix; give --cc X.Y instead")
        cc = row["compute_capability"]
    lines = _matrix_call(lambda: matrix_cli.suggest(driver, cc, python, os_name and os_name.lower(), parsed))
    for line in lines or ["nothing in the matrix fits this driver and GPU"]:
        click.echo(line)


@matrix_group.command("show")
@click.argument("topic", required=False)
@MATRIX_OPTION
def matrix_show(topic) -> None:
    """The matrix data as tables, with sources (TOPIC: one of the compat_matrix files)."""
    from gpudoctor import matrix, matrix_cli

    if topic and topic not in matrix.topics():
        raise BadInput(f"unknown topic {topic!r}; topics: {', '.join(matrix.topics())}")
    click.echo(_matrix_call(lambda: matrix_cli.show(topic)))


def _matrix_call(fn: Callable[[], Any]) -> Any:
    from gpudoctor.matrix import MatrixError

    try:
        return fn()
    except MatrixError as exc:
        raise BadInput(str(exc)) from None
