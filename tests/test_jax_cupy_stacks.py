"""Old JAX and CuPy stacks judged against compat_matrix/jax.json and cupy.json: a jaxlib wheel named by
its local version (+cuda111, +cuda11.cudnn82), the cuDNN each JAX build refuses to run below, and the
per-CUDA CuPy packages (cupy-cuda101). Each expected verdict comes from the sources the matrix cites
(JAX's build scripts, README and CHANGELOG at each tag; CuPy's install guide and PyPI's wheels)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.compat import jax_wheels, rules
from gpudoctor.compat.data import BUNDLED

from helpers_judge import findings, only


def judge(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["matrix", "check", "--json", *args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def coded(data: dict[str, Any]) -> set[str]:
    return {f["code"] for f in data["findings"]}


# --- a JAX build's own minimum cuDNN ---------------------------------------------------------------

@pytest.mark.parametrize("jax,cudnn,code,floor", [
    ("0.4.31", "8.9.7", "FWK006", "9.1"),  # 'Minimum supported: 9100 Installed version: 8907' (conda-forge, Aug 2024)
    ("0.6.0", "9.1.0", "FWK007", "9.8"),  # CHANGELOG 0.6.0: 'The minimum CuDNN version is v9.8'
    ("0.4.29+cuda12.cudnn91", "8.9.7", "FWK006", "9.1"),  # the wheel named its cuDNN
    ("0.4.13+cuda12.cudnn89", "8.8.1", "FWK007", "8.9"),
    ("0.4.12+cuda12.cudnn88", "8.8.0", "FWK007", "8.9"),  # misnamed: built with 8.9 (jax 0.4.13's CHANGELOG)
    ("0.3.25+cuda11.cudnn82", "8.0.5", "FWK007", "8.2"),
    ("0.1.62+cuda112", "8.0.5", "FWK007", "8.1"),  # built with cuDNN 8.1.0.77
    ("0.1.69+cuda111", "7.6.5", "FWK006", "8.0"),  # 'the CUDA 11 wheels of JAX require CuDNN 8'
    ("0.1.69+cuda101", "8.0.5", "FWK006", "7"),  # 'The CUDA 10 JAX wheels require CuDNN 7'
])
def test_a_jaxlib_older_than_its_cudnn_floor_is_an_error_naming_both(jax, cudnn, code, floor):
    data = judge("--jax", jax, "--cudnn", cudnn)
    assert data["verdict"] == "error" and coded(data) == {code}
    (f,) = data["findings"]
    assert f["severity"] == "error" and f"cuDNN {cudnn}" in f["title"] and f"cuDNN {floor}" in f["title"]
    assert f"Loaded runtime CuDNN library: {cudnn} but source was compiled with: {floor}" in f["detail"]


@pytest.mark.parametrize("jax,cudnn", [
    ("0.4.29", "8.9.7"),  # the reporter's workaround: jax<=0.4.29 runs with cuDNN 8.9.7
    ("0.3.25", "8.0.5"),  # the +cuda11.cudnn805 wheel of the same release accepts it
    ("0.3.25+cuda11.cudnn805", "8.1.0"),
    ("0.1.69+cuda102", "7.6.5"),
    ("0.4.13+cuda12_pip", "8.9.2"),
    ("0.11.2", "9.19.0"),  # the recorded 2 x H200 stack
    ("0.11.2+cuda13", "9.8.0"),
])
def test_a_cudnn_one_of_the_wheels_accepts_is_not_judged(jax, cudnn):
    data = judge("--jax", jax, "--cudnn", cudnn)
    assert not coded(data) & {"FWK006", "FWK007"}, data["findings"]


@pytest.mark.parametrize("jax,cuda", [("0.1.69+cuda111", "11.1"), ("0.1.50+cuda92", None), ("0.1.57+cuda100", "10.0"),
                                      ("0.3.25+cuda11.cudnn82", "11"), ("0.4.23+cuda12.cudnn89", "12")])
def test_a_jaxlib_local_version_gives_its_cuda(jax, cuda):
    data = judge("--jax", jax, "--cc", "7.0")
    if cuda is None:  # jaxlib 0.1.50 built no CUDA 9.2 wheel: not a version to guess
        assert data["verdict"] == "unknown" and "no jaxlib 0.1.50+cuda92 wheel is known" in json.dumps(data["stack"]["unknown"])
    else:
        assert data["stack"]["unknown"] == [] and data["stack"]["builds"][0]["cuda"] == cuda


def test_an_old_jaxlib_is_judged_against_the_driver_of_its_own_cuda():
    data = judge("--jax", "0.1.69+cuda101", "--driver", "410.48")
    (f,) = data["findings"]
    assert f["code"] == "CMP001" and "418.39" in f["detail"]
    assert f["remediation"]["commands"] == []  # no jax[cudaNN] extra installs a jaxlib 0.1 wheel
    assert judge("--jax", "0.1.69+cuda101", "--driver", "418.39")["verdict"] == "ok"


def test_jax_0_3_is_judged_not_unknown():
    assert judge("--jax", "0.3.25", "--gpu", "NVIDIA A100-SXM4-40GB", "--driver", "470.82.01")["verdict"] == "ok"
    data = judge("--jax", "0.3.25", "--cc", "3.0")
    assert coded(data) == {"CMP003"} and "3.5 and newer" in data["findings"][0]["detail"]


@pytest.mark.parametrize("jax,cudnn,verdict", [
    ("0.2.26", "7.6.5", "error"),  # imports jaxlib 0.1.74 or newer: only +cuda11.cudnn82/805 wheels, cuDNN 8
    ("0.2.25", "7.6.5", "ok"),  # jaxlib 0.1.69-0.1.71 had a +cuda102 wheel built with cuDNN 7.6
    ("0.2.26", "8.0.5", "ok"),
    ("0.2.5", "7.6.5", "ok"),
])
def test_a_jax_0_2_version_is_judged_against_every_jaxlib_it_imports(jax, cudnn, verdict):
    """jax 0.2.x ran with jaxlib 0.1.x, any from the oldest it imports on (JAX-MIN-JAXLIB)."""
    data = judge("--jax", jax, "--cudnn", cudnn)
    assert data["verdict"] == verdict, data["findings"]
    if verdict == "error":
        assert coded(data) == {"FWK006"} and "with jaxlib 0.1.74 or newer" in data["findings"][0]["title"]
        assert data["findings"][0]["remediation"]["text"].endswith("or a jaxlib wheel built for the cuDNN installed")


def test_floors_of_a_version_without_its_tag_are_every_wheel_s():
    release = rules.jax_release(BUNDLED, "0.3.25")
    assert jax_wheels.cudnn_floors(release, None, None) == ["8.0.5", "8.2"]
    wheel = jax_wheels.tagged_wheel(release, "CUDA11.cudnn82")
    assert wheel == jax_wheels.Wheel("cuda11.cudnn82", "11", "8.2") and wheel.major == 11
    assert jax_wheels.cudnn_floors(release, 11, wheel) == ["8.2"]
    assert jax_wheels.refusing_floor("8.1.0", ["8.0.5", "8.2"]) is None
    assert jax_wheels.refusing_floor("7.6.5", ["8.0.5", "8.2"]) == "8.0.5"
    assert jax_wheels.refusing_floor("9.1.0", ["7", "7.6", "8.0"]) == "7"
    assert jax_wheels.refusing_floor("x", ["8.2"]) is None and jax_wheels.refusing_floor("8.2", []) is None
    assert jax_wheels.tagged_wheel(release, "cuda12") is None
    assert jax_wheels.tagged_wheel({"jaxlib_tags": {"cudaXY": {"cuda": "banana"}}}, "cudaXY") is None
    oldest, lines = jax_wheels.jaxlib_lines_of(BUNDLED, rules.jax_release(BUNDLED, "0.2.20"), "0.2.20")
    assert oldest == "0.1.69" and set(lines["jaxlib_tags"]) == {"cuda101", "cuda102", "cuda110", "cuda111", "cuda11.cudnn805",
                                                                 "cuda11.cudnn82"}
    assert jax_wheels.jaxlib_lines_of(BUNDLED, rules.jax_release(BUNDLED, "0.3.25"), "0.3.25") is None  # a jaxlib version itself


# --- an installed JAX: the cuDNN its own process loaded -------------------------------------------

def _old_jax(facts: dict[str, Any], jaxlib: str, cudnn: str) -> dict[str, Any]:
    """The recorded 2 x H200 facts with JAX replaced by a monolithic CUDA jaxlib that loaded ``cudnn``."""
    facts = copy.deepcopy(facts)
    dists = [d for d in facts["python"]["distributions"] if not str(d.get("name", "")).startswith("jax")]
    base = jaxlib.partition("+")[0]
    facts["python"]["distributions"] = dists + [{"name": "jax", "version": base}, {"name": "jaxlib", "version": jaxlib}]
    info = facts["frameworks"]["jax"]["info"]
    info.update({"version": base, "jaxlib_version": base, "plugins": [], "runtime_cudnn": cudnn})
    return facts


def test_an_installed_jaxlib_that_loaded_an_older_cudnn_is_an_error(h200x2):
    f = only(_old_jax(h200x2, "0.3.25+cuda11.cudnn82", "8.0.5"), "FWK007")
    assert f["severity"] == "error" and "JAX 0.3.25" in f["title"] and "8.0.5" in f["title"] and "8.2" in f["title"]


def test_an_installed_jaxlib_with_a_cudnn_it_accepts_adds_nothing(h200x2):
    before = {f["code"] for f in findings(h200x2)}
    assert {f["code"] for f in findings(_old_jax(h200x2, "0.3.25+cuda11.cudnn82", "8.9.7"))} == before
    recorded = copy.deepcopy(h200x2)
    recorded["frameworks"]["jax"]["info"]["runtime_cudnn"] = {"error": "not read"}  # falls back to the mapped library
    assert {f["code"] for f in findings(recorded)} == before


def test_the_recorded_jax_refuses_a_cudnn_below_its_floor(h200x2):
    facts = copy.deepcopy(h200x2)
    facts["frameworks"]["jax"]["info"]["runtime_cudnn"] = "9.1.0"  # jax 0.11.2: cuDNN >= 9.8
    f = only(facts, "FWK007")
    assert "JAX 0.11.2" in f["title"] and "9.1.0" in f["title"] and "9.8" in f["title"]


# --- CuPy since v7 --------------------------------------------------------------------------------

@pytest.mark.parametrize("args,verdict,codes_", [
    (["--cupy", "7.8.0+cuda101", "--driver", "410.48"], "error", {"CMP001"}),  # CUDA 10.1 needs 418.39
    (["--cupy", "7.8.0+cuda101", "--driver", "418.39", "--cc", "3.0"], "ok", set()),
    (["--cupy", "9.6.0", "--python", "3.10"], "error", {"CMP007"}),  # v9 wheels: cp36-cp39
    (["--cupy", "10.6.0+cuda117", "--python", "3.10", "--driver", "515.43.04"], "ok", set()),
    (["--cupy", "13.6.0+cuda11x", "--cc", "3.0"], "error", {"CMP003"}),  # NVRTC 11 cannot target 3.0
    (["--cupy", "9.6.0+cuda102", "--cc", "3.0", "--driver", "440.33"], "ok", set()),
    (["--cupy", "8.6.0+cuda80"], "unknown", {"CMP008"}),  # cupy-cuda80 ended with v7
])
def test_old_cupy_packages(args, verdict, codes_):
    data = judge(*args)
    assert data["verdict"] == verdict and coded(data) == codes_, data["findings"]


def test_a_per_cuda_cupy_package_carries_its_cuda():
    data = judge("--cupy", "9.6.0+cuda112", "--cc", "8.0")
    (build,) = data["stack"]["builds"]
    assert build["cuda"] == "11.2" and data["verdict"] == "ok"
    assert judge("--cupy", "9.6.0")["stack"]["builds"][0]["label"] == "CuPy 9.6.0 (cupy-cuda115)"
