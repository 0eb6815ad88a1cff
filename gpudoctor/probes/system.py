"""Host facts that need no driver: the kernel module, NVIDIA devices on the PCI bus, device
nodes, container markers, the environment variables that decide what CUDA sees and those that
steer a framework on the GPU.

These are read from /proc, /sys and /dev directly, so they still answer when NVML cannot load:
that is what lets a check tell "no NVIDIA GPU here" from "a GPU with no driver bound".
"""

from __future__ import annotations

import glob
import os
import platform
import re
import socket
import sys
from pathlib import Path
from typing import Any, Optional, Union

from gpudoctor.probes.kernel_log import probe_legacy_notices
from gpudoctor.snapshot import unavailable

NVIDIA_PCI_VENDOR = "0x10de"
DISPLAY_CLASS_PREFIX = "0x03"  # VGA (0x0300) and 3D controllers (0x0302)
ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_REQUIRE_CUDA",
    "NVIDIA_DISABLE_REQUIRE",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
)
#: Environment variables that change what a framework does on the GPU: hide it (JAX_PLATFORMS), configure
#: the framework's memory allocator (a value it refuses makes its first CUDA call fail), slow work down for
#: debugging (CUDA_LAUNCH_BLOCKING), or steer NCCL. ``host.framework_env`` records the ones that are set;
#: checks/framework_env.py judges them. None of them is in ENV_NAMES: nothing is recorded twice.
FRAMEWORK_ENV_NAMES = (
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "JAX_PLATFORMS",
    "JAX_PLATFORM_NAME",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_CLIENT_MEM_FRACTION",  # the newer name jaxlib reads (jaxlib/xla_client.py)
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "XLA_FLAGS",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "TF_CUDA_PATHS",
    "TF_ENABLE_ONEDNN_OPTS",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_SOCKET_IFNAME",
    "NCCL_DEBUG",
)
#: A value longer than this is cut (XLA_FLAGS can be long); the checks read only the start of any value.
FRAMEWORK_ENV_MAX_CHARS = 1000
NVML_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu",
    "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib", "/run/nvidia/driver/usr/lib/x86_64-linux-gnu",
)


def probe_host() -> dict[str, Any]:
    release = platform.release()
    return {
        "hostname": socket.gethostname(),
        "os": platform.system(),
        "kernel": release,
        "machine": platform.machine(),
        "distro": _os_release(),
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "wsl": "microsoft" in release.lower() or os.path.exists("/usr/lib/wsl/lib"),
        "container": probe_container(),
        "env": {name: os.environ.get(name) for name in ENV_NAMES},
        "framework_env": probe_framework_env(),
        "limits": probe_limits(),
    }


def probe_limits() -> dict[str, Any]:
    """What this process may use to start others: its limits on open files and on processes (the soft
    limits, ``ulimit -n`` and ``ulimit -u``; null where unlimited), and the size of its environment against
    the most a new process may be handed (``getconf ARG_MAX``): every probe starts a process, and a
    child that cannot start is a limit's doing, not the driver's or a framework's."""
    out: dict[str, Any] = {}
    try:
        import resource

        for key, which in (("open_files", "RLIMIT_NOFILE"), ("processes", "RLIMIT_NPROC")):
            soft = resource.getrlimit(getattr(resource, which))[0]
            out[key] = None if soft == resource.RLIM_INFINITY else int(soft)
    except (ImportError, AttributeError, OSError, ValueError):
        pass
    out["environment_bytes"] = sum(len(k) + len(v) + 2 for k, v in os.environb.items()) if hasattr(os, "environb") else None
    try:
        out["arg_max_bytes"] = int(os.sysconf("SC_ARG_MAX"))
    except (AttributeError, OSError, ValueError):
        out["arg_max_bytes"] = None
    return out


def probe_framework_env() -> dict[str, str]:
    """The variables of FRAMEWORK_ENV_NAMES that are set (an empty value counts: it is set), each value as
    the environment has it, cut at FRAMEWORK_ENV_MAX_CHARS. An unset variable is absent."""
    return {name: os.environ[name][:FRAMEWORK_ENV_MAX_CHARS] for name in FRAMEWORK_ENV_NAMES if name in os.environ}


def probe_driver_files() -> dict[str, Any]:
    """What the kernel says about the driver, read without NVML."""
    pci = _pci_nvidia_devices()
    return {
        "kernel_module": _kernel_module(),
        "nouveau_loaded": os.path.isdir("/sys/module/nouveau") or _module_listed("nouveau"),
        "pci_devices": pci,
        "legacy_notices": probe_legacy_notices(pci_devices=pci),
        "device_nodes": _device_nodes(),
        "nvml_library_files": sorted({p for d in NVML_LIBRARY_DIRS for p in glob.glob(f"{d}/libnvidia-ml.so*")}),
    }


def _os_release() -> Any:
    try:
        text = Path("/etc/os-release").read_text(errors="replace")
    except OSError:
        return unavailable("not_found")
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return match.group(1) if match else unavailable("not_found")


def _kernel_module() -> dict[str, Any]:
    """``/proc/driver/nvidia/version``: the loaded module's version and flavour (open or proprietary)."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text(errors="replace")
    except OSError:
        return {"loaded": False, "version": unavailable("not_found"), "flavour": unavailable("not_found")}
    first = text.splitlines()[0] if text else ""
    version = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", first + " ")
    flavour: Union[str, dict[str, str]]
    if "Open Kernel Module" in first:
        flavour = "open"
    elif "Kernel Module" in first:
        flavour = "proprietary"
    else:
        flavour = unavailable("unknown")
    return {
        "loaded": True,
        "version": version.group(1) if version else unavailable("unknown"),
        "flavour": flavour,
        "text": first.strip(),
    }


def _module_listed(name: str) -> bool:
    try:
        return any(line.split(" ", 1)[0] == name for line in Path("/proc/modules").read_text().splitlines())
    except OSError:
        return False


def _pci_nvidia_devices() -> Any:
    """NVIDIA display/3D controllers on the PCI bus and the kernel driver bound to each."""
    root = Path("/sys/bus/pci/devices")
    if not root.is_dir():
        return unavailable("not_found")
    devices = []
    for dev in sorted(root.iterdir()):
        vendor, cls = _read(dev / "vendor"), _read(dev / "class")
        if vendor != NVIDIA_PCI_VENDOR or not (cls or "").startswith(DISPLAY_CLASS_PREFIX):
            continue
        driver = dev / "driver"
        devices.append({
            "bus_id": dev.name,
            "device_id": _read(dev / "device"),
            "class": cls,
            "driver": os.path.basename(os.readlink(driver)) if driver.is_symlink() else None,
        })
    return devices


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _device_nodes() -> dict[str, Any]:
    nodes = {}
    names = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    names += sorted(glob.glob("/dev/nvidia[0-9]*"), key=lambda p: int(re.sub(r"\D", "", p) or 0))
    for path in names:
        exists = os.path.exists(path)
        nodes[path] = {"exists": exists, "accessible": exists and os.access(path, os.R_OK | os.W_OK)}
    return nodes


def probe_container() -> dict[str, Any]:
    """Markers that say we run inside a container; each one found is listed, not just a yes/no."""
    markers = []
    if os.path.exists("/.dockerenv"):
        markers.append("/.dockerenv")
    if os.path.exists("/run/.containerenv"):
        markers.append("/run/.containerenv")
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        markers.append("KUBERNETES_SERVICE_HOST")
    if os.environ.get("container"):
        markers.append(f"container={os.environ['container']}")
    cgroup = _read(Path("/proc/1/cgroup")) or ""
    for word in ("docker", "kubepods", "containerd", "libpod", "lxc"):
        if word in cgroup:
            markers.append(f"cgroup:{word}")
    return {"detected": bool(markers), "markers": markers, "dev_shm_bytes": _shm_size()}


def _shm_size() -> Any:
    """Size of /dev/shm: NCCL and PyTorch's DataLoader workers pass data through it; Docker gives 64 MiB."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return unavailable("not_found")
    return st.f_blocks * st.f_frsize
