"""The compiled-architecture data of the bundled matrix: every PyTorch variant since 1.12 and every
TensorFlow release 2.4-2.21 says which GPUs it has code for (SASS ``arch_list``, PTX ``ptx``) and
where that comes from, or says explicitly that it is not known; and where a real build was at hand
(the lab H100, 2026-11-23) the data equals what that build reported.

Why: a missing list silently became "ok" for a GPU the build cannot run on (PyTorch 2.5 cu121 on an
RTX 5090), and a wrong PTX claim turns a hard failure into "runs through PTX JIT".
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpudoctor.compat import data as matrix

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "tests" / "fixtures" / "real" / "h100x1-20261123"
SASS = re.compile(r"^sm_\d{2,3}[af]?$")
PTX = re.compile(r"^compute_\d{2,3}[af]?$")


def _load(topic: str) -> dict:
    return json.loads((ROOT / "compat_matrix" / f"{topic}.json").read_text())


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _torch_variants() -> list[tuple[str, dict]]:
    return [(e["version"], v) for e in _load("pytorch")["entries"] if _key(e["version"]) >= (1, 12)
            for v in e["variants"]]


def test_every_torch_variant_since_1_12_has_a_sourced_arch_list_and_ptx() -> None:
    data = _load("pytorch")
    variants = _torch_variants()
    assert len(variants) >= 40  # 1.12 .. 2.14, every CUDA variant
    versions = {v for v, _ in variants}
    assert {"1.12", "2.5", "2.7", "2.11", "2.14"} <= versions
    for version, v in variants:
        where = f"torch {version} {v['name']}"
        assert v.get("arch_list"), where
        assert all(SASS.match(a) for a in v["arch_list"]), where
        assert v.get("arch_source") in data["sources"], where
        assert v.get("arch_note"), where
        if "ptx" in v:
            assert all(PTX.match(a) for a in v["ptx"]), where
        else:  # absent = unknown, and then it says why
            assert v.get("ptx_unknown"), where


def test_ptx_unknown_stays_the_exception() -> None:
    unknown = sorted(f"{ver} {v['name']}" for ver, v in _torch_variants() if "ptx" not in v)
    assert len(unknown) <= 4, unknown


def test_torch_2_5_cu121_is_sm50_to_sm90_without_ptx() -> None:
    """pytorch/builder release/2.5 manywheel/build_cuda.sh: 12.1 -> 5.0;6.0;7.0;7.5;8.0;8.6;9.0."""
    release = next(e for e in _load("pytorch")["entries"] if e["version"] == "2.5")
    cu121 = next(x for x in release["variants"] if x["name"] == "cu121")
    assert cu121["arch_list"] == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert cu121["ptx"] == []
    assert cu121["arch_source"] == "BUILDER-2.5"


def test_cu128_builds_add_blackwell_and_drop_maxwell() -> None:
    for version in ("2.7", "2.8", "2.9", "2.10", "2.11"):
        release = next(e for e in _load("pytorch")["entries"] if e["version"] == version)
        cu128 = next(x for x in release["variants"] if x["name"] == "cu128")
        assert {"sm_100", "sm_120"} <= set(cu128["arch_list"]), version
        assert "sm_50" not in cu128["arch_list"], version


def _lab_facts() -> tuple[list[str], str, int]:
    """What torch 2.11.0+cu130 reported on nvidia-h100-x1, 2026-11-23 (recorded reports)."""
    full = json.loads((LAB / "full.json").read_text())
    info = full["facts"]["frameworks"]["torch"]["info"]
    assert info["version"] == "2.11.0+cu130"
    pin = re.search(r"nvidia-cudnn-cu13==([0-9.]+)", (LAB / "before" / "metadata.txt").read_text())
    assert pin
    raw = (LAB / "before" / "torch-facts.txt").read_text().split()
    assert raw[0] == "2.11.0+cu130"
    return info["arch_list"], pin.group(1), int(raw[-1])


def test_torch_2_11_cu130_equals_the_real_build() -> None:
    """Recorded on nvidia-h100-x1, 2026-11-23: get_arch_list() has no compute_120, the wheel pins
    nvidia-cudnn-cu13==9.19.0.56 and reports cuDNN 91900."""
    arch, cudnn_pin, cudnn_int = _lab_facts()
    release = next(e for e in _load("pytorch")["entries"] if e["version"] == "2.11")
    cu130 = next(x for x in release["variants"] if x["name"] == "cu130")
    assert cu130["arch_list"] + cu130["ptx"] == arch
    assert cu130["ptx"] == []
    assert cu130["cudnn"] == cudnn_pin
    major, minor, patch = (int(p) for p in cu130["cudnn"].split(".")[:3])
    assert major * 10000 + minor * 100 + patch == cudnn_int
    assert cu130["arch_source"] == cu130["cudnn_source"] == "LAB-H100-20261123"


def test_tensorflow_2_4_to_2_21_each_have_arch_data_or_say_unknown() -> None:
    data = _load("tensorflow")
    entries = {e["version"]: e for e in data["entries"]}
    expected = {f"2.{minor}" for minor in range(4, 22)}
    assert expected <= set(entries)
    known = 0
    for version in sorted(expected, key=_key):
        e = entries[version]
        if "arch_list" in e:
            known += 1
            assert all(SASS.match(a) for a in e["arch_list"]), version
            assert all(PTX.match(a) for a in e["ptx"]), version
            assert e.get("arch_source") in data["sources"], version
            # the released wheels: sm_XY = SASS, compute_XY = SASS and PTX as TensorFlow itself counts it
            # (TF-NOTATION; its SASS is in only a minority of the fatbinaries, the rest JIT-compiled once)
            mixed = e.get("compute_capabilities")
            assert mixed, version
            assert e["arch_list"] == [a for a in mixed if a.startswith("sm_")] + \
                [a.replace("compute_", "sm_") for a in mixed if a.startswith("compute_")], version
            assert e["ptx"] == [a for a in mixed if a.startswith("compute_")], version
            assert e.get("compute_capabilities_source") == e["arch_source"], version
        else:
            assert e.get("arch_unknown") and e.get("arch_unknown_source") in data["sources"], version
    assert known == len(expected)


# What build_info.py (= tf.sysconfig.get_build_info()) says in each release wheel on PyPI, read
# 2026-11-23 (https://pypi.org/project/tensorflow/<version>/#files; file names and sha256 in the
# matrix's TF-WHEEL-<version> sources).
_TF_WHEEL_CAPS = {
    **{f"2.{m}": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80" for m in range(4, 15)},
    "2.15": "sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.16": "sm_50,sm_60,sm_70,sm_80,compute_90",
    **{f"2.{m}": "sm_60,sm_70,sm_80,sm_89,compute_90" for m in range(17, 22)},
}


@pytest.mark.parametrize("version", sorted(_TF_WHEEL_CAPS, key=_key))
def test_tensorflow_arch_lists_equal_the_release_wheels(version: str) -> None:
    data = _load("tensorflow")
    entry = next(e for e in data["entries"] if e["version"] == version)
    assert ",".join(entry["compute_capabilities"]) == _TF_WHEEL_CAPS[version]
    assert entry["arch_source"] == f"TF-WHEEL-{entry['tested_build']}"
    cited = data["sources"][entry["arch_source"]]
    assert f"pypi.org/project/tensorflow/{entry['tested_build']}/" in cited
    assert str(entry["compute_capabilities"]) in cited  # the source text quotes the wheel's list


def test_tensorflow_runs_where_tensorflow_itself_says_it_was_built_for() -> None:
    """compute_80 (2.4-2.15) and compute_90 (2.16-2.21) count as built for 8.0 and 9.0, as TensorFlow's own
    start-up check counts them (no false "PTX only" on a healthy A100 or H100); a cc 6.1 GPU on 2.10 runs sm_60
    machine code, 12.0 on 2.20 only through PTX, and a cc 3.5 GPU has no code in 2.15+ (Kepler dropped)."""
    from gpudoctor.compat import rules as compat
    rows = {e["version"]: e for e in _load("tensorflow")["entries"]}
    def verdict(cc: str, version: str) -> str:
        return compat.build_runs_on(cc, rows[version]["arch_list"], rows[version]["ptx"]).status
    assert verdict("6.1", "2.10") == compat.OK
    assert verdict("8.0", "2.10") == compat.OK
    assert verdict("8.6", "2.16") == compat.OK  # sm_80 SASS runs on 8.6
    assert verdict("9.0", "2.20") == compat.OK
    assert verdict("12.0", "2.20") == compat.LIMITED  # judged an error by the known-bad list, not here
    assert verdict("3.5", "2.14") == compat.OK
    assert verdict("3.5", "2.15") == compat.FAIL


def test_matrix_files_still_validate() -> None:
    for topic in ("pytorch", "tensorflow"):
        matrix.validate(_load(topic), topic)


@pytest.mark.parametrize("topic", ["pytorch", "tensorflow"])
def test_as_of_is_a_date(topic: str) -> None:
    assert re.match(r"^\d{4}-\d{2}-\d{2}$", _load(topic)["as_of"])
