"""A stand-in for PyTorch, just enough for gpudoctor's multi-GPU worker (probes/multigpu/worker.py), so
its processes, locks, time limits and output can be tested on a machine without a GPU.

Only child processes import it (tests put tests/fakes on their PYTHONPATH). A tensor is symbolic:
a constant, or the pattern 3 x index + offset the P2P test writes, with a few elements overridden.
FAKE_TORCH_MODE picks a fault, FAKE_TORCH_RANK the rank that has it (default 1):
  wrong  the all-reduce returns one wrong element        raise  the all-reduce raises (an NCCL error)
  hang   the all-reduce never returns                    crash  the all-reduce aborts the process
  no-peer  CUDA refuses peer access between every pair   corrupt  every copy to cuda:0 comes out wrong
"""

from __future__ import annotations

import os

from torch import cuda, distributed  # noqa: F401 - torch.cuda and torch.distributed, as in PyTorch

__version__ = "2.11.0+fake"
float32, int32 = "float32", "int32"
MODE = os.environ.get("FAKE_TORCH_MODE", "ok")


class device:
    def __init__(self, kind: str, index: int | None = None) -> None:
        if ":" in kind:
            kind, index = kind.split(":")[0], int(kind.split(":")[1])
        self.type, self.index = kind, index


class Tensor:
    def __init__(self, n: int, fill: float | None = None, offset: int | None = None, dev: int = 0) -> None:
        self.n, self.fill, self.offset, self.dev = n, fill, offset, dev  # constant fill, or 3*i + offset
        self.overrides: dict[int, float] = {}

    def value(self, i: int) -> float:
        return self.overrides.get(i, self.fill if self.fill is not None else 3 * i + self.offset)

    def numel(self) -> int:
        return self.n

    def _set(self, fill: float | None, offset: int | None) -> "Tensor":
        self.fill, self.offset, self.overrides = fill, offset, {}
        return self

    def mul_(self, k: int) -> "Tensor":
        assert self.offset == 0 and k == 3, "the fake only knows arange(n) * 3"
        return self

    def __add__(self, k: int) -> "Tensor":
        return Tensor(self.n, None, self.offset + k, self.dev)

    def fill_(self, value: float) -> "Tensor":
        return self._set(value, None)

    def copy_(self, src: "Tensor") -> "Tensor":
        self._set(src.fill, src.offset)
        if MODE == "corrupt" and self.dev == 0:
            self.overrides = {5: -7.0}
        return self

    def sub(self, other: "Tensor") -> "Tensor":  # only pattern - pattern: a constant
        out = Tensor(self.n, float(self.offset - other.offset), None, self.dev)
        out.overrides = {i: v - 3 * i - other.offset for i, v in self.overrides.items()}
        return out

    def ne_(self, value: float) -> "Mask":
        return self != value

    def __ne__(self, value: float) -> "Mask":  # type: ignore[override]
        assert self.fill is not None
        wrong = {i for i, v in self.overrides.items() if v != value}
        if self.fill != value:
            return Mask(self.n - sum(1 for v in self.overrides.values() if v == value), 0)
        return Mask(len(wrong), min(wrong) if wrong else None)

    def __getitem__(self, i: int) -> float:
        return self.value(i)


class Mask:
    def __init__(self, count: int, first: int | None) -> None:
        self.count, self.first = count, first

    def sum(self) -> int:
        return self.count


def full(shape: tuple[int], value: float, dtype: str = float32, device: device | None = None) -> Tensor:
    return Tensor(shape[0], float(value), None, device.index if device else 0)


def zeros_like(t: Tensor) -> Tensor:
    return Tensor(t.n, 0.0, None, t.dev)


def empty_like(t: Tensor) -> Tensor:
    return Tensor(t.n, float("nan"), None, t.dev)


def arange(n: int, dtype: str = int32, device: str = "cuda:0") -> Tensor:
    return Tensor(n, None, 0, int(str(device).split(":")[1]))


def nonzero(mask: Mask) -> list[list[int]]:
    return [[mask.first]]
