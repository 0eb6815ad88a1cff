"""Find each paste in what a user posted: a bare paste, or an issue body or comment with prose,
``` fences, <details> blocks, quoted (``>``) lines, and several pastes at once.

The body is cut at its fences (an unclosed fence runs to the end: a paste cut short), and every
piece is offered to every format's recogniser, since people put collect_env and nvidia-smi in one
fence as often as in two. A piece gives one paste per format it holds; the parsers then read only
their own lines, so prose around a paste is ignored rather than misread.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.compat.data import BUNDLED, Matrix
from gpudoctor.pastes import collect_env, markdown_report, nvidia_smi

_FENCE = re.compile(r"^\s{0,3}(```+|~~~+)")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
#: Characters that show as nothing (zero-width spaces and joiners, soft hyphen, word joiner, BOM): copied
#: from a web page into a key ("PyTorch\u200b version:") they would hide the line from every reader.
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff"


def _visible(text: str) -> str:
    """``text`` without the characters of _INVISIBLE (str.replace per character: a pass over a megabyte
    takes a millisecond, where a regular expression's substitution takes tens)."""
    for char in _INVISIBLE:
        if char in text:
            text = text.replace(char, "")
    return text
_TAGS = re.compile(r"</?(?:details|summary|pre|code|p|br|b|strong|em|i|div|sub|sup)\b[^>]*>", re.I)

KINDS = ("gpudoctor-json", "gpudoctor-markdown", "collect_env", "nvidia-smi", "nvidia-smi -q", "nvidia-smi -q -x", "nvidia-smi -L",
         "nvidia-container-cli info",
         "messages", "session", "template", "tools", "prose")


@dataclass
class Paste:
    kind: str  # one of KINDS
    where: str  # "issue.md, block 2"
    parsed: dict[str, Any] = field(default_factory=dict)


def unquote(text: str) -> str:
    """Drop Markdown quote markers (a paste quoted in a reply) and the HTML tags GitHub's templates wrap
    pastes in; XML pastes keep their tags (they are not in the list)."""
    if ">" not in text:  # no quote marker anywhere: the lines as they are, without a test per line
        return "\n".join(text.splitlines())
    lines = []
    for line in text.splitlines():
        while ">" in line[:4] and _QUOTE.match(line) and not line.lstrip().startswith(">>>"):  # a marker is in the first 4
            line = _QUOTE.sub("", line, count=1)
        lines.append(line)
    return "\n".join(lines)


def pieces(text: str) -> list[str]:
    """The body cut at its fences: fenced blocks and the text between them, in order."""
    out: list[str] = []
    current: list[str] = []
    fenced = ""
    for line in text.splitlines():
        m = _FENCE.match(line) if "```" in line or "~~~" in line else None
        if m and (not fenced or m.group(1)[0] == fenced[0] and len(m.group(1)) >= len(fenced)
                  and not line.strip()[len(m.group(1)):].strip()):
            out.append("\n".join(current))
            current = []
            fenced = "" if fenced else m.group(1)
            continue
        current.append(line)
    out.append("\n".join(current))
    return [p for p in out if p.strip()]


def find_pastes(text: str, name: str = "input", matrix: Matrix = BUNDLED) -> list[Paste]:
    """Every paste in ``text``, each parsed; an empty list when none is there. ``matrix`` names what a message
    leaves unsaid (pastes/forms/)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    report = _json_report(text)
    if report is not None:
        return [Paste("gpudoctor-json", name, report)]
    if markdown_report.looks_like(text):
        facts = markdown_report.embedded_facts(text)
        left_out = markdown_report.facts_left_out(text) if facts is not None else []
        own = Paste("gpudoctor-markdown", name, {"facts": facts, "left_out": left_out,
                                                 "shown_findings": markdown_report.shown_findings(text) if left_out else []}
                    if facts is not None else markdown_report.parse_shown(text))
        # the body around the report may hold other pastes (a collect_env of the failing run): they are read,
        # not dropped unseen; a report that carries its facts ends at them, so what follows is read in full
        rest = _visible(markdown_report.outside(text))
        return _without_prose([own] + _blocks(rest, name) + (find_forms(rest, name, matrix) if facts is not None else []))
    text = _visible(text)
    return _without_prose(_blocks(text, name) + find_forms(text, name, matrix))


#: Pastes that state the machine's facts themselves: where one is, the prose around it only retells them.
_FIXED = {"gpudoctor-json", "gpudoctor-markdown", "collect_env", "nvidia-smi", "nvidia-smi -q", "nvidia-smi -q -x"}


def _without_prose(found: list[Paste]) -> list[Paste]:
    """``found`` less the prose's versions when a report, collect_env or nvidia-smi paste is among them (nvidia-smi's
    one-line failure states no version, so the prose around it still counts: "WSL", the GPU, the framework)."""
    if any(p.kind in _FIXED and not p.parsed.get("failure") for p in found):
        return [p for p in found if p.kind != "prose"]
    return found


def _blocks(text: str, name: str) -> list[Paste]:
    """The pastes of the fixed layouts (a JSON report, nvidia-smi, collect_env), block by block."""
    found: list[Paste] = []
    blocks = pieces(unquote(text))
    first: dict[str, tuple[str, int]] = {}  # a block's text -> where it was first read, the index of its first paste
    repeats: dict[str, list[int]] = {}
    for n, block in enumerate(blocks, 1):
        where = name if len(blocks) == 1 else f"{name}, block {n}"
        seen = first.get(block.strip())
        if seen is not None:  # the same text again tells nothing new: read once, however often it was pasted
            repeats.setdefault(seen[0], []).append(n)
            continue
        first[block.strip()] = (where, len(found))
        if block.lstrip().startswith("{"):
            report = _json_report(block)
            if report is not None:
                found.append(Paste("gpudoctor-json", where, report))
                continue
        if nvidia_smi.looks_like_xml(block):
            try:
                found.append(Paste("nvidia-smi -q -x", where, nvidia_smi.parse_xml(block)))
            except nvidia_smi.UnsafeXML as exc:
                found.append(Paste("nvidia-smi -q -x", where, {"gpus": [], "notes": [f"nvidia-smi -q -x: {exc}"],
                                                                "refused": True}))
            continue
        plain = html.unescape(_TAGS.sub("", block))
        if nvidia_smi.looks_like_q(plain):
            found.append(Paste("nvidia-smi -q", where, nvidia_smi.parse_q(plain)))
        elif nvidia_smi.looks_like_table(plain):
            found.append(Paste("nvidia-smi", where, nvidia_smi.parse_table(plain)))
        elif nvidia_smi.looks_like_list(plain) and not collect_env.looks_like(plain):
            found.append(Paste("nvidia-smi -L", where, nvidia_smi.parse_list(plain)))
        if nvidia_smi.looks_like_cli_info(plain):
            found.append(Paste("nvidia-container-cli info", where, nvidia_smi.parse_cli_info(plain)))
        failed = nvidia_smi.failure(plain)
        # a table or -q of the same block already says how nvidia-smi ended; a -L listing does not (it may be the
        # host's, beside the container's failure)
        if failed and not any(p.kind in ("nvidia-smi", "nvidia-smi -q") and p.where == where for p in found):
            said: dict[str, Any] = {"reason": failed[0], "message": failed[1]}
            library = nvidia_smi.nvml_library_version(plain) if failed[0] == "driver_library_mismatch" else None
            if library:
                said["library_version"] = library
            found.append(Paste("nvidia-smi", where, {"gpus": [], "notes": [], "failure": said}))
        if collect_env.looks_like(plain):
            found.append(Paste("collect_env", where, collect_env.parse(plain)))
    for where, start in first.values():
        if where in repeats and start < len(found) and found[start].where == where and found[start].kind != "gpudoctor-json":
            found[start].parsed.setdefault("notes", []).append(_repeated(where, repeats[where]))
    return found


def _repeated(where: str, blocks: list[int]) -> str:
    """The note for a block pasted again in ``blocks``: read once."""
    shown = ", ".join(str(n) for n in blocks[:5]) + (f" and {len(blocks) - 5} more" if len(blocks) > 5 else "")
    return f"{where}: the same text is pasted again in block{'s' if len(blocks) > 1 else ''} {shown}; read once"


def find_forms(text: str, name: str, matrix: Matrix) -> list[Paste]:
    """The other forms (gpudoctor/pastes/forms/), each read over the whole body, so that a warning in
    prose or a session split by fences is still read; every value keeps its line in the body."""
    from gpudoctor.pastes.forms import MAX_LINE, readers

    lines = [html.unescape(_TAGS.sub("", line[:MAX_LINE])) if "<" in line or "&" in line else line[:MAX_LINE]
             for line in unquote(text).split("\n")]
    found = []
    for kind, reader in readers(matrix):
        values = reader(lines)
        if values:
            found.append(Paste(kind, f"{name}, {_first_line(values)}", values))
    return found


def _first_line(values: dict[str, Any]) -> str:
    numbers = [e["line"] for e in values.get("evidence") or []] + list((values.get("lines") or {}).values())
    numbers += [p["line"] for key in ("packages", "lspci", "ldconfig") for p in values.get(key) or []]
    return f"line {min(numbers)}" if numbers else "body"


def _json_report(text: str) -> Any:
    """A gpudoctor JSON report in the text (a fenced one in a body included), or None."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and "facts" in data and "schema_version" in data else None
