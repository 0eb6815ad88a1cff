"""`analyze`'s inputs: files or standard input, size-capped as saved reports are, decoded the ways users'
files come (UTF-8, with or without BOM; UTF-16 from a PowerShell ``>``), then a gpudoctor report or
the pastes found in them. Every failure is a PasteError with one line for the user.
"""

from __future__ import annotations

import codecs
import sys
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Optional, Sequence

from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.pastes.detect import Paste, find_pastes
from gpudoctor.pastes.to_facts import merge

#: The same cap as a saved report's (gpudoctor/report.py MAX_REPORT_BYTES), per input.
from gpudoctor.report import MAX_REPORT_BYTES

WHAT = ("a gpudoctor report, collect_env output, nvidia-smi output (table, -q or -q -x), a framework's or CUDA's "
        "error message, a Python session, an issue template, nvcc/pip/conda output or an issue body holding them")


class PasteError(ValueError):
    """An input that cannot be used; the message is one line."""


@dataclass
class Inputs:
    """What the inputs hold: one gpudoctor report (``report``), or pastes merged into ``facts``."""

    report: Optional[dict[str, Any]] = None
    report_source: str = ""
    pastes: list[Paste] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    runnable: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # what a Markdown report left out of its facts to fit
    shown_findings: list[dict[str, str]] = field(default_factory=list)  # that report's own findings, as shown


def read_bytes(name: str, stdin: Optional[BinaryIO] = None) -> bytes:
    from gpudoctor.files import TooLarge, read_capped

    if name == "-" and stdin is None and getattr(sys.stdin, "buffer", None) is None:
        # started with standard input closed (`<&-`, a service): Python sets sys.stdin to None
        raise PasteError("cannot read standard input (-): it is closed; give a file instead")
    try:
        return read_capped((stdin if stdin is not None else sys.stdin.buffer) if name == "-" else name, MAX_REPORT_BYTES)
    except OSError as exc:
        raise PasteError(f"cannot read {name}: {exc.strerror or exc}") from None
    except TooLarge as exc:
        raise PasteError(f"{name} is too large to analyze ({exc})") from None


def decode(data: bytes, name: str) -> tuple[str, list[str]]:
    """Text, and a note when bytes had to be replaced. NUL bytes outside UTF-16 mean a binary file."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace"), []
    if b"\x00" in data:
        raise PasteError(f"{name} is not text; analyze reads {WHAT}")
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), [f"{name}: bytes that are not UTF-8 were replaced"]


def read_inputs(texts: Sequence[tuple[str, str]], matrix: Matrix = BUNDLED) -> Inputs:
    """Find the pastes in each (name, text); a gpudoctor report among them is judged alone. What the pastes
    name (a GPU, a PyTorch wheel) is looked up in ``matrix``, the one they are judged with."""
    found: list[Paste] = []
    for name, text in texts:
        pastes = find_pastes(text, name, matrix)
        if not pastes:
            raise PasteError(f"{name}: nothing to judge: no paste found; analyze reads {WHAT}")
        found += pastes
    reports = [p for p in found if p.kind == "gpudoctor-json" or (p.kind == "gpudoctor-markdown" and "facts" in p.parsed)]
    out = Inputs(pastes=found)
    if reports:
        first = reports[0]
        out.report = first.parsed if first.kind == "gpudoctor-json" else {"schema_version": 1, "facts": first.parsed["facts"]}
        out.report_source = first.where
        out.left_out = list(first.parsed.get("left_out") or []) if first.kind == "gpudoctor-markdown" else []
        out.shown_findings = list(first.parsed.get("shown_findings") or []) if first.kind == "gpudoctor-markdown" else []
        if len(found) > 1:
            others = [p for p in found if p is not first]
            out.notes.append(f"judged the gpudoctor report in {first.where} alone; {len(others)} other paste(s) not "
                             f"judged with it: {', '.join(f'{p.kind} ({p.where})' for p in others[:10])}; analyze "
                             "them apart to judge them")
        return out
    facts, runnable = merge(matrix, found)
    useful = [p for p in found if _says_something(p)]
    if not useful:
        raise PasteError(f"{texts[0][0] if len(texts) == 1 else 'the inputs'}: nothing to judge: the pastes could not be read "
                         f"({'; '.join(n for p in found for n in p.parsed.get('notes') or []) or 'no values found'})")
    out.facts, out.runnable, out.notes = facts, runnable, list(facts["paste"]["notes"])
    return out


def _says_something(paste: Paste) -> bool:
    values = paste.parsed
    return any(values.get(k) for k in ("driver_version", "gpus", "torch_version", "failure", "cuda_build",
                                        "python_version", "frameworks", "cuda_runtime", "evidence", "nvcc",
                                        "kernel_module", "packages", "lspci", "tensorflow_version", "jax_version",
                                        "cupy_version", "gpu", "cuda", "driver_version", "os", "signs"))
