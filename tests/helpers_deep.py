"""`check --deep` facts shared by the acceleration area's judging tests (test_area_acceleration.py) and the
tests of the probes that record them (test_multigpu.py, test_cluster.py): the real 4 x H200 recording with a
synthetic ``multigpu`` section shaped as the probe writes it, and the torchrun jobs recorded on real H200s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from gpudoctor.probes import multigpu

REAL = Path(__file__).parent / "fixtures" / "real"
CLUSTER = REAL / "h200x2-20261121" / "cluster"
CLUSTER4 = REAL / "h200x4-20261121" / "cluster"
GB = 1e9


def recorded(name: str, folder: Path = CLUSTER) -> dict[str, Any]:
    """A torchrun job's report recorded on a real machine (tests/fixtures/real/h200x*-20261121/cluster/)."""
    return json.loads((folder / f"{name}.json").read_text())


def h200x4() -> dict[str, Any]:
    return json.loads((REAL / "h200x4-20261121" / "report.json").read_text())["facts"]


def deep_section(facts: dict[str, Any], gbs: Optional[dict[tuple[int, int], float]] = None, busbw: float = 337.0,
                 order: Optional[list[int]] = None) -> dict[str, Any]:
    """What the probe writes on these GPUs: every ordered pair at about 370 GB/s (``gbs`` overrides), an
    all-reduce at ``busbw``. ``order``: the NVML index of each CUDA ordinal (default: the same)."""
    gpus = facts["gpus"]
    order = order or [g["index"] for g in gpus]
    devices = [{"ordinal": o, "name": gpus[i]["name"], "uuid": gpus[i]["uuid"]} for o, i in enumerate(order)]
    n = len(devices)
    pairs = [{"src": a, "dst": b, "access": True, "gbs": (gbs or {}).get((a, b), 365.0 + a + 2 * b), "wrong_elements": 0}
             for a in range(n) for b in range(n) if a != b]
    algbw = busbw * n / (2 * (n - 1))
    ranks = [{"rank": r, "device": r, "name": "NVIDIA H200", "nccl_version": "2.28.9", "median_s": 256 * 2**20 / algbw / GB,
              "correct": True, "wrong_elements": 0, "elements": 64 * 2**20,
              "checks": [{"wrong_elements": 0, "expected": n * (n + 1) / 2}] * 2} for r in range(n)]
    return {
        "devices": devices,
        "p2p": {"torch": "2.11.0+cu130", "device_count": n, "bytes": 256 * 2**20, "warmup": 3, "repeats": 10,
                "pairs": pairs, "ok": True},
        "allreduce": {"world_size": n, "backend": "nccl", "dtype": "float32", "bytes": 256 * 2**20, "warmup": 3,
                      "repeats": 10, "batch": 4, "expected": n * (n + 1) / 2, "env": dict(multigpu.SAFE_ENV),
                      "ranks": ranks, "nccl_version": "2.28.9", "correct": True, "wrong_elements": 0,
                      "elements": n * 64 * 2**20, "time_s": 256 * 2**20 / algbw / GB, "algbw_gbs": algbw,
                      "busbw_gbs": busbw, "ok": True},
    }


def deep(**kwargs: Any) -> dict[str, Any]:
    facts = h200x4()
    facts["multigpu"] = deep_section(facts, **kwargs)
    return facts
