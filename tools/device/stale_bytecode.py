"""Which modules `check --quick` imports without usable bytecode: no .pyc beside the source, or one
older than it. Where PYTHONDONTWRITEBYTECODE is set (the GPU machines' image sets it) and a package was
installed with `pip install --no-compile`, Python compiles each such module from source on every run.
Reads only. Usage (device tool, repo root): python3 tools/device/stale_bytecode.py
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def usable(source: str) -> bool:
    """Whether ``source``'s cached bytecode exists and was written for its current mtime and size."""
    cached = importlib.util.cache_from_source(source)
    try:
        head = Path(cached).read_bytes()[:16]
        stat = os.stat(source)
    except OSError:
        return False
    flags = int.from_bytes(head[4:8], "little")
    if flags & 1:  # hash-based pyc: trusted as written
        return True
    return (int.from_bytes(head[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(head[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def main() -> None:
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        from gpudoctor.cli import cli

        cli.main(["check", "--quick"], prog_name="gpudoctor", standalone_mode=False)
    except SystemExit:
        pass
    sys.stdout = out
    stale = []
    for name, module in sorted(sys.modules.items()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None) or ""
        if origin.endswith(".py") and not usable(origin):
            stale.append((os.path.getsize(origin), name, origin))
    print(f"{len(stale)} of {len(sys.modules)} modules imported without usable bytecode "
          f"(PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}):")
    for size, name, origin in sorted(stale, reverse=True):
        print(f"  {size:8d} B  {name}  {origin}")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
