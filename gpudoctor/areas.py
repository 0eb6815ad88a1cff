"""The check areas, each named once: its name, the title the reports print, its finding codes' prefix and
what those codes are about.

An area is one layer of the GPU stack, and the reports are laid out by them, bottom of the stack to top:
the registry orders and selects checks by area (``--only``/``--skip``), the text and Markdown reports
print one line per area under its title, docs/findings.md (tools/docgen.py) introduces the code prefixes,
and docs/report-format.md lists them (tests/test_docs_drift.py holds it to this module). None of them
keeps a list of its own, so a new area, or a renamed title, is one edit here.

Only names and words: no check, probe or renderer is imported (the frameworks' names are
gpudoctor/frameworks_table.py's), so any layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudoctor import frameworks_table


@dataclass(frozen=True)
class Area:
    name: str  # what checks declare, summary.areas holds, --only/--skip take
    title: str  # the area's line in the text and Markdown reports
    prefix: str  # the prefix of the finding codes its checks report (DRV002)
    what: str  # what those codes are about, for the reference of codes (docs/findings.md)


#: Bottom of the stack to top: the order of the registry's checks and of every report's areas.
AREAS: tuple[Area, ...] = (
    Area("doctor", "gpudoctor itself", "INT", "gpudoctor itself"),
    Area("driver", "Driver", "DRV", "the driver: NVML, the kernel module, device files"),
    Area("gpus", "GPUs", "GPU", "each GPU's health and state"),
    Area("topology", "Topology", "TOPO", "links between GPUs"),
    Area("visibility", "Visibility", "VIS", "what a CUDA program will see"),
    Area("container", "Container", "CTR", "what the container runtime passed in"),
    Area("toolkit", "CUDA toolkit", "CUDA", "the CUDA toolkit: nvcc and CUDA_HOME"),
    Area("libraries", "CUDA libraries", "LIB", "the CUDA libraries frameworks load"),
    Area("python", "Python", "PY", "the Python environment's packages"),
    Area("frameworks", "Frameworks", "FWK", f"the installed frameworks ({', '.join(frameworks_table.NAMES.values())})"),
    Area("compat", "Compatibility", "CMP", "compatibility of driver, GPUs, toolkit and framework builds"),
    Area("acceleration", "Acceleration", "RUN",
         "the smoke kernel, the framework workloads, and the GPUs and nodes together"),
)

#: The areas' names, in order (checks/registry.py's ``AREAS``).
NAMES: tuple[str, ...] = tuple(a.name for a in AREAS)
_TITLES = {a.name: a.title for a in AREAS}


def title(name: str) -> str:
    """The title a report prints for area ``name``; an area this version does not know (a report from
    another version) is shown by its name."""
    return _TITLES.get(name, name)
