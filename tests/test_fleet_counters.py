"""`merge` and error counters (gpudoctor/fleet_counters.py): the node whose count stands out from the fleet's.

Every node is the real 2 x H200 recording with the counters a healthy 4 x H100 read (tests/test_error_counters.py
``healthy``: recovery 1-24 per link, every other NVLink counter 0, PCIe replay 0-2), one node then changed one
fact at a time. A fleet without counters is tests/test_fleet.py's, whose outputs hold byte for byte.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from conftest import REAL_DIRS
from gpudoctor import fleet
from gpudoctor.render.fleet import render_fleet_markdown, render_fleet_text
from helpers_facts import with_fact

from test_error_counters import as_totals, healthy


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    path = next(p for p in REAL_DIRS if p.name.startswith("h200x2")) / "report.json"
    report = json.loads(path.read_text())
    report["facts"] = healthy(report["facts"])
    return report


def nodes(base: dict[str, Any], count: int = 4, **changes: tuple[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``count`` healthy nodes named node-a, node-b ...; ``changes`` maps a node's letter to (fact path, value)."""
    out = []
    for i in range(count):
        letter = "abcdefgh"[i]
        report = copy.deepcopy(base)
        report["facts"]["host"]["hostname"] = f"node-{letter}"
        if letter in changes:
            path, value = changes[letter]
            report["facts"] = with_fact(report["facts"], path, value)
        out.append((f"node-{letter}.json", report))
    return out


def counter(merged: dict[str, Any], key: str) -> dict[str, Any]:
    return next(c for c in merged["counters"]["counters"] if c["counter"] == key)


def test_a_healthy_fleet_has_no_counter_outlier(base):
    merged = fleet.merge(nodes(base))
    assert merged["counters"]["far_above"] == 10 and merged["counters"]["min_nodes"] == 3
    assert [c["counter"] for c in merged["counters"]["counters"]] == [
        "nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay", "nvlink_recovery", "pcie_replay"]
    assert all(c["compared"] and c["outliers"] == [] and c["nodes"] == 4 for c in merged["counters"]["counters"])


def test_a_node_far_above_the_fleets_recovery_count(base):
    """A node's figure is its largest GPU total over the links: 225 on the healthy nodes' GPU 0."""
    merged = fleet.merge(nodes(base, c=("gpus.1.counters.nvlink_errors.5.recovery", 2400)))
    assert counter(merged, "nvlink_recovery")["outliers"] == [
        {"node": "node-c", "subject": "GPU 1", "value": 219 - 13 + 2400, "peers_median": 225.0}]
    assert not any(c["outliers"] for c in merged["counters"]["counters"] if c["counter"] != "nvlink_recovery")
    # recovery errors are not judged on one report: the node's own row is clean
    assert next(n for n in merged["nodes"] if n["name"] == "node-c")["findings"] == []


def test_reports_holding_totals_compare_alike_with_reports_holding_links(base):
    """Reports from before the probe read totals hold a list per link; merge sums it, so a fleet of both
    shapes is no outlier, and a node of either shape still stands out by its GPU total."""
    mixed = [(name, {**report, "facts": as_totals(report["facts"])} if i % 2 else report)
             for i, (name, report) in enumerate(nodes(base))]
    merged = fleet.merge(mixed)
    assert not any(c["outliers"] for c in merged["counters"]["counters"])
    name, report = mixed[1]
    mixed[1] = (name, {**report, "facts": with_fact(report["facts"], "gpus.0.counters.nvlink_errors.recovery", 5000)})
    assert counter(fleet.merge(mixed), "nvlink_recovery")["outliers"] == [
        {"node": "node-b", "subject": "GPU 0", "value": 5000, "peers_median": 225.0}]


@pytest.mark.parametrize("value,outlier", [(10, False), (11, True)])
def test_on_a_fleet_of_zeros_a_count_above_ten_stands_out(base, value, outlier):
    merged = fleet.merge(nodes(base, b=("gpus.0.counters.nvlink_errors.2.crc_data", value)))
    assert bool(counter(merged, "nvlink_crc_data")["outliers"]) is outlier


def test_two_nodes_are_not_compared(base):
    merged = fleet.merge(nodes(base, count=2, a=("gpus.0.counters.pcie_replay", 5000)))
    assert counter(merged, "pcie_replay") == {"counter": "pcie_replay", "title": "PCIe replays of one GPU", "nodes": 2,
                                              "compared": False, "outliers": []}


def test_a_node_without_counters_is_left_out_of_their_comparison(base):
    fleet_nodes = nodes(base, a=("gpus.0.counters.pcie_replay", 900))
    for _, report in fleet_nodes[1:2]:
        for gpu in report["facts"]["gpus"]:
            del gpu["counters"]
    merged = fleet.merge(fleet_nodes)
    assert counter(merged, "pcie_replay")["nodes"] == 3
    assert counter(merged, "pcie_replay")["outliers"][0]["node"] == "node-a"


def test_reports_without_counters_add_no_section(base):
    plain = copy.deepcopy(base)
    for gpu in plain["facts"]["gpus"]:
        del gpu["counters"]
    assert "counters" not in fleet.merge(nodes(plain))


def test_the_outlier_in_text_and_markdown(base):
    merged = fleet.merge(nodes(base, d=("gpus.0.counters.nvlink_errors.0.replay", 40)))
    text = render_fleet_text(merged)
    assert text.endswith(
        "Error counters: a node whose largest count is more than 10 x the other nodes' median "
        "(a median under 1 counts as 1; at least 3 nodes)\n"
        "  NVLink CRC-flit errors of one GPU: 4 nodes; no outlier\n"
        "  NVLink CRC-data errors of one GPU: 4 nodes; no outlier\n"
        "  NVLink replay errors of one GPU: 4 nodes; 1 outlier(s)\n"
        "    node-d GPU 0: 40, the other nodes' median 0\n"
        "  NVLink recovery errors of one GPU: 4 nodes; no outlier\n"
        "  PCIe replays of one GPU: 4 nodes; no outlier\n")
    markdown = render_fleet_markdown(merged)
    assert "| NVLink replay errors of one GPU | 4 | node-d GPU 0: 40, the other nodes' median 0 |" in markdown
    assert "| PCIe replays of one GPU | 4 | no outlier |" in markdown


def test_the_merge_command_shows_a_counter_outlier(base, tmp_path):
    """Through the CLI, which hands merge what it shows of each report: the counters must be part of it."""
    from click.testing import CliRunner

    from gpudoctor.cli import cli

    paths = []
    for source, report in nodes(base, b=("gpus.0.counters.nvlink_errors.1.crc_flit", 25)):
        (tmp_path / source).write_text(json.dumps(report), encoding="utf-8")
        paths.append(str(tmp_path / source))
    result = CliRunner().invoke(cli, ["merge", *paths, "--no-redact"])
    assert result.exit_code == 0, result.output
    assert "  NVLink CRC-flit errors of one GPU: 4 nodes; 1 outlier(s)\n" \
           "    node-b GPU 0: 25, the other nodes' median 0\n" in result.stdout
