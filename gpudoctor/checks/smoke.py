"""Proof that a GPU runs work at all: did the framework-free smoke kernel run, and compute the right numbers,
on every GPU CUDA enumerates? A module of its own because it needs no framework: a failure here is the
driver's, CUDA's or the GPU's own, and its CUDA error is the most exact account of why. Each error is mapped
to its meaning and fix (CUDA driver API reference, "Error Handling"; cuInit's documented returns include
802-804). The framework workloads are judged in checks/workload.py, the GPUs together in checks/multigpu.py."""

from __future__ import annotations

from typing import Any, Iterator

from gpudoctor.checks.base import DRIVER_LOG_COMMAND, XID_COMMAND, Check, Facts, NotApplicable, finding, nvml_index, nvml_ready
from gpudoctor.findings import Finding, Subject
from gpudoctor.views.visibility import resolve

#: CUresult -> (what it means here, how to fix it, commands)
CUDA_ERRORS: dict[int, tuple[str, str, tuple[str, ...]]] = {
    2: ("out of GPU memory", "Another process holds the GPU's memory; free it or pick another GPU.",
        ("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",)),
    3: ("CUDA could not initialise", "Check the driver (nvidia-smi) and the kernel log.", ("nvidia-smi",)),
    34: ("the libcuda.so.1 loaded is the toolkit's stub, not the driver's",
         "Remove the toolkit's stubs directory from LD_LIBRARY_PATH and the loader cache.", ("echo $LD_LIBRARY_PATH",)),
    46: ("the GPU is busy or unavailable (exclusive or prohibited compute mode, or in use)",
         "Check the compute mode and the processes on the GPU.", ("nvidia-smi -q -d COMPUTE",)),
    100: ("CUDA enumerates no device", "Check CUDA_VISIBLE_DEVICES and, in a container, that the GPUs were passed in.",
          ("echo $CUDA_VISIBLE_DEVICES", "ls -l /dev/nvidia*")),
    101: ("CUDA_VISIBLE_DEVICES or the device number is invalid", "Fix CUDA_VISIBLE_DEVICES.", ("echo $CUDA_VISIBLE_DEVICES",)),
    209: ("there is no kernel image for this GPU", "The code carries no machine code or PTX for this GPU.", ()),
    214: ("an uncorrectable ECC error occurred", "Drain the GPU; reboot or reset it; replace it if it recurs.",
          ("nvidia-smi -q -d ECC",)),
    218: ("the driver's PTX JIT compiler rejected the PTX", "Reinstall the driver (its JIT compiler library is broken).", ()),
    221: ("the driver's PTX JIT compiler library is missing", "Reinstall the driver; in a container, mount its compute libraries "
          "(NVIDIA_DRIVER_CAPABILITIES must include compute).", ()),
    222: ("the PTX is newer than this driver can compile", "Upgrade the driver.", ()),
    700: ("the kernel accessed an illegal address", "The GPU or driver misbehaved on a known-good kernel: reset the GPU or reboot, "
          "and check the kernel log for Xid errors.", (XID_COMMAND,)),
    719: ("the kernel launch failed", "The GPU or driver misbehaved on a known-good kernel: check the kernel log for Xid errors.",
          (XID_COMMAND,)),
    802: ("the system is not ready: on NVSwitch systems the Fabric Manager is not running",
          "Start the NVIDIA Fabric Manager service matching the driver version.",
          ("systemctl status nvidia-fabricmanager", "sudo systemctl enable --now nvidia-fabricmanager")),
    803: ("the user-space driver (libcuda) and the kernel module do not match",
          "Often a forward-compatibility (cuda-compat) libcuda or a stale libcuda on the search path; or a driver upgrade "
          "without a reboot. Remove the stray libcuda, or reboot.", ("ldconfig -p | grep libcuda.so", "cat /proc/driver/nvidia/version")),
    804: ("the forward-compatibility package (cuda-compat) is in use on a GPU that does not support it",
          "Forward compatibility works only on datacenter GPUs; remove cuda-compat from the loader path.",
          ("ldconfig -p | grep libcuda.so",)),
    999: ("an unknown CUDA error, most often /dev/nvidia-uvm missing or a driver fault",
          "Check that /dev/nvidia-uvm exists (nvidia-modprobe -u) and read the kernel log.",
          ("ls -l /dev/nvidia-uvm", DRIVER_LOG_COMMAND)),
}


def _smoke(facts: Facts) -> dict[str, Any]:
    smoke = facts.get("smoke")
    if not isinstance(smoke, dict):
        raise NotApplicable("the smoke kernel was not run (--quick)")
    if not nvml_ready(facts) or not resolve(facts).devices:
        raise NotApplicable("no GPU is visible to CUDA programs here")
    return smoke


def check_smoke(facts: Facts) -> Iterator[Finding]:
    smoke = _smoke(facts)
    count = smoke.get("count") or {}
    if "devices" not in count:
        yield _cuda_failure(count, Subject(), "before any GPU could be tested")
        return
    expected = len(resolve(facts).devices)
    if len(count["devices"]) < expected:
        yield finding("RUN003", f"CUDA enumerates {len(count['devices'])} GPU(s) but {expected} should be visible",
                      text="A GPU NVML lists is missing from CUDA's enumeration; check its state and the kernel log.",
                      commands=["nvidia-smi -L", XID_COMMAND])
    for run in smoke.get("runs") or []:
        subject = Subject("gpu", nvml_index(facts, run.get("uuid")), run.get("uuid"))
        where = f"cuda:{run.get('ordinal')} ({run.get('name')})"
        if "error" in run:
            yield _cuda_failure(run["error"], subject, f"on {where}")
        elif not run.get("ok"):
            yield finding("RUN002", f"the smoke kernel computed wrong results on {where}: "
                                    f"{run.get('wrong_elements')} of {run.get('elements')} elements",
                          subject=subject, detail=f"First wrong elements [index, got, expected]: {run.get('first_wrong')}.",
                          text="A GPU that computes a known-good kernel wrongly is faulty or unstable: drain it, check "
                               "ECC errors and the kernel log, and run the vendor's diagnostics (dcgmi diag -r 3).",
                          commands=["nvidia-smi -q -d ECC", XID_COMMAND])


def _cuda_failure(error: dict[str, Any], subject: Subject, where: str) -> Finding:
    code: Any = error.get("code")
    meaning, fix, commands = CUDA_ERRORS.get(code, ("", "Read the error name; check the driver and the kernel log.",
                                                    ("nvidia-smi",)))
    name = error.get("name")
    message = error.get("message", "")
    if name == "library_not_found":
        meaning, fix = "libcuda.so.1 (the driver's CUDA library) cannot be loaded", \
                       "Install the driver's CUDA library; in a container, NVIDIA_DRIVER_CAPABILITIES must include compute."
    title = f"the smoke kernel failed {where}: {error.get('step')} returned {name}" + (f" ({code})" if code is not None else "")
    return finding("RUN001", title, subject=subject, detail=(meaning + ". " if meaning else "") + message,
                   text=fix, commands=list(commands))


CHECKS = (
    Check("acceleration.smoke", "acceleration", "a kernel runs and computes correctly on every GPU",
          ("RUN001", "RUN002", "RUN003"), check_smoke, ("smoke", "nvml")),
)
