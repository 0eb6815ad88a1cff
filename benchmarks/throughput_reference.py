"""gpudoctor's throughput figures next to a reference harness, in the same run on the same GPU.

Run on a GPU machine: python3 benchmarks/throughput_reference.py [DEVICE]
The reference is triton.testing.do_bench with its default settings (25 ms warm-up, 100 ms of
repetitions, the L2 cache flushed before each, median), the harness GPU kernel authors tune
against. A longer back-to-back run (rep=500 ms) is printed too: on a 700 W H200 it heats the
chip into its power cap and measures the throttled clock, a different quantity, not judged.
The pinned host<->device copies are set beside one 1 GiB pinned copy each way, timed the same way.
A gpudoctor figure within 10% of the reference is trustworthy; the script prints each pair,
the ratio, and PASS/FAIL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: `python3 benchmarks/...`
from gpudoctor.probes.workload.torch_child import _torch_throughput  # noqa: E402


def reference(device: torch.device, n: int, copy_bytes: int) -> dict[str, float]:
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    out = {}
    for label, dtype, tf32 in (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True)):
        a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = do_bench(lambda: a @ b, return_mode="median") if do_bench else _graph_ms(lambda: a @ b)  # noqa: F821 - the lambda runs before the del below
        out[f"matmul_{label}_tflops"] = 2 * n**3 / (ms / 1e3) / 1e12
        if do_bench:
            ms = do_bench(lambda: a @ b, warmup=100, rep=500, return_mode="median")  # noqa: F821 - the lambda runs before the del below
            out[f"sustained_{label}_tflops"] = 2 * n**3 / (ms / 1e3) / 1e12
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    src = torch.empty(copy_bytes, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), return_mode="median") if do_bench else _graph_ms(lambda: dst.copy_(src))  # noqa: F821 - the lambda runs before the del below
    out["device_copy_gbs"] = 2 * copy_bytes / (ms / 1e3) / 1e9
    del src, dst
    host, devbuf = torch.empty(PINNED_REFERENCE_BYTES, dtype=torch.uint8).pin_memory(), torch.empty(
        PINNED_REFERENCE_BYTES, dtype=torch.uint8, device=device)
    for key, copy in (("h2d_gbs", lambda: devbuf.copy_(host, non_blocking=True)),
                      ("d2h_gbs", lambda: host.copy_(devbuf, non_blocking=True))):
        ms = do_bench(copy, return_mode="median") if do_bench else _graph_ms(copy, per_graph=3)
        out[key] = PINNED_REFERENCE_BYTES / (ms / 1e3) / 1e9
    return out


#: The reference's pinned copy: far past the size where a PCIe link reaches full speed.
PINNED_REFERENCE_BYTES = 1 << 30


def _graph_ms(fn, per_graph: int = 10, replays: int = 5) -> float:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            fn()
    graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / per_graph)
    return sorted(times)[len(times) // 2]


def main() -> None:
    index = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    device = torch.device(f"cuda:{index}")
    torch.cuda.set_device(device)
    free, _ = torch.cuda.mem_get_info(device)
    ours = _torch_throughput(torch, device, free, deep=False)
    ref = reference(device, ours["matmul_n"], ours["device_copy_bytes"])
    print(f"GPU {index}: {torch.cuda.get_device_name(device)}; matmul n={ours['matmul_n']}, copy {ours['device_copy_bytes'] >> 20} MiB")
    print(f"{'figure':<22} {'gpudoctor':>10} {'reference':>10} {'ratio':>6}")
    worst = 1.0
    for key in ("matmul_bf16_tflops", "matmul_tf32_tflops", "device_copy_gbs", "h2d_gbs", "d2h_gbs"):
        ratio = ours[key] / ref[key]
        worst = min(worst, 1 - abs(1 - ratio))
        print(f"{key:<22} {ours[key]:>10.1f} {ref[key]:>10.1f} {ratio:>6.3f} {'PASS' if abs(1 - ratio) <= 0.10 else 'FAIL'}")
    for key in ("sustained_bf16_tflops", "sustained_tf32_tflops"):
        if key in ref:
            print(f"{key:<22} {'':>10} {ref[key]:>10.1f}  (do_bench, 500 ms back to back: power-capped clock, not judged)")
    print(f"pinned copies: gpudoctor {ours['pinned_bytes'] >> 20} MiB, reference {PINNED_REFERENCE_BYTES >> 20} MiB")


if __name__ == "__main__":
    main()
