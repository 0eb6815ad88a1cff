"""PyTorch 1.0-1.11 and TensorFlow 1.13-2.3 in the bundled matrix, judged by `gpudoctor matrix check`.

Sources (each case's expectation; the matrix entries cite the same):
  PYPI-TORCH  https://pypi.org/project/torch/#history: torch/version.py inside each X.Y.0 manylinux1 wheel
              (1.0-1.1 cuda 9.0.176, 1.2 10.0.130, 1.3 10.1.243, 1.4 10.1, 1.5-1.11 10.2); Windows wheels on PyPI
              from 1.7.0 only, CPU-only like the macOS ones
  BUILDER     https://github.com/pytorch/builder manywheel/build.sh (Linux) and windows/cuda<NN>.bat (Windows,
              3.7+PTX;5.0;6.0;6.1;7.0;... from 1.4) at each release (TORCH_CUDA_ARCH_LIST), Linux:
              1.0-1.3.0 3.5;5.0+PTX;..., 1.4-1.5 3.7+PTX;5.0;..., 1.6-1.11 3.7;5.0;6.0;7.0 (+7.5 for 10.x in 1.7,
              +7.5;8.0 for 11.0, +7.5;8.0;8.6 for 11.1/11.3)
  TABLE3      https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/ Table 3: 9.0.76 >= 384.81, 10.0.130 >= 410.48,
              10.1 >= 418.39 (Linux)
  TF-SOURCE   https://www.tensorflow.org/install/source#gpu: 1.13.1-2.0.0 cuDNN 7.4 CUDA 10.0, 2.1.0-2.3.0 cuDNN 7.6
              CUDA 10.1
  TF-WHEELS   the tensorflow_gpu 1.13.1-2.3.0 wheels' CUDA fatbinaries: SASS sm_35-sm_70 only (no sm_75/sm_80)
"""

from __future__ import annotations


import pytest

from gpudoctor.compat import rules
from gpudoctor.compat.data import BUNDLED
from helpers_matrix import matrix_check

K80, T4, V100, A100 = "Tesla K80", "Tesla T4", "Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-40GB"




check = matrix_check


def codes(data: dict) -> set[str]:
    return {f["code"] for f in data["findings"] if f["severity"] != "info"}


CASES = [
    # (args, verdict, codes, source)
    (["--gpu", K80, "--torch", "1.4.0+cu101", "--driver", "418.87"], "ok", set(), "BUILDER sm_37; TABLE3 10.1"),
    (["--gpu", A100, "--torch", "1.7.1+cu101", "--driver", "450.80.02"], "error", {"CMP003"}, "BUILDER: 10.x has no 8.0"),
    (["--gpu", A100, "--torch", "1.7.1+cu110", "--driver", "450.80.02"], "ok", set(), "BUILDER: 11.0 adds 7.5;8.0"),
    (["--gpu", T4, "--torch", "1.6.0+cu101", "--driver", "418.87"], "ok", set(), "BUILDER: sm_70 SASS runs on 7.5"),
    (["--gpu", V100, "--torch", "1.0.0", "--driver", "384.81"], "ok", set(), "PYPI-TORCH cu90; TABLE3 9.0"),
    (["--gpu", V100, "--torch", "1.0.0", "--driver", "375.26"], "error", {"CMP001"}, "TABLE3: 9.0 needs 384.81"),
    (["--gpu", V100, "--torch", "1.2.0", "--driver", "384.81"], "error", {"CMP001"}, "PYPI-TORCH cu100; TABLE3 10.0"),
    (["--torch", "1.2.0", "--python", "3.8"], "error", {"CMP007"}, "PYPI-TORCH: 1.2 has no cp38 wheel"),
    (["--torch", "1.4.0", "--python", "3.8"], "ok", set(), "PYPI-TORCH: 1.4 has a cp38 wheel"),
    (["--tensorflow", "2.3.0", "--cuda", "10.1", "--cudnn", "7.6"], "ok", set(), "TF-SOURCE"),
    (["--tensorflow", "1.14.0", "--cuda", "10.0"], "ok", set(), "TF-SOURCE"),
    (["--tensorflow", "1.14.0", "--cudnn", "7.6.5"], "ok", set(), "TF-SOURCE: 7.4 built, a newer 7.x minor loads"),
    (["--tensorflow", "2.1.0", "--cudnn", "7.4"], "error", {"FWK007"}, "TF-SOURCE: built with 7.6"),
    (["--gpu", K80, "--tensorflow", "1.14.0", "--driver", "410.48"], "ok", set(), "TF-WHEELS sm_37; TABLE3 10.0"),
    (["--gpu", K80, "--tensorflow", "2.2.0", "--driver", "410.48"], "error", {"CMP001"}, "TF-SOURCE 10.1; TABLE3"),
    (["--os", "windows", "--tensorflow", "1.15.0"], "ok", set(), "TF-SOURCE Windows: GPU builds up to 2.10"),
    (["--tensorflow", "1.13.1", "--python", "3.8"], "error", {"CMP007"}, "TF-SOURCE: 2.7, 3.3-3.7"),
]


@pytest.mark.parametrize("args,verdict,want,source", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_old_release_case(args, verdict, want, source):
    exit_code, data = check(*args)
    assert (data["verdict"], codes(data)) == (verdict, want), source
    assert exit_code == (1 if verdict == "error" else 0)


def test_a_turing_or_ampere_gpu_runs_old_tensorflow_only_through_ptx():
    """TF-WHEELS: no release 1.13-2.3 carries SASS for 7.5 or 8.x, only PTX up to compute_70, so an A100 is
    a JIT warning (never an error, never ok)."""
    for version in ("1.13.1", "1.15.0", "2.0.0", "2.3.0"):
        exit_code, data = check("--gpu", A100, "--tensorflow", version, "--driver", "450.80.02")
        assert (exit_code, data["verdict"], codes(data)) == (0, "warning", {"CMP004"}), version


def test_plain_version_on_windows_before_pypi_had_windows_wheels_is_unknown_not_cpu_only():
    """PYPI-TORCH: 1.0-1.6 have no Windows wheel on PyPI, so a plain "1.4.0" on Windows is a build from
    download.pytorch.org whose variant the version does not name: unknown, never "CPU-only" (FWK001)."""
    exit_code, data = check("--os", "windows", "--gpu", T4, "--torch", "1.4.0")
    assert (exit_code, data["verdict"], codes(data)) == (0, "unknown", set())
    exit_code, data = check("--os", "windows", "--gpu", T4, "--torch", "1.7.0")
    assert (exit_code, codes(data)) == (1, {"FWK001"})  # PyPI's 1.7.0 win_amd64 wheel is CPU-only


def test_windows_wheels_are_judged_by_their_own_architecture_list():
    """BUILDER windows/cuda101.bat: the 1.7 Windows cu101 wheel is 3.7+PTX;5.0;6.0;6.1;7.0;7.5, so an RTX 3090
    (8.6) runs it through PTX JIT (a warning); the Linux wheel (3.7;5.0;6.0;7.0;7.5, no PTX) cannot run."""
    gpu = "NVIDIA GeForce RTX 3090"
    exit_code, data = check("--os", "windows", "--gpu", gpu, "--torch", "1.7.1+cu101", "--driver", "456.71")
    assert (exit_code, data["verdict"], codes(data)) == (0, "warning", {"CMP004"})
    exit_code, data = check("--os", "linux", "--gpu", gpu, "--torch", "1.7.1+cu101", "--driver", "455.32")
    assert (exit_code, data["verdict"], codes(data)) == (1, "error", {"CMP003"})


def test_every_old_variant_has_a_driver_floor_and_a_known_default():
    """Every CUDA variant of PyTorch 1.0-1.11 finds its toolkit's Table 3 driver, and the plain PyPI wheel
    is one of the release's variants (its CUDA as torch/version.py of the wheel says)."""
    want_default = {"1.0": "cu90", "1.1": "cu90", "1.2": "cu100", "1.3": "cu101", "1.3.1": "cu101", "1.4": "cu101"}
    rows = [r for r in BUNDLED.topic("pytorch")["entries"] if rules.version(r["version"]) < rules.version("1.12")]
    # 1.3.1 has an entry of its own: its wheels carry other architectures than 1.3.0's
    assert [r["version"] for r in rows] == [f"1.{m}" for m in range(4)] + ["1.3.1"] + [f"1.{m}" for m in range(4, 12)]
    for row in rows:
        assert row["default_pypi_variant"] == want_default.get(row["version"], "cu102")
        assert row["default_pypi_variant"] in {v["name"] for v in row["variants"]}
        for variant in row["variants"]:
            floor = rules.toolkit_entry(BUNDLED, variant["cuda"])
            assert floor and floor["min_driver_linux"], (row["version"], variant["name"])
            has_kepler_35 = "sm_35" in variant["arch_list"]
            assert has_kepler_35 is (rules.version(row["version"]) <= rules.version("1.3")), (row["version"], variant["name"])


def test_tensorflow_package_split():
    """Before 2.1 the GPU build is the tensorflow-gpu package (tensorflow is CPU-only), except 1.15, whose
    tensorflow wheel is a CUDA build too."""
    rows = {r["version"]: r for r in BUNDLED.topic("tensorflow")["entries"]}
    assert rows["1.14"]["cpu_only_packages"] == ["tensorflow"] and rows["2.0"]["cpu_only_packages"] == ["tensorflow"]
    assert "tensorflow" in rows["1.15"]["gpu_packages"] and "tensorflow" in rows["2.1"]["gpu_packages"]
    assert rows["2.3"]["compute_capabilities"] == ["sm_35", "sm_37", "sm_52", "sm_60", "sm_61", "compute_70"]
