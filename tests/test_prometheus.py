"""`--format prometheus`: node_exporter's textfile-collector format, read back by prometheus_client's parser.

Beyond what that parser accepts, node_exporter (client_golang) refuses a whole file for a family written
twice, a series written twice, or a family whose samples have different label names; those are checked
here too, on every recorded report and on reports full of hostile text.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from gpudoctor import __version__
from gpudoctor import report as rep
from gpudoctor.cli import cli
from gpudoctor.cli.output import emit, render
from gpudoctor.compat.data import BUNDLED

REAL = Path(__file__).parent / "fixtures" / "real"
HEALTHY = REAL / "h100x1-20261127" / "full.json"
NAME = re.compile(r"^gpudoctor_[a-z0-9_]+$")


def recorded() -> list[Path]:
    out = []
    for path in sorted(REAL.rglob("*.json")):
        text = path.read_text(encoding="utf-8")
        if '"schema_version"' in text and '"facts"' in text:
            out.append(path)
    return out


def parse(text: str) -> dict[str, Any]:
    """The families by name, after the strict checks node_exporter makes beyond the parser's."""
    helps, types, seen_series = [], [], set()
    for line in text.splitlines():
        assert line.strip(), "no blank lines"
        if line.startswith("# HELP "):
            helps.append(line.split()[2])
        elif line.startswith("# TYPE "):
            types.append(line.split()[2])
    assert len(helps) == len(set(helps)) and helps == types, "each family once, HELP then TYPE"
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert len(families) == len(helps)
    for family in families.values():
        assert NAME.match(family.name), family.name
        assert family.documentation, family.name
        assert family.type in ("gauge", "counter"), family.name
        assert family.samples, family.name
        label_names = {tuple(sorted(s.labels)) for s in family.samples}
        assert len(label_names) == 1, (family.name, label_names)
        for s in family.samples:
            assert s.name.endswith("_total") == (family.type == "counter"), s.name
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in seen_series, key
            seen_series.add(key)
    return families


def values(families: dict[str, Any], name: str) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for s in families[name].samples] if name in families else []


def prometheus(report: dict[str, Any], **kwargs: Any) -> str:
    return render(rep.encodable(report), "prometheus", False, to_terminal=False, matrix=BUNDLED, **kwargs)


@pytest.mark.parametrize("path", recorded(), ids=lambda p: str(p.relative_to(REAL)))
def test_every_recorded_report_parses_and_agrees_with_its_summary(path: Path) -> None:
    report = json.loads(path.read_text(encoding="utf-8"))
    families = parse(prometheus(report))
    summary = report["summary"]
    assert values(families, "gpudoctor_verdict") and \
        {labels["verdict"] for labels, v in values(families, "gpudoctor_verdict") if v == 1} == {summary["verdict"]}
    for area, status in summary["areas"].items():
        holds = {labels["status"] for labels, v in values(families, "gpudoctor_area_status") if labels["area"] == area and v}
        assert holds == {status}, area
    by_severity = {labels["severity"]: v for labels, v in values(families, "gpudoctor_findings")}
    assert by_severity == {s: sum(1 for f in report["findings"] if f["severity"] == s) for s in ("info", "warning", "error")}
    assert sum(v for _, v in values(families, "gpudoctor_findings_by_code")) == len(report["findings"])
    assert values(families, "gpudoctor_exit_code") == [({}, float(rep.exit_code(rep.findings_of(report))))]


def test_measured_and_expected_figures_are_in_base_units() -> None:
    families = parse(prometheus(json.loads(HEALTHY.read_text(encoding="utf-8"))))
    run = json.loads(HEALTHY.read_text(encoding="utf-8"))["facts"]["workload"]["runs"][0]
    matmul = {labels["precision"]: v for labels, v in values(families, "gpudoctor_gpu_matmul_flops_per_second")}
    assert matmul["bf16"] == pytest.approx(run["throughput"]["matmul_bf16_tflops"] * 1e12)
    copy_bw = values(families, "gpudoctor_gpu_memory_copy_bytes_per_second")
    assert copy_bw[0][1] == pytest.approx(run["throughput"]["device_copy_gbs"] * 1e9)
    assert copy_bw[0][0]["gpu"] == "0" and copy_bw[0][0]["framework"] == "torch"
    # the H100 SXM row of compat_matrix/performance.json, measured on that model
    expected = values(families, "gpudoctor_gpu_matmul_expected_flops_per_second")
    assert [(labels["basis"], v) for labels, v in expected] == [("measured", 786e12)]
    assert values(families, "gpudoctor_info") == [({"version": __version__}, 1.0)]


def test_a_gpu_without_bf16_exports_its_matmul_as_float32() -> None:
    """The H100's report with its bf16 figure taken away, as a GPU older than compute capability 8.0 records
    its run: the tf32 timing there is float32's, and the label says so."""
    report = json.loads(HEALTHY.read_text(encoding="utf-8"))
    del report["facts"]["workload"]["runs"][0]["throughput"]["matmul_bf16_tflops"]
    families = parse(prometheus(report))
    matmul = {labels["precision"]: v for labels, v in values(families, "gpudoctor_gpu_matmul_flops_per_second")}
    tf32 = report["facts"]["workload"]["runs"][0]["throughput"]["matmul_tf32_tflops"]
    assert matmul == {"float32": pytest.approx(tf32 * 1e12)}


def test_run_duration_only_where_the_run_was_timed() -> None:
    report = json.loads(HEALTHY.read_text(encoding="utf-8"))
    assert "gpudoctor_run_duration_seconds" not in parse(prometheus(report))
    timed = parse(prometheus(report, duration_s=3.25))
    assert values(timed, "gpudoctor_run_duration_seconds") == [({}, 3.25)]


def _with_counters(report: dict[str, Any]) -> dict[str, Any]:
    report = copy.deepcopy(report)
    report["facts"]["gpus"][0]["counters"] = {
        "uptime_s": 5000.0, "pcie_replay": 2,
        "nvlink_errors": [{"link": 0, "replay": 0, "recovery": 24, "crc_flit": 0, "crc_data": 0},
                          {"link": 1, "replay": {"unavailable": "not_supported"}, "recovery": 1, "crc_flit": 0,
                           "crc_data": 0}],
        "violation_ns": {"power": 1500000000, "thermal": 0, "reliability": {"unavailable": "not_supported"}}}
    report["facts"]["gpus"][0]["fabric"] = {"state": "completed", "status": "success", "health_summary": "healthy"}
    return report


def test_error_counters_are_counters_and_an_unread_one_is_no_zero() -> None:
    families = parse(prometheus(_with_counters(json.loads(HEALTHY.read_text(encoding="utf-8")))))
    assert families["gpudoctor_gpu_pcie_replays"].type == "counter"
    assert values(families, "gpudoctor_gpu_pcie_replays") == [({"gpu": "0", "model": "NVIDIA H100 80GB HBM3"}, 2.0)]
    # a report that kept each link: summed over the links; a kind one link did not read has no total
    nvlink = {labels["kind"]: v for labels, v in values(families, "gpudoctor_gpu_nvlink_errors")}
    assert nvlink == {"recovery": 25.0, "crc_flit": 0.0, "crc_data": 0.0}
    held = {labels["cause"]: v for labels, v in values(families, "gpudoctor_gpu_clock_held_down_seconds")}
    assert held == {"power": 1.5, "thermal": 0.0}
    assert values(families, "gpudoctor_gpu_fabric_info")[0][0]["state"] == "completed"


HOSTILE = 'a\\b "quoted" line\nforged_metric{x="1"} 1\n# TYPE evil gauge\x1b[2J\u202e}'


def _hostile(report: dict[str, Any]) -> dict[str, Any]:
    report = _with_counters(report)
    report["tool"]["version"] = HOSTILE
    report["summary"]["areas"] = {HOSTILE: "fail", **report["summary"]["areas"]}
    report["findings"].append({"code": HOSTILE, "severity": "error", "check": HOSTILE, "title": HOSTILE,
                               "message": HOSTILE})
    report["facts"]["gpus"][0]["name"] = HOSTILE
    report["facts"]["gpus"][0]["fabric"]["state"] = HOSTILE
    report["facts"]["gpus"].append(copy.deepcopy(report["facts"]["gpus"][0]))  # the same index twice
    run = report["facts"]["workload"]["runs"][0]
    run["framework"], run["name"] = HOSTILE, HOSTILE
    report["facts"]["workload"]["runs"].append(copy.deepcopy(run))
    run["throughput"]["device_copy_gbs"] = "fast"  # a string where a number belongs: no sample
    report["facts"]["smoke"]["runs"][0]["ok"] = float("nan")
    return report


def test_hostile_text_stays_inside_its_label() -> None:
    text = prometheus(_hostile(json.loads(HEALTHY.read_text(encoding="utf-8"))))
    families = parse(text)
    assert not any(line.startswith(("forged_metric", "# TYPE evil")) for line in text.splitlines())
    assert "\x1b" not in text and "\u202e" not in text
    (labels, _), = values(families, "gpudoctor_info")
    assert labels["version"] == 'a\\b "quoted" line\\nforged_metric{x="1"} 1\\n# TYPE evil gauge\\x1b[2J\\u202e}'
    assert any("forged_metric" in labels["code"] for labels, _ in values(families, "gpudoctor_findings_by_code"))
    assert len(values(families, "gpudoctor_gpu_pcie_replays")) == 1  # the GPU named twice is one series
    assert "gpudoctor_gpu_smoke_kernel_ok" not in families


def test_cli_prometheus_by_extension_written_whole(tmp_path: Path) -> None:
    target = tmp_path / "gpudoctor.prom"
    target.write_text("old\n")
    reader = open(target)  # a collector that opened the old file while gpudoctor replaced it
    result = CliRunner().invoke(cli, ["analyze", str(HEALTHY), "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert reader.read() == "old\n"  # the old file was replaced, never rewritten under the reader
    reader.close()
    parse(target.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpudoctor.prom"]  # no temporary file left
    assert stat_mode(target) == 0o666 & ~current_umask()


def test_atomic_write_keeps_a_symlink_and_writes_a_device_in_place(tmp_path: Path) -> None:
    real = tmp_path / "real.prom"
    real.write_text("old\n")
    link = tmp_path / "link.prom"
    link.symlink_to(real)
    result = CliRunner().invoke(cli, ["analyze", str(HEALTHY), "-f", "prometheus", "-o", str(link)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and real.read_text().startswith("# HELP gpudoctor_info")
    devnull = CliRunner().invoke(cli, ["analyze", str(HEALTHY), "-f", "prometheus", "-o", os.devnull])
    assert devnull.exit_code == 0 and os.path.exists(os.devnull) and not Path(os.devnull).is_file()


def test_unwritable_folder_is_one_line_exit_3(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes any folder")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    result = CliRunner().invoke(cli, ["analyze", str(HEALTHY), "-o", str(folder / "x.prom")])
    folder.chmod(0o700)
    assert result.exit_code == 3 and "could not write the report" in result.stderr and list(folder.iterdir()) == []


def test_check_passes_its_duration(tmp_path: Path) -> None:
    report = json.loads(HEALTHY.read_text(encoding="utf-8"))
    runner = CliRunner()
    with runner.isolation() as (out, _err, *_):
        emit(report, "prometheus", None, verbose=False, duration_s=0.4, matrix=BUNDLED)
    assert values(parse(out.getvalue().decode()), "gpudoctor_run_duration_seconds") == [({}, 0.4)]


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_xid_events_by_gpu_and_an_unread_log_is_said() -> None:
    report = json.loads(HEALTHY.read_text(encoding="utf-8"))
    report["facts"]["gpus"][0]["pci"]["bus_id"] = "00000000:2B:00.0"
    line = {"xid": 79, "bus_id": "0000:2b:00", "time_s": 10.0, "pid": None, "process": None, "detail": "fell off"}
    report["facts"]["kernel_log"] = {"read": True, "source": "/dev/kmsg", "xid_count": 3,
                                     "events": [line, dict(line), {**line, "xid": 13, "bus_id": "0000:3c:00"}]}
    families = parse(prometheus(report))
    assert values(families, "gpudoctor_kernel_log_read") == [({}, 1.0)]
    xids = {(labels["gpu"], labels["bus_id"], labels["xid"]): v for labels, v in values(families, "gpudoctor_gpu_xid_events")}
    assert xids == {("0", "0000:2b:00", "79"): 2.0, ("", "0000:3c:00", "13"): 1.0}  # 3c: a GPU NVML does not list
    report["facts"]["kernel_log"] = {"read": False, "reason": "no_permission", "events": [line]}
    families = parse(prometheus(report))
    assert values(families, "gpudoctor_kernel_log_read") == [({}, 0.0)] and "gpudoctor_gpu_xid_events" not in families


def test_merge_labels_each_node(tmp_path: Path) -> None:
    nodes = [REAL / "h100x1-20261127" / "full.json", REAL / "h200x1-20261127" / "report.json"]
    target = tmp_path / "fleet.prom"
    result = CliRunner().invoke(cli, ["merge", *map(str, nodes), "-o", str(target)])
    assert result.exit_code in (0, 1), result.output
    families = parse(target.read_text())
    verdicts = {labels["node"] for labels, v in values(families, "gpudoctor_node_verdict") if v == 1}
    assert len(verdicts) == 2
    assert values(families, "gpudoctor_merge_exit_code") == [({}, float(result.exit_code))]


def test_counters_read_through_the_nvml_worker_reach_the_textfile(tmp_path: Path, monkeypatch: Any) -> None:
    """The real NVML worker over the fake nvidia-ml-py (2 x H100 on NVSwitches, tests/helpers_faults.py), judged
    and rendered: each GPU's NVLink totals, one series per kind, and its fabric are series of their own."""
    from helpers_faults import full_facts, install_fake_pynvml

    from gpudoctor import pipeline

    install_fake_pynvml(tmp_path, monkeypatch)
    families = parse(prometheus(pipeline.judge(full_facts())))
    replays = {labels["gpu"] for labels, _ in values(families, "gpudoctor_gpu_pcie_replays")}
    kinds = {(labels["gpu"], labels["kind"]) for labels, _ in values(families, "gpudoctor_gpu_nvlink_errors")}
    assert replays == {"0", "1"}
    assert kinds == {(gpu, kind) for gpu in ("0", "1") for kind in ("replay", "recovery", "crc_flit", "crc_data")}
    assert {labels["state"] for labels, _ in values(families, "gpudoctor_gpu_fabric_info")} == {"completed"}


def test_a_driver_without_nvlink_totals_gives_the_per_link_sums_in_the_full_check_only(tmp_path: Path,
                                                                                      monkeypatch: Any) -> None:
    """The 4 x H200's driver keeps no NVLink totals: the full check's per-link counts are summed into the same
    series; --quick, which leaves them unread, writes none rather than a count it did not read."""
    from helpers_faults import full_facts, install_fake_pynvml

    from gpudoctor import pipeline

    install_fake_pynvml(tmp_path, monkeypatch, nvlink="per_link_only")
    full = parse(prometheus(pipeline.judge(full_facts())))
    crc_data = {labels["gpu"]: value for labels, value in values(full, "gpudoctor_gpu_nvlink_errors")
                if labels["kind"] == "crc_data"}
    assert crc_data == {str(g): sum((n * 5 + g) % 27 + 1 for n in range(18)) for g in (0, 1)}
    quick = parse(prometheus(pipeline.judge(full_facts(quick=True))))
    assert values(quick, "gpudoctor_gpu_nvlink_errors") == []
    assert {labels["gpu"] for labels, _ in values(quick, "gpudoctor_gpu_pcie_replays")} == {"0", "1"}


def test_merge_keeps_a_hostile_node_name_inside_its_label(tmp_path: Path) -> None:
    """A node is named by its file where the host name is redacted, and a file name may hold anything but "/"."""
    node = tmp_path / 'no"de\\x\nforged_metric{x="1"} 1.json'
    node.write_text(HEALTHY.read_text(encoding="utf-8"))
    result = CliRunner().invoke(cli, ["merge", str(node), str(REAL / "h200x1-20261127" / "report.json"),
                                      "-f", "prometheus"])
    families = parse(result.stdout)
    names = {labels["node"] for labels, _ in values(families, "gpudoctor_node_verdict")}
    assert 'no"de\\x\\nforged_metric{x="1"} 1' in names, names
    assert not any(line.startswith("forged_metric") for line in result.stdout.splitlines())
