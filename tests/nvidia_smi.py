"""Compare what gpudoctor reports with what NVIDIA's own tool says, field by field.

Used twice: on recorded fixtures (nvidia-smi -q -x, topo -m and topo -p2p r captured in the same
run as the report, on the real machine) by the CPU test suite, and live on a GPU machine by the
GPU-marked test. Values that move between two reads (temperature, power draw, used memory,
clock reasons of a GPU waking up) are compared with a tolerance or not at all, and say so.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

MIB = 1024**2
P2P_WORDS = {"ok": "OK", "chipset_not_supported": "CNS", "gpu_not_supported": "GNS",
             "topology_not_supported": "TNS", "not_supported": "NS", "unknown": "U", "disabled_by_regkey": "DR"}
EVENT_TAGS = {  # nvidia-smi -q -x tag suffix -> gpudoctor name
    "gpu_idle": "gpu_idle", "applications_clocks_setting": "applications_clocks_setting",
    "sw_power_cap": "sw_power_cap", "hw_slowdown": "hw_slowdown", "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown", "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown", "display_clocks_setting": "display_clock_setting",
}


class Comparison:
    def __init__(self) -> None:
        self.compared: list[str] = []
        self.mismatches: list[str] = []

    def same(self, what: str, ours: Any, theirs: Any) -> None:
        self.compared.append(what)
        if ours != theirs:
            self.mismatches.append(f"{what}: gpudoctor {ours!r} != nvidia-smi {theirs!r}")

    def close(self, what: str, ours: Any, theirs: Any, tolerance: float) -> None:
        self.compared.append(what)
        if not (isinstance(ours, (int, float)) and abs(ours - theirs) <= tolerance):
            self.mismatches.append(f"{what}: gpudoctor {ours!r} vs nvidia-smi {theirs!r} (tolerance {tolerance})")


def _int(text: str | None) -> int | None:
    match = re.match(r"\s*(-?\d+)", text or "")
    return int(match.group(1)) if match else None


def _word(text: str | None) -> str:
    return (text or "").strip().lower().replace(" ", "_")


def compare_smi_xml(facts: dict[str, Any], xml_text: str) -> Comparison:
    root = ET.fromstring(xml_text)
    c = Comparison()
    nvml = facts["nvml"]
    c.same("driver version", nvml["driver_version"], root.findtext("driver_version"))
    raw = nvml["cuda_driver_version"]
    c.same("CUDA version", f"{raw // 1000}.{(raw % 1000) // 10}", root.findtext("cuda_version"))
    c.same("GPU count", nvml["device_count"], int(root.findtext("attached_gpus") or -1))
    ours = {g["pci"]["bus_id"]: g for g in facts["gpus"]}
    for xg in root.findall("gpu"):
        bus = xg.get("id")
        g = ours.get(bus)
        c.same(f"{bus} listed", g is not None, True)
        if g is None:
            continue
        _compare_gpu(c, bus, g, xg)
    return c


def _compare_gpu(c: Comparison, bus: str, g: dict[str, Any], xg: ET.Element) -> None:
    c.same(f"{bus} name", g["name"], xg.findtext("product_name"))
    c.same(f"{bus} uuid", g["uuid"], xg.findtext("uuid"))
    c.same(f"{bus} serial", g["serial"], xg.findtext("serial"))
    c.same(f"{bus} minor number", g["minor_number"], int(xg.findtext("minor_number") or -1))
    c.same(f"{bus} vbios", g["vbios_version"], xg.findtext("vbios_version"))
    c.same(f"{bus} persistence", g["persistence_mode"], _word(xg.findtext("persistence_mode")))
    c.same(f"{bus} compute mode", g["compute_mode"], _word(xg.findtext("compute_mode")))
    device_id = (xg.findtext("pci/pci_device_id") or "")
    c.same(f"{bus} PCI device id", g["pci"]["device_id"], "0x" + device_id[:4].lower())
    c.same(f"{bus} PCI subsystem id", g["pci"]["subsystem_id"], "0x" + (xg.findtext("pci/pci_sub_system_id") or "").lower())
    link = "pci/pci_gpu_link_info/"
    c.same(f"{bus} PCIe gen max", g["pcie"]["gen_max"], _int(xg.findtext(link + "pcie_gen/max_link_gen")))
    c.same(f"{bus} PCIe gen GPU max", g["pcie"]["gen_gpu_max"], _int(xg.findtext(link + "pcie_gen/max_device_link_gen")))
    c.same(f"{bus} PCIe gen current", g["pcie"]["gen_current"], _int(xg.findtext(link + "pcie_gen/current_link_gen")))
    c.same(f"{bus} PCIe width max", g["pcie"]["width_max"], _int(xg.findtext(link + "link_widths/max_link_width")))
    c.same(f"{bus} PCIe width current", g["pcie"]["width_current"], _int(xg.findtext(link + "link_widths/current_link_width")))
    mem = g["memory"]
    c.same(f"{bus} memory total MiB", mem["total_bytes"] // MIB, _int(xg.findtext("fb_memory_usage/total")))
    # nvidia-smi rounds reserved memory up (644939776 B shows as 616 MiB), gpudoctor keeps bytes
    c.close(f"{bus} memory reserved MiB", mem["reserved_bytes"] / MIB, _int(xg.findtext("fb_memory_usage/reserved")), 1)
    c.close(f"{bus} memory used MiB", mem["used_bytes"] // MIB, _int(xg.findtext("fb_memory_usage/used")), 64)
    c.same(f"{bus} MIG current", g["mig"]["current"], _word(xg.findtext("mig_mode/current_mig")))
    c.same(f"{bus} MIG pending", g["mig"]["pending"], _word(xg.findtext("mig_mode/pending_mig")))
    c.same(f"{bus} ECC current", g["ecc"]["current"], _word(xg.findtext("ecc_mode/current_ecc")))
    c.same(f"{bus} ECC pending", g["ecc"]["pending"], _word(xg.findtext("ecc_mode/pending_ecc")))
    volatile = sum(_int(e.text) or 0 for e in xg.findall("ecc_errors/volatile/*") if "uncorrectable" in e.tag)
    c.same(f"{bus} ECC uncorrected volatile", g["ecc"]["uncorrected_volatile"], volatile)
    rows = g["remapped_rows"]
    c.same(f"{bus} remapped rows corrected", rows["corrected"], _int(xg.findtext("remapped_rows/remapped_row_corr")))
    c.same(f"{bus} remapped rows uncorrected", rows["uncorrected"], _int(xg.findtext("remapped_rows/remapped_row_unc")))
    c.same(f"{bus} remap pending", rows["pending"], xg.findtext("remapped_rows/remapped_row_pending") == "Yes")
    c.same(f"{bus} remap failure", rows["failure"], xg.findtext("remapped_rows/remapped_row_failure") == "Yes")
    c.close(f"{bus} temperature C", g["temperature"]["current_c"], _int(xg.findtext("temperature/gpu_temp")), 5)
    limit = float((xg.findtext("gpu_power_readings/current_power_limit") or "nan").split()[0])
    c.close(f"{bus} power limit W", g["power"]["limit_mw"] / 1000, limit, 0.5)
    c.same(f"{bus} processes", len(g["processes"]), len(xg.findall("processes/process_info")))
    # "GPU idle" flips whenever any tool (nvidia-smi itself) wakes the GPU; the reasons gpudoctor judges do not.
    active = sorted(EVENT_TAGS[e.tag.replace("clocks_event_reason_", "")] for e in xg.findall("clocks_event_reasons/*")
                    if e.text == "Active" and e.tag.replace("clocks_event_reason_", "") in EVENT_TAGS)
    ours = sorted(r for r in g["clock_event_reasons"]["active"] if r != "gpu_idle")
    c.same(f"{bus} clock event reasons (not idle)", ours, [r for r in active if r != "gpu_idle"])
    if isinstance(g.get("counters"), dict) or isinstance(g.get("fabric"), dict):
        _compare_counters(c, bus, g, xg)


#: nvidia-smi's words for a fabric state, as gpudoctor records it ("N/A": a GPU on no fabric).
FABRIC_STATES = {"n/a": "not_supported", "not_supported": "not_supported", "not_started": "not_started",
                 "in_progress": "in_progress", "completed": "completed"}
#: The clocks event reasons counters nvidia-smi prints in microseconds, gpudoctor keeps in ns: those that
#: stand still on an idle GPU (power capping grows whenever the GPU is busy between the two reads).
SLOWDOWN_COUNTERS = ("sw_therm_slowdown", "hw_therm_slowdown", "hw_power_brake")


def _compare_counters(c: Comparison, bus: str, g: dict[str, Any], xg: ET.Element) -> None:
    """Error counters and fabric state, in recordings that have them. The counters only grow, and
    nvidia-smi -q -x is taken just before the check: gpudoctor's count may be a little higher."""
    counters = g.get("counters") or {}
    replays = _int(xg.findtext("pci/replay_counter"))
    if isinstance(counters.get("pcie_replay"), int) and replays is not None:
        c.close(f"{bus} PCIe replays", counters["pcie_replay"], replays, 5)
    fabric = g.get("fabric")
    state = FABRIC_STATES.get(_word(xg.findtext("fabric/state")))
    if state is not None:
        ours = fabric.get("state") if isinstance(fabric, dict) and "state" in fabric else \
            "not_supported" if fabric == {"unavailable": "not_supported"} else fabric
        c.same(f"{bus} fabric state", ours, state)
    held = counters.get("violation_ns") if isinstance(counters.get("violation_ns"), dict) else {}
    names = {"sw_therm_slowdown": "sw_thermal_slowdown", "hw_therm_slowdown": "hw_thermal_slowdown",
             "hw_power_brake": "hw_power_brake_slowdown"}
    for tag in SLOWDOWN_COUNTERS:
        theirs = _int(xg.findtext(f"clocks_event_reasons_counters/clocks_event_reasons_counters_{tag}"))
        if theirs is not None and isinstance(held.get(names[tag]), int):
            c.close(f"{bus} clocks event counter {tag} us", held[names[tag]] // 1000, theirs, 1_000_000)


def parse_topo_matrix(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """``nvidia-smi topo -m``: header columns and, per GPU row, its cells (ANSI codes stripped)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    header = [h.strip() for h in lines[0].strip("\t ").split("\t") if h.strip()]
    rows = {}
    for line in lines[1:]:
        line = line.strip()
        if not line.startswith("GPU"):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in line.split("\t")]
        rows[cells[0]] = cells[1:]
    return header, rows


def compare_topology(facts: dict[str, Any], topo_m: str, topo_p2p: str) -> Comparison:
    from gpudoctor.views.topology import link_label

    c = Comparison()
    header, rows = parse_topo_matrix(topo_m)
    _, p2p_rows = parse_topo_matrix(topo_p2p)
    gpus = {f"GPU{g['index']}": g for g in facts["gpus"]}
    for pair in facts["topology"]["pairs"]:
        a, b = (f"GPU{i}" for i in pair["gpus"])
        c.same(f"{a}-{b} link", link_label(pair), rows[a][header.index(b)])
        c.same(f"{a}-{b} P2P read", P2P_WORDS.get(pair["p2p"]["read"]), p2p_rows[a][header.index(b)])
    for name, g in gpus.items():
        c.same(f"{name} CPU affinity", g.get("cpu_affinity"), rows[name][header.index("CPU Affinity")])
        c.same(f"{name} NUMA affinity", g.get("numa_affinity"), rows[name][header.index("NUMA Affinity")])
    return c
