"""The proof of acceleration (render/proof.py): one row per GPU and framework, in text and Markdown, read
from reports recorded on real machines (tests/fixtures/real/README.md).

The expected cells are the recorded facts as a reader checks them by hand: on the 1 x H100
(h100x1-20261123/full.json) PyTorch's bf16 matmul ran at 743.5 TFLOP/s against the 786 TFLOP/s
compat_matrix/performance.json measured on that model (MEASURED-H100), 95 %; its 1 GiB device copy at
2959 GB/s against 3000, 99 %; pinned host-to-device copies at 51.4 GB/s against 63.0 GB/s for a PCIe
Gen5 x16 link (3.938 GB/s per lane), 82 %; the small CNN's loss fell from 0.696 to 0.157 in 30 bf16 steps,
a warm step 1.77 x as fast as on the CPU. On the 4 x H200 (deep-report-1709.json) the NCCL all-reduce
reached 339.9 GB/s bus bandwidth against 337 measured on 4 x H200 over NV18 (MEASURED-H200-NCCL).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gpudoctor import pipeline
from gpudoctor.cli import cli
from gpudoctor.render import facts_text as ft
from gpudoctor.render import proof
from gpudoctor.render.markdown import render_markdown
from gpudoctor.render.text import render_text
from gpudoctor.compat.data import BUNDLED

REAL = Path(__file__).parent / "fixtures" / "real"


def load(name: str) -> dict[str, Any]:
    return json.loads((REAL / name).read_text(encoding="utf-8"))


def judged(name: str) -> dict[str, Any]:
    """A recorded report re-judged by this version's checks, as `analyze` does."""
    saved = load(name)
    return pipeline.judge(saved["facts"], created=saved.get("created"))


def test_h100_rows_show_the_measured_figures_against_the_reference():
    rows = proof.rows(load("h100x1-20261123/full.json")["facts"], BUNDLED)
    assert [(r["gpu"], r["framework"]) for r in rows] == [("cuda:0", "torch"), ("cuda:0", "jax"), ("cuda:0", "cupy")]
    torch, jax, cupy = rows
    assert torch == {"gpu": "cuda:0", "framework": "torch", "smoke": "correct", "results": "6 of 6 correct",
                     "training": "loss 0.696 -> 0.157, 30 steps bf16, 1.8x CPU speed",
                     "matmul": "bf16 744 TFLOP/s (95% of 786 expected)", "memory": "2959 GB/s (99% of 3000 expected)",
                     "host": "51 / 53 GB/s (82% of 63, PCIe Gen5 x16)"}
    assert jax["results"] == "2 of 2 correct" and jax["training"] == "loss 0.736 -> 0.087, 30 steps bf16"
    assert jax["matmul"] == proof.NONE  # only PyTorch measures throughput
    assert cupy["results"] == "2 of 2 correct" and cupy["training"] == proof.NONE


def test_four_h200s_one_row_per_gpu_and_framework_and_the_collectives():
    facts = load("h200x4-20261121/deep-report-1709.json")["facts"]
    rows = proof.rows(facts, BUNDLED)
    assert [(r["gpu"], r["framework"]) for r in rows] == [(f"cuda:{i}", fw) for i in range(4) for fw in ("torch", "jax", "cupy")]
    assert all(r["smoke"] == "correct" for r in rows)
    torch = [r for r in rows if r["framework"] == "torch"]
    assert [r["matmul"] for r in torch] == [f"bf16 {t} TFLOP/s ({p}% of 790 expected)" for t, p in
                                            ((700, 89), (684, 87), (703, 89), (710, 90))]
    assert "CPU speed" in torch[0]["training"] and "CPU" not in torch[1]["training"]  # compared once, on cuda:0
    lines = proof.between_gpus(facts, BUNDLED)
    assert lines == ["P2P copies: 12 GPU pairs, median 387 GB/s, slowest cuda:2 -> cuda:0 387 GB/s",
                     "NCCL all-reduce on 4 GPUs: 340 GB/s bus bandwidth (101% of 337 expected for 4 x NVIDIA H200, NV18)"]


def test_torchrun_job_says_the_job_all_reduce():
    lines = proof.between_gpus(load("h200x4-20261121/cluster/job-2x2.json")["facts"], BUNDLED)
    assert lines[-1] == "torchrun job of 4 ranks on 2 node(s): NCCL all-reduce 340.9 GB/s bus bandwidth via P2P/CUMEM"
    failed = proof.between_gpus(load("h200x2-20261121/cluster/fault-no-such-interface.json")["facts"], BUNDLED)
    assert failed == ["torchrun job of 2 ranks on 2 node(s): all-reduce failed"]


def test_text_report_of_a_healthy_machine_stays_short_with_the_table_under_acceleration():
    report = judged("h100x1-20261123/full.json")
    lines = render_text(report).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("[✓] Acceleration: "))
    header = lines[at + 1].split()
    assert header[:2] == ["GPU", "Framework"] and "Matmul" in header
    table = lines[at + 2:at + 5]
    assert [line.split()[:3] for line in table] == [["cuda:0", "torch", "correct"], ["cuda:0", "jax", "correct"],
                                                    ["cuda:0", "cupy", "correct"]]
    assert "bf16 744 TFLOP/s (95% of 786 expected)" in table[0]
    # a dozen lines plus the table: title, blank, the areas, blank, the summary
    assert len(lines) - 4 <= 16, lines
    assert lines[0].endswith(": no problems found") and lines[-1] == "No problems found. 0 error(s), 0 warning(s), 0 note(s)."


def test_markdown_carries_the_same_table():
    report = judged("h200x4-20261121/deep-report-1709.json")
    markdown = render_markdown(report, pipeline.cuda_numbers(report["facts"]))
    assert "\n### Proof of acceleration\n\n| GPU | Framework | Smoke kernel | Results vs CPU | Training step | Matmul |" in markdown
    assert ("| cuda:3 | torch | correct | 6 of 6 correct | loss 0.696 -> 0.157, 30 steps bf16 | "
            "bf16 710 TFLOP/s (90% of 790 expected) | 4152 GB/s (98% of 4220 expected) | "
            "55 / 55 GB/s (87% of 63, PCIe Gen5 x16) |") in markdown
    assert "\n- NCCL all-reduce on 4 GPUs: 340 GB/s bus bandwidth (101% of 337 expected for 4 x NVIDIA H200, NV18)\n" in markdown


def test_a_slow_gpu_and_a_shared_gpu_show_as_measured():
    slow = proof.rows(load("h100x1-20261123/env-faults/slowing.json")["facts"], BUNDLED)[0]
    assert slow["matmul"] == "bf16 569 TFLOP/s (72% of 786 expected)"  # RUN014 in that report
    shared = proof.rows(load("h100x1-20261123/shared_gpu.json")["facts"], BUNDLED)[0]
    assert shared["matmul"] == "bf16 312 TFLOP/s (40% of 786 expected) [GPU shared: not judged]"  # RUN019


def test_failures_show_in_their_cells():
    stub = load("h200x2-20261121/faults/stub-libcuda-first-on-ld-library-path.json")["facts"]
    assert proof.rows(stub, BUNDLED) == [{"gpu": "every GPU", "framework": "-", "smoke": "failed: cuInit returned "
                                 "CUDA_ERROR_STUB_LIBRARY (34)", "results": "-", "training": "-", "matmul": "-",
                                 "memory": "-", "host": "-"}]
    assert ft.area_headline("acceleration", stub, BUNDLED) == "smoke kernel failed: cuInit returned CUDA_ERROR_STUB_LIBRARY (34)"
    bogus = proof.rows(load("h100x1-20261123/bogus_alloc.json")["facts"], BUNDLED)  # PyTorch refused its allocator setting
    assert bogus[0]["framework"] == "torch" and bogus[0]["results"] == "did not run"
    facts = load("h100x1-20261123/full.json")["facts"]
    wrong = copy.deepcopy(facts)
    wrong["smoke"]["runs"][0].update(ok=False, wrong_elements=7)
    wrong["workload"]["runs"][0]["matmul"]["checks"][1]["ok"] = False
    wrong["workload"]["runs"][0]["training"]["ok"] = False
    row = proof.rows(wrong, BUNDLED)[0]
    assert row["smoke"] == "WRONG: 7 of 262144 elements" and row["results"] == "WRONG: matmul bfloat16"
    assert row["training"].endswith("did NOT learn")


def test_quick_report_has_no_table():
    report = judged("h100x1-20261123/quick.json")
    assert proof.rows(report["facts"], BUNDLED) == []
    assert "Proof of acceleration" not in render_markdown(report, {0: [0]})


def test_unknown_model_and_values_of_the_wrong_type_do_not_raise():
    facts = copy.deepcopy(load("h100x1-20261123/full.json")["facts"])
    for where in (facts["smoke"]["count"]["devices"][0], facts["smoke"]["runs"][0], facts["workload"]["runs"][0]):
        where["name"] = "NVIDIA Imaginary 9000"
    assert proof.rows(facts, BUNDLED)[0]["matmul"] == "bf16 744 TFLOP/s (no reference for this model)"
    facts["workload"]["runs"][0]["training"].update(loss_first="x", steps="30", speedup_vs_cpu=None)
    facts["workload"]["runs"][1]["throughput"] = {"ok": True, "matmul_bf16_tflops": "fast", "h2d_gbs": True}
    facts["workload"]["runs"][2]["conv"] = "broken"
    rows = proof.rows(facts, BUNDLED)
    assert rows[0]["training"] == "loss unknown" and rows[1]["matmul"] == "-" and rows[1]["host"] == "-"
    assert rows[2]["results"] == "2 of 2 correct"


def test_hostile_gpu_names_stay_text():
    """Two models (so the name is shown): a name with escapes, a newline and Markdown stays in its cell."""
    report = judged("h200x4-20261121/deep-report-1709.json")
    name = "NVIDIA H200\x1b[2J\n| forged | row |\n</details><img src=x>"
    report["facts"]["smoke"]["count"]["devices"][1]["name"] = name
    text = render_text(report)
    assert "\x1b" not in text and "\n| forged" not in text
    row = next(line for line in text.splitlines() if line.startswith("    cuda:1 (NVIDIA H200\\x1b[2J\\n"))
    assert "torch" in row
    markdown = render_markdown(report, pipeline.cuda_numbers(report["facts"]))
    cell_rows = [line for line in markdown.splitlines() if line.startswith("| cuda:1 (")]
    assert len(cell_rows) == 3 and all(len(re.split(r"(?<!\\)\|", line)) == 10 for line in cell_rows)
    assert "<img" not in markdown.split("```gpudoctor-facts")[0]


def test_compatibility_says_its_result():
    report = judged("h100x1-20261123/full.json")
    line = ft.area_headline("compat", report["facts"], BUNDLED, report["findings"])
    assert line == ("torch 2.11.0+cu130 (CUDA 13.0, sm_75-sm_120), jax 0.11.2 (CUDA 13, cc 7.5+), "
                    "cupy 14.2.0 (CUDA 13, kernels compiled at run time), nvcc 13.0 run on cc 9.0; "
                    "driver 580.159.04 runs CUDA up to 13.0")
    # an older driver than the build needs (the facts docs/findings.md shows for CMP001): the problem is named
    from docexamples import EXAMPLES

    facts = EXAMPLES["CMP001"]
    findings = pipeline.judge(copy.deepcopy(facts))["findings"]
    line = ft.area_headline("compat", facts, BUNDLED, findings)
    assert line.startswith("1 problem(s) (CMP001): ") and " run on " not in line


def test_pastes_say_what_they_cannot_tell(tmp_path: Path):
    """collect_env from https://github.com/pytorch/pytorch/issues/40682 (tests/fixtures/pastes/index.json)."""
    result = CliRunner().invoke(cli, ["analyze", str(Path(__file__).parent / "fixtures" / "pastes" / "pytorch-40682.md")])
    out = result.stdout
    assert "[-] Acceleration: not checked: nothing ran on a GPU: a paste cannot show that work runs" in out
    assert "[-] Topology: not checked: a paste does not show the links between GPUs" in out
    assert "torch 1.5.0+cu101 (CUDA 10.1, from the paste)" in out
    assert "from package metadata" not in out
    # the matrix knows 1.5.0+cu101's architectures (pytorch.json, builder windows/cuda101.bat): judged, not unknown
    assert "[✓] Compatibility: torch 1.5.0+cu101 (CUDA 10.1, sm_37-sm_75, PTX compute_37)" in out
    assert "CMP008" not in out


def test_the_readme_example_is_what_gpudoctor_prints():
    """README.md "What it looks like": the healthy 1 x H100 example is this renderer's output, line for line."""
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("tests/fixtures/real/h100x1-20261127/full.json", 1)[1].split("```text\n", 1)[1]
    shown = block.split("```", 1)[0]
    assert shown == render_text(judged("h100x1-20261127/full.json"))
