"""`gpudoctor merge` on the reports recorded on real machines (1 x H100, 2 x H200, 4 x H200) and on
nodes derived from them one fact at a time with helpers_facts.with_fact.

The recorded machines all call themselves ``vm`` (the 4 x H200 workload recording is redacted), so
the nodes are named after their files, as in a fleet whose reports are saved as ``reports/NODE.json``.
The fleet is each machine's fullest recording: the 1 x H100 and 4 x H200 ``check`` runs with the
framework workload (workload-report.json), the 2 x H200 one without (report.json). Outliers are
judged on the NVLink counts and the workload's throughput figures; the four real H200s' figures lie
within about 6 % of each other (bf16 matmul 752 to 797 TFLOP/s) and are no outlier. A slow GPU is
derived by lowering one run's ``throughput.matmul_bf16_tflops``. Every expected output below is what
the rules in gpudoctor/fleet.py give on these figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import REAL_DIRS
from gpudoctor import fleet
from gpudoctor.cli import cli
from helpers_facts import with_fact

#: Each machine kind's first recording (2026-11-21): the inputs the golden outputs below were checked against,
#: whatever later recording of the same kind joins tests/fixtures/real.
REAL: dict[str, Path] = {}
for _dir in REAL_DIRS:
    if _dir.name.split("-")[0] in ("h100x1", "h200x2", "h200x4"):
        REAL.setdefault(_dir.name.split("-")[0], _dir / "report.json")
#: The fleet these golden outputs were checked against: workload recordings of 1 x H100 and 4 x H200 beside
#: the 2 x H200 report.json. Named explicitly, so a new recording elsewhere does not change the inputs here.
WORKLOAD: dict[str, Path] = {}
for _dir in REAL_DIRS:
    if _dir.name.split("-")[0] in ("h100x1", "h200x4") and (_dir / "workload-report.json").exists():
        WORKLOAD.setdefault(_dir.name.split("-")[0], _dir / "workload-report.json")
DEEP_METRICS = ("multigpu.p2p.pairs[*].gbs", "multigpu.allreduce.busbw_gbs")
NOT_MEASURED = ("workload.runs[*].throughput.matmul_bf16_tflops, workload.runs[*].throughput.matmul_tf32_tflops, "
                "workload.runs[*].throughput.device_copy_gbs, workload.runs[*].throughput.h2d_gbs, "
                "workload.runs[*].throughput.d2h_gbs, " + ", ".join(DEEP_METRICS))
#: The `check --deep` figures: absent from every report without a --deep run
DEEP_NOT_MEASURED_TEXT = f"  not measured in any report: {', '.join(DEEP_METRICS)}\n"
DEEP_NOT_MEASURED_MARKDOWN = f"\nNot measured in any report: {', '.join(f'`{m}`' for m in DEEP_METRICS)}.\n"
DEEP_NOT_MEASURED_JSON = [{"metric": m, "better": "higher", "unit": "GB/s", "models": []} for m in DEEP_METRICS]
AREAS = ("doctor driver gpus topology visibility container toolkit libraries python frameworks compat "
         "acceleration").split()
HEADER = ("node{pad}  verdict  doctor  driver  gpus  topology  visibility  container  toolkit  libraries  python  "
          "frameworks  compat  acceleration")


def real(name: str) -> dict[str, Any]:
    return json.loads(REAL[name].read_text())


def workload(name: str) -> dict[str, Any]:
    """The recording of a full `check` with the framework workload (and its throughput figures)."""
    return json.loads(WORKLOAD[name].read_text())


def recorded(name: str) -> dict[str, Any]:
    """The machine's fullest recording: with the workload where there is one."""
    return workload(name) if name in WORKLOAD else real(name)


def slower(report: dict[str, Any], *runs: tuple[int, float]) -> dict[str, Any]:
    """``report`` with the bf16 matmul throughput of the given workload runs (index, TFLOP/s) lowered."""
    return changed(report, *((f"workload.runs.{i}.throughput.matmul_bf16_tflops", tflops) for i, tflops in runs))


def changed(report: dict[str, Any], *changes: tuple[str, Any]) -> dict[str, Any]:
    """``report`` with its facts changed in the given facts only."""
    for path, value in changes:
        report["facts"] = with_fact(report["facts"], path, value)
    return report


def variant(name: str, *changes: tuple[str, Any]) -> dict[str, Any]:
    """A real report (report.json) whose facts differ in the given facts only."""
    return changed(real(name), *changes)


def row(name: str, verdict: str, width: int, topology: str = "pass", visibility: str = "skip",
        libraries: str = "pass", compat: str = "pass", acceleration: str = "pass") -> str:
    cells = [name.ljust(width), verdict.ljust(7), "pass  ", "pass  ", "pass", topology.ljust(8), visibility.ljust(10),
             "pass     ", "pass   ", libraries.ljust(9), "pass  ", "pass      ", compat.ljust(6), acceleration]
    return "  ".join(cells)


@pytest.fixture
def write(tmp_path):
    """Write reports as NAME.json (the three real machines' fullest recordings, plus any given) and return
    the paths as a shell glob orders them."""

    def make(extra: dict[str, dict[str, Any]] | None = None, real_ones=("h100x1", "h200x2", "h200x4")) -> list[Path]:
        reports = {n: recorded(n) for n in real_ones}
        reports.update(extra or {})
        for name, report in reports.items():
            (tmp_path / f"{name}.json").write_text(json.dumps(report), encoding="utf-8")
        return sorted(tmp_path / f"{n}.json" for n in reports)

    return make


def merge(paths, *args: str):
    return CliRunner().invoke(cli, ["merge", *map(str, paths), *args])


def test_the_three_recordings_are_real():
    assert sorted(REAL) == ["h100x1", "h200x2", "h200x4"]
    assert sorted(WORKLOAD) == ["h100x1", "h200x4"]


# The three real recordings -------------------------------------------------------------------------

THROUGHPUT = (("matmul_bf16_tflops", "TFLOP/s"), ("matmul_tf32_tflops", "TFLOP/s"), ("device_copy_gbs", "GB/s"),
              ("h2d_gbs", "GB/s"), ("d2h_gbs", "GB/s"))
REAL_THROUGHPUT_TEXT = "".join(
    f"  workload.runs[*].throughput.{figure} (higher is better)\n"
    "    NVIDIA H100 80GB HBM3: 1 sample(s); at least 3 needed to compare\n"
    "    NVIDIA H200: 4 samples; no outlier\n" for figure, _ in THROUGHPUT)
REAL_TEXT = f"""\
gpudoctor merge: 3 node(s), none with findings at or above --fail-on error

{HEADER.format(pad='  ')}
{row('h100x1', 'ok', 6, topology='skip')}
{row('h200x2', 'ok', 6)}
{row('h200x4', 'ok', 6)}

Drift: facts that differ between nodes
  GPU models: NVIDIA H200 (h200x2, h200x4); NVIDIA H100 80GB HBM3 (h100x1)
  GPU count: 1 (h100x1); 2 (h200x2); 4 (h200x4)

Outliers: worse than 0.7 x the median of peers with the same GPU model (at least 3 samples of a model)
  topology.pairs[*].nvlink_count (higher is better)
    NVIDIA H200: 7 samples; no outlier
{REAL_THROUGHPUT_TEXT}{DEEP_NOT_MEASURED_TEXT}"""

REAL_THROUGHPUT_MARKDOWN = "".join(
    f"| `workload.runs[*].throughput.{figure}` (higher is better) | NVIDIA H100 80GB HBM3 | 1 | "
    "not compared: at least 3 samples needed |\n"
    f"| `workload.runs[*].throughput.{figure}` (higher is better) | NVIDIA H200 | 4 | none |\n"
    for figure, _ in THROUGHPUT)
REAL_MARKDOWN = f"""\
## gpudoctor merge: 3 node(s), none with findings at or above --fail-on error

| Node | Verdict | {' | '.join(AREAS)} |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
| h100x1 | ok | ✅ pass | ✅ pass | ✅ pass | ➖ skipped | ➖ skipped | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass |
| h200x2 | ok | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ➖ skipped | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass |
| h200x4 | ok | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ➖ skipped | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ✅ pass |

### Drift

| Fact | Value | Nodes |
|---|---|---|
| GPU models | NVIDIA H200 | h200x2, h200x4 |
| GPU models | NVIDIA H100 80GB HBM3 | h100x1 |
| GPU count | 1 | h100x1 |
| GPU count | 2 | h200x2 |
| GPU count | 4 | h200x4 |

### Outliers

A GPU, GPU pair or node worse than 0.7 x the median of peers with the same GPU model (at least 3 samples of a model).

| Metric | GPU model | Samples | Outliers |
|---|---|---|---|
| `topology.pairs[*].nvlink_count` (higher is better) | NVIDIA H200 | 7 | none |
{REAL_THROUGHPUT_MARKDOWN}{DEEP_NOT_MEASURED_MARKDOWN}"""

REAL_DRIFT = [
    {"fact": "gpu_models", "label": "GPU models",
     "values": [{"value": "NVIDIA H200", "nodes": ["h200x2", "h200x4"]},
                {"value": "NVIDIA H100 80GB HBM3", "nodes": ["h100x1"]}]},
    {"fact": "gpu_count", "label": "GPU count",
     "values": [{"value": "1", "nodes": ["h100x1"]}, {"value": "2", "nodes": ["h200x2"]},
                {"value": "4", "nodes": ["h200x4"]}]},
]
REAL_NVLINK = {"metric": "topology.pairs[*].nvlink_count", "better": "higher", "unit": "",
               "models": [{"model": "NVIDIA H200", "samples": 7, "compared": True, "outliers": []}]}
# the four H200s' figures lie within about 6 % of each other: no outlier; one H100 is too few to compare
REAL_THROUGHPUT = [
    {"metric": f"workload.runs[*].throughput.{figure}", "better": "higher", "unit": unit,
     "models": [{"model": "NVIDIA H100 80GB HBM3", "samples": 1, "compared": False, "outliers": []},
                {"model": "NVIDIA H200", "samples": 4, "compared": True, "outliers": []}]}
    for figure, unit in THROUGHPUT]


def test_real_fleet_text(write):
    result = merge(write())
    assert result.exit_code == 0, result.output
    assert result.stdout == REAL_TEXT
    assert result.stderr == ""


def test_real_fleet_markdown(write):
    result = merge(write(), "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert result.stdout == REAL_MARKDOWN


def test_real_fleet_json(write, tmp_path):
    result = merge(write(), "--format", "json")
    assert result.exit_code == 0, result.output
    merged = json.loads(result.stdout)
    assert list(merged) == ["kind", "schema_version", "tool", "fail_on", "areas", "nodes", "drift", "outliers"]
    assert (merged["kind"], merged["schema_version"], merged["fail_on"]) == ("gpudoctor-merge", 1, "error")
    assert merged["areas"] == AREAS
    h100 = merged["nodes"][0]
    assert h100 == {
        "name": "h100x1", "file": str(tmp_path / "h100x1.json"), "hostname": "host-redacted", "created": "2026-11-21T11:32:24Z",
        "verdict": "ok", "counts": {"error": 0, "warning": 0, "info": 0},
        "areas": {a: "skip" if a in ("topology", "visibility") else "pass" for a in AREAS},
        "failing": False, "findings": []}
    assert [(n["name"], n["verdict"], n["failing"], n["areas"]["topology"]) for n in merged["nodes"]] == [
        ("h100x1", "ok", False, "skip"), ("h200x2", "ok", False, "pass"), ("h200x4", "ok", False, "pass")]
    assert merged["drift"] == REAL_DRIFT
    outliers = merged["outliers"]
    assert (outliers["well_below"], outliers["min_samples"], outliers["peers"]) == (0.7, 3, "same GPU model")
    assert outliers["metrics"] == [REAL_NVLINK, *REAL_THROUGHPUT, *DEEP_NOT_MEASURED_JSON]


def test_output_file(write, tmp_path):
    target = tmp_path / "out" / "fleet.md"
    target.parent.mkdir()
    result = merge(write(), "--format", "markdown", "--output", str(target))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == f"gpudoctor: merged report written to {target}\n"
    assert target.read_text(encoding="utf-8") == REAL_MARKDOWN


# A node with an older driver: drift names it ----------------------------------------------------

OLD_DRIVER = variant("h200x2", ("nvml.driver_version", "570.172.08"), ("nvml.cuda_driver_version", 12080))
OLD_FINDINGS = [
    *(f"  h200x2-old: error LIB004 [host] libcuda 580.159.04 at {path} does not match the running driver 570.172.08"
      for path in ("/usr/local/nvidia/lib64/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.580.159.04",
                   "/usr/local/nvidia/lib/libcuda.so.1", "/usr/local/nvidia/lib/libcuda.so.580.159.04",
                   "/usr/lib/libcuda.so.1", "/lib/libcuda.so.1")),
    "  h200x2-old: error CMP001 [host] PyTorch 2.11.0+cu130 needs a newer driver than driver 570.172.08",
    "  h200x2-old: error CMP001 [host] JAX 0.11.2 needs a newer driver than driver 570.172.08",
    "  h200x2-old: error CMP001 [host] CuPy 14.2.0 needs a newer driver than driver 570.172.08",
    "  h200x2-old: error CMP006 [host] the CUDA toolkit (13.0) needs a newer driver than this one",
]
OLD_DRIFT = """\
Drift: facts that differ between nodes
  driver: 580.159.04 (h100x1, h200x2, h200x4); 570.172.08 (h200x2-old)
  CUDA driver: 13.0 (h100x1, h200x2, h200x4); 12.8 (h200x2-old)
  GPU models: NVIDIA H200 (h200x2-old, h200x2, h200x4); NVIDIA H100 80GB HBM3 (h100x1)
  GPU count: 2 (h200x2-old, h200x2); 1 (h100x1); 4 (h200x4)
"""


def test_older_driver_text(write):
    result = merge(write({"h200x2-old": OLD_DRIVER}))
    assert result.exit_code == 1  # the node's own findings: its libcuda and frameworks need the newer driver
    text = result.stdout
    assert text.startswith("gpudoctor merge: 4 node(s), 1 with findings at or above --fail-on error: h200x2-old\n\n"
                           f"{HEADER.format(pad='      ')}\n"
                           f"{row('h100x1', 'ok', 10, topology='skip')}\n"
                           f"{row('h200x2-old', 'error', 10, libraries='fail', compat='fail')}\n"
                           f"{row('h200x2', 'ok', 10)}\n"
                           f"{row('h200x4', 'ok', 10)}\n\n"
                           "Findings (errors and warnings)\n" + "\n".join(OLD_FINDINGS) + "\n\n" + OLD_DRIFT + "\n")


def test_older_driver_markdown(write):
    text = merge(write({"h200x2-old": OLD_DRIVER}), "-f", "markdown").stdout
    assert ("| Fact | Value | Nodes |\n|---|---|---|\n"
            "| driver | 580.159.04 | h100x1, h200x2, h200x4 |\n"
            "| driver | 570.172.08 | h200x2-old |\n"
            "| CUDA driver | 13.0 | h100x1, h200x2, h200x4 |\n"
            "| CUDA driver | 12.8 | h200x2-old |\n") in text
    assert ("| h200x2-old | error | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ➖ skipped | ✅ pass | ✅ pass | ❌ fail | "
            "✅ pass | ✅ pass | ❌ fail | ✅ pass |") in text
    assert "- **h200x2-old** error `CMP001` (host) PyTorch 2.11.0+cu130 needs a newer driver than driver 570.172.08" in text


def test_older_driver_json(write):
    result = merge(write({"h200x2-old": OLD_DRIVER}), "-f", "json")
    assert result.exit_code == 1
    merged = json.loads(result.stdout)
    assert merged["drift"][:2] == [
        {"fact": "driver_version", "label": "driver",
         "values": [{"value": "580.159.04", "nodes": ["h100x1", "h200x2", "h200x4"]},
                    {"value": "570.172.08", "nodes": ["h200x2-old"]}]},
        {"fact": "cuda_driver_version", "label": "CUDA driver",
         "values": [{"value": "13.0", "nodes": ["h100x1", "h200x2", "h200x4"]},
                    {"value": "12.8", "nodes": ["h200x2-old"]}]},
    ]
    old = merged["nodes"][1]
    assert (old["name"], old["verdict"], old["failing"], old["counts"]) == (
        "h200x2-old", "error", True, {"error": 10, "warning": 0, "info": 0})
    assert old["findings"][6] == {"severity": "error", "code": "CMP001", "where": "host",
                                  "title": "PyTorch 2.11.0+cu130 needs a newer driver than driver 570.172.08"}


def test_framework_and_toolkit_drift(write):
    other = variant("h200x2", ("frameworks.torch.info.version", "2.10.0+cu128"), ("toolkit.nvcc.version", "12.8.93"),
                    ("frameworks.tensorflow", {"installed": True, "status": "import_error", "error": "ImportError: x"}))
    merged = json.loads(merge(write({"h200x2-other": other}), "-f", "json").stdout)
    drift = {d["fact"]: d["values"] for d in merged["drift"]}
    assert drift["frameworks.torch"] == [{"value": "2.11.0+cu130", "nodes": ["h100x1", "h200x2", "h200x4"]},
                                         {"value": "2.10.0+cu128", "nodes": ["h200x2-other"]}]
    assert drift["frameworks.tensorflow"] == [{"value": "not installed", "nodes": ["h100x1", "h200x2", "h200x4"]},
                                              {"value": "installed (import_error)", "nodes": ["h200x2-other"]}]
    assert drift["toolkit.nvcc"] == [{"value": "13.0.88", "nodes": ["h100x1", "h200x2", "h200x4"]},
                                     {"value": "12.8.93", "nodes": ["h200x2-other"]}]
    assert "frameworks.jax" not in drift and "driver_version" not in drift


# A GPU whose bf16 matmul reaches 300 TFLOP/s, against its peers' 752 to 797: an outlier ----------

SLOW = slower(workload("h200x4"), (1, 300.0))
SLOW_OUTLIERS = """\
  workload.runs[*].throughput.matmul_bf16_tflops (higher is better)
    NVIDIA H100 80GB HBM3: 1 sample(s); at least 3 needed to compare
    NVIDIA H200: 8 samples; 1 outlier(s)
      h200x4-slow GPU 1: 300 TFLOP/s, 0.38 x the peers' median of 783.175 TFLOP/s
  workload.runs[*].throughput.matmul_tf32_tflops (higher is better)
    NVIDIA H100 80GB HBM3: 1 sample(s); at least 3 needed to compare
    NVIDIA H200: 8 samples; no outlier
"""


def test_slow_node_text(write):
    result = merge(write({"h200x4-slow": SLOW}))
    assert result.exit_code == 0  # outliers and drift inform; only the nodes' findings set the exit status
    assert SLOW_OUTLIERS in result.stdout
    assert result.stdout.count("outlier(s)") == 1
    # the node's own throughput check (a warning, below --fail-on error) is its one finding
    assert ("Findings (errors and warnings)\n"
            "  h200x4-slow: warning RUN014 [GPU 1] PyTorch on cuda:1 (NVIDIA H200) is slower than this GPU should be: "
            "bf16 matmul 300 vs 790 expected (measured on this model; below 80%)\n\n") in result.stdout


def test_an_outlier_alone_sets_no_exit_status(write):
    """tf32 matmul throughput is judged by no check of a single node: the outlier is shown, not counted."""
    slow_tf32 = changed(workload("h200x4"), ("workload.runs.2.throughput.matmul_tf32_tflops", 150.0))
    result = merge(write({"h200x4-slow": slow_tf32}), "--fail-on", "warning")
    assert result.exit_code == 0
    assert "Findings" not in result.stdout
    assert ("  workload.runs[*].throughput.matmul_tf32_tflops (higher is better)\n"
            "    NVIDIA H100 80GB HBM3: 1 sample(s); at least 3 needed to compare\n"
            "    NVIDIA H200: 8 samples; 1 outlier(s)\n"
            "      h200x4-slow GPU 2: 150 TFLOP/s, 0.41 x the peers' median of 363.756 TFLOP/s\n") in result.stdout
    assert result.stdout.count("outlier(s)") == 1


def test_slow_node_markdown(write):
    text = merge(write({"h200x4-slow": SLOW}), "-f", "markdown").stdout
    assert ("| `workload.runs[*].throughput.matmul_bf16_tflops` (higher is better) | NVIDIA H200 | 8 | "
            "h200x4-slow GPU 1: 300 TFLOP/s, 0.38 x the peers' median of 783.175 TFLOP/s |\n") in text
    assert ("| `workload.runs[*].throughput.matmul_tf32_tflops` (higher is better) | NVIDIA H200 | 8 | none |\n"
            in text)


def test_slow_node_json(write):
    merged = json.loads(merge(write({"h200x4-slow": SLOW}), "-f", "json").stdout)
    found = [(m["metric"], g["model"], o) for m in merged["outliers"]["metrics"] for g in m["models"]
             for o in g["outliers"]]
    assert found == [("workload.runs[*].throughput.matmul_bf16_tflops", "NVIDIA H200",
                      {"node": "h200x4-slow", "subject": "GPU 1", "value": 300.0,
                       "peers_median": 783.1747958868616, "ratio": 0.38})]


def test_slow_node_among_identical_peers_is_the_only_outlier(write):
    """Three copies of the 4 x H200 workload recording, one with every GPU's bf16 matmul at 300 to 330
    TFLOP/s: that node's four GPUs are named, and no GPU of the other two."""
    slow = slower(workload("h200x4"), (0, 300.0), (1, 310.0), (2, 320.0), (3, 330.0))
    paths = write({"node-a": workload("h200x4"), "node-b": workload("h200x4"), "node-c": slow}, real_ones=())
    text = merge(paths).stdout
    assert text.endswith(
        "Outliers: worse than 0.7 x the median of peers with the same GPU model (at least 3 samples of a model)\n"
        "  topology.pairs[*].nvlink_count (higher is better)\n"
        "    NVIDIA H200: 18 samples; no outlier\n"
        "  workload.runs[*].throughput.matmul_bf16_tflops (higher is better)\n"
        "    NVIDIA H200: 12 samples; 4 outlier(s)\n"
        "      node-c GPU 0: 300 TFLOP/s, 0.39 x the peers' median of 778.676 TFLOP/s\n"
        "      node-c GPU 1: 310 TFLOP/s, 0.4 x the peers' median of 778.676 TFLOP/s\n"
        "      node-c GPU 2: 320 TFLOP/s, 0.41 x the peers' median of 778.676 TFLOP/s\n"
        "      node-c GPU 3: 330 TFLOP/s, 0.42 x the peers' median of 778.676 TFLOP/s\n"
        + "".join(f"  workload.runs[*].throughput.{figure} (higher is better)\n"
                  "    NVIDIA H200: 12 samples; no outlier\n" for figure, _ in THROUGHPUT[1:]) + DEEP_NOT_MEASURED_TEXT)
    assert "Drift: none; the driver, CUDA driver, GPU models and count, framework versions and CUDA toolkit are the " \
           "same on every node\n" in text


def test_missing_nvlinks_are_an_outlier(write):
    """A pair whose NVLinks are down (0 of 18) is worse than 0.7 x its peers' 18."""
    down = variant("h200x4", ("topology.pairs.2.nvlink_count", 0))
    text = merge(write({"h200x4-down": down})).stdout
    assert ("  topology.pairs[*].nvlink_count (higher is better)\n"
            "    NVIDIA H200: 13 samples; 1 outlier(s)\n"
            "      h200x4-down GPU 0 <-> GPU 3: 0, 0 x the peers' median of 18\n") in text


# A node with a failing area: the table shows it and the exit status is 1 ------------------------

CVD = variant("h200x2", ("host.env.CUDA_VISIBLE_DEVICES", "0,0"))


def test_failing_area_text(write):
    result = merge(write({"h200x2-cvd": CVD}))
    assert result.exit_code == 1
    assert result.stdout.startswith(
        "gpudoctor merge: 4 node(s), 1 with findings at or above --fail-on error: h200x2-cvd\n\n"
        f"{HEADER.format(pad='      ')}\n"
        f"{row('h100x1', 'ok', 10, topology='skip')}\n"
        f"{row('h200x2-cvd', 'error', 10, visibility='fail', acceleration='skip')}\n"
        f"{row('h200x2', 'ok', 10)}\n"
        f"{row('h200x4', 'ok', 10)}\n\n"
        "Findings (errors and warnings)\n"
        "  h200x2-cvd: error VIS001 [host] CUDA_VISIBLE_DEVICES='0,0' hides every GPU from CUDA programs\n\n"
        "Drift: facts that differ between nodes\n")


def test_failing_area_markdown(write):
    result = merge(write({"h200x2-cvd": CVD}), "--format", "markdown")
    assert result.exit_code == 1
    assert ("| h200x2-cvd | error | ✅ pass | ✅ pass | ✅ pass | ✅ pass | ❌ fail | ✅ pass | ✅ pass | ✅ pass | "
            "✅ pass | ✅ pass | ✅ pass | ➖ skipped |\n") in result.stdout
    assert ("### Findings (errors and warnings)\n\n"
            "- **h200x2-cvd** error `VIS001` (host) CUDA_VISIBLE_DEVICES='0,0' hides every GPU from CUDA programs\n"
            ) in result.stdout


def test_failing_area_json(write):
    result = merge(write({"h200x2-cvd": CVD}), "--format", "json")
    assert result.exit_code == 1
    node = json.loads(result.stdout)["nodes"][1]
    assert (node["name"], node["verdict"], node["failing"], node["areas"]["visibility"]) == ("h200x2-cvd", "error", True, "fail")
    assert node["findings"] == [{"severity": "error", "code": "VIS001", "where": "host",
                                 "title": "CUDA_VISIBLE_DEVICES='0,0' hides every GPU from CUDA programs"}]


@pytest.mark.parametrize("fail_on, code, headline", [
    ("error", 1, "4 node(s), 1 with findings at or above --fail-on error: h200x2-cvd"),
    ("warning", 1, "4 node(s), 1 with findings at or above --fail-on warning: h200x2-cvd"),
    ("never", 0, "4 node(s); --fail-on never: findings do not change the exit status"),
])
def test_fail_on(write, fail_on, code, headline):
    result = merge(write({"h200x2-cvd": CVD}), "--fail-on", fail_on)
    assert result.exit_code == code
    assert result.stdout.splitlines()[0] == f"gpudoctor merge: {headline}"


def test_a_warning_fails_only_at_fail_on_warning(write):
    warned = variant("h200x2", ("gpus.0.pcie.width_current", 8))  # GPU131: x8 of x16
    paths = write({"h200x2-warn": warned})
    assert merge(paths).exit_code == 0
    result = merge(paths, "--fail-on", "warning")
    assert result.exit_code == 1
    assert ("  h200x2-warn: warning GPU131 [GPU 0] GPU 0 (NVIDIA H200): PCIe link runs at x8, the GPU and slot allow x16\n"
            in result.stdout)


# A file that is not a readable report: a row of its own, the rest merged, exit 2 ----------------------

@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
@pytest.mark.parametrize("content, message", [
    (lambda r: {**r, "schema_version": 2},
     "{path} uses report schema 2, newer than this gpudoctor understands (1); upgrade gpudoctor"),
    (lambda r: json.dumps(r)[:-40], "{path} is not valid JSON"),
    (lambda r: [r], "{path} is not a gpudoctor report (expected a JSON object)"),
    (lambda r: {k: v for k, v in r.items() if k != "facts"}, "{path} is not a gpudoctor report (missing facts)"),
])
def test_bad_report_is_a_refused_row_and_exit_2(write, tmp_path, fmt, content, message):
    bad = content(real("h200x2"))
    path = tmp_path / "bad-node.json"
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad), encoding="utf-8")
    good = write()
    result = merge([*good, path], "--format", fmt)
    assert result.exit_code == 2
    assert message.format(path=path) in result.stdout
    if fmt == "json":
        nodes = json.loads(result.stdout)["nodes"]
        assert [n["verdict"] for n in nodes][-1] == "refused" and len(nodes) == len(good) + 1


def test_missing_report_is_exit_2(tmp_path):
    result = merge([tmp_path / "absent.json"])
    assert result.exit_code == 2
    assert f"cannot read {tmp_path / 'absent.json'}: No such file or directory" in result.stdout


def test_no_report_is_a_usage_error():
    result = CliRunner().invoke(cli, ["merge"])
    assert result.exit_code == 2
    assert "Missing argument 'REPORT.json|DIR|-...'" in result.stderr


# Node names ---------------------------------------------------------------------------------------

def test_redacted_hostname_falls_back_to_the_file_name(write, tmp_path):
    reports = {
        "a": variant("h200x2", ("host.hostname", "gpu-node-01")),
        "b": variant("h200x4", ("host.hostname", "gpu-node-02")),
        "node-3": variant("h100x1", ("host.hostname", "host-redacted")),
        "node-4": {**variant("h200x2", ("host.hostname", "host-redacted-1")), "redacted": True},
    }
    paths = write(reports, real_ones=())
    result = merge(paths, "--no-redact")
    assert [line.split()[0] for line in result.stdout.splitlines()[2:7]] == ["node", "gpu-node-01", "gpu-node-02",
                                                                             "node-3", "node-4"]
    merged = json.loads(merge(paths, "-f", "json", "--no-redact").stdout)
    assert [(n["name"], n["hostname"], Path(n["file"]).name) for n in merged["nodes"]] == [
        ("gpu-node-01", "gpu-node-01", "a.json"), ("gpu-node-02", "gpu-node-02", "b.json"),
        ("node-3", "host-redacted", "node-3.json"), ("node-4", "host-redacted-1", "node-4.json")]
    markdown = merge(paths, "-f", "markdown", "--no-redact").stdout
    assert "\n| node-3 | ok | " in markdown and "\n| gpu-node-01 | ok | " in markdown
    # by default merge redacts as every report does: the host names are gone, the files name the nodes
    for fmt in ("text", "markdown", "json"):
        out = merge(paths, "-f", fmt).stdout
        assert "gpu-node-0" not in out and "node-3" in out
    redacted = json.loads(merge(paths, "-f", "json").stdout)
    assert [n["name"] for n in redacted["nodes"]] == ["a", "b", "node-3", "node-4"]


def test_a_redacted_report_says_so_at_the_top():
    report = {**real("h200x2"), "redacted": True}
    report["facts"] = with_fact(report["facts"], "host.hostname", "pseudonym-7")
    assert fleet.hostname(report) is None
    assert fleet.hostname(variant("h200x2", ("host.hostname", "gpu-node-01"))) == "gpu-node-01"
    assert fleet.hostname(variant("h200x2", ("host.hostname", {"unavailable": "not_found"}))) is None


def test_colliding_names_take_more_of_the_path():
    """The recordings are all ``vm`` in files all named report.json: their folders tell them apart."""
    paths = [REAL[n] for n in ("h100x1", "h200x2", "h200x4")]
    result = merge(paths)
    assert [line.split()[0] for line in result.stdout.splitlines()[3:6]] == [
        "h100x1-20261121/report", "h200x2-20261121/report", "h200x4-20261121/report"]
    assert fleet.node_names(["a/x.json", "a/x.json", "b.json"], [None, None, "b"]) == ["a/x#1", "a/x#2", "b"]
    assert fleet.node_names(["/r/n1.json", "/r/n2.json"], ["vm", "vm"]) == ["n1", "n2"]
    assert fleet.node_names(["n1.json", "gpu7.json"], ["gpu7", None]) == ["n1", "gpu7"]


# The outlier rule and its metrics --------------------------------------------------------------------

def test_well_below_is_strictly_worse_than_0_7_of_the_median():
    higher, lower = fleet.Metric("x[*].gbs", "higher"), fleet.Metric("x[*].s", "lower")
    assert higher.worse(69.9, 100) and not higher.worse(70.0, 100) and not higher.worse(150, 100)
    assert lower.worse(1.43, 1.0) and not lower.worse(1.0 / 0.7, 1.0) and not lower.worse(0.1, 1.0)
    assert not lower.worse(5.0, 0.0)  # no ratio to a zero time


def _gpu_facts(name: str, values: list[float], **extra: Any) -> dict[str, Any]:
    gpus = [{"index": i, "name": name, "uuid": f"GPU-{name[-4:]}-{i}"} for i in range(len(values))]
    return {"gpus": gpus, "performance": {"gpus": [{"index": i, "matmul_tflops": v} for i, v in enumerate(values)]},
            **extra}


def test_a_new_figure_plugs_in_as_one_metric():
    """facts.performance.* (not recorded yet): a per-GPU figure and a per-node one, by path and direction alone."""
    metrics = [fleet.Metric("performance.gpus[*].matmul_tflops", "higher", "TFLOP/s"),
               fleet.Metric("performance.host_gbs", "higher", "GB/s")]
    facts = [_gpu_facts("NVIDIA H100 80GB HBM3", [700, 690]),
             _gpu_facts("NVIDIA H100 80GB HBM3", [705, 300]),
             _gpu_facts("NVIDIA L4", [120])]
    for f, gbs in zip(facts, (50.0, 20.0, 25.0)):
        f["performance"]["host_gbs"] = gbs
    result = fleet.outliers(["n1", "n2", "n3"], facts, metrics)
    assert result[0]["models"] == [
        {"model": "NVIDIA H100 80GB HBM3", "samples": 4, "compared": True, "outliers": [
            {"node": "n2", "subject": "GPU 1", "value": 300.0, "peers_median": 700.0, "ratio": 0.43}]},
        {"model": "NVIDIA L4", "samples": 1, "compared": False, "outliers": []}]
    # a node-level figure compares nodes with the same GPU models: two H100 nodes are too few
    assert result[1]["models"] == [
        {"model": "NVIDIA H100 80GB HBM3", "samples": 2, "compared": False, "outliers": []},
        {"model": "NVIDIA L4", "samples": 1, "compared": False, "outliers": []}]


def test_workload_throughput_is_matched_to_its_gpu_through_the_cuda_ordinal():
    """A workload run names its GPU by CUDA ordinal (``device``); the smoke probe's UUIDs give the NVML index."""
    facts = real("h200x2")["facts"]
    facts = with_fact(facts, "smoke.count.devices", list(reversed(facts["smoke"]["count"]["devices"])))
    facts["smoke"]["count"]["devices"][0]["ordinal"], facts["smoke"]["count"]["devices"][1]["ordinal"] = 0, 1
    facts["workload"] = {"runs": [
        {"framework": "torch", "device": "0", "name": "NVIDIA H200", "throughput": {"ok": True, "h2d_gbs": 50.0}},
        {"framework": "torch", "device": "1", "name": "NVIDIA H200", "throughput": {"ok": True, "h2d_gbs": 10.0}},
        {"framework": "torch", "device": "1", "error": "the workload timeout"},
    ]}
    metric = fleet.Metric("workload.runs[*].throughput.h2d_gbs", "higher", "GB/s")
    # CUDA ordinal 0 is NVML GPU 1 here (as with CUDA_VISIBLE_DEVICES=1,0)
    assert fleet.samples(facts, metric) == [("GPU 1", "NVIDIA H200", 50.0), ("GPU 0", "NVIDIA H200", 10.0)]


def test_failed_and_unavailable_measurements_are_not_samples():
    bf16 = next(m for m in fleet.METRICS if m.path == "workload.runs[*].throughput.matmul_bf16_tflops")
    assert fleet.samples(workload("h200x4")["facts"], bf16) == [
        ("GPU 0", "NVIDIA H200", 783.1747958868616), ("GPU 1", "NVIDIA H200", 751.7370564283151),
        ("GPU 2", "NVIDIA H200", 797.0525055937275), ("GPU 3", "NVIDIA H200", 778.6755381432858)]
    facts = changed(workload("h200x4"),
                    # the step failed, as the workload worker records it: no figures
                    ("workload.runs.0.throughput", {"ok": False, "error": "RuntimeError: CUDA error: out of memory"}),
                    # the step failed although figures were written
                    ("workload.runs.1.throughput.ok", False),
                    ("workload.runs.2.throughput.matmul_bf16_tflops", {"unavailable": "timeout"}))["facts"]
    assert fleet.samples(facts, bf16) == [("GPU 3", "NVIDIA H200", 778.6755381432858)]
    # a run without throughput at all (a GPU skipped as busy; JAX and CuPy runs never have one)
    facts = with_fact(facts, "workload.runs.3", {"framework": "torch", "device": "3", "name": "NVIDIA H200",
                                                 "skipped": "the GPU is busy: 120.0 of 139.8 GiB in use"})
    assert fleet.samples(facts, bf16) == []
    # a list element that failed (a smoke run with "ok": false) is no sample either, for any figure in it
    smoke = fleet.Metric("smoke.runs[*].kernel_and_copies_s", "lower", "s")
    facts = with_fact(real("h200x2")["facts"], "smoke.runs.0.ok", False)
    assert [s[0] for s in fleet.samples(real("h200x2")["facts"], smoke)] == ["GPU 0", "GPU 1"]
    assert [s[0] for s in fleet.samples(facts, smoke)] == ["GPU 1"]
    facts = with_fact(facts, "smoke.runs.1.kernel_and_copies_s", {"unavailable": "timeout"})
    assert fleet.samples(facts, smoke) == []


def test_figures_in_no_report_are_listed_as_not_measured():
    """The report.json recordings ran no framework workload: no throughput figure to compare."""
    paths = [REAL[n] for n in ("h100x1", "h200x2", "h200x4")]
    text = merge(paths).stdout
    assert text.endswith("Outliers: worse than 0.7 x the median of peers with the same GPU model "
                         "(at least 3 samples of a model)\n"
                         "  topology.pairs[*].nvlink_count (higher is better)\n"
                         "    NVIDIA H200: 7 samples; no outlier\n"
                         f"  not measured in any report: {NOT_MEASURED}\n")
    markdown = merge(paths, "-f", "markdown").stdout
    assert markdown.endswith("| `topology.pairs[*].nvlink_count` (higher is better) | NVIDIA H200 | 7 | none |\n\n"
                             "Not measured in any report: "
                             + ", ".join(f"`{m}`" for m in NOT_MEASURED.split(", ")) + ".\n")


def test_merge_does_not_change_the_reports():
    reports = [(str(REAL[n]), real(n)) for n in ("h100x1", "h200x2")]
    before = json.dumps(reports)
    fleet.merge(reports)
    assert json.dumps(reports) == before


# The --deep figures: P2P pairs and the node's all-reduce ------------------------------------------

DEEP = {p.name.split("-")[0]: p / "deep-report.json" for p in REAL_DIRS if (p / "deep-report.json").exists()}


def deep(name: str) -> dict[str, Any]:
    """A real `check --deep` recording (2 x H200 and 4 x H200, 2026-11-21)."""
    return json.loads(DEEP[name].read_text())


def test_deep_figures_are_compared_per_pair_and_per_gpu_count(write):
    """Three 4 x H200 nodes (the real --deep recording; the third with the P2P copy from cuda:0 to
    cuda:1 at 120 GB/s and its all-reduce at 150 GB/s) and the real 2 x H200 one: the slow pair and
    the slow collective are named; the 2-GPU all-reduce has no peers of its own size to compare with."""
    slow = changed(deep("h200x4"), ("multigpu.p2p.pairs.0.gbs", 120.0), ("multigpu.allreduce.busbw_gbs", 150.0))
    paths = write({"node-a": deep("h200x4"), "node-b": deep("h200x4"), "node-c": slow, "pair": deep("h200x2")},
                  real_ones=())
    text = merge(paths).stdout
    assert ("  multigpu.p2p.pairs[*].gbs (higher is better)\n"
            "    NVIDIA H200, NV18: 38 samples; 1 outlier(s)\n"
            "      node-c GPU 0 -> GPU 1: 120 GB/s, 0.31 x the peers' median of 387.") in text
    assert ("  multigpu.allreduce.busbw_gbs (higher is better)\n"
            "    4 x NVIDIA H200: 3 samples; 1 outlier(s)\n"
            "      node-c all-reduce over 4 GPUs: 150 GB/s, 0.44 x the peers' median of 340.") in text
    assert "    2 x NVIDIA H200: 1 sample(s); at least 3 needed to compare\n" in text
    assert text.count("outlier(s)") == 2
    healthy = merge(write({"node-a": deep("h200x4"), "node-b": deep("h200x4"), "node-c": deep("h200x4")},
                          real_ones=())).stdout
    assert "outlier(s)" not in healthy and "    NVIDIA H200, NV18: 36 samples; no outlier\n" in healthy


def test_p2p_pairs_are_named_by_nvml_index_through_their_uuids():
    """The multi-GPU test numbers GPUs as CUDA does; the merge names them as nvidia-smi does."""
    facts = deep("h200x4")["facts"]
    devices = facts["multigpu"]["devices"]
    # cuda:0 and cuda:1 swapped, as CUDA_VISIBLE_DEVICES=1,0,2,3 would number them
    swapped = [{**devices[1], "ordinal": 0}, {**devices[0], "ordinal": 1}, *devices[2:]]
    facts = with_fact(facts, "multigpu.devices", swapped)
    metric = next(m for m in fleet.METRICS if m.path == "multigpu.p2p.pairs[*].gbs")
    subjects = [s for s, _, _ in fleet.samples(facts, metric)]
    assert subjects[:3] == ["GPU 1 -> GPU 0", "GPU 1 -> GPU 2", "GPU 1 -> GPU 3"]


def test_merge_output_leaks_no_planted_identity_or_secret(write):
    """A node report with a host name, GPU UUIDs and serials, a username in a path and a password in a URL:
    none of them reaches merge's output in any format unless --no-redact (and the password never)."""
    planted = variant("h200x2", ("host.hostname", "dgx-prod-17.corp.example"),
                      ("host.env.LD_LIBRARY_PATH", "/home/alice/cuda/lib64:https://bob:hunter2@repo.example/lib"))
    planted["facts"]["gpus"][0]["serial"] = "1654922008473"
    uuid = planted["facts"]["gpus"][0]["uuid"]
    paths = write({"node-x": planted}, real_ones=())
    for fmt in ("text", "markdown", "json"):
        out = merge(paths, "-f", fmt).stdout
        for secret in ("dgx-prod-17", "alice", "hunter2", "1654922008473", uuid):
            assert secret not in out, (fmt, secret)
    kept = merge(paths, "-f", "json", "--no-redact").stdout
    assert "dgx-prod-17" in kept and "hunter2" not in kept


def test_p2p_pairs_are_compared_with_pairs_joined_the_same_way():
    """A PCIe pair next to NVLink pairs is no outlier of theirs; a copy that corrupted data is no figure."""
    facts = deep("h200x4")["facts"]
    facts = with_fact(facts, "topology.pairs.0.nvlink_count", 0)  # GPU 0 <-> GPU 1 over PCIe, say
    metric = next(m for m in fleet.METRICS if m.path == "multigpu.p2p.pairs[*].gbs")
    models = {model for _, model, _ in fleet.samples(facts, metric)}
    assert models == {"NVIDIA H200, NV18", "NVIDIA H200, no NVLink"}
    facts = with_fact(facts, "multigpu.p2p.pairs.0.wrong_elements", 12)
    assert len(fleet.samples(facts, metric)) == 11


def test_each_samples_peers_median_is_the_median_of_the_others():
    """fleet.median_without answers in O(1) what statistics.median of the other samples would say."""
    import random
    import statistics

    from gpudoctor.fleet import median_without

    rng = random.Random(20261123)
    for n in range(2, 40):
        values = sorted(rng.choice([1.0, 2.0, 3.5, rng.random()]) for _ in range(n))
        for k in range(n):
            assert median_without(values, k) == pytest.approx(statistics.median(values[:k] + values[k + 1:]))


def test_a_large_fleet_read_in_worker_processes_merges_exactly_as_in_one(tmp_path, monkeypatch):
    """merge reads, redacts and judges many reports in worker processes (cli/reports.py PARALLEL_FROM);
    the merged result must be the same as reading them one by one."""
    from gpudoctor.cli import reports as reports_cli

    real = Path(__file__).parent / "fixtures/real"
    sources = [real / f for f in ("h100x1-20261123/full.json", "h200x1-20261123/full.json", "h100x1-20261123/shared_gpu.json",
                                  "h200x4-20261121/deep-report-1709.json", "h200x2-20261121/workload-report-1712.json",
                                  "h100x1-20261123/bogus_alloc.json")]
    files = []
    for i, src in enumerate(sources):
        dst = tmp_path / f"node-{i}.json"
        dst.write_bytes(src.read_bytes())
        files.append(str(dst))
    serial = CliRunner().invoke(cli, ["merge", "-f", "json", *files])
    monkeypatch.setattr(reports_cli, "PARALLEL_FROM", 2)
    parallel = CliRunner().invoke(cli, ["merge", "-f", "json", *files])
    assert parallel.exit_code == serial.exit_code == 1  # bogus_alloc.json's node has an error
    assert json.loads(parallel.stdout) == json.loads(serial.stdout)


# --- files that are not readable reports, folders and standard input ---------------------------------------


def _fleet_folder(tmp_path: Path) -> list[Path]:
    real = Path(__file__).parent / "fixtures/real"
    good = [real / "h100x1-20261123/full.json", real / "h200x1-20261123/full.json"]
    files = []
    for i, src in enumerate(good):
        files.append(tmp_path / f"node-{i}.json")
        files[-1].write_bytes(src.read_bytes())
    (tmp_path / "cut.json").write_bytes(good[0].read_bytes()[:6000])  # a copy cut short
    (tmp_path / "other.json").write_text('{"kind": "something else"}')  # JSON, not a report
    return files + [tmp_path / "cut.json", tmp_path / "other.json"]


@pytest.mark.parametrize("parallel", [False, True], ids=["one process", "workers"])
def test_a_file_that_is_not_a_report_is_its_own_row_and_the_rest_is_merged(tmp_path, monkeypatch, parallel):
    from gpudoctor.cli import reports as reports_cli

    files = _fleet_folder(tmp_path)
    if parallel:
        monkeypatch.setattr(reports_cli, "PARALLEL_FROM", 2)
    result = CliRunner().invoke(cli, ["merge", "-f", "json", *map(str, files)])
    assert result.exit_code == 2  # a file was refused; the table is still there
    merged = json.loads(result.stdout)
    rows = {n["name"]: n for n in merged["nodes"]}
    assert [rows[n]["verdict"] for n in ("cut", "other")] == ["refused", "refused"]
    assert all(rows[n]["failing"] and rows[n]["findings"][0]["code"] == "INT007" for n in ("cut", "other"))
    assert "not valid JSON" in rows["cut"]["findings"][0]["title"]
    assert "not a gpudoctor report" in rows["other"]["findings"][0]["title"]
    assert sum(n["verdict"] == "ok" for n in merged["nodes"]) == 2


def test_a_folder_and_standard_input_name_the_reports(tmp_path):
    files = _fleet_folder(tmp_path)
    by_folder = CliRunner().invoke(cli, ["merge", "-f", "json", str(tmp_path)])
    by_stdin = CliRunner().invoke(cli, ["merge", "-f", "json", "-"], input="\n".join(map(str, files)) + "\n")
    assert by_folder.exit_code == by_stdin.exit_code == 2
    names = lambda r: sorted(n["name"] for n in json.loads(r.stdout)["nodes"])  # noqa: E731
    assert names(by_folder) == names(by_stdin) == ["cut", "h100x1", "h200x1", "other"] or \
        len(names(by_folder)) == len(names(by_stdin)) == 4
    text = CliRunner().invoke(cli, ["merge", str(tmp_path)]).stdout
    assert "2 file(s) refused, not readable reports: cut, other" in text.splitlines()[0]


def test_nothing_to_merge_is_one_line_and_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["merge", str(tmp_path)])
    assert result.exit_code == 2 and "no report files given" in result.output
