"""torch.cuda, faked: FAKE_TORCH_GPUS GPUs (default 2) of 140 GiB, events that time 0.72 ms per call."""

from __future__ import annotations

import contextlib
import os

from torch.cuda import nccl  # noqa: F401

COUNT = int(os.environ.get("FAKE_TORCH_GPUS", "2"))
EVENT_MS = 0.72
_calls = 0  # timed calls so far, for the events


def is_available() -> bool:
    return COUNT > 0


def device_count() -> int:
    return COUNT


def set_device(index: int) -> None:
    assert 0 <= index < COUNT


def get_device_name(dev: object = None) -> str:
    return "NVIDIA H200"


def mem_get_info(index: int = 0) -> tuple[int, int]:
    return 139 << 30, 140 << 30


def synchronize(dev: object = None) -> None:
    pass


def can_device_access_peer(a: int, b: int) -> bool:
    return os.environ.get("FAKE_TORCH_MODE") != "no-peer"


def current_stream(index: int | None = None) -> str:
    return f"stream{index}"


@contextlib.contextmanager
def device(index: int):
    yield


class Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.at = None

    def record(self, stream: object = None) -> None:
        self.at = len(_timeline)
        _timeline.append(self)

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: "Event") -> float:
        return EVENT_MS * _work_between(self.at, end.at)


_timeline: list = []


def _work_between(start: int, end: int) -> int:
    return max(1, sum(1 for mark in _timeline[start:end] if mark == "work"))


def _did_work() -> None:
    _timeline.append("work")
