"""The GPU catalogue (compat_matrix/gpus.json) against NVIDIA's own compute-capability lists.

Why: a GPU gpudoctor cannot name turns every `matrix check --gpu` into "unknown", and a match string that
catches a neighbour (RTX 4090 for an RTX 4090 D, H100 for an H100 NVL, GTX TITAN X for a TITAN X Pascal)
gives a confident wrong answer. So every product on NVIDIA's two pages must resolve, through gpudoctor's own
lookup (compat.gpu_entry), to an entry with NVIDIA's compute capability; every name the driver reports must
resolve to exactly its own entry; and the GPUs recorded on the lab machines must still resolve.

The two lists below are NVIDIA's pages as read on 2026-11-23 (names exactly as the pages print them):
  https://developer.nvidia.com/cuda-gpus         (compute capability 12.1 down to 7.5)
  https://developer.nvidia.com/cuda-legacy-gpus  (compute capability 7.2 down to 1.0)
gpus.json's "sources" map says which copy of each page they were read from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from gpudoctor.compat import data as matrix, rules as compat
from gpudoctor.compat.data import BUNDLED

RAW = json.loads((matrix.data_dir() / "gpus.json").read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = RAW["entries"]
REAL = Path(__file__).parent / "fixtures" / "real"

# https://developer.nvidia.com/cuda-gpus, read 2026-11-23
NVIDIA_CURRENT: dict[str, list[str]] = {
    "12.1": ["NVIDIA GB10 (DGX Spark)"],
    "12.0": ["NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 4500 Blackwell Server Edition",
           "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
           "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "NVIDIA RTX PRO 5000 Blackwell",
           "NVIDIA RTX PRO 4500 Blackwell", "NVIDIA RTX PRO 4000 Blackwell",
           "NVIDIA RTX PRO 4000 Blackwell SFF Edition", "NVIDIA RTX PRO 2000 Blackwell", "GeForce RTX 5090",
           "GeForce RTX 5080", "GeForce RTX 5070 Ti", "GeForce RTX 5070", "GeForce RTX 5060 Ti", "GeForce RTX 5060",
           "GeForce RTX 5050"],
    "11.0": ["Jetson T5000", "Jetson T4000"],
    "10.3": ["NVIDIA GB300", "NVIDIA B300"],
    "10.0": ["NVIDIA GB200", "NVIDIA B200"],
    "9.0": ["NVIDIA GH200", "NVIDIA H200", "NVIDIA H100"],
    "8.9": ["NVIDIA L4", "NVIDIA L40", "NVIDIA L40S", "NVIDIA RTX 6000 Ada", "NVIDIA RTX 5000 Ada",
           "NVIDIA RTX 4500 Ada", "NVIDIA RTX 4000 Ada", "NVIDIA RTX 4000 SFF Ada", "NVIDIA RTX 2000 Ada",
           "GeForce RTX 4090", "GeForce RTX 4080", "GeForce RTX 4070 Ti", "GeForce RTX 4070", "GeForce RTX 4060 Ti",
           "GeForce RTX 4060", "GeForce RTX 4050"],
    "8.7": ["Jetson AGX Orin", "Jetson Orin NX", "Jetson Orin Nano"],
    "8.6": ["NVIDIA A40", "NVIDIA A10", "NVIDIA A16", "NVIDIA A2", "NVIDIA RTX A6000", "NVIDIA RTX A5000",
           "NVIDIA RTX A4000", "NVIDIA RTX A3000", "NVIDIA RTX A2000", "GeForce RTX 3090 Ti", "GeForce RTX 3090",
           "GeForce RTX 3080 Ti", "GeForce RTX 3080", "GeForce RTX 3070 Ti", "GeForce RTX 3070",
           "GeForce RTX 3060 Ti", "GeForce RTX 3060", "GeForce RTX 3050 Ti", "GeForce RTX 3050"],
    "8.0": ["NVIDIA A100", "NVIDIA A30"],
    "7.5": ["NVIDIA T4", "QUADRO RTX 8000", "QUADRO RTX 6000", "QUADRO RTX 5000", "QUADRO RTX 4000",
           "QUADRO RTX 3000", "QUADRO  T2000", "NVIDIA T1200", "NVIDIA T1000", "NVIDIA T600", "NVIDIA T500",
           "NVIDIA T400", "GeForce GTX 1650 Ti", "NVIDIA TITAN RTX", "GeForce RTX 2080 Ti", "GeForce RTX 2080",
           "GeForce RTX 2070", "GeForce RTX 2060"],
}
# https://developer.nvidia.com/cuda-legacy-gpus, read 2026-11-23 (GeForce G210M is printed under both 1.2 and 1.1)
NVIDIA_LEGACY: dict[str, list[str]] = {
    "7.2": ["Jetson AGX Xavier", "Jetson Xavier NX"],
    "7.0": ["NVIDIA V100", "Quadro GV100", "NVIDIA TITAN V"],
    "6.2": ["Jetson TX2"],
    "6.1": ["Tesla P40", "Tesla P4", "Quadro P6000", "Quadro P5200", "Quadro P5000", "Quadro P4200", "Quadro P4000",
           "Quadro P3200", "Quadro P3000", "Quadro P2200", "Quadro P2000", "Quadro P1000", "Quadro P620",
           "Quadro P600", "Quadro P500", "Quadro P400", "P620", "P520", "NVIDIA TITAN Xp", "NVIDIA TITAN X",
           "GeForce GTX 1080 Ti", "GeForce GTX 1080", "GeForce GTX 1070 Ti", "GeForce GTX 1070", "GeForce GTX 1060",
           "GeForce GTX 1050"],
    "6.0": ["Tesla P100", "Quadro GP100"],
    "5.3": ["Jetson Nano"],
    "5.2": ["Tesla M60", "Tesla M40", "Quadro M6000 24GB", "Quadro M6000", "Quadro M5000", "Quadro M4000",
           "Quadro M2000", "Quadro M5500M", "Quadro M2200", "Quadro M620", "GeForce GTX TITAN X",
           "GeForce GTX 980 Ti", "GeForce GTX 980", "GeForce GTX 970", "GeForce GTX 960", "GeForce GTX 950",
           "GeForce GTX 980M", "GeForce GTX 970M", "GeForce GTX 965M", "GeForce 910M"],
    "5.0": ["Quadro K2200", "Quadro K1200", "Quadro K620", "Quadro M1200", "Quadro M520", "Quadro M5000M",
           "Quadro M4000M", "Quadro M3000M", "Quadro M2000M", "Quadro M1000M", "Quadro K620M", "Quadro M600M",
           "Quadro M500M", "NVIDIA NVS 810", "GeForce GTX 750 Ti", "GeForce GTX 750", "GeForce GTX 960M",
           "GeForce GTX 950M", "GeForce 940M", "GeForce 930M", "GeForce GTX 850M", "GeForce 840M", "GeForce 830M"],
    "3.7": ["Tesla K80"],
    "3.5": ["Tesla K40", "Tesla K20", "Quadro K6000", "Quadro K5200", "Quadro K610M", "Quadro K510M",
           "GeForce GTX TITAN Z", "GeForce GTX TITAN Black", "GeForce GTX TITAN", "GeForce GTX 780 Ti",
           "GeForce GTX 780", "GeForce GT 730", "GeForce GT 720", "GeForce GT 705", "GeForce GT 640 GDDR5",
           "GeForce 920M"],
    "3.2": ["Tegra K1", "Jetson TK1"],
    "3.0": ["Tesla K10", "Quadro K5000", "Quadro K4200", "Quadro K4000", "Quadro K2000", "Quadro K2000D",
           "Quadro K600", "Quadro K420", "Quadro 410", "Quadro K6000M", "Quadro K5200M", "Quadro K5100M",
           "Quadro K500M", "Quadro K4200M", "Quadro K4100M", "Quadro K3100M", "Quadro K2200M", "Quadro K2100M",
           "Quadro K1100M", "NVIDIA NVS 510", "GeForce GTX 770", "GeForce GTX 760", "GeForce GTX 690",
           "GeForce GTX 680", "GeForce GTX 670", "GeForce GTX 660 Ti", "GeForce GTX 660", "GeForce GTX 650 Ti BOOST",
           "GeForce GTX 650 Ti", "GeForce GTX 650", "GeForce GT 740", "GeForce GTX 880M", "GeForce GTX 870M",
           "GeForce GTX 780M", "GeForce GTX 770M", "GeForce GTX 765M", "GeForce GTX 760M", "GeForce GTX 680MX",
           "GeForce GTX 680M", "GeForce GTX 675MX", "GeForce GTX 670MX", "GeForce GTX 660M", "GeForce GT 755M",
           "GeForce GT 750M", "GeForce GT 650M", "GeForce GT 745M", "GeForce GT 645M", "GeForce GT 740M",
           "GeForce GT 730M", "GeForce GT 640M", "GeForce GT 640M LE", "GeForce GT 735M"],
    "2.1": ["NVIDIA NVS 315", "NVIDIA NVS 310", "NVS 5400M", "NVS 5200M", "NVS 4200M", "Quadro 2000", "Quadro 2000D",
           "Quadro 600", "Quadro 4000M", "Quadro 3000M", "Quadro 2000M", "Quadro 1000M", "GeForce GTX 560 Ti",
           "GeForce GTX 550 Ti", "GeForce GTX 460", "GeForce GTS 450", "GeForce GT 730 DDR3", "GeForce GT 640 GDDR3",
           "GeForce GT 630", "GeForce GT 620", "GeForce GT 610", "GeForce GT 520", "GeForce GT 440",
           "GeForce GT 430", "GeForce 820M", "GeForce 800M", "GeForce GTX 675M", "GeForce GTX 670M",
           "GeForce GT 635M", "GeForce GT 630M", "GeForce GT 625M", "GeForce GT 720M", "GeForce GT 620M",
           "GeForce 710M", "GeForce 705M", "GeForce 610M", "GeForce GTX 580M", "GeForce GTX 570M",
           "GeForce GTX 560M", "GeForce GT 555M", "GeForce GT 550M", "GeForce GT 540M", "GeForce GT 525M",
           "GeForce GT 520MX", "GeForce GT 520M", "GeForce GTX 485M", "GeForce GTX 470M", "GeForce GTX 460M",
           "GeForce GT 445M", "GeForce GT 435M", "GeForce GT 420M", "GeForce GT 415M", "GeForce 410M"],
    "2.0": ["Tesla C2075", "Tesla C2050", "Tesla C2070", "Tesla M2050", "Tesla M2070", "Tesla M2075", "Tesla M2090",
           "Quadro Plex 7000", "Quadro 6000", "Quadro 5000", "Quadro 4000", "Quadro 4000 for Mac", "Quadro 5010M",
           "Quadro 5000M", "GeForce GTX 590", "GeForce GTX 580", "GeForce GTX 570", "GeForce GTX 480",
           "GeForce GTX 470", "GeForce GTX 465", "GeForce GTX 480M"],
    "1.3": ["Tesla C1060", "Tesla S1070", "Tesla M1060", "Quadro FX 5800", "Quadro FX 4800",
           "Quadro FX 4800 for Mac", "Quadro FX 3800", "Quadro CX", "Quadro Plex 2200 D2", "GeForce GTX 295",
           "GeForce GTX 285", "GeForce GTX 285 for Mac", "GeForce GTX 280", "GeForce GTX 275", "GeForce GTX 260"],
    "1.2": ["Quadro 400", "Quadro FX 380 Low Profile", "NVIDIA NVS 300", "Quadro FX 1800M", "Quadro FX 880M",
           "Quadro FX 380M", "NVS 5100M", "NVS 3100M", "NVS 2100M", "GeForce GT 240", "GeForce GT 220",
           "GeForce 210", "GeForce GTS 360M", "GeForce GTS 350M", "GeForce GT 335M", "GeForce GT 330M",
           "GeForce GT 325M", "GeForce GT 240M", "GeForce G210M", "GeForce 310M", "GeForce 305M"],
    "1.1": ["Quadro FX 4700 X2", "Quadro FX 3700", "Quadro FX 1800", "Quadro FX 580", "Quadro FX 570",
           "Quadro FX 470", "Quadro FX 380", "Quadro FX 370", "Quadro FX 370 Low Profile", "Quadro NVS 450",
           "Quadro NVS 420", "Quadro NVS 295", "Quadro Plex 2100 D4", "Quadro FX 3800M", "Quadro FX 3700M",
           "Quadro FX 3600M", "Quadro FX 2800M", "Quadro FX 2700M", "Quadro FX 1700M", "Quadro FX 1600M",
           "Quadro FX 770M", "Quadro FX 570M", "Quadro FX 370M", "Quadro FX 360M", "Quadro NVS 320M",
           "Quadro NVS 160M", "Quadro NVS 150M", "Quadro NVS 140M", "Quadro NVS 135M", "Quadro NVS 130M",
           "GeForce GTS 250", "GeForce GTS 150", "GeForce GT 130", "GeForce GT 120", "GeForce G100",
           "GeForce 9800 GX2", "GeForce 9800 GTX+", "GeForce 9800 GTX", "GeForce 9600 GSO", "GeForce 9500 GT",
           "GeForce 8800 GTS", "GeForce 8800 GT", "GeForce 8800 GS", "GeForce 8600 GTS", "GeForce 8600 GT",
           "GeForce 8500 GT", "GeForce 8400 GS", "GeForce 9400 mGPU", "GeForce 9300 mGPU", "GeForce 8300 mGPU",
           "GeForce 8200 mGPU", "GeForce 8100 mGPU", "GeForce GTX 285M", "GeForce GTX 280M", "GeForce GTX 260M",
           "GeForce 9800M GTX", "GeForce 8800M GTX", "GeForce GTS 260M", "GeForce GTS 250M", "GeForce 9800M GT",
           "GeForce 9600M GT", "GeForce 8800M GTS", "GeForce 9800M GTS", "GeForce GT 230M", "GeForce 9700M GT",
           "GeForce 9650M GS", "GeForce 9600M GS", "GeForce 9500M GS", "GeForce 8700M GT", "GeForce 8600M GT",
           "GeForce 8600M GS", "GeForce 9500M G", "GeForce 9300M G", "GeForce 8400M GS", "GeForce G210M",
           "GeForce G110M", "GeForce 9300M GS", "GeForce 9200M GS", "GeForce 9100M G", "GeForce 8400M GT",
           "GeForce G105M"],
    "1.0": ["Tesla C870", "Tesla D870", "Tesla S870", "Quadro FX 5600", "Quadro FX 4600", "Quadro Plex 2100 S4",
           "GeForce GT 420", "GeForce 8800 Ultra", "GeForce 8800 GTX", "GeForce GT 340", "GeForce GT 330",
           "GeForce GT 320", "GeForce 315", "GeForce 310", "GeForce 9800 GT", "GeForce 9600 GT", "GeForce 9400GT"],
}
# How many names each page prints per compute capability (a name printed twice counts twice).
CURRENT_COUNTS = {"12.1": 1, "12.0": 16, "11.0": 2, "10.3": 2, "10.0": 2, "9.0": 3, "8.9": 16, "8.7": 3, "8.6": 19, "8.0": 2,
                  "7.5": 18}
LEGACY_COUNTS = {"7.2": 2, "7.0": 3, "6.2": 1, "6.1": 26, "6.0": 2, "5.3": 1, "5.2": 20, "5.0": 23, "3.7": 1, "3.5": 16,
                 "3.2": 2, "3.0": 52, "2.1": 53, "2.0": 21, "1.3": 15, "1.2": 21, "1.1": 81, "1.0": 17}
TWICE_LISTED = {"GeForce G210M": "1.2"}  # its chip, GT218, is the one the page lists at 1.2


def words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def page_names() -> Iterator[tuple[str, str, str]]:
    for page, lists in (("CUDA-GPUS", NVIDIA_CURRENT), ("CUDA-LEGACY-GPUS", NVIDIA_LEGACY)):
        for cc, names in lists.items():
            for name in names:
                yield page, cc, name


def clean(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip()


# --- the source lists themselves -----------------------------------------------------------------------

def test_the_transcribed_lists_hold_the_pages_counts():
    assert {cc: len(v) for cc, v in NVIDIA_CURRENT.items()} == CURRENT_COUNTS
    assert {cc: len(v) for cc, v in NVIDIA_LEGACY.items()} == LEGACY_COUNTS
    assert sum(CURRENT_COUNTS.values()) == 84 and sum(LEGACY_COUNTS.values()) == 357


def test_every_name_on_nvidias_pages_is_listed_by_exactly_one_entry_per_compute_capability():
    """listed_as records the page names an entry stands for: per compute capability they are the page's
    names, none missing and none added."""
    listed: dict[str, list[str]] = {}
    for row in ENTRIES:
        for name in row.get("listed_as", []):
            listed.setdefault(row["compute_capability"], []).append(name)
    expected: dict[str, list[str]] = {}
    for _, cc, name in page_names():
        if TWICE_LISTED.get(clean(name), cc) == cc:
            expected.setdefault(cc, []).append(clean(name))
    assert {cc: sorted(v) for cc, v in listed.items()} == {cc: sorted(v) for cc, v in expected.items()}


# --- NVIDIA's names resolve, with NVIDIA's compute capability ----------------------------------------------

@pytest.mark.parametrize("page, cc, name", list(page_names()), ids=lambda v: str(v))
def test_gpudoctors_lookup_finds_every_gpu_on_nvidias_pages(page: str, cc: str, name: str):
    want = TWICE_LISTED.get(clean(name), cc)
    for spelled in (clean(name), f"NVIDIA {clean(name).removeprefix('NVIDIA ')}"):
        row = compat.gpu_entry(BUNDLED, spelled)
        assert row is not None, spelled
        assert row["compute_capability"] == want, (spelled, row["model"])
        assert clean(name) in row.get("listed_as", []) or row["source"] == page or row.get("cc_source") == page


# Models reported missing in real tickets, as the driver names them (OGKM README 595.45.04:
# https://github.com/NVIDIA/open-gpu-kernel-modules/blob/595.45.04/README.md; pre-Turing names from
# https://github.com/NVIDIA/open-gpu-kernel-modules/blob/580.142/src/nvidia/generated/g_nv_name_released.h).
ISSUE_MODELS = [
    ("NVIDIA L20", "L20", "8.9"),
    ("NVIDIA H20", "H20", "9.0"),
    ("NVIDIA H20-3e", "H20", "9.0"),
    ("NVIDIA A800-SXM4-80GB", "A800", "8.0"),
    ("NVIDIA A800 80GB PCIe", "A800", "8.0"),
    ("NVIDIA H800", "H800", "9.0"),
    ("NVIDIA H800 PCIe", "H800", "9.0"),
    ("NVIDIA RTX PRO 1000 Blackwell Generation Laptop GPU", "RTX PRO 1000 Blackwell Generation Laptop GPU", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX PRO 6000 Blackwell Max-Q Workstation Edition", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("NVIDIA TITAN V", "TITAN V", "7.0"),
    ("Tesla M40", "Tesla M40", "5.2"),
    ("Tesla M40 24GB", "Tesla M40", "5.2"),
    ("Quadro P5000", "Quadro P5000", "6.1"),
    ("Quadro P6000", "Quadro P6000", "6.1"),
    ("NVIDIA GeForce MX550", "GeForce MX550", "7.5"),
    ("NVIDIA GeForce GTX 980", "GeForce GTX 980", "5.2"),
    ("GeForce GTX 980", "GeForce GTX 980", "5.2"),  # drivers before the "NVIDIA " prefix
    ("NVIDIA GeForce RTX 5090", "GeForce RTX 5090", "12.0"),  # the card of the "sm_120 is not compatible" tickets
]


@pytest.mark.parametrize("nvml_name, model, cc", ISSUE_MODELS)
def test_the_models_missing_in_tickets_are_found(nvml_name: str, model: str, cc: str):
    row = compat.gpu_entry(BUNDLED, nvml_name)
    assert row is not None, nvml_name
    assert (row["model"], row["compute_capability"]) == (model, cc)


# --- no entry catches another's GPU ----------------------------------------------------------------------

def test_every_match_string_resolves_to_its_own_entry():
    """Each match string is a name a source gives (the driver's NVML name without "NVIDIA ", or NVIDIA's page
    name): spelled bare and with the prefix, it must find its own entry and no earlier one."""
    for row in ENTRIES:
        for pattern in row["match"]:
            for spelled in (pattern, f"NVIDIA {pattern}"):
                hit = compat.gpu_entry(BUNDLED, spelled)
                assert hit == row, f"{spelled!r} of {row['model']} resolves to {hit and hit['model']}"


@pytest.mark.parametrize("longer, shorter", [
    ("NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", "NVIDIA GeForce RTX 4090"),
    ("NVIDIA GeForce RTX 5090 D v2", "NVIDIA GeForce RTX 5090 D"),
    ("NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 5090"),
    ("NVIDIA A100X", "NVIDIA A100-SXM4-80GB"),
    ("NVIDIA H100 NVL", "NVIDIA H100 80GB HBM3"),
    ("NVIDIA H200 NVL", "NVIDIA H200"),
    ("NVIDIA H20 NVL16", "NVIDIA H20"),
    ("NVIDIA H800 NVL", "NVIDIA H800"),
    ("NVIDIA GeForce RTX 3050 A Laptop GPU", "NVIDIA GeForce RTX 3050 Laptop GPU"),
    ("NVIDIA GeForce RTX 3050 Ti Laptop GPU", "NVIDIA GeForce RTX 3050"),
    ("Quadro T1000", "NVIDIA T1000"),
    ("NVIDIA RTX 4000 SFF Ada Generation", "NVIDIA RTX 4000 Ada Generation"),
    ("NVIDIA RTX PRO 4000 Blackwell SFF Edition", "NVIDIA RTX PRO 4000 Blackwell"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
    ("NVIDIA RTX A4000H", "NVIDIA RTX A4000"),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", "NVIDIA GeForce RTX 4070 Ti"),
    # the legacy page lists the Fermi "GeForce GT 730 DDR3" at 2.1 and the Kepler "GeForce GT 730" at 3.5
    ("GeForce GT 730 DDR3", "GeForce GT 730"),
    ("GeForce GT 640 GDDR3", "GeForce GT 640 GDDR5"),
    ("Quadro K2000D", "Quadro K2000"),
    ("GeForce GTX 650 Ti BOOST", "GeForce GTX 650 Ti"),
])
def test_neighbours_resolve_to_different_entries(longer: str, shorter: str):
    a, b = compat.gpu_entry(BUNDLED, longer), compat.gpu_entry(BUNDLED, shorter)
    assert a is not None and b is not None and a is not b, (longer, shorter)


def test_titan_x_maxwell_and_pascal_keep_their_compute_capabilities():
    # NVIDIA's legacy page: GeForce GTX TITAN X is 5.2 (Maxwell), NVIDIA TITAN X is 6.1 (Pascal); the driver
    # names the Pascal card "NVIDIA TITAN X (Pascal)" (g_nv_name_released.h 580.142, device 0x1B00).
    assert compat.gpu_entry(BUNDLED, "NVIDIA GeForce GTX TITAN X")["compute_capability"] == "5.2"
    assert compat.gpu_entry(BUNDLED, "NVIDIA TITAN X (Pascal)")["compute_capability"] == "6.1"
    assert compat.gpu_entry(BUNDLED, "NVIDIA TITAN Xp")["compute_capability"] == "6.1"


def test_the_ada_rtx_3050_laptop_is_not_taken_for_the_ampere_one():
    # The driver (OGKM README 595.45.04) names an Ada part "NVIDIA GeForce RTX 3050 A Laptop GPU"; pci.ids puts
    # its device id on an AD10x chip, which NVIDIA's page lists at 8.9. The plain 3050 Laptop GPU is GA107 (8.6).
    assert compat.gpu_entry(BUNDLED, "NVIDIA GeForce RTX 3050 A Laptop GPU")["compute_capability"] == "8.9"
    assert compat.gpu_entry(BUNDLED, "NVIDIA GeForce RTX 3050 Laptop GPU")["compute_capability"] == "8.6"


def test_names_no_source_gives_stay_unknown():
    for name in ("NVIDIA GeForce RTX 9090", "NVIDIA H300", "NVIDIA Graphics Device", "Intel(R) UHD Graphics 630", ""):
        assert compat.gpu_entry(BUNDLED, name) is None, name


# --- the lab machines' recordings still resolve ----------------------------------------------------------

def recorded_gpus() -> Iterator[tuple[str, str, str]]:
    """(file, NVML name, compute capability) of every GPU fact in tests/fixtures/real/**.json."""
    def walk(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            yield node
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)
    for path in sorted(REAL.rglob("*.json")):
        for node in walk(json.loads(path.read_text(encoding="utf-8"))):
            if isinstance(node.get("name"), str) and isinstance(node.get("compute_capability"), str):
                yield str(path.relative_to(REAL)), node["name"], node["compute_capability"]


def test_recorded_real_gpus_resolve_to_their_measured_compute_capability():
    seen = set()
    for where, name, cc in recorded_gpus():
        row = compat.gpu_entry(BUNDLED, name)
        assert row is not None and row["compute_capability"] == cc, (where, name)
        seen.add((name, row["model"]))
    assert {("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H200", "H200")} <= seen


def test_recorded_pci_device_ids_are_in_the_resolved_entry():
    for path in sorted(REAL.rglob("report.json")):
        facts = json.loads(path.read_text(encoding="utf-8"))["facts"]
        names = {g.get("name") for g in facts.get("gpus") or [] if isinstance(g.get("name"), str)}
        ids = {d.get("device_id") for d in (facts.get("driver") or {}).get("pci_devices") or []}
        for name in names:
            row = compat.gpu_entry(BUNDLED, name)
            assert ids and ids <= set(row["pci_device_ids"]), (path, name, ids)


# --- every entry is cited and dated ------------------------------------------------------------------------

def test_every_entry_cites_declared_sources_and_an_as_of_date():
    sources = RAW["sources"]
    for row in ENTRIES:
        assert row["source"] in sources, row["model"]
        for key, value in row.items():
            if key.endswith("_source"):
                assert value in sources, (row["model"], key)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row.get("as_of", "")), row["model"]
        if row["pci_device_ids"]:
            assert row.get("pci_source") in sources, row["model"]


def test_a_compute_capability_not_from_nvidias_pages_says_how_it_was_derived():
    pages = {"CUDA-GPUS", "CUDA-LEGACY-GPUS"}
    for row in ENTRIES:
        if row["source"] in pages:
            assert row.get("listed_as"), row["model"]
            continue
        assert "listed_as" not in row, row["model"]
        assert row.get("cc_source") in pages and row.get("chip_source") == "PCIIDS", row["model"]
        assert row.get("cc_note", "").startswith("derived:"), row["model"]


def test_every_gpu_is_one_the_matrix_can_judge():
    """gpu_entry reads only "entries": every GPU on NVIDIA's pages is there (the former legacy_entries, compute
    capability 3.2 and below, included), and architectures.json and cuda_targets.json describe every compute
    capability in it, so no catalogued GPU falls back to "unknown" for want of its architecture."""
    assert "legacy_entries" not in RAW
    archs = {r["compute_capability"]: r["architecture"] for r in BUNDLED.topic("architectures")["entries"]}
    targets = {r["compute_capability"] for r in BUNDLED.topic("cuda_targets")["entries"]}
    assert {cc for _, cc, _ in page_names()} <= {r["compute_capability"] for r in ENTRIES}
    for row in ENTRIES:
        assert row["compute_capability"] in targets, row["model"]
        assert archs.get(row["compute_capability"]) == row["architecture"], row["model"]


# The oldest GPUs, by NVIDIA's legacy page, and the last toolkit that targets them (cuda_targets.json: clang's
# MaxVersionForOffloadArch, Wikipedia's CUDA table, the CUDA 6.5 deprecation of sm_1x):
#   1.0 (CUDA 6.0), 1.1-1.3 (6.5), 2.x Fermi (8.0), 3.0/3.2 Kepler (10.2), 3.5/3.7 Kepler (11.8).
@pytest.mark.parametrize("name, cc, architecture, last_good, first_bad", [
    ("GeForce 8800 GTX", "1.0", "tesla", "6.0", "6.5"),
    ("Tesla C1060", "1.3", "tesla", "6.5", "7.0"),
    ("Tesla C2050", "2.0", "fermi", "8.0", "9.0"),
    ("GeForce GT 730 DDR3", "2.1", "fermi", "8.0", "9.0"),
    ("Tesla K10", "3.0", "kepler", "10.2", "11.0"),
    ("Jetson TK1", "3.2", "kepler", "10.2", "11.0"),
    ("GeForce GT 730", "3.5", "kepler", "11.8", "12.0"),
])
def test_the_oldest_gpus_resolve_and_get_a_toolkit_verdict(name: str, cc: str, architecture: str, last_good: str,
                                                         first_bad: str):
    row = compat.gpu_entry(BUNDLED, f"NVIDIA {name}") or compat.gpu_entry(BUNDLED, name)
    assert row is not None and (row["compute_capability"], row["architecture"]) == (cc, architecture), name
    assert matrix.architecture_for(BUNDLED, cc) == architecture
    assert compat.toolkit_targets(BUNDLED, last_good, cc).status == compat.OK
    verdict = compat.toolkit_targets(BUNDLED, first_bad, cc)
    assert verdict.status == compat.FAIL and last_good in verdict.reason


def test_performance_rows_name_gpus_of_the_catalogue():
    """Every row of compat_matrix/performance.json must be reachable: at least one of its match strings occurs
    in an NVML name the catalogue knows (a row whose keys all drifted from the driver's names never matches)."""
    names = [f" {words(p)} " for r in ENTRIES for p in r["match"]]
    for row in BUNDLED.topic("performance")["entries"]:
        assert any(f" {words(pattern)} " in n for pattern in row["match"] for n in names), row["model"]
