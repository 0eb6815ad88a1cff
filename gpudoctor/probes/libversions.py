"""Child process: load each library given on the command line and print the version it reports.

Run as ``python -m gpudoctor.probes.libversions '[["libcudnn", "/path/libcudnn.so.9"], ...]'``.
One JSON line per library, printed as soon as it is read, so a library that crashes the process
(a broken or wrong-architecture copy) costs only the lines after it.
"""

from __future__ import annotations

import json
import sys

from gpudoctor.procs import protocol
from gpudoctor.probes.libnames import version_from_library


def main(argv: list[str]) -> int:
    for family, path in json.loads(argv[0]):
        protocol.emit("library", {"path": path, "version": version_from_library(family, path)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
