"""The bundled compatibility matrix (compat_matrix/*.json): shape, citations, parseable versions, GPU
name matching, and spot checks of key facts against the research notes' sources."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpudoctor.compat import data as matrix
from gpudoctor.compat.data import BUNDLED

FILES = sorted(matrix.data_dir().glob("*.json"))
TOPICS = [p.stem for p in FILES]
CC = re.compile(r"^\d{1,2}\.\d$")
ARCH_FLAG = re.compile(r"^(sm|compute)_\d{2,3}[af]?$")
PCI_ID = re.compile(r"^0x[0-9a-f]{4}$")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
TODAY = "2026-12-31"  # the latest "as of" date a file may carry (the matrix is dated when its data was read)


def topic(name: str) -> dict[str, Any]:
    return BUNDLED.topic(name)


def walk(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every (path, key, value) pair below node."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key, value
            yield from walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, f"{path}[{i}]")


# --- every file -----------------------------------------------------------------------------------

def test_expected_topics_are_bundled():
    for name in ("architectures", "cuda_toolkits", "cuda_targets", "gpus", "pytorch", "tensorflow", "cudnn", "jax", "cupy",
                 "known_bad"):
        assert name in TOPICS


@pytest.mark.parametrize("path", FILES, ids=TOPICS)
def test_file_loads_validates_and_cites(path: Path):
    data = BUNDLED.topic(path.stem)  # reading a topic runs matrix.validate
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["topic"] == path.stem
    assert ISO_DATE.match(raw["as_of"]) and "2026-11-21" <= raw["as_of"] <= TODAY, raw["as_of"]
    assert raw["entries"], "a matrix file with no entries"
    sources = raw["sources"]
    assert sources and all(isinstance(v, str) and v.strip() for v in sources.values())
    for entry in data["entries"]:
        assert entry["source"] in sources
    for where, key, value in walk(raw):
        if key == "source" or key.endswith("_source"):
            assert value in sources, f"{path.name}{where}.{key} cites undeclared {value!r}"


@pytest.mark.parametrize("path", FILES, ids=TOPICS)
def test_versions_and_compute_capabilities_parse(path: Path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    for where, key, value in walk(raw["entries"]):
        if value is None:
            continue
        if key in ("version", "cuda", "cudnn", "first_cuda", "last_cuda", "first_version", "cuda_build", "min_cuda",
                   "built_with_cuda", "min_cudnn", "tested_build", "nccl", "cuda_min", "cuda_max", "cupy", "dropped_in") and isinstance(value, str):
            if key in ("cudnn",) and value[:1] in "<>=":
                SpecifierSet(value)
            else:
                Version(value)
        if key in ("min_driver_linux", "min_driver_windows") and isinstance(value, str):
            Version(value)
        if key in ("min_driver_linux", "min_driver_windows") and isinstance(value, dict):
            for v in value.values():
                Version(v)
        if key in ("compute_capability", "min_compute_capability", "max_compute_capability", "renamed_to", "renamed_from"):
            assert CC.match(value), f"{path.name}{where}.{key} = {value!r}"
        if key == "python":
            SpecifierSet(value)
        if key in ("arch_list", "ptx", "windows_arch_list", "windows_ptx"):
            assert all(ARCH_FLAG.match(a) for a in value), f"{path.name}{where}.{key} = {value!r}"
        if key == "pci_device_ids":
            assert all(PCI_ID.match(a) for a in value), f"{path.name}{where}.{key} = {value!r}"


def citation_problems(raw: dict[str, Any], stem: str) -> list[str]:
    """What in a matrix file lacks its source or its "as of" date: an entry (and every item of
    a section) names one of the file's sources; its date is its own "as_of" or, failing that, the file's.
    Per-field data the rules read carries its own citation: a PyTorch variant's or a TensorFlow release's
    arch_list/ptx an arch_source (or the entry's source covers it, as for TensorFlow's tested-build table),
    a GPU's pci_device_ids a pci_source when not empty, a JAX extra's min_cudnn a min_cudnn_source, each
    jaxlib wheel tag its source, a CuPy release line's python and cudnn_supported a python_source and a
    cudnn_source."""
    sources = raw.get("sources") or {}
    problems = []
    for i, entry in enumerate(raw["entries"]):
        where = f"{stem} entry {i}"
        if not isinstance(entry.get("source"), str) or entry["source"] not in sources:
            problems.append(f"{where}: no declared source")
        as_of = entry.get("as_of", raw.get("as_of"))
        if not (isinstance(as_of, str) and ISO_DATE.match(as_of) and as_of <= TODAY):
            problems.append(f"{where}: no valid as_of date ({as_of!r})")
        for variant in entry.get("variants") or []:
            if ("arch_list" in variant or "ptx" in variant) and not (variant.get("arch_source") or variant.get("ptx_source")):
                problems.append(f"{where} variant {variant.get('name')}: arch_list/ptx without arch_source")
            if ("windows_arch_list" in variant or "windows_ptx" in variant) and not variant.get("windows_arch_source"):
                problems.append(f"{where} variant {variant.get('name')}: windows_arch_list/ptx without windows_arch_source")
        if stem == "tensorflow" and ("arch_list" in entry or "ptx" in entry) and not entry.get("arch_source"):
            problems.append(f"{where}: arch_list/ptx without arch_source")
        if stem == "gpus" and entry.get("pci_device_ids") and not entry.get("pci_source"):
            problems.append(f"{where}: pci_device_ids without pci_source")
        for extra in entry.get("extras") or [] if stem == "jax" else []:
            if "min_cudnn" in extra and extra.get("min_cudnn_source") not in sources:
                problems.append(f"{where} extra {extra.get('name')}: min_cudnn without min_cudnn_source")
        for tag, row in (entry.get("jaxlib_tags") or {}).items() if stem == "jax" else []:
            if not isinstance(row, dict) or row.get("source") not in sources:
                problems.append(f"{where} jaxlib tag {tag}: no declared source")
        for line in entry.get("cupy_releases") or [] if stem == "cupy" else []:
            for key in ("python", "cudnn_supported"):
                cite = "cudnn_source" if key == "cudnn_supported" else "python_source"
                if key in line and line.get(cite) not in sources:
                    problems.append(f"{where} CuPy {line.get('cupy')}: {key} without {cite}")
    return problems


@pytest.mark.parametrize("path", FILES, ids=TOPICS)
def test_every_data_entry_cites_a_source_and_an_as_of_date(path: Path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    problems = citation_problems(raw, path.stem)
    assert problems == [], "\n".join(problems[:20])


@pytest.mark.parametrize("stem,mutate,expected", [
    ("jax", lambda raw: raw["entries"][0].pop("source"), "entry 0: no declared source"),
    ("jax", lambda raw: raw.pop("as_of"), "no valid as_of date (None)"),  # then every entry lacks one
    ("jax", lambda raw: raw["entries"][0].__setitem__("as_of", "someday"), "entry 0: no valid as_of date ('someday')"),
    ("jax", lambda raw: next(iter(raw["entries"][0]["jaxlib_tags"].values())).pop("source"), "jaxlib tag cuda90: no declared source"),
    ("jax", lambda raw: raw["entries"][0]["extras"][0].pop("min_cudnn_source"), "extra jax[cuda10]: min_cudnn without"),
    ("pytorch", lambda raw: raw["entries"][0].pop("source"), "entry 0: no declared source"),
    ("pytorch", lambda raw: raw["entries"][0].__setitem__("as_of", "last year"), "entry 0: no valid as_of date ('last year')"),
    ("pytorch", lambda raw: raw["entries"][0]["variants"][0].pop("arch_source"), "variant cu80: arch_list/ptx without"),
    ("pytorch", lambda raw: raw["entries"][0]["variants"][0].pop("windows_arch_source"), "variant cu80: windows_arch_list"),
    ("tensorflow", lambda raw: raw["entries"][0].pop("source"), "entry 0: no declared source"),
    ("tensorflow", lambda raw: raw["entries"][0].__setitem__("as_of", "2027-01-01"), "entry 0: no valid as_of date"),
    ("tensorflow", lambda raw: raw["entries"][0].pop("arch_source"), "entry 0: arch_list/ptx without arch_source"),
    ("cupy", lambda raw: raw["entries"][-1].pop("source"), "no declared source"),
    ("cupy", lambda raw: raw["entries"][-1].__setitem__("as_of", "2027-01-01"), "no valid as_of date ('2027-01-01')"),
    ("cupy", lambda raw: raw["entries"][-1]["cupy_releases"][0].pop("python_source"), "CuPy 7.0.0: python without python_source"),
    ("cupy", lambda raw: raw["entries"][-1]["cupy_releases"][0].pop("cudnn_source"), "CuPy 7.0.0: cudnn_supported without"),
])
def test_an_entry_without_its_source_or_as_of_date_fails(stem: str, mutate, expected: str):
    """The check above is not vacuous: the bundled PyTorch, TensorFlow, JAX and CuPy files, each stripped of
    one citation or given a date that is not a past ISO date, fail it, naming what is missing."""
    raw = json.loads((matrix.data_dir() / f"{stem}.json").read_text(encoding="utf-8"))
    assert citation_problems(raw, stem) == []
    mutate(raw)
    problems = citation_problems(raw, stem)
    assert problems and all(expected in p for p in problems), problems


def test_old_releases_carry_their_own_as_of_date():
    """Releases added after a file was first dated (PyTorch 1.0-1.11, TensorFlow 1.13-2.3) say when their
    facts were read."""
    for stem, first, last in (("pytorch", "1.0", "1.11"), ("tensorflow", "1.13", "2.3")):
        rows = {r["version"]: r for r in topic(stem)["entries"]}
        dated = [v for v in rows if Version(first) <= Version(v) <= Version(last)]
        assert dated and all(ISO_DATE.match(rows[v]["as_of"]) and rows[v]["as_of"] <= TODAY for v in dated), stem


def test_known_bad_entries_are_complete_and_sourced():
    """compat_matrix/known_bad.json: each entry has a condition, a severity, a message, a fix, a source whose
    text carries a URL, and its own as_of date; every see_also names a declared source."""
    raw = json.loads((matrix.data_dir() / "known_bad.json").read_text(encoding="utf-8"))
    ids = set()
    for entry in raw["entries"]:
        assert entry["id"] not in ids
        ids.add(entry["id"])
        assert set(entry["when"]) <= {"framework", "version_range", "cc_range", "os"} and entry["when"]
        assert entry["severity"] in ("error", "warning")
        assert entry["message"].strip() and entry["fix"].strip()
        assert ISO_DATE.match(entry["as_of"])
        for key in [entry["source"], *entry.get("see_also", [])]:
            assert re.search(r"https?://", raw["sources"][key]), key
        for key in ("version_range", "cc_range"):
            if key in entry["when"]:
                SpecifierSet(entry["when"][key])
        assert set(entry["when"].get("os", [])) <= {"linux", "windows", "wsl", "macos"}
    for rule in raw["rules"]:
        assert rule["source"] in raw["sources"] and ISO_DATE.match(rule["as_of"])


@pytest.mark.parametrize("path", FILES, ids=TOPICS)
def test_bundled_files_have_the_shapes_the_rules_read(path: Path):
    matrix.validate_shapes(json.loads(path.read_text(encoding="utf-8")), path.name)


def test_validate_rejects_uncited_data():
    good = {"topic": "t", "as_of": "2026-11-21", "sources": {"A": "x"}, "entries": [{"source": "A"}]}
    matrix.validate(good, "good")
    bad_cases = [
        {**good, "entries": [{"source": "B"}]},
        {**good, "entries": [{"source": "A", "arch_source": "B"}]},
        {**good, "extra_section": {"text": "no source"}},
        {**good, "extra_section": [{"source": "A"}, {"text": "no source"}]},
        {**good, "plain": "11.0"},
        {**good, "plain": "11.0", "plain_source": "B"},
        {k: v for k, v in good.items() if k != "as_of"},
        {**good, "entries": [{"source": ["A"]}]},  # a list where a source key belongs: refused, not a TypeError
        {**good, "sources": {"A": ["x"]}},
    ]
    for bad in bad_cases:
        with pytest.raises(matrix.MatrixError):
            matrix.validate(bad, "bad")
    matrix.validate({**good, "plain": "11.0", "plain_source": "A", "section": {"source": "A"}}, "good")


# --- gpus -----------------------------------------------------------------------------------------

def match_gpu(name: str) -> Optional[dict[str, Any]]:
    """Whole-word, case-insensitive, first match over gpus.json (letters and digits form words)."""
    words = f" {' '.join(re.findall(r'[a-z0-9]+', name.lower()))} "
    for row in topic("gpus")["entries"]:
        for pattern in row["match"]:
            wanted = " ".join(re.findall(r"[a-z0-9]+", pattern.lower()))
            if wanted and f" {wanted} " in words:
                return row
    return None


@pytest.mark.parametrize("nvml_name, model, cc", [
    ("NVIDIA A10G", "A10G", "8.6"),
    ("NVIDIA A10", "A10", "8.6"),
    ("NVIDIA A100-SXM4-80GB", "A100", "8.0"),
    ("NVIDIA A100 80GB PCIe", "A100", "8.0"),
    ("NVIDIA A100-PCIE-40GB", "A100", "8.0"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", "8.9"),
    ("Quadro RTX 6000", "Quadro RTX 6000", "7.5"),
    ("NVIDIA H100 80GB HBM3", "H100", "9.0"),
    ("NVIDIA H100 PCIe", "H100", "9.0"),
    ("NVIDIA H200", "H200", "9.0"),
    ("NVIDIA GH200 480GB", "GH200", "9.0"),
    ("NVIDIA B200", "B200", "10.0"),
    ("NVIDIA GeForce RTX 5090", "GeForce RTX 5090", "12.0"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "8.9"),
    ("NVIDIA GeForce RTX 3060 Ti", "GeForce RTX 3060 Ti", "8.6"),
    ("Tesla V100-SXM2-32GB", "V100", "7.0"),
    ("Tesla V100S-PCIE-32GB", "V100", "7.0"),
    ("Tesla T4", "T4", "7.5"),
    ("Tesla P4", "P4", "6.1"),
    ("Tesla P40", "P40", "6.1"),
    ("Tesla P100-PCIE-16GB", "P100", "6.0"),
    ("NVIDIA L4", "L4", "8.9"),
    ("NVIDIA L40", "L40", "8.9"),
    ("NVIDIA L40S", "L40S", "8.9"),
    ("NVIDIA A2", "A2", "8.6"),
    ("NVIDIA RTX A2000 12GB", "RTX A2000", "8.6"),
    ("NVIDIA RTX A6000", "RTX A6000", "8.6"),
    ("NVIDIA RTX 4000 SFF Ada Generation", "RTX 4000 SFF Ada", "8.9"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
    # reported missing in real tickets (CUDA-GPUS / legacy page: Turing 7.5, GA107 8.6, A800 8.0)
    ("NVIDIA T400", "T400", "7.5"),
    ("NVIDIA GeForce RTX 2050", "GeForce RTX 2050", "8.6"),
    ("NVIDIA A800-SXM4-80GB", "A800", "8.0"),
    ("NVIDIA RTX A4000H", "RTX A4000H", "8.6"),
    ("NVIDIA GB10", "GB10 (DGX Spark)", "12.1"),
])
def test_nvml_names_map_to_the_right_gpu(nvml_name: str, model: str, cc: str):
    row = match_gpu(nvml_name)
    assert row is not None, nvml_name
    assert (row["model"], row["compute_capability"]) == (model, cc)


@pytest.mark.parametrize("nvml_name", ["NVIDIA Fictional X9000", "NVIDIA GeForce RTX 9090", "NVIDIA Q9999"])
def test_unknown_names_do_not_match_a_neighbour(nvml_name: str):
    assert match_gpu(nvml_name) is None


def test_the_engines_gpu_matcher_agrees_with_this_one():
    from gpudoctor.compat import rules as compat

    for name in ("NVIDIA A10G", "NVIDIA A100-SXM4-80GB", "NVIDIA RTX 6000 Ada Generation", "NVIDIA L4", "NVIDIA L40S",
                 "Tesla V100-SXM2-32GB", "NVIDIA GeForce RTX 5090", "NVIDIA T400"):
        assert compat.gpu_entry(BUNDLED, name) == match_gpu(name)


def test_no_match_string_is_shadowed_by_an_earlier_entry():
    rows = topic("gpus")["entries"]
    for i, row in enumerate(rows):
        for pattern in row["match"]:
            hit = match_gpu(f"NVIDIA {pattern}")
            assert hit is row, f"{pattern!r} of {row['model']} is caught by {hit and hit['model']}"


def test_gpu_architecture_agrees_with_architectures_json():
    for row in topic("gpus")["entries"]:
        assert row["segment"] in ("datacenter", "workstation", "geforce", "jetson")
        assert matrix.architecture_for(BUNDLED, row["compute_capability"]) == row["architecture"], row["model"]


def test_measured_pci_ids():
    by_model = {r["model"]: r for r in topic("gpus")["entries"]}
    assert "0x2330" in by_model["H100"]["pci_device_ids"]
    assert by_model["H200"]["pci_device_ids"] == ["0x2335"]


def test_every_gpu_compute_capability_is_a_known_target():
    targets = {r["compute_capability"] for r in topic("cuda_targets")["entries"]}
    for row in topic("gpus")["entries"]:
        assert row["compute_capability"] in targets, row["model"]


# --- CUDA toolkits and targets --------------------------------------------------------------------

def mvc(major: int) -> dict[str, Any]:
    return next(r for r in topic("cuda_toolkits")["minor_version_compatibility"] if r["cuda_major"] == major)


def test_minor_version_compatibility_floors():
    data = topic("cuda_toolkits")
    assert data["minor_version_compatibility_since"] == "11.0"
    assert (mvc(11)["min_driver_linux"], mvc(11)["min_driver_windows"]) == ("450.80.02", "452.39")
    assert (mvc(12)["min_driver_linux"], mvc(12)["min_driver_windows"]) == ("525.60.13", "527.41")
    assert mvc(13)["min_driver_linux"] == "580"
    assert "min_driver_windows" not in mvc(13)  # not printed by NVIDIA for 13.x
    for major in (11, 12, 13):
        assert "JIT" in mvc(major)["limits"]
    fwd = data["forward_compatibility"]
    assert fwd["package"] == "cuda-compat" and fwd["datacenter_only"] is True


def test_toolkit_rows_are_ordered_and_known_values_hold():
    rows = topic("cuda_toolkits")["entries"]
    versions = [Version(r["version"]) for r in rows]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    by_version = {r["version"]: r for r in rows}
    assert (by_version["12.4"]["min_driver_linux"], by_version["12.4"]["min_driver_windows"]) == ("550.54.14", "551.61")
    assert by_version["12.0"]["min_driver_linux"] == "525.60.13"
    assert by_version["13.0"]["min_driver_linux"] == "580.65.06"
    assert by_version["10.2"]["min_driver_linux"] == "440.33"
    assert "12.7" not in by_version  # there was no CUDA 12.7
    for major in (10, 11, 12, 13):
        assert any(v.major == major for v in versions)
    # a Table 3 driver never goes down as the toolkit goes up
    linux = [(Version(r["version"]), Version(r["min_driver_linux"])) for r in rows if "min_driver_linux" in r]
    assert [d for _, d in linux] == sorted(d for _, d in linux)


def test_cuda_13_dropped_everything_below_7_5():
    rows = {r["compute_capability"]: r for r in topic("cuda_targets")["entries"]}
    for cc in ("3.0", "3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2"):
        assert rows[cc]["last_cuda"] is not None and Version(rows[cc]["last_cuda"]) < Version("13.0"), cc
    for cc in ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"):
        assert rows[cc]["last_cuda"] is None, cc
    assert rows["3.0"]["last_cuda"] == "10.2"
    assert rows["3.5"]["last_cuda"] == rows["3.7"]["last_cuda"] == "11.8"
    assert rows["7.0"]["last_cuda"] == "12.9"
    assert (rows["9.0"]["first_cuda"], rows["8.9"]["first_cuda"]) == ("11.8", "11.8")
    assert (rows["10.0"]["first_cuda"], rows["12.0"]["first_cuda"], rows["12.1"]["first_cuda"]) == ("12.8", "12.8", "12.9")
    assert rows["10.1"]["renamed_to"] == "11.0" and rows["11.0"]["first_cuda"] == "13.0"


def test_engine_reads_the_toolkit_matrix():
    from gpudoctor.compat import rules as compat

    assert compat.driver_runs_cuda(BUNDLED, "12.4", driver="550.54.14").status == compat.OK
    assert compat.driver_runs_cuda(BUNDLED, "12.8", driver="535.104.05").status == compat.LIMITED
    assert compat.driver_runs_cuda(BUNDLED, "13.0", driver="575.57.08", driver_cuda="12.9").status == compat.FAIL
    assert compat.toolkit_targets(BUNDLED, "13.0", "7.0").status == compat.FAIL
    assert compat.toolkit_targets(BUNDLED, "12.9", "7.0").status == compat.OK
    assert compat.toolkit_targets(BUNDLED, "12.6", "12.0").status == compat.FAIL


# --- frameworks -----------------------------------------------------------------------------------

def torch_variant(release: str, name: str) -> dict[str, Any]:
    row = next(r for r in topic("pytorch")["entries"] if r["version"] == release)
    return next(v for v in row["variants"] if v["name"] == name)


def test_pytorch_releases():
    rows = topic("pytorch")["entries"]
    versions = [r["version"] for r in rows]
    assert versions[0] == "1.0" and "1.12" in versions and "2.7" in versions and "2.14" in versions
    assert [Version(v) for v in versions] == sorted(Version(v) for v in versions)
    for row in rows:
        names = [v["name"] for v in row["variants"]]
        assert row["default_pypi_variant"] in names, row["version"]
        for v in row["variants"]:
            assert v["name"] == "cu" + v["cuda"].replace(".", "")
    assert "sm_120" in torch_variant("2.7", "cu128")["arch_list"]
    assert "sm_120" not in torch_variant("2.7", "cu126")["arch_list"]
    assert "sm_50" in torch_variant("2.7", "cu126")["arch_list"]
    assert "sm_70" not in torch_variant("2.11", "cu128")["arch_list"]
    assert torch_variant("2.9", "cu130")["ptx"] == ["compute_120"]
    assert next(r for r in rows if r["version"] == "2.7")["python"] == ">=3.9,<3.14"
    assert next(r for r in rows if r["version"] == "2.7")["default_pypi_variant"] == "cu126"


def test_engine_reads_the_pytorch_matrix():
    from gpudoctor.compat import rules as compat

    release, variant, name = compat.torch_build(BUNDLED, "2.7.1")
    assert (release["version"], name) == ("2.7", "cu126")
    release, variant, name = compat.torch_build(BUNDLED, "2.7.1+cu128")
    assert compat.arch_runs("12.0", variant["arch_list"] + variant.get("ptx", [])).status == compat.OK
    release, variant, name = compat.torch_build(BUNDLED, "2.7.1+cu126")
    assert compat.arch_runs("12.0", variant["arch_list"] + variant.get("ptx", [])).status == compat.FAIL


def test_tensorflow_releases():
    rows = {r["version"]: r for r in topic("tensorflow")["entries"]}
    assert rows["2.17"]["python"] == ">=3.9,<3.13" and rows["2.17"]["cuda"] == "12.3" and rows["2.17"]["cudnn"] == "8.9"
    assert rows["2.4"]["cuda"] == "11.0"
    for version, row in rows.items():
        assert row["and_cuda_extra"] is (Version(version) >= Version("2.14"))
        assert row["windows_native_gpu"] is (Version(version) <= Version("2.10"))


def test_cudnn_releases():
    rows = {r["version"]: r for r in topic("cudnn")["entries"]}
    assert rows["9.17.0"]["cuda_majors"] == [12, 13] and rows["9.17.0"]["min_compute_capability"] == "7.5"
    assert rows["9.10.2"]["min_driver_linux"] == {"11": "450.80.02", "12": "525.60.13"}
    assert rows["9.0.0"]["min_compute_capability"] == "5.0"
    for row in rows.values():
        for major in row.get("min_driver_linux", {}):
            assert int(major) in row["cuda_majors"]


def test_jax_and_cupy():
    jax = {r["version"]: r for r in topic("jax")["entries"]}
    extras = {e["name"]: e for e in jax["0.11.0"]["extras"]}
    assert extras["jax[cuda13]"]["min_compute_capability"] == "7.5" and extras["jax[cuda13]"]["min_driver_linux"] == "580"
    assert extras["jax[cuda12]"]["min_compute_capability"] == "5.2"
    cupy = {r["package"]: r for r in topic("cupy")["entries"]}
    per_cuda = ["80", "90", "91", "92", "100", "101", "102", "110", "111", "112", "113", "114", "115", "116", "117"]
    assert set(cupy) == {"cupy-cuda11x", "cupy-cuda12x", "cupy-cuda13x"} | {f"cupy-cuda{c}" for c in per_cuda}
    assert {p: r["cuda_major"] for p, r in cupy.items() if p.endswith("x")} == {"cupy-cuda11x": 11, "cupy-cuda12x": 12,
                                                                                "cupy-cuda13x": 13}
    for c in per_cuda:  # the package's name is its CUDA: cupy-cuda101 is CUDA 10.1
        assert cupy[f"cupy-cuda{c}"]["cuda"] == f"{c[:-1]}.{c[-1]}" and cupy[f"cupy-cuda{c}"]["cuda_major"] == int(c[:-1])
    # measured on nvidia-h100-x1, 2026-11-23 (tests/fixtures/real/h100x1-20261123/build_facts.txt: cuobjdump)
    assert extras["jax[cuda13]"]["arch_list"] == ["sm_75", "sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
    assert extras["jax[cuda13]"]["ptx"] == ["compute_120"]
    assert cupy["cupy-cuda13x"]["min_compute_capability"] == "7.5"


def test_old_jaxlib_wheels_and_their_cudnn_floors():
    """jaxlib's CUDA wheels before the pip extras, as JAX's build scripts, README and CHANGELOG give them."""
    jax = {r["version"]: r for r in topic("jax")["entries"]}
    assert sorted(jax["0.1.32"]["jaxlib_tags"]) == ["cuda100", "cuda101", "cuda90", "cuda92"]
    assert sorted(jax["0.1.66"]["jaxlib_tags"]) == ["cuda101", "cuda102", "cuda110", "cuda111"]  # no cuda112 from 0.1.66
    assert list(jax["0.1.72"]["jaxlib_tags"]) == ["cuda111"]
    assert jax["0.1.61"]["jaxlib_tags"]["cuda112"] == {"cuda": "11.2", "min_cudnn": "8.1", "source": "JAXLIB-BUILD-0.1",
                                                       "note": "built with cuDNN 8.1.0.77"}
    assert {t: r["min_cudnn"] for t, r in jax["0.1.73"]["jaxlib_tags"].items()} == {"cuda11.cudnn82": "8.2", "cuda11.cudnn805": "8.0.5"}
    assert jax["0.2.0"]["no_jaxlib"] is True and jax["0.3.0"]["no_jaxlib"] is False
    assert jax["0.4.11"]["jaxlib_tags"]["cuda12.cudnn88"]["min_cudnn"] == "8.9"  # misnamed: built with 8.9 (jax 0.4.13)
    assert jax["0.4.29"]["jaxlib_tags"] == {"cuda12.cudnn91": {"cuda": "12", "min_cudnn": "9.1", "source": "JAX-SETUP-0.2"}}
    assert jax["0.4.31"]["min_cudnn"] == "9.1" and jax["0.6.0"]["min_cudnn_by_major"] == {"12": "9.8"}


def test_cupy_python_wheels_per_release_line():
    """The CPython tags of each package's wheels on PyPI (PYPI-CUPY-WHEELS), as the matrix gives them."""
    cupy = {r["package"]: r for r in topic("cupy")["entries"]}
    lines = {r["cupy"]: r for r in cupy["cupy-cuda101"]["cupy_releases"]}
    assert lines["7.0.0"]["python"] == ">=3.5,<3.9" and lines["7.0.0"]["wheels"]["windows"] == ["cp36", "cp37", "cp38"]
    assert lines["9.6.0"]["python"] == ">=3.6,<3.10" and "10.0.0" not in lines  # CuPy v10 dropped CUDA 10.1
    assert [r["cupy"] for r in cupy["cupy-cuda117"]["cupy_releases"]] == ["10.6.0"]
    assert "v8.0 (CUDA 10.1)" in lines["9.0.0"]["cudnn_supported"]
    assert cupy["cupy-cuda80"]["min_compute_capability"] == "3.0" and cupy["cupy-cuda110"]["min_compute_capability"] == "3.5"
