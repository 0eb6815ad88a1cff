"""The start of every child process: the module search path the user's own ``python -c 'import torch'``
would have, without the working directory, and gpudoctor's own package from its own folder.

Children are started as ``PYTHON -I -u -c BOOT CONFIG MODULE ARGS...`` (child.command): ``-I`` keeps
the working directory, ``PYTHON*`` variables and the user site out of ``sys.path``, so a project
folder holding ``random.py`` or ``types.py`` cannot shadow the standard library in a child, and
``PYTHONWARNINGS=error`` cannot turn a child's pipes into tracebacks. Once the standard library has
loaded, ``start`` rebuilds what the user's interpreter would see, in the order it would see it:
``PYTHONPATH`` first, then the interpreter's own path, with the user site before site-packages where
the interpreter enables it. A framework found on ``PYTHONPATH`` is then the one diagnosed, as it is
the one the user's import gets.

This module runs under the diagnosed interpreter, which may be older than gpudoctor's own (3.9
upward) and may not have gpudoctor installed: standard library only.
"""

from __future__ import annotations

import os
import runpy
import site
import sys
from typing import Any

#: The code ``-c`` runs: find the package ``gpudoctor`` (and nothing else) in the folder the parent names,
#: so the child never sees the other packages of gpudoctor's own environment (a pipx venv, say).
BOOT = (
    "import sys,json,importlib.machinery as m\n"
    "c=json.loads(sys.argv[1])\n"
    "class F:\n"
    " @staticmethod\n"
    " def find_spec(n,p=None,t=None):\n"
    "  return m.PathFinder.find_spec(n,[c['root']]) if n=='gpudoctor' else None\n"
    "sys.meta_path.insert(0,F)\n"
    "from gpudoctor.probes import childpath\n"
    "childpath.start(c,sys.argv[2],sys.argv[3:])\n"
)


def start(config: dict[str, Any], module: str, args: list[str]) -> None:
    """Set the search path (``user_path``, then ``config["append"]``: gpudoctor's own path, for the
    children that need its dependencies such as NVML's bindings) and run ``module`` as ``__main__``."""
    import faulthandler

    from gpudoctor.probes import protocol

    protocol.take()  # before anything can start a process that would inherit the channel's name
    faulthandler.enable()  # a crash inside a framework or the driver prints the Python stack it happened in
    sys.path[:] = list(dict.fromkeys(user_path(config.get("cwd") or "/") + list(config.get("append") or [])))
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def user_path(cwd: str = "/") -> list[str]:
    """``sys.path`` as ``python -c`` started in ``cwd`` would have it, less the working directory itself:
    ``PYTHONPATH`` (relative entries taken from ``cwd``), this interpreter's own entries, and the user
    site before the first site-packages where this interpreter would enable it."""
    base = [p for p in sys.path if p]
    extra = [os.path.join(cwd, p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = list(dict.fromkeys(extra + base))
    user = _user_site()
    if user and os.path.isdir(user) and user not in path:
        before = list(sys.path)
        site.addsitedir(user)  # also runs its .pth files, as site.py would
        added = [p for p in sys.path if p not in before]
        sys.path[:] = before
        at = next((i for i, p in enumerate(path) if p.rstrip("/").endswith(("site-packages", "dist-packages"))), len(path))
        path[at:at] = [p for p in added if p not in path]
    return path


def _user_site() -> str:
    """The user site folder this interpreter would add without ``-I`` (site.py's rules), or ""."""
    if os.environ.get("PYTHONNOUSERSITE"):
        return ""
    if hasattr(os, "geteuid") and os.geteuid() != os.getuid():
        return ""
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix) and not _venv_includes_system_site():
        return ""
    try:
        return site.getusersitepackages()
    except Exception:  # noqa: BLE001 - an odd site.py: no user site
        return ""


def _venv_includes_system_site() -> bool:
    cfg = os.path.join(sys.prefix, "pyvenv.cfg")
    try:
        with open(cfg) as fh:
            for line in fh:
                key, _, value = line.partition("=")
                if key.strip().lower() == "include-system-site-packages":
                    return value.strip().lower() == "true"
    except OSError:
        pass
    return False
