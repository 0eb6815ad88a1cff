"""The pip arguments that install one PyTorch build (a pytorch.json release and CUDA variant), in the form
pytorch.org's previous-versions page gives for that release (pytorch.json source PIP-PINS).

One form does not serve every release: from 2.0 each CUDA variant has its own index (--index-url
.../whl/cu118); 1.11-1.13 pinned a local version with --extra-index-url; up to 1.10 the wheels were found
through a torch_stable.html page (-f), pinned as torch==1.7.1+cu101, and 1.0-1.1 wheels carry no local
version at all. A wildcard such as torch==1.7.* cannot carry a local version, so a release before 2.0 is
pinned to the patch release its variant exists in (pip_version): 1.8.0 had no CUDA 10.1 wheel, 1.8.1 has.
The release's PyPI default variant is installed from PyPI, as the page does.
"""

from __future__ import annotations

from typing import Any, Optional

from gpudoctor.compat import rules
from gpudoctor.frameworks_table import TORCH_INDEX

#: the page every release from 1.2 to 1.9 names with -f
_STABLE = f"{TORCH_INDEX}/torch_stable.html"


def pip_args(release: dict[str, Any], variant: dict[str, Any], os_name: Optional[str] = None) -> Optional[str]:
    """The arguments after ``pip install`` for this build ("'torch==2.7.*' --index-url URL", "torch==1.7.1+cu101
    -f URL"), or None where no pip command is sure to install exactly this build."""
    name = str(variant.get("name") or "")
    released = rules.version(release.get("version"))
    if released is None or not name:
        return None
    if released >= rules.known_version("2.0"):
        # quoted against the shell's globbing of "*": cmd.exe takes single quotes as part of the argument
        quote = '"' if os_name == "windows" else "'"
        return f"{quote}torch=={release['version']}.*{quote} --index-url {TORCH_INDEX}/{name}"
    pinned = variant.get("pip_version") or release.get("pip_version")
    if not isinstance(pinned, str) or rules.version(pinned) is None:
        return None
    if name == release.get("default_pypi_variant") and variant.get("pip_version") is None:
        return _default_variant(release, pinned, os_name)
    if released >= rules.known_version("1.11"):
        return f"torch=={pinned}+{name} --extra-index-url {TORCH_INDEX}/{name}"
    if released < rules.known_version("1.2"):
        # the per-CUDA page's wheels carry no local version: only that page may be searched, or PyPI's
        # manylinux wheel of the same version (another CUDA) is preferred over its linux_x86_64 one
        return f"--no-index --no-deps -f {TORCH_INDEX}/{name}/torch_stable.html torch=={pinned}"
    # 1.10's commands name the per-CUDA page (1.10.1+cu111, 1.10.0+cu113), earlier ones the shared page
    page = _STABLE if released < rules.known_version("1.10") else f"{TORCH_INDEX}/{name}/torch_stable.html"
    return f"torch=={pinned}+{name} -f {page}"


def _default_variant(release: dict[str, Any], pinned: str, os_name: Optional[str]) -> Optional[str]:
    """The PyPI default variant: a plain pin on Linux. On Windows PyPI's wheel is CPU-only where there is one
    (1.7 on), and download.pytorch.org's CUDA wheel carries the same version, so no pin is sure: None."""
    if os_name == "macos":
        return None
    if os_name == "windows":  # WSL installs the Linux wheels
        if "windows" in (release.get("pypi_wheels") or {}):
            return None
        return f"torch=={pinned} -f {_STABLE}"  # PyPI has no Windows wheel of it: only the page's
    return f"torch=={pinned}"
