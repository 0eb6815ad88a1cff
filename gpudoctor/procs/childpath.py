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

A child dies with gpudoctor, and takes what it started along: gpudoctor holds the write end of a
lifeline pipe (child.run_json_lines) whose read end the child names in ``GPUDOCTOR_LIFELINE_FD``;
nothing is ever written to it, so end-of-file there means gpudoctor is gone, whatever ended it (a
SIGKILL runs no clean-up of gpudoctor's). A daemon thread of the child waits for that and then kills
the child's descendants, its process group and itself. PR_SET_PDEATHSIG would not do: it fires when
the *thread* that started the child ends (prctl(2)), and gpudoctor starts children from probe
threads that may end while the child's exit is still under way.

This module runs under the diagnosed interpreter, which may be older than gpudoctor's own (3.9
upward) and may not have gpudoctor installed: standard library only.
"""

from __future__ import annotations

import os
import runpy
import signal
import site
import sys
import threading
from typing import Any

from gpudoctor.procs.pids import descendant_pids, marked_pids, start_ticks

#: Names the descriptor of the child's end of its lifeline (see the module's docstring).
LIFELINE_ENV = "GPUDOCTOR_LIFELINE_FD"

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
    "from gpudoctor.procs import childpath\n"
    "childpath.start(c,sys.argv[2],sys.argv[3:])\n"
)


def start(config: dict[str, Any], module: str, args: list[str]) -> None:
    """Set the search path (``user_path``, then ``config["append"]``: gpudoctor's own path, for the
    children that need its dependencies such as NVML's bindings) and run ``module`` as ``__main__``."""
    import faulthandler

    from gpudoctor.procs import protocol
    from gpudoctor.trace import mark

    mark(f"child: {module} starts")

    protocol.take()  # before anything can start a process that would inherit the channel's name
    hold_lifeline()
    faulthandler.enable()  # a crash inside a framework or the driver prints the Python stack it happened in
    sys.path[:] = list(dict.fromkeys(user_path(config.get("cwd") or "/") + list(config.get("append") or [])))
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def hold_lifeline() -> None:
    """Take the lifeline the parent named (out of the environment, and not inherited by what this child
    starts), and watch it from a daemon thread: at its end-of-file, die with what this child started."""
    value = os.environ.pop(LIFELINE_ENV, "")
    if not value.isdigit():
        return  # started by hand: no parent to die with
    fd = int(value)
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return
    threading.Thread(target=_watch, args=(fd,), name="gpudoctor-lifeline", daemon=True).start()


def _watch(fd: int) -> None:
    try:
        while os.read(fd, 64):
            pass  # nothing is ever written; read on to end-of-file
    except OSError:
        return  # closed under it by the child's own code: no longer a lifeline, and no reason to die
    die_with_parent()


def die_with_parent() -> None:
    """gpudoctor is gone: kill every descendant of this child (one that left the group through setsid
    too), the child's group, and the child."""
    me = os.getpid()
    for pid in descendant_pids(me) + _marked(me):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if os.getpgrp() == me:  # the leader of its own group (child.run_json_lines starts a session)
        try:
            os.killpg(me, signal.SIGKILL)
        except OSError:
            pass
    os._exit(1)


def _marked(me: int) -> list[int]:
    """The processes started since this child whose environment carries its mark (``GPUDOCTOR_CHILD``,
    processes.MARK_ENV): its descendants that left its tree (a double fork)."""
    token = os.environ.get("GPUDOCTOR_CHILD", "")
    since = start_ticks(me)
    if not token or since is None:
        return []
    return marked_pids(f"GPUDOCTOR_CHILD={token}".encode(), skip=me, since=since)


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
