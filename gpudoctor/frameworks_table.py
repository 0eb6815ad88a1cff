"""The frameworks gpudoctor knows, each described once: how facts key it, how a reader names it, what
``import`` names, which pip distributions install it, how to install its CUDA build, the module that
runs it under the diagnosed interpreter, how its workload is placed on the GPUs, its compatibility
matrix and the option `matrix check` takes for it, and what its own first step on a GPU is.

Probes, checks, the compatibility rules, the command line and the renderers all look a framework up
here, so a framework is never spelled two ways and a new one is one row, one module for its children
(``child``) and one matrix file. The children read this table too: it imports only the standard
library and holds to Python 3.9, the oldest Python a child runs under (tests/test_interpreter.py).

Only names and words: nothing is imported from gpudoctor, so any layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: PyTorch's wheel index; a CUDA variant's index is ``{TORCH_INDEX}/cu130`` and so on.
TORCH_INDEX = "https://download.pytorch.org/whl"


@dataclass(frozen=True)
class Install:
    """One CUDA build of a framework from PyPI: the pip arguments of each command, in order, and the
    oldest CUDA the driver must support for it (None: the build for any driver the framework runs on)."""

    variant: str  # the extra or package that makes it a CUDA build ("and-cuda", "cuda13")
    pip: tuple[str, ...]  # what follows `python -m pip`, one command each
    min_driver_cuda: Optional[str] = None


@dataclass(frozen=True)
class Framework:
    key: str  # its key in facts.frameworks, and the option `matrix check` takes (--torch)
    label: str  # the name findings and reports show
    module: str  # what ``import`` names
    distributions: tuple[str, ...]  # the pip distributions that install the module, the usual one first
    own_step: str  # a one-line program that reaches a GPU as its child does after the import
    #: The module that runs it under the diagnosed interpreter (probes/frameworks/children.py says what it holds).
    child: str
    distribution_prefixes: tuple[str, ...] = ()  # families of distributions named per CUDA or ROCm (cupy-cuda12x)
    cuda_package: str = ""  # the pattern of a package whose name gives the CUDA it targets: "major", or "exact" and "minor"
    installs: tuple[Install, ...] = ()  # its CUDA builds, oldest driver CUDA first
    installs_from_matrix: bool = False  # one wheel per CUDA on its own index: the matrix picks it (compat/torch_pip.py)
    cpu_only_builds: bool = True  # CuPy is built for CUDA or ROCm, never for the CPU alone
    cpu_only_says: str = ""  # what the imported framework answers that shows a CPU-only build
    cpu_only_says_error: str = ""  # the same where it raised {error} on the way; empty: the error adds nothing
    # --- its workload (probes/workload): which children run it, on which GPUs
    threaded: bool = False  # one child for all its GPUs, a thread each, that is the framework probe's child too
    every_gpu: bool = False  # it runs on every GPU, not once per GPU model
    trains_on_cpu: bool = False  # without a GPU its training step still runs, on the CPU, to prove the code path
    #: The extension module whose loading brings in the CUDA runtime the framework calls ("torch._C"): its child
    #: starts CUDA through that runtime, and makes the GPUs' contexts, while the rest of the import still runs
    #: (probes/workload/worker.py cuda_early). Empty: CUDA starts when the framework starts it.
    cuda_runtime_module: str = ""
    # --- its compatibility matrix (compat/)
    matrix: str = ""  # the topic of its file in compat_matrix/ (compat_matrix/pytorch.json); empty: its key
    #: Fields its matrix entries hold beyond a release's usual ones (compat/data.py RELEASE), with their type
    #: in compat/data.py's words: (("min_compute_capability", "a string"),).
    matrix_fields: tuple[tuple[str, str], ...] = ()
    # --- the option `matrix check --KEY` (cli/matrix.py)
    option_metavar: str = "VER"  # how the option's help shows its value
    option_help: str = ""  # empty: "<label> version."
    option_build: bool = True  # the value may name a build after "+" (a local tag) or "=" (a conda build string)

    @property
    def topic(self) -> str:
        """The topic of its compatibility matrix."""
        return self.matrix or self.key


_AND_CUDA = "install 'tensorflow[and-cuda]'"

#: In the order the probes run them and the reports list them.
FRAMEWORKS: tuple[Framework, ...] = (
    Framework("torch", "PyTorch", "torch", ("torch",),
              own_step='import torch; torch.ones(1, device="cuda")',
              child="gpudoctor.probes.workload.torch_child", installs_from_matrix=True,
              cpu_only_says="torch.version.cuda is None.",
              cpu_only_says_error="torch.version.cuda is None ({error}).",
              threaded=True, every_gpu=True, trains_on_cpu=True,  # every GPU: PyTorch measures each GPU's throughput
              cuda_runtime_module="torch._C",
              matrix="pytorch", option_metavar="VER[+cuXXX|+cpu]",
              option_help="PyTorch version; without +cuXXX, the plain PyPI wheel (CUDA on Linux, CPU-only on Windows "
                          "and macOS); VER=BUILD a conda package (1.12.1=py3.9_cuda11.3_cudnn8.3.2_0)."),
    Framework("tensorflow", "TensorFlow", "tensorflow",
              ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-rocm", "tensorflow-intel",
               "tensorflow-macos", "tensorflow-aarch64", "tensorflow-cpu-aws", "intel-tensorflow"),
              own_step='import tensorflow as tf; print(tf.config.list_physical_devices("GPU"))',
              child="gpudoctor.probes.workload.tensorflow_child",
              installs=(Install("and-cuda", ("uninstall -y tensorflow-cpu", _AND_CUDA)),),
              cpu_only_says="tf.sysconfig.get_build_info() does not say is_cuda_build=True or is_rocm_build=True.",
              # not threaded: Keras's seed is process-wide and its threading could not be proven on a GPU (no
              # TensorFlow on the GPU machines), so it keeps children of its own, each pinned to its GPU
              trains_on_cpu=True,
              option_help="TensorFlow version (the pip wheel; tensorflow[and-cuda] from 2.14).", option_build=False),
    Framework("jax", "JAX", "jax", ("jax",),
              own_step='import jax; print(jax.devices("gpu"))',
              child="gpudoctor.probes.workload.jax_child",
              cuda_package=r"^jax-cuda(?P<major>\d+)-plugin$",
              installs=(Install("cuda12", ("install -U 'jax[cuda12]'",)),
                        Install("cuda13", ("install -U 'jax[cuda13]'",), min_driver_cuda="13.0")),
              cpu_only_says="No jax-cuda plugin is installed.",
              cpu_only_says_error="No jax-cuda plugin is installed, and jax.devices('gpu') raised {error}.",
              threaded=True, option_metavar="VER[+cudaNN[-local]]",
              option_help="JAX version; without +cudaNN, its newest CUDA extra, e.g. jax[cuda13]. Before 0.4.1 the "
                          "jaxlib wheel as pip shows it (0.1.69+cuda111, 0.3.25+cuda11.cudnn82)."),
    Framework("cupy", "CuPy", "cupy", ("cupy",),
              own_step="import cupy; print(cupy.ones(1))",
              child="gpudoctor.probes.workload.cupy_child",
              distribution_prefixes=("cupy-cuda", "cupy-rocm"),
              cuda_package=r"^cupy-cuda(?:(?P<major>\d+)x|(?P<exact>\d+)(?P<minor>\d))$",
              cpu_only_builds=False,
              threaded=True, option_metavar="VER[+cudaNNx]",
              option_help="CuPy version; without +cudaNNx, its newest cupy-cudaNNx package (+cuda101: the cupy-cuda101 "
                          "package)."),
)

#: The frameworks' keys, in order.
KEYS: tuple[str, ...] = tuple(f.key for f in FRAMEWORKS)
#: A framework's key -> the name shown in findings.
NAMES: dict[str, str] = {f.key: f.label for f in FRAMEWORKS}
#: The modules whose presence means a framework is installed.
MODULES: tuple[str, ...] = tuple(f.module for f in FRAMEWORKS)
_BY_KEY = {f.key: f for f in FRAMEWORKS}


def get(key: str) -> Optional[Framework]:
    """The framework of key ``key``; None for one this version does not know (a report from another)."""
    return _BY_KEY.get(key)


def label(key: str) -> str:
    """How a reader names framework ``key``; an unknown one is shown by its key."""
    return NAMES.get(key, key)


def module(key: str) -> str:
    """What ``import`` names for framework ``key``; an unknown one is imported by its key."""
    fw = _BY_KEY.get(key)
    return fw.module if fw else key
