"""What the NVIDIA container runtime was asked to pass in, judged against what the host offers.

The variables are read by the NVIDIA Container Toolkit when the container starts; inside the
container they record what was asked for (NVIDIA Container Toolkit docs, "Specialized
configurations with Docker").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterator, Optional

from packaging.version import Version

from gpudoctor import versions
from gpudoctor.checks.base import Check, Facts, NotApplicable, finding
from gpudoctor.findings import Finding
from gpudoctor.snapshot import get, known
from gpudoctor.status import COMPAT_LIMITED

if TYPE_CHECKING:
    from gpudoctor.compat.data import Matrix

TOOLKIT_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"
_CONSTRAINT = re.compile(r"^(cuda|driver|arch|brand)\s*(>=|<=|==|=|>|<)\s*(\S+)$")


def _env(facts: Facts) -> dict[str, Any]:
    return get(facts, "host.env") or {}


def check_capabilities(facts: Facts) -> Iterator[Finding]:
    caps = _env(facts).get("NVIDIA_DRIVER_CAPABILITIES")
    if caps is None:
        raise NotApplicable("NVIDIA_DRIVER_CAPABILITIES is not set")
    wanted = {c.strip() for c in caps.split(",") if c.strip()}
    if not wanted or "all" in wanted:
        return  # empty means the toolkit's default, compute,utility
    missing = [c for c in ("compute", "utility") if c not in wanted]
    if missing:
        yield finding("CTR002", f"NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks {' and '.join(missing)}",
                      detail="'compute' mounts libcuda (CUDA); 'utility' mounts nvidia-smi and NVML.",
                      severity="error" if "compute" in missing else "warning",
                      text="Start the container with the capabilities it needs.",
                      commands=["docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility <image>"],
                      links=[TOOLKIT_DOCS])


def check_visible_none(facts: Facts) -> Iterator[Finding]:
    value = _env(facts).get("NVIDIA_VISIBLE_DEVICES")
    if value is None:
        raise NotApplicable("NVIDIA_VISIBLE_DEVICES is not set")
    if value.strip() in ("none", "void", ""):
        yield finding("CTR004", f"NVIDIA_VISIBLE_DEVICES={value!r}: the container runtime was told to pass in no GPU",
                      text="Start the container with the GPUs it needs.",
                      commands=["docker run --gpus all <image>"], links=[TOOLKIT_DOCS])


def check_require_cuda(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    """NVIDIA_REQUIRE_CUDA: space-separated alternatives, each a comma-separated list of constraints that must all hold."""
    env = _env(facts)
    require = env.get("NVIDIA_REQUIRE_CUDA")
    if not require or env.get("NVIDIA_DISABLE_REQUIRE"):
        raise NotApplicable("no NVIDIA_REQUIRE_CUDA to check")
    host = _host_versions(facts)
    if host["cuda"] is None:
        raise NotApplicable("the driver's CUDA version is unknown")
    if any(_alternative(alt, host) is not False for alt in require.split()):
        return  # satisfied, or depends on something we cannot judge (brand): say nothing rather than guess
    driver = known(get(facts, "nvml.driver_version")) or "unknown"  # as nvidia-smi prints it: 580.95.05, not 580.95.5
    wanted = _required_cuda(require)
    verdict = _image_verdict(matrix, wanted, driver, str(host["cuda"]))
    limited = verdict is not None and verdict.status == COMPAT_LIMITED
    yield finding("CTR003", f"the host driver (CUDA {host['cuda']}, driver {driver}) does not meet "
                            f"NVIDIA_REQUIRE_CUDA={require!r}"
                            + (": the image's CUDA runs only under minor-version compatibility" if limited else ""),
                  severity="warning" if limited else None,
                  detail=(verdict.reason + ". " if verdict else "") +
                         "The NVIDIA container runtime refuses to start such an image unless NVIDIA_DISABLE_REQUIRE is set, "
                         "which is how this container must have started.",
                  text=f"Upgrade the host driver, or use an image built for CUDA {host['cuda']} or older (what this driver supports).",
                  links=[TOOLKIT_DOCS])


def _required_cuda(require: str) -> Optional[str]:
    """The image's CUDA from its first 'cuda>=X.Y' term (the CUDA images put it first)."""
    match = re.search(r"(?:^|\s)cuda\s*>=\s*(\d+\.\d+)", require)
    return match.group(1) if match else None


def _image_verdict(matrix: Matrix, cuda: Optional[str], driver: str, driver_cuda: str) -> Any:
    """The same driver-versus-CUDA verdict the compatibility checks give a framework build."""
    if not cuda:
        return None
    from gpudoctor.compat import rules as compat
    from gpudoctor.compat.data import MatrixError

    try:
        return compat.driver_runs_cuda(matrix, cuda, driver if driver != "unknown" else None, driver_cuda)
    except MatrixError:
        return None


def _host_versions(facts: Facts) -> dict[str, Optional[Version]]:
    raw = known(get(facts, "nvml.cuda_driver_version"))
    decoded = versions.cuda(raw)
    cuda = Version(decoded) if decoded else None
    driver = _version(known(get(facts, "nvml.driver_version")))
    ccs = {known(g.get("compute_capability")) for g in facts.get("gpus") or []}
    arch = _version(next(iter(ccs))) if len(ccs) == 1 else None
    return {"cuda": cuda, "driver": driver, "arch": arch}


def _alternative(alt: str, host: dict[str, Optional[Version]]) -> Optional[bool]:
    """True if every constraint holds, False if one fails, None if one cannot be judged."""
    result: Optional[bool] = True
    for term in alt.split(","):
        match = _CONSTRAINT.match(term.strip())
        if not match:
            return None
        key, op, value = match.groups()
        have, want = host.get(key), _version(value)
        if key == "brand" or have is None or want is None:
            result = None
            continue
        if not _compare(have, op, want):
            return False
    return result


def _compare(have: Version, op: str, want: Version) -> bool:
    return {
        ">=": have >= want, "<=": have <= want, ">": have > want, "<": have < want, "=": have == want, "==": have == want,
    }[op]


def _version(text: Any) -> Optional[Version]:
    from gpudoctor.compat.rules import version

    return version(text) if text is not None else None


SHM_MINIMUM_BYTES = 1 << 30  # Docker's default is 64 MiB; NCCL's docs ask for far more (--shm-size=1g and up)
NCCL_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#docker"


def check_shm(facts: Facts) -> Iterator[Finding]:
    container = get(facts, "host.container") or {}
    size = known(container.get("dev_shm_bytes"))
    if not container.get("detected") or not isinstance(size, int):
        raise NotApplicable("not in a container, or /dev/shm not measured")
    gpus = [g for g in facts.get("gpus") or [] if "name" in g]
    if size >= SHM_MINIMUM_BYTES or not gpus:
        return
    several = len(gpus) > 1
    yield finding("CTR005", f"/dev/shm is only {size / 2**20:.0f} MiB in this container",
                  severity="warning" if several else "info",
                  detail=("NCCL falls back to shared memory between GPUs without P2P, and " if several else "")
                         + "PyTorch DataLoader workers pass tensors through /dev/shm; at Docker's 64 MiB default they "
                           "fail with 'Bus error' or NCCL 'unhandled system error'.",
                  text="Start the container with a larger /dev/shm (or share the host's IPC namespace); in "
                       "Kubernetes, mount an emptyDir with medium: Memory at /dev/shm.",
                  commands=["docker run --gpus all --shm-size=16g <image>", "docker run --gpus all --ipc=host <image>"],
                  links=[NCCL_DOCS])


CHECKS = (
    Check("container.capabilities", "container", "the container runtime passes compute and utility",
          ("CTR002",), check_capabilities, ("host",)),
    Check("container.visible_devices", "container", "the container runtime passes GPUs", ("CTR004",),
          check_visible_none, ("host",)),
    Check("container.shm", "container", "/dev/shm is large enough for NCCL and DataLoader workers", ("CTR005",),
          check_shm, ("host", "nvml")),
    Check("container.require_cuda", "container", "the host driver meets the image's NVIDIA_REQUIRE_CUDA",
          ("CTR003",), check_require_cuda, ("host", "nvml"), reads_matrix=True),
)
