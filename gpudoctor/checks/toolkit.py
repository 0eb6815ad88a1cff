"""The CUDA toolkit: does the nvcc on PATH belong to the toolkit CUDA_HOME names?

Build tools (torch.utils.cpp_extension, CMake, setup.py of flash-attn and friends) take
CUDA_HOME's toolkit while a user running `nvcc --version` sees another, so an extension is built
for a CUDA the user did not check.
"""

from __future__ import annotations

import os
from typing import Iterator

from gpudoctor.checks.base import Check, Facts, NotApplicable, finding
from gpudoctor.findings import Finding
from gpudoctor.snapshot import get, known


def check_nvcc_vs_home(facts: Facts) -> Iterator[Finding]:
    nvcc = get(facts, "toolkit.nvcc") or {}
    homes = {var: entry for var, entry in (get(facts, "toolkit.env") or {}).items() if entry}
    if not homes:
        raise NotApplicable("CUDA_HOME and CUDA_PATH are not set")
    for var, home in homes.items():
        if not home.get("exists"):
            yield finding("CUDA002", f"{var}={home.get('path')} does not exist",
                          text=(f"Point {var} at the toolkit nvcc comes from ({nvcc['toolkit_root']}), or unset it."
                                if nvcc.get("toolkit_root") else f"Point {var} at an installed toolkit, or unset it."),
                          commands=[f"unset {var}"] + ([f"export {var}={nvcc['toolkit_root']}"] if nvcc.get("toolkit_root") else []))
            continue
        if not nvcc.get("found") or not nvcc.get("toolkit_root"):
            continue
        home_version, nvcc_release = known(home.get("version")), known(nvcc.get("release"))
        same_dir = os.path.realpath(nvcc["toolkit_root"]) == home.get("real_path")
        if not same_dir and home_version and nvcc_release and str(home_version).split(".")[:2] != str(nvcc_release).split(".")[:2]:
            yield finding("CUDA001", f"nvcc on PATH is CUDA {nvcc_release} ({nvcc['path']}), but {var} points at CUDA "
                                     f"{home_version} ({home.get('path')})",
                          text="Extension builds use the toolkit CUDA_HOME names. Make both name the same toolkit: "
                               f"point {var} at nvcc's (below), or instead put {home.get('path')}/bin first on PATH.",
                          commands=[f"export {var}={nvcc['toolkit_root']}"])


CHECKS = (
    Check("toolkit.nvcc_home", "toolkit", "nvcc and CUDA_HOME name the same toolkit", ("CUDA001", "CUDA002"),
          check_nvcc_vs_home, ("cuda_stack",)),
)
