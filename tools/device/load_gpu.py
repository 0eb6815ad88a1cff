"""Another process keeping one GPU busy: bf16 matmuls on cuda:N for S seconds, its CUDA context on that GPU
alone (a bare synchronize() would make one on GPU 0 too). What the shared-GPU recordings run beside a check.
Usage: python3 tools/device/load_gpu.py [N] [SECONDS]"""

import sys
import time

import torch


def main(device: int, seconds: float) -> None:
    torch.cuda.set_device(device)
    a = torch.randn(8192, 8192, device=f"cuda:{device}", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    end = time.time() + seconds
    print(f"load starts on cuda:{device}", flush=True)
    while time.time() < end:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize(device)
    print("load ends", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 0, float(sys.argv[2]) if len(sys.argv) > 2 else 40.0)
