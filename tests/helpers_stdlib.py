"""The standard library's top-level module names, on every Python gpudoctor supports."""

from __future__ import annotations

import os
import pkgutil
import sys
import sysconfig
from typing import FrozenSet


def stdlib_module_names() -> FrozenSet[str]:
    """``sys.stdlib_module_names``, which Python 3.10 added; on 3.9, the modules built into the interpreter
    and those in the standard library's own folders (site-packages is not a module there, so it and what
    it holds are left out)."""
    names = getattr(sys, "stdlib_module_names", None)
    if names is not None:
        return frozenset(names)
    # the base interpreter's folders: inside a venv, platstdlib names the venv
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
                                     "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix})
    folders = {base["stdlib"], base["platstdlib"], os.path.join(base["platstdlib"], "lib-dynload")}
    return frozenset({m.name for m in pkgutil.iter_modules(sorted(folders))} | set(sys.builtin_module_names))
