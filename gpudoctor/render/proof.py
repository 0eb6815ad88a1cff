"""The proof of acceleration as a table: one row per GPU and framework, what ran there and how fast.

A report that says only "smoke kernel correct on 1 of 1 GPU(s)" asks the reader to trust it; a
maintainer reading a ticket wants the evidence: the framework-free smoke kernel, each framework's
results against its CPU reference, the training step (loss first -> last, steps, the speed against
the same step on the CPU), and the measured matmul, device-memory and host-link bandwidths against
what this GPU model should reach (compat_matrix/performance.json through ``compat.rules.performance_entry``,
the same references ``acceleration.throughput`` judges by). Text and Markdown print the same cells.

The facts are data from any report (``analyze``): every value is read defensively (a string where a
number belongs is shown as unknown, never raised on), and the cells are plain strings the renderer
escapes for where it prints them (render/safe.py).
"""

from __future__ import annotations

from typing import Any, Optional

from gpudoctor.snapshot import as_list, as_object, known
from gpudoctor.compat.data import Matrix
from gpudoctor.compat.rules import allreduce_row
from gpudoctor.views import throughput
from gpudoctor.views.topology import PCIE_GB_PER_LANE, allreduce_setting, slowest_pair

#: (key, header) of each column, in order.
COLUMNS = (("gpu", "GPU"), ("framework", "Framework"), ("smoke", "Smoke kernel"), ("results", "Results vs CPU"),
           ("training", "Training step"), ("matmul", "Matmul"), ("memory", "Memory copy"), ("host", "Host <-> GPU"))
NONE = "-"
STEPS = ("elementwise", "matmul", "conv")


def _num(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rows(facts: dict[str, Any], matrix: Matrix) -> list[dict[str, str]]:
    """One row per GPU x framework (GPUs by CUDA number, frameworks in the order they ran), the figures against
    ``matrix``'s references; a GPU with no framework run gets one row with its smoke kernel alone. Empty when
    no GPU work ran (``--quick``)."""
    smoke = facts.get("smoke") if isinstance(facts.get("smoke"), dict) else None
    workload = facts.get("workload") if isinstance(facts.get("workload"), dict) else None
    if smoke is None and workload is None:
        return []
    smoke_runs = {str(r.get("ordinal")): r for r in (smoke or {}).get("runs") or [] if isinstance(r, dict)}
    names = _names(facts)
    runs = [r for r in (workload or {}).get("runs") or [] if isinstance(r, dict)]
    order = {"cpu": float("inf")}
    devices: list[str] = []
    for key in [*smoke_runs, *(str(r.get("device")) for r in runs)]:
        if key not in devices:
            devices.append(key)
    frameworks: list[str] = []
    for r in runs:
        if str(r.get("framework")) not in frameworks:
            frameworks.append(str(r.get("framework")))
    devices.sort(key=lambda d: order.get(d, int(d) if d.isdigit() else 1e9))
    models = {names.get(d) for d in devices if d != "cpu"} - {None}
    out = []
    failed = count_failure(smoke) if smoke is not None else None
    if failed and not devices:  # CUDA could not count the GPUs: nothing ran anywhere
        return [{"gpu": "every GPU", "framework": NONE, "smoke": failed, "results": NONE, "training": NONE,
                 "matmul": NONE, "memory": NONE, "host": NONE}]
    for device in devices:
        label = "CPU" if device == "cpu" else f"cuda:{device}"
        if len(models) > 1 and names.get(device):
            label += f" ({names[device]})"
        smoke_cell = _smoke(smoke, smoke_runs.get(device)) if device != "cpu" else NONE
        here = sorted((r for r in runs if str(r.get("device")) == device),
                      key=lambda r: frameworks.index(str(r.get("framework"))))
        if not here:
            out.append({"gpu": label, "framework": NONE, "smoke": smoke_cell, "results": NONE, "training": NONE,
                        "matmul": NONE, "memory": NONE, "host": NONE})
        for run in here:
            row = {"gpu": label, "framework": str(run.get("framework")), "smoke": smoke_cell,
                   "results": _results(run, runs), "training": _training(run, runs)}
            row.update(_throughput(facts, matrix, run, names.get(device)))
            out.append(row)
    return out


def _names(facts: dict[str, Any]) -> dict[str, str]:
    """CUDA number -> GPU model, from the smoke kernel's count, the runs, else NVML through the UUID."""
    out: dict[str, str] = {}
    smoke = as_object(facts.get("smoke"))
    for d in (smoke.get("count") or {}).get("devices") or []:
        if isinstance(d, dict) and isinstance(d.get("name"), str):
            out[str(d.get("ordinal"))] = d["name"]
    for r in (facts.get("workload") or {}).get("runs") or [] if isinstance(facts.get("workload"), dict) else []:
        if isinstance(r, dict) and isinstance(r.get("name"), str):
            out.setdefault(str(r.get("device")), r["name"])
    return out


def count_failure(smoke: dict[str, Any]) -> Optional[str]:
    """"failed: cuInit returned CUDA_ERROR_STUB_LIBRARY (34)" when CUDA could not even count the GPUs."""
    count = smoke.get("count")
    if not isinstance(count, dict) or "devices" in count or not (count.get("name") or count.get("code") is not None):
        return None
    code = f" ({count['code']})" if isinstance(count.get("code"), int) else ""
    return f"failed: {count.get('step') or 'CUDA'} returned {count.get('name') or 'an error'}{code}"


def _smoke(smoke: Optional[dict[str, Any]], run: Optional[dict[str, Any]]) -> str:
    if smoke is None:
        return "not run"
    if run is None:
        return count_failure(smoke) or "not run"
    error = run.get("error")
    if isinstance(error, dict):
        return f"failed: {error.get('name') or error.get('code') or 'error'}"
    if run.get("ok") is True:
        return "correct"
    return f"WRONG: {run.get('wrong_elements')} of {run.get('elements')} elements"


def comparisons(run: dict[str, Any]) -> list[tuple[str, Any]]:
    """(what, result) of each comparison against the CPU reference a framework run made."""
    out = []
    for step in STEPS:
        result = run.get(step)
        if not isinstance(result, dict):
            continue
        subs = [c for c in result.get("checks") or [] if isinstance(c, dict)]
        if "error" in result:
            out.append((step, result))
        elif subs:
            out += [(str(c.get("what") or step), c) for c in subs]
        else:
            out.append((str(result.get("what") or step), result))
    return out


def _results(run: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    if run.get("error"):
        return "did not run"
    if run.get("skipped"):
        return "skipped"
    checks = comparisons(run)
    there = elsewhere(run, runs)
    if not checks:
        return f"on {there}" if there else NONE
    failed = [what for what, c in checks if "error" in c]
    wrong = [what for what, c in checks if "error" not in c and c.get("ok") is not True]
    if failed:
        return "failed: " + ", ".join(failed)
    if wrong:
        return "WRONG: " + ", ".join(wrong)
    return f"{len(checks)} of {len(checks)} correct" + (f", the rest on {there}" if there else "")


def elsewhere(run: dict[str, Any], runs: list[dict[str, Any]]) -> Optional[str]:
    """"cuda:0, same model" where the run left its model's checks and training step to another GPU of that
    model (``checks_on``) and that GPU's run in ``runs`` made them; None where not (a run that names a GPU
    whose run ended before them is shown with nothing of its own there)."""
    on = run.get("checks_on")
    if not isinstance(on, str) or run.get("error") or run.get("skipped"):
        return None
    named = next((r for r in runs if isinstance(r, dict) and r.get("framework") == run.get("framework")
                  and str(r.get("device")) == on), None)
    if named is None or not (comparisons(named) or isinstance(named.get("training"), dict)):
        return None
    return f"cuda:{on}, same model"


def _training(run: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    t = run.get("training")
    if not isinstance(t, dict):
        there = elsewhere(run, runs)
        return f"on {there}" if there else NONE
    if "error" in t:
        return "failed"
    first, last, steps = _num(t.get("loss_first")), _num(t.get("loss_last")), t.get("steps")
    loss = f"loss {first:.3f} -> {last:.3f}" if first is not None and last is not None else "loss unknown"
    parts = [loss]
    if isinstance(steps, int):
        parts.append(f"{steps} steps" + (f" {t['mixed_precision']}" if isinstance(t.get("mixed_precision"), str) else ""))
    speedup = _num(t.get("speedup_vs_cpu"))
    if speedup is not None:
        parts.append(f"{speedup:.1f}x CPU speed")
    if t.get("ok") is not True:
        parts.append("did NOT learn")
    return ", ".join(parts)


def reference(matrix: Matrix, name: Optional[str]) -> Optional[dict[str, Any]]:
    """This model's row of the matrix's performance table, or None (unknown model, unreadable matrix)."""
    if not name:
        return None
    from gpudoctor.compat.data import MatrixError
    from gpudoctor.compat.rules import performance_entry

    try:
        return performance_entry(matrix, name)
    except (MatrixError, OSError, ValueError, KeyError, TypeError):
        return None


def _against(got: float, unit: str, entry: Optional[dict[str, Any]], measured_key: str, peak_key: str,
             digits: int = 0) -> str:
    """``774 TFLOP/s (98% of 786 expected)``: against the figure measured on this model, else the datasheet
    peak (which real kernels do not reach), else alone."""
    text = f"{got:.{digits}f} {unit}"
    if entry is None:
        return text + " (no reference for this model)"
    ref = expected(entry, measured_key, peak_key)
    if ref and ref[1] == "measured":
        return text + f" ({got / ref[0]:.0%} of {ref[0]:g} expected)"
    if ref:
        return text + f" ({got / ref[0]:.0%} of the {ref[0]:g} datasheet peak)"
    return text


def expected(entry: Optional[dict[str, Any]], measured_key: str, peak_key: str) -> Optional[tuple[float, str]]:
    """(figure, "measured" or "datasheet"): what this model should reach, measured on it where the matrix
    has that, else its datasheet peak; None without either."""
    if entry is None:
        return None
    measured = as_object(entry.get("measured"))
    ref = _num(measured.get(measured_key))
    if ref:
        return ref, "measured"
    peak = _num(entry.get(peak_key))
    return (peak, "datasheet") if peak else None


def _throughput(facts: dict[str, Any], matrix: Matrix, run: dict[str, Any], name: Optional[str]) -> dict[str, str]:
    t = run.get("throughput")
    if not isinstance(t, dict) or not t.get("ok"):
        why = "failed" if isinstance(t, dict) else NONE
        return {"matmul": why, "memory": why, "host": why}
    entry = reference(matrix, name or run.get("name"))
    out = {}
    figure, copy = throughput.matmul(t), _num(t.get("device_copy_gbs"))
    if not figure or not figure[1]:
        out["matmul"] = NONE
    elif figure[0] == "bf16":
        out["matmul"] = "bf16 " + _against(figure[1], "TFLOP/s", entry, "bf16_matmul_tflops", "bf16_dense_tflops")
    else:  # a GPU without bf16: its float32 figure, which no table holds
        out["matmul"] = f"{figure[0]} {figure[1]:.0f} TFLOP/s"
    out["memory"] = _against(copy, "GB/s", entry, "device_copy_gbs", "memory_gbs") if copy else NONE
    h2d, d2h = _num(t.get("h2d_gbs")), _num(t.get("d2h_gbs"))
    if h2d is None:
        out["host"] = NONE
    else:
        text = f"{h2d:.0f} / {d2h:.0f} GB/s" if d2h is not None else f"{h2d:.0f} GB/s in"
        link = host_link(facts, run)
        out["host"] = text + (f" ({h2d / link[0]:.0%} of {link[0]:.0f}, {link[1]})" if link else "")
    if throughput.shared(t):
        out = {k: v + " [GPU shared: not judged]" if v != NONE else v for k, v in out.items()}
    return out


def host_link(facts: dict[str, Any], run: dict[str, Any]) -> Optional[tuple[float, str]]:
    """(GB/s one way, "PCIe Gen5 x16") of the run's GPU, found through the smoke count's UUID: pinned
    host<->device copies are judged against the PCIe link's rate (views/topology.py PCIE_GB_PER_LANE)."""
    smoke = as_object(facts.get("smoke"))
    uuid = next((d.get("uuid") for d in (smoke.get("count") or {}).get("devices") or []
                 if isinstance(d, dict) and str(d.get("ordinal")) == str(run.get("device"))), None)
    gpu = next((g for g in facts.get("gpus") or [] if isinstance(g, dict) and uuid and g.get("uuid") == uuid), None)
    if gpu is None and len(facts.get("gpus") or []) == 1 and isinstance((facts.get("gpus") or [None])[0], dict):
        gpu = facts["gpus"][0]
    pcie = as_object((gpu or {}).get("pcie"))
    gen, width = known(pcie.get("gen_max")), known(pcie.get("width_max"))
    if isinstance(gen, int) and isinstance(width, int) and PCIE_GB_PER_LANE.get(gen):
        return PCIE_GB_PER_LANE[gen] * width, f"PCIe Gen{gen} x{width}"
    return None


def between_gpus(facts: dict[str, Any], matrix: Matrix) -> list[str]:
    """What `check --deep` measured between GPUs and across a torchrun job, against ``matrix``'s references."""
    out = []
    multigpu = facts.get("multigpu")
    if isinstance(multigpu, dict) and not multigpu.get("skipped"):
        found = slowest_pair(multigpu.get("p2p")) if isinstance(multigpu.get("p2p"), dict) else None
        if found:
            slow, median, count = found
            out.append(f"P2P copies: {count} GPU pairs, median {median:.0f} GB/s, slowest cuda:{slow.get('src')} -> "
                       f"cuda:{slow.get('dst')} {slow['gbs']:.0f} GB/s")
        allreduce = as_object(multigpu.get("allreduce"))
        busbw = _num(allreduce.get("busbw_gbs"))
        if busbw is not None:
            line = f"NCCL all-reduce on {allreduce.get('world_size')} GPUs: {busbw:.0f} GB/s bus bandwidth"
            out.append(line + _allreduce_reference(facts, matrix, multigpu, allreduce.get("world_size"), busbw))
    cluster = facts.get("cluster")
    if isinstance(cluster, dict):
        nodes = as_list(cluster.get("nodes"))
        job = f"torchrun job of {cluster.get('world_size')} ranks on {len(nodes) or '?'} node(s)"
        allreduce = as_object(cluster.get("allreduce"))
        busbw = _num(allreduce.get("busbw_gbs"))
        if busbw is not None:
            over = [str(x) for x in allreduce.get("transports") or allreduce.get("networks") or []]
            out.append(f"{job}: NCCL all-reduce {busbw:.1f} GB/s bus bandwidth" + (f" via {', '.join(over)}" if over else ""))
        else:
            out.append(f"{job}: all-reduce " + ("not measured" if allreduce.get("skipped") else "failed"))
    return out


def _allreduce_reference(facts: dict[str, Any], matrix: Matrix, multigpu: dict[str, Any], world: Any, busbw: float) -> str:
    """`` (101% of 337 expected for 4 x NVIDIA H200, NV18)``: the reference acceleration.allreduce judges by."""
    try:
        model, label = allreduce_setting(facts, multigpu, world)
        row = allreduce_row(matrix, model, world, label)
    except Exception:  # noqa: BLE001 - a reference is a nicety; the check itself reports a failure
        return ""
    ref = _num((row or {}).get("busbw_gbs"))
    if not ref:
        return f" (no reference for {world} x {model or 'mixed GPUs'}, {label})"
    return f" ({busbw / ref:.0%} of {ref:g} expected for {world} x {model}, {label})"


LEGEND = ("Results vs CPU: each framework's element-wise, matmul and convolution results against float64 CPU "
          "references. Training step: a small CNN's loss must fall; its speed against the same step on the CPU (measured "
          "on cuda:0) shows launch overhead more than GPU power. Matmul and memory copy: against what this GPU model "
          "reaches (gpudoctor's measured reference, else the datasheet peak). Host <-> GPU: pinned copies to / from the "
          "GPU, against the PCIe link's rate.")
