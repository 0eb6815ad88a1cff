"""Smoke-kernel worker: proves one GPU computes, through the CUDA driver API alone.

Run as ``python -m gpudoctor.probes.smoke.worker count`` (how many devices CUDA enumerates) or
``... run ORDINAL``. It loads the driver's libcuda with ctypes, retains the device's primary
context, has the driver JIT-compile a small PTX kernel (y = a*x + y over 1M floats of varied
data), runs it, copies the result back and checks every element against a CPU reference. No
toolkit and no framework are involved, so a failure here is the driver's or the GPU's.
Each step's CUDA error is reported by number and name; the parent maps it to a fix. A workload child
that has started CUDA on every GPU runs the same kernel from its own process instead (host()).
"""

from __future__ import annotations

import ctypes
import functools
import operator
import os
import struct
import sys
import threading
import time
from array import array
from typing import Any, Callable, ContextManager, Optional

from gpudoctor.procs import protocol
from gpudoctor.trace import mark

N = 1 << 18  # 1 MiB per buffer: enough varied data to catch a wrong result, fast on any GPU
A = 2.5
BLOCK = 256
# PTX ISA 6.0 for sm_30: old enough that any driver since CUDA 9 JIT-compiles it for any newer GPU.
PTX = b"""
.version 6.0
.target sm_30
.address_size 64

.visible .entry saxpy(.param .u64 x_ptr, .param .u64 y_ptr, .param .f32 a, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .f32 %f<5>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x_ptr];
    ld.param.u64 %rd2, [y_ptr];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
DONE:
    ret;
}
\x00"""


#: Names for the CUresult values worth diagnosing (cuda.h); used when the library cannot name its own
#: error, as the stub libcuda cannot.
ERROR_NAMES = {
    1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 214: "CUDA_ERROR_ECC_UNCORRECTABLE",
    218: "CUDA_ERROR_INVALID_PTX", 221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    700: "CUDA_ERROR_ILLEGAL_ADDRESS", 719: "CUDA_ERROR_LAUNCH_FAILED", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 999: "CUDA_ERROR_UNKNOWN",
}


class CudaFailure(Exception):
    def __init__(self, step: str, code: int, name: str):
        super().__init__(f"{step} failed with {name} ({code})")
        self.step, self.code, self.name = step, code, name


def emit(section: str, data: Any) -> None:
    protocol.emit(section, data)


def load() -> Any:
    return ctypes.CDLL("libcuda.so.1")


def check(cuda: Any, step: str, rc: int) -> None:
    if rc != 0:
        name = ctypes.c_char_p()
        try:
            cuda.cuGetErrorName(rc, ctypes.byref(name))
        except AttributeError:
            pass
        raise CudaFailure(step, rc, name.value.decode() if name.value else ERROR_NAMES.get(rc, f"CUDA error {rc}"))


def fn(cuda: Any, *names: str) -> Any:
    """The first of the versioned symbols this driver exports (cuMemAlloc_v2 before cuMemAlloc)."""
    for name in names:
        try:
            return getattr(cuda, name)
        except AttributeError:
            continue
    raise AttributeError(names[0])


def count() -> int:
    cuda = load()
    check(cuda, "cuInit", cuda.cuInit(0))
    mark("count: cuInit done")
    version, n = ctypes.c_int(), ctypes.c_int()
    check(cuda, "cuDriverGetVersion", cuda.cuDriverGetVersion(ctypes.byref(version)))
    check(cuda, "cuDeviceGetCount", cuda.cuDeviceGetCount(ctypes.byref(n)))
    devices = []
    for i in range(n.value):
        dev, name, uuid = ctypes.c_int(), ctypes.create_string_buffer(256), (ctypes.c_ubyte * 16)()
        check(cuda, "cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(dev), i))
        check(cuda, "cuDeviceGetName", cuda.cuDeviceGetName(name, 256, dev))
        check(cuda, "cuDeviceGetUuid", fn(cuda, "cuDeviceGetUuid_v2", "cuDeviceGetUuid")(uuid, dev))
        devices.append({"ordinal": i, "name": name.value.decode(errors="replace"), "uuid": _uuid(bytes(uuid))})
    emit("count", {"driver_cuda": version.value, "devices": devices})
    mark("count: printed")
    return 0


def _uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def run(ordinal: int) -> int:
    cuda = load()
    start = time.monotonic()
    check(cuda, "cuInit", cuda.cuInit(0))
    mark(f"smoke {ordinal}: cuInit done")
    result = on_gpu(cuda, ordinal)
    result["total_s"] = round(time.monotonic() - start, 4)
    emit("run", result)
    mark(f"smoke {ordinal}: printed")
    return 0


def on_gpu(cuda: Any, ordinal: int) -> dict[str, Any]:
    """The kernel on GPU ``ordinal`` once CUDA has started in this process: its result, the ordinal kept as
    reported (a child pinned to its GPU's UUID calls that GPU 0), and each step's seconds."""
    start = time.monotonic()
    steps: dict[str, float] = {}
    dev, ctx, module, kernel = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda, "cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(dev), 0 if os.environ.get("GPUDOCTOR_PINNED_GPU") else ordinal))
    t = time.monotonic()
    check(cuda, "cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check(cuda, "cuCtxSetCurrent", cuda.cuCtxSetCurrent(ctx))
    steps["context_s"] = time.monotonic() - t
    mark(f"smoke {ordinal}: context made")
    try:
        t = time.monotonic()
        check(cuda, "cuModuleLoadData (PTX JIT)", cuda.cuModuleLoadData(ctypes.byref(module), PTX))
        check(cuda, "cuModuleGetFunction", cuda.cuModuleGetFunction(ctypes.byref(kernel), module, b"saxpy"))
        steps["jit_s"] = time.monotonic() - t
        x, y, expected = inputs()
        t = time.monotonic()
        got = _launch(cuda, kernel, x, y)
        steps["kernel_and_copies_s"] = time.monotonic() - t
        bad = wrong(got, expected)
        result = {"ordinal": ordinal, "ok": not bad, "elements": N, "wrong_elements": len(bad),
                  "first_wrong": [[i, got[i], expected[i]] for i in bad[:5]]}
    finally:
        if module:
            cuda.cuModuleUnload(module)
        fn(cuda, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")(dev)
    result.update({k: round(v, 4) for k, v in steps.items()}, total_s=round(time.monotonic() - start, 4))
    return result


_INPUTS_LOCK = threading.Lock()


def inputs() -> tuple[array, array, array]:
    """The kernel's x and y, and the CPU's a*x + y, made once per process: a process that runs the kernel on
    several GPUs (host()) shares them, and its other threads share the interpreter. Every value is exact in
    float32 (halves and quarters well below 2**24), so a right answer is the same bytes."""
    with _INPUTS_LOCK:
        return _inputs()


@functools.lru_cache(maxsize=1)
def _inputs() -> tuple[array, array, array]:
    x = (array("f", [k * 0.5 - 17.0 for k in range(1000)]) * (N // 1000 + 1))[:N]  # (i % 1000) * 0.5 - 17
    y = (array("f", [k * 0.25 + 1.0 for k in range(4093)]) * (N // 4093 + 1))[:N]  # (i % 4093) * 0.25 + 1
    return x, y, array("f", map(operator.add, map(A.__mul__, x), y))


def wrong(got: array, expected: array) -> list[int]:
    """The indices of the wrong elements: none when the bytes agree, the usual answer, which is read
    without a Python step per element."""
    if got.tobytes() == expected.tobytes():
        return []
    return [i for i in range(N) if not _close(got[i], expected[i])]


def _launch(cuda: Any, kernel: Any, x: array, y: array) -> array:
    nbytes = N * 4
    dx, dy = ctypes.c_uint64(), ctypes.c_uint64()
    alloc, free = fn(cuda, "cuMemAlloc_v2", "cuMemAlloc"), fn(cuda, "cuMemFree_v2", "cuMemFree")
    htod, dtoh = fn(cuda, "cuMemcpyHtoD_v2", "cuMemcpyHtoD"), fn(cuda, "cuMemcpyDtoH_v2", "cuMemcpyDtoH")
    check(cuda, "cuMemAlloc", alloc(ctypes.byref(dx), ctypes.c_size_t(nbytes)))
    try:
        check(cuda, "cuMemAlloc", alloc(ctypes.byref(dy), ctypes.c_size_t(nbytes)))
        try:
            check(cuda, "cuMemcpyHtoD", htod(dx, ctypes.c_void_p(x.buffer_info()[0]), ctypes.c_size_t(nbytes)))
            check(cuda, "cuMemcpyHtoD", htod(dy, ctypes.c_void_p(y.buffer_info()[0]), ctypes.c_size_t(nbytes)))
            a, n = ctypes.c_float(A), ctypes.c_uint32(N)
            params = (ctypes.c_void_p * 4)(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in (dx, dy, a, n)))
            grid = (N + BLOCK - 1) // BLOCK
            check(cuda, "cuLaunchKernel", cuda.cuLaunchKernel(kernel, grid, 1, 1, BLOCK, 1, 1, 0, None, params, None))
            check(cuda, "cuCtxSynchronize", cuda.cuCtxSynchronize())
            out = array("f", bytes(nbytes))
            check(cuda, "cuMemcpyDtoH", dtoh(ctypes.c_void_p(out.buffer_info()[0]), dy, ctypes.c_size_t(nbytes)))
            return out
        finally:
            free(dy)
    finally:
        free(dx)


def _close(got: float, want: float) -> bool:
    """fma rounds once, the float32 reference twice: allow one unit in the last place."""
    if got == want:
        return True
    ulp = abs(struct.unpack("f", struct.pack("f", want))[0]) * 2.0**-23
    return abs(got - want) <= max(ulp, 1e-30)


#: What a hosted run records as its process (the report's smoke.runs[].process); a run in a child of its
#: own records none.
HOSTED = "torch workload"


def host(ordinals: list[str], lock: Callable[[str], ContextManager[Any]]) -> list[threading.Thread]:
    """Run the kernel on each of ``ordinals`` from this process, a thread each, printing a ``smoke`` line per
    GPU: for a workload child that has already started CUDA on those GPUs (PyTorch's, on every GPU), so the
    driver makes no context and starts no process for the kernel. Still framework-free: the same driver
    calls, on the libcuda the process loaded. ``lock(ordinal)`` keeps the kernel off the GPU while the
    workload times something there. The caller joins the threads before it exits."""
    threads = [threading.Thread(target=_hosted, args=(o, lock), name=f"smoke{o}", daemon=True) for o in ordinals]
    for thread in threads:
        thread.start()
    return threads


def _hosted(ordinal: str, lock: Callable[[str], ContextManager[Any]]) -> None:
    try:
        cuda = load()
        check(cuda, "cuInit", cuda.cuInit(0))
        with lock(ordinal):
            result = on_gpu(cuda, int(ordinal))
        emit("smoke", {**result, "process": HOSTED})
    except BaseException as exc:  # noqa: BLE001 - the parent runs the kernel in a child of its own instead
        emit("smoke", {"ordinal": int(ordinal), "error": failure(exc) or {"step": "hosted", "code": None, "name": type(exc).__name__,
                                                                    "message": str(exc)[:500]}})


def failure(exc: BaseException) -> Optional[dict[str, Any]]:
    """What a failed run reports, for the failures it diagnoses; None for any other exception."""
    if isinstance(exc, CudaFailure):
        return {"step": exc.step, "code": exc.code, "name": exc.name}
    if isinstance(exc, OSError):  # libcuda.so.1 cannot be loaded
        return {"step": "load libcuda.so.1", "code": None, "name": "library_not_found", "message": str(exc)}
    if isinstance(exc, AttributeError):
        return {"step": "find a driver API symbol", "code": None, "name": "symbol_missing", "message": str(exc)}
    return None


def main(argv: list[str]) -> int:
    try:
        return count() if argv[0] == "count" else run(int(argv[1]))
    except (CudaFailure, OSError, AttributeError) as exc:
        emit("error", failure(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
