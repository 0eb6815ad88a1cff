"""torch.distributed, faked: checks what the launcher must set, and sums as NCCL would."""

from __future__ import annotations

import datetime
import os
import time

import torch

_world = _rank = None
REQUIRED = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "MASTER_ADDR": "127.0.0.1"}


def init_process_group(backend: str, init_method: str, rank: int, world_size: int, timeout: datetime.timedelta,
                       device_id: object) -> None:
    global _world, _rank
    wrong = {k: os.environ.get(k) for k, v in REQUIRED.items() if os.environ.get(k) != v}
    assert not wrong, f"fake torch.distributed: environment not as required: {wrong}"
    assert backend == "nccl" and init_method == "env://" and os.environ["MASTER_PORT"].isdigit()
    assert str(rank) == os.environ["RANK"] and str(world_size) == os.environ["WORLD_SIZE"]
    assert device_id.index == rank and 0 < timeout.total_seconds()
    _world, _rank = world_size, rank


def all_reduce(t: "torch.Tensor") -> None:
    faulty = _rank == int(os.environ.get("FAKE_TORCH_RANK", "1"))
    mode = torch.MODE if faulty else "ok"
    if mode == "raise":
        raise RuntimeError("NCCL error: unhandled system error (fake), NCCL version 2.28.9")
    if mode == "hang":
        time.sleep(3600)
    if mode == "crash":
        os.abort()
    # every rank holds the same kind of data: rank+1 everywhere, or zeros
    t.fill = _world * (_world + 1) / 2 if t.fill == _rank + 1 else t.fill * _world
    if mode == "wrong":
        t.overrides = {12345: 9.0}
    torch.cuda._did_work()


def destroy_process_group() -> None:
    pass
