"""Combinations recorded as broken whatever the version rules say (compat_matrix/known_bad.json), each
with its source: CMP009. Kept apart from the rules of compat/stack.py because it is data-driven (an
entry's "when" names the framework, version and compute capability ranges and the OS) and because a
known-bad error settles what the architecture rule would otherwise call unknown (settled_by_known_bad)."""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.compat import rules
from gpudoctor.compat.data import Matrix, MatrixError
from gpudoctor.compat.model import Build, Stack, _os_label, finding
from gpudoctor.findings import ERROR, WARNING, Finding


def settled_by_known_bad(matrix: Matrix, stack: Stack) -> set[tuple[str, str]]:
    """(build label, GPU label) pairs a known-bad error already decides."""
    return {(b.label, label) for entry, b, label, _ in _known_bad_matches(matrix, stack) if entry.get("severity", ERROR) == ERROR and label}


def judge_known_bad(matrix: Matrix, stack: Stack) -> list[Finding]:
    """Combinations recorded as broken whatever the version rules say, each with its source: CMP009 at
    the entry's severity. An entry's "when" may name: framework (torch, tensorflow, jax, cupy, or "cuda"
    for any CUDA build), version_range (a specifier on the release, major.minor), cc_range (a specifier
    on the GPU's compute capability), os (a list). A condition the stack does not state never matches."""
    try:
        sources = matrix.topic("known_bad").get("sources", {})
    except MatrixError:
        return []
    return [_known_bad_finding(entry, build, label, cc, stack, sources) for entry, build, label, cc in _known_bad_matches(matrix, stack)]


def _known_bad_matches(matrix: Matrix, stack: Stack) -> list[tuple[dict[str, Any], Build, str, str]]:
    try:
        entries = matrix.topic("known_bad")["entries"]
    except MatrixError:
        return []
    out = []
    for entry in entries:
        when = entry.get("when") or {}
        for build in stack.builds:
            for gpu_label, cc in (stack.gpus if "cc_range" in when else [("", "")]):
                if _matches(when, build, cc, stack):
                    out.append((entry, build, gpu_label, cc))
    return out


def _matches(when: dict[str, Any], build: Build, cc: str, stack: Stack) -> bool:
    fw = when.get("framework")
    if build.installed and not (stack.gpus or stack.gpus_named):
        return False  # a machine with no NVIDIA GPU in view: no GPU use is expected of what it has installed
    if fw == "cuda":
        if build.cpu_only:
            return False  # a CPU build (macOS's own torch) never asks for CUDA
    elif fw and fw != build.framework:
        return False
    if "cc_range" in when and build.cpu_only:
        return False  # a CPU-only build does not touch the GPU (FWK001 speaks for it)
    if "os" in when and stack.os not in (when["os"] or []):
        return False
    if "version_range" in when and not _in_spec(build.version.partition("+")[0], when["version_range"]):
        return False
    if "cc_range" in when and not _in_spec(cc, when["cc_range"]):
        return False
    return True


def _in_spec(value: str, spec: Any) -> bool:
    v = rules.major_minor(value)
    return v is not None and isinstance(spec, str) and bool(rules.in_range(v, spec))


def _known_bad_finding(entry: Any, build: Build, gpu_label: str, cc: str, stack: Stack,
                       sources: dict[str, str]) -> Finding:
    fields = {"build": build.label, "gpu": gpu_label, "cc": cc, "os": _os_label(stack.os)}
    try:
        title = str(entry.get("message", "")).format(**fields)
        fix = str(entry.get("fix", "")).format(**fields)
    except (KeyError, IndexError, ValueError):
        title, fix = str(entry.get("message", "")), str(entry.get("fix", ""))
    links = [u for u in (re.search(r"https?://\S+", sources.get(k, "")) for k in [entry.get("source")] + list(entry.get("see_also") or []))
             if u]
    severity = entry.get("severity") if entry.get("severity") in (ERROR, WARNING) else ERROR
    detail = str(entry.get("detail", "")) + (f" (known-bad entry {entry.get('id')}, as of {entry.get('as_of')})")
    return finding("CMP009", title, detail=detail.strip(), text=fix, commands=[c.replace("python3", stack.python_executable, 1)
                   if c.startswith("python3 ") else c for c in entry.get("fix_commands") or []],
                   links=[m.group(0).rstrip(").,;") for m in links], severity=severity)
