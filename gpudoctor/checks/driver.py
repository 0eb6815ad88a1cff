"""The driver: can NVML start, is the right kernel module bound, can CUDA open the devices."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterator, cast

from gpudoctor.checks.base import (DRIVER_ERRORS_COMMAND, DRIVER_LOAD_COMMAND, DRIVER_LOG_COMMAND, XID_COMMAND, Check, Facts,
                                    NotApplicable, finding, nvml_ready)
from gpudoctor.findings import ERROR, WARNING, Finding, Subject
from gpudoctor.snapshot import as_list, get, gpus, known, stopped_by
from gpudoctor.status import STOPPED_DEADLINE
from gpudoctor.compat.branches import undriven
from gpudoctor.compat.data import Matrix
from gpudoctor.views.limits import limit_hit

if TYPE_CHECKING:
    from gpudoctor.facts_types import NvmlFacts, NvmlInit

DRIVER_DOCS = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/"
WSL_DOCS = "https://docs.nvidia.com/cuda/wsl-user-guide/"
CONTAINER_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"


#: NVML reads even a machine of several GPUs with every query in well under a second: not done after
#: this long, it is blocked, not slow.
NVML_STUCK_S = 5.0


def check_nvml_init(facts: Facts) -> Iterator[Finding]:
    nvml = cast("NvmlFacts", facts.get("nvml") or {})
    incomplete = nvml.get("incomplete") or {}
    record = get(facts, "probes.nvml") or {}
    if not nvml and not record:  # nothing was asked of NVML: no verdict, least of all a pass
        raise NotApplicable("NVML was not asked")
    stopped = stopped_by(record) is not None  # the GPU checks cannot say it: they are blocked
    at_deadline = stopped_by(record) == STOPPED_DEADLINE
    if at_deadline and not nvml.get("incomplete") and nvml.get("init"):
        return  # NVML had answered everything; only its thread was late at the deadline
    if stopped:
        incomplete = {**incomplete, "reason": "timeout", "while": incomplete.get("while") or "starting"}
    during = str(incomplete.get("while", "starting"))
    if at_deadline:  # a wedged driver if NVML had long enough; a --timeout shorter than that is only a warning
        waited = record.get("duration_s")
        waited = waited if isinstance(waited, (int, float)) else 0.0
        yield finding("DRV009", f"NVML had not answered while {_while(during)} when the --timeout deadline passed "
                                f"({waited:g} s in)", severity=ERROR if waited >= NVML_STUCK_S else WARNING,
                      detail="Normally NVML answers in well under a second per GPU; if it took longer, the driver "
                             "may be blocking queries.",
                      text="Run again with a longer --timeout; if NVML still does not answer, look for Xid errors "
                           "in the kernel log.",
                      commands=["nvidia-smi", DRIVER_ERRORS_COMMAND])
        return
    if incomplete.get("reason") == "timeout" and (stopped or not during.startswith("GPU ")):  # else GPU102's
        yield finding("DRV009", f"NVML did not answer while {_while(during)}",
                      detail="The driver blocked an NVML query; CUDA programs would hang the same way.",
                      text="Look for Xid errors in the kernel log. A wedged driver usually needs a GPU reset or a reboot.",
                      commands=[DRIVER_ERRORS_COMMAND])
        if not nvml.get("init"):
            return
    elif incomplete.get("reason") == "not_started":
        yield _not_started(facts, str(incomplete.get("stderr_tail") or ""))
        if not (get(facts, "driver.nvml_library_files") or []) and isinstance(get(facts, "driver.device_nodes"), dict):
            yield _library_not_found(facts)  # what the driver's files alone show still stands: no driver, a container without GPUs
        return
    elif incomplete.get("reason") == "crashed":
        code = incomplete.get("returncode")
        yield finding("DRV019", f"the NVML probe crashed while {_while(during)} (exit status {code})",
                      detail=(incomplete.get("stderr_tail") or "")[-800:],
                      text="A crash inside libnvidia-ml usually means the driver's user-space libraries are broken "
                           "or do not match the kernel module. Run nvidia-smi, and reinstall the driver if it crashes too.",
                      commands=["nvidia-smi", "cat /proc/driver/nvidia/version"])
        if not nvml.get("init"):
            return
    bindings = nvml.get("bindings") or {}
    if bindings.get("import_error"):
        yield finding("DRV010", f"the NVML bindings cannot be imported: {bindings['import_error']}",
                      commands=["python3 -m pip install --force-reinstall nvidia-ml-py"])
        return
    init = nvml.get("init") or {}
    if init.get("ok") or not init:
        return
    yield from _init_failure(facts, init)


def _not_started(facts: Facts, error: str) -> Finding:
    """NVML was never asked anything: its process could not be started. A limit of this process is named as
    the cause (views/limits.py); a driver must never be blamed for what it was not asked."""
    hit = limit_hit(error, facts)
    if hit is not None:
        return finding("INT006", f"the NVML probe could not start: {hit.what}",
                       detail=error[-800:], text="Nothing was asked of the driver. Raise the limit, then run again.",
                       commands=[hit.fix])
    return finding("INT006", f"the NVML probe could not start: {error or 'no reason given'}",
                   text="Nothing was asked of the driver. Run again; if it persists, report it to gpudoctor.")


def _while(during: str) -> str:
    return {"nvmlInit": "starting (nvmlInit)", "system": "reading the driver version",
            "topology": "reading the links between GPUs", "starting": "starting"}.get(
        during, f"reading {during}" if during.startswith("GPU ") else during)


def _init_failure(facts: Facts, init: NvmlInit) -> Iterator[Finding]:
    reason, message = init.get("reason"), init.get("message", "")
    driver = facts.get("driver") or {}
    module = driver.get("kernel_module") or {}
    if reason == "library_not_found":
        yield _library_not_found(facts)
    elif reason == "driver_not_loaded" and (facts.get("host") or {}).get("wsl"):
        # WSL has no NVIDIA kernel module of its own: the Windows driver serves it through /usr/lib/wsl/lib
        yield finding("DRV002", "nvidia-smi cannot reach the NVIDIA driver from WSL",
                      detail=f"NVML: {message}",
                      text="Under WSL 2 the GPU comes from the Windows NVIDIA driver: install or update it on Windows, "
                           "then restart WSL (wsl --shutdown in Windows); never install a Linux driver or load a kernel "
                           "module inside WSL. WSL 1 has no GPU: convert the distribution with wsl --set-version <distro> 2.",
                      commands=["ls -l /usr/lib/wsl/lib/", "wsl --list --verbose"], links=[WSL_DOCS])
    elif reason == "driver_not_loaded":
        yield finding("DRV002", "the NVIDIA kernel module is not loaded",
                      detail=f"NVML: {message}",
                      text="Load it with `sudo modprobe nvidia`. If that fails, `dkms status` shows whether a module is "
                           "built for the running kernel (`uname -r`), and `mokutil --sb-state` whether Secure Boot is on.",
                      commands=["sudo modprobe nvidia", "dkms status", "mokutil --sb-state", "uname -r"],
                      links=[DRIVER_DOCS])
    elif reason == "driver_library_mismatch":
        libs = _library_versions(driver.get("nvml_library_files") or []) or \
            ([init["library_version"]] if isinstance(init.get("library_version"), str) else [])
        kernel = known(module.get("version")) or "unknown"
        yield finding("DRV003", f"driver/library version mismatch: kernel module {kernel}, "
                                f"user-space libraries {', '.join(libs) or 'unknown'}",
                      detail="The user-space driver was upgraded but the old kernel module is still loaded.",
                      text="Reboot. Or, with no GPU process running, unload and reload the nvidia modules "
                           "(rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia, then modprobe nvidia).",
                      commands=["cat /proc/driver/nvidia/version", "ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*"])
    elif reason == "no_permission":
        yield finding("DRV004", "NVML: no permission to open the NVIDIA devices",
                      detail=f"NVML: {message}",
                      text="The user needs read/write access to /dev/nvidiactl and /dev/nvidia*; "
                           "check their group and mode, or the container's device cgroup.",
                      commands=["ls -l /dev/nvidia*", "id"])
    elif reason == "gpu_lost":
        yield finding("DRV005", "NVML could not start: a GPU has fallen off the bus",
                      detail=f"NVML: {message}",
                      text="Reboot (or reset the lost GPU when nothing uses it). If it recurs, check power, cooling "
                           "and seating, and report the Xid to the system vendor.",
                      commands=[XID_COMMAND])
    else:
        code = init.get("code")
        yield finding("DRV006", f"NVML could not start: {message or reason}",
                      detail=f"NVML error code {code} ({reason})." if code is not None else f"NVML: {message or reason}.",
                      text=_UNKNOWN_ERROR_TEXT if reason == "unknown" else "",
                      commands=["nvidia-smi", DRIVER_LOAD_COMMAND],
                      links=[CONTAINER_DETACHED_NOTICE] if reason == "unknown" else [])


#: NVIDIA's notice on containers that lose their GPUs: NVML then says "Unknown Error" in the container while the
#: host's nvidia-smi works.
CONTAINER_DETACHED_NOTICE = "https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"
_UNKNOWN_ERROR_TEXT = ("In a container that had its GPUs before, this is most often the container cut off from them "
                       "when systemd reloaded the host's cgroups (systemctl daemon-reload, or a kubelet with a static "
                       "CPU manager). If nvidia-smi works on the host: recreate the container, and have the host run "
                       "sudo nvidia-ctk system create-dev-char-symlinks --create-all at every boot (NVIDIA Container "
                       "Toolkit 1.12 or newer) so that it does not recur (NVIDIA's notice, linked). Outside a "
                       "container, look for NVRM errors in the kernel log.")


def _library_not_found(facts: Facts) -> Finding:
    host = facts.get("host") or {}
    driver = facts.get("driver") or {}
    pci = driver.get("pci_devices")
    pci = pci if isinstance(pci, list) else []
    nodes = [p for p, n in (driver.get("device_nodes") or {}).items() if n.get("exists")]
    libs = driver.get("nvml_library_files") or []
    if host.get("wsl"):
        return finding("DRV001", "NVML not found: on WSL the driver's libraries live in /usr/lib/wsl/lib",
                       detail="The Windows NVIDIA driver provides libnvidia-ml.so.1 and libcuda.so.1 to WSL 2 "
                              "under /usr/lib/wsl/lib; the loader is not finding them.",
                       text="Install the NVIDIA driver on Windows (not inside WSL), and put /usr/lib/wsl/lib on the loader path.",
                       commands=["ls -l /usr/lib/wsl/lib/", "export LD_LIBRARY_PATH=/usr/lib/wsl/lib:$LD_LIBRARY_PATH"],
                       links=[WSL_DOCS])
    if libs:
        return finding("DRV001", f"NVML is installed ({libs[0]}) but the loader cannot load libnvidia-ml.so.1",
                       detail="The library exists on disk but is not in the loader's cache or search path, "
                              "or it is broken (wrong architecture, dangling link).",
                       commands=["sudo ldconfig", "ldconfig -p | grep libnvidia-ml"])
    container = host.get("container") or {}
    # before the PCI test: a container's /sys shows the host's GPUs even when it was given none
    if container.get("detected") and nodes:
        return finding("CTR006", "the GPU device files are in this container but the driver's libraries are not",
                       detail=f"Present: {', '.join(sorted(nodes))}; no libnvidia-ml or libcuda was mounted. The devices "
                              "were passed in by hand (docker run --device) instead of through the NVIDIA runtime.",
                       text="Start the container through the NVIDIA Container Toolkit, which mounts the host driver's "
                            "user-space libraries to match its kernel module; never bake a driver into the image.",
                       commands=["docker run --rm --gpus all <image> gpudoctor check"], links=[CONTAINER_DOCS])
    if container.get("detected") and not nodes:
        return finding("CTR001", "this container was started without GPU access",
                       detail="No NVIDIA device files and no driver libraries are inside the container "
                              f"(container markers: {', '.join(container.get('markers', []))}). "
                              "The host may have GPUs; this container was not given any.",
                       text="Start the container with the NVIDIA Container Toolkit and request GPUs; "
                            "in Kubernetes, request nvidia.com/gpu in the pod's resources.limits.",
                       commands=["docker run --rm --gpus all <image> gpudoctor check"], links=[CONTAINER_DOCS])
    if pci:
        bound = sorted({d.get("driver") or "none" for d in pci})
        return finding("DRV001", f"the NVIDIA driver is not installed: {len(pci)} NVIDIA GPU(s) on the PCI bus, "
                                 f"kernel driver bound: {', '.join(bound)}",
                       detail="No libnvidia-ml.so.1 was found, so no CUDA program can run.",
                       text="Install the NVIDIA driver for your distribution, then reboot.",
                       commands=_install_driver_commands(host), links=[DRIVER_DOCS])
    if isinstance(driver.get("pci_devices"), list):
        return finding("DRV011", "no NVIDIA GPU found: no NVIDIA driver, and no NVIDIA GPU on the PCI bus",
                       detail="This machine has no NVIDIA GPU the operating system can see.",
                       text="Run on a machine with an NVIDIA GPU (a GPU instance type on a cloud); in a VM, "
                            "check that the GPU is passed through.")
    return finding("DRV001", "NVML not found, and /sys/bus/pci could not be read to look for NVIDIA GPUs",
                   text="Install the NVIDIA driver if this machine has an NVIDIA GPU.",
                   commands=["lspci -nn | grep -i nvidia"], links=[DRIVER_DOCS])


def _install_driver_commands(host: dict[str, Any]) -> list[str]:
    distro = str(known(host.get("distro")) or "").lower()
    if "ubuntu" in distro:
        return ["sudo ubuntu-drivers install", "sudo reboot"]
    if "debian" in distro:
        return ["sudo apt-get install nvidia-driver", "sudo reboot"]
    return ["lspci -nn | grep -i nvidia"]


def _library_versions(paths: list[str]) -> list[str]:
    versions = {m.group(1) for p in paths if (m := re.search(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$", p))}
    return sorted(versions)


def check_nouveau(facts: Facts) -> Iterator[Finding]:
    driver = facts.get("driver") or {}
    if not driver:
        raise NotApplicable("the driver's files were not read")
    pci = as_list(driver.get("pci_devices"))
    bound = [d["bus_id"] for d in pci if d.get("driver") == "nouveau"]
    if not (driver.get("nouveau_loaded") or bound):
        return
    where = f" and bound to {', '.join(bound)}" if bound else ""
    yield finding("DRV007", f"the nouveau driver is loaded{where}",
                  detail="nouveau has no CUDA support and keeps the nvidia kernel module from binding the GPU.",
                  text="Blacklist nouveau, rebuild the initramfs (update-initramfs on Debian/Ubuntu, dracut on "
                       "RHEL/Fedora), reboot, then install or load the NVIDIA driver.",
                  commands=["printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf",
                            "sudo update-initramfs -u"],
                  links=[DRIVER_DOCS])


def check_gpu_count(facts: Facts, matrix: Matrix) -> Iterator[Finding]:
    if not nvml_ready(facts):
        raise NotApplicable("NVML is not available")
    nvml = cast("NvmlFacts", facts.get("nvml") or {})
    count = known(nvml.get("device_count"))
    driver = facts.get("driver") or {}
    pci = as_list(driver.get("pci_devices"))
    in_container = bool(get(facts, "host.container.detected"))
    if count == 0:
        yield finding("DRV012", "the NVIDIA driver is running but lists no GPU",
                      detail=_count_detail(facts),
                      text="Check that the GPUs are bound to the nvidia driver; in a container, that GPUs were allocated to it.",
                      commands=["lspci -nnk -d 10de:", "nvidia-smi -L"])
    if not isinstance(count, int) or in_container:
        return  # a container's /sys shows the host's GPUs, not the ones it was given
    driver_version = known(nvml.get("driver_version"))
    pci = [d for d in pci if not undriven(matrix, d.get("device_id"), driver_version)]  # driver.branch names those (DRV021)
    bound_nvidia = [d for d in pci if d.get("driver") == "nvidia"]
    listed = {str(known(get(g, "pci.bus_id")) or "")[-12:].lower() for g in gpus(facts)}
    if len(bound_nvidia) > count:
        missing = [d["bus_id"] for d in bound_nvidia if d["bus_id"][-12:].lower() not in listed]
        yield finding("DRV013", f"{len(bound_nvidia)} GPUs are bound to the nvidia driver but NVML lists {count}",
                      detail=f"Not listed by NVML: {', '.join(missing) or 'unknown'}.",
                      text="A GPU the driver owns but cannot use has usually fallen off the bus. Check the kernel log; "
                           "reboot, and reseat or replace the GPU if it recurs.",
                      commands=[DRIVER_LOG_COMMAND, "lspci -nnk -d 10de:"])
    if (get(facts, "driver.kernel_module.loaded")):
        for dev in pci:
            if dev.get("driver") is None:
                yield finding("DRV014", f"NVIDIA GPU {dev['bus_id']} (device {dev.get('device_id')}) has no kernel driver bound",
                              text="The nvidia module is loaded but did not take this GPU. Read the kernel log for the "
                                   "bus id; the installed driver branch or its kernel-module flavour may not support it "
                                   "(the open kernel modules need Turing or newer).",
                              commands=[f"lspci -nnk -s {dev['bus_id']}", DRIVER_LOAD_COMMAND])


def _count_detail(facts: Facts) -> str:
    value = get(facts, "host.env.NVIDIA_VISIBLE_DEVICES")
    return f"NVIDIA_VISIBLE_DEVICES={value!r}." if value is not None else ""


def check_device_nodes(facts: Facts) -> Iterator[Finding]:
    if not nvml_ready(facts):
        raise NotApplicable("NVML is not available")
    nodes = get(facts, "driver.device_nodes") or {}
    wanted = ["/dev/nvidiactl"] + [
        f"/dev/nvidia{minor}" for g in gpus(facts) if isinstance(minor := known(g.get("minor_number")), int)
    ]
    for path in wanted:
        node = nodes.get(path) or {}
        if not node.get("exists"):
            yield finding("DRV015", f"{path} does not exist", subject=_node_subject(facts, path),
                          detail="CUDA opens this device file directly and will not find the GPU without it.",
                          text="Create the device files with nvidia-modprobe or by loading the driver; in a container, "
                               "pass the devices in through the NVIDIA container runtime.",
                          commands=["sudo nvidia-modprobe -c 0", "ls -l /dev/nvidia*"])
        elif not node.get("accessible"):
            yield finding("DRV016", f"{path} is not readable and writable by this user", subject=_node_subject(facts, path),
                          text="Add the user to the group that owns the device files, or fix the udev rules.",
                          commands=[f"ls -l {path}", "id"])
    uvm = nodes.get("/dev/nvidia-uvm") or {}
    if not uvm.get("exists"):
        yield finding("DRV017", "/dev/nvidia-uvm does not exist yet",
                      detail="It is created on first CUDA use by the setuid helper nvidia-modprobe; without that helper "
                             "(or inside a container) CUDA fails to initialise with 'unknown error'.",
                      commands=["sudo nvidia-modprobe -u -c 0", "ls -l /dev/nvidia-uvm"])
    elif not uvm.get("accessible"):
        yield finding("DRV016", "/dev/nvidia-uvm is not readable and writable by this user",
                      commands=["ls -l /dev/nvidia-uvm", "id"])


def _node_subject(facts: Facts, path: str) -> Subject:
    for g in gpus(facts):
        if path == f"/dev/nvidia{known(g.get('minor_number'))}":
            return Subject("gpu", g.get("index"), known(g.get("uuid")))
    return Subject()


def check_bindings(facts: Facts) -> Iterator[Finding]:
    if not facts.get("nvml"):
        raise NotApplicable("NVML was not asked")
    missing = get(facts, "nvml.missing_functions") or []
    if missing:
        yield finding("DRV018", f"this driver's NVML lacks {len(missing)} function(s) the bindings use: {', '.join(missing)}",
                      detail="The facts those functions give are shown as unavailable.",
                      text="Install the nvidia-ml-py release that matches the driver branch if those facts matter.")


CHECKS = (
    Check("driver.nvml", "driver", "NVML starts", ("DRV001", "DRV002", "DRV003", "DRV004", "DRV005", "DRV006",
                                                   "DRV009", "DRV010", "DRV011", "DRV019", "CTR001", "CTR006",
                                                   "INT006"),
          check_nvml_init),
    Check("driver.nouveau", "driver", "nouveau is not in the way", ("DRV007",), check_nouveau, ("driver_files",)),
    Check("driver.gpu_count", "driver", "every NVIDIA GPU is listed by the driver", ("DRV012", "DRV013", "DRV014"),
          check_gpu_count, ("nvml", "driver_files"), reads_matrix=True),
    Check("driver.device_nodes", "driver", "the device files CUDA opens exist and are accessible",
          ("DRV015", "DRV016", "DRV017"), check_device_nodes, ("nvml", "driver_files")),
    Check("driver.bindings", "driver", "the NVML bindings match the driver", ("DRV018",), check_bindings, ("nvml",)),
)
