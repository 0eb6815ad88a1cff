"""Untrusted text made safe for where it is printed: a terminal, XML, GitHub Markdown.

Every string in a report's facts is untrusted: a GPU name and a driver version come from NVML, an error
from a framework, a host name and file names from the machine, and ``analyze`` and ``merge`` read reports
written anywhere. Printed raw, such a string clears a terminal (``\\x1b[2J``), sets its title (OSC 0),
plants a hyperlink (OSC 8), forges a line of the report (a newline), makes the JUnit file ill-formed XML
(a colour code in a framework error, exactly when CI needs to read it), or in Markdown meant for GitHub
closes a ``<details>``, embeds an image, pings ``@everyone`` or starts a heading.

Renderers therefore clean every string of the data once (:func:`printable`) and then, where a string
goes into one line or one table cell, keep it on that line (:func:`terminal`), or, in Markdown, keep it
text (:func:`markdown_inline`). Only the renderers' own text carries newlines and colour codes. The JSON
output is never cleaned: it is data, and ``json`` escapes what it must.

The cleaning is visible and lossless to a reader: an escape character is shown as ``\\x1b``, a newline in
a one-line place as ``\\n``, never dropped, so a hostile string is seen for what it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Characters never printed raw: C0 controls but tab and newline (carriage return included: it overwrites
#: the line), DEL, C1 controls (U+009B is a one-character CSI to a terminal), the bidirectional overrides
#: and isolates that reorder what a line shows ("Trojan Source", CVE-2021-42574), the Unicode line and
#: paragraph separators, lone surrogates and U+FFFE/U+FFFF (not allowed in XML 1.0, not encodable as UTF-8).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                     "\u2028\u2029\ud800-\udfff\ufffe\uffff]")
_UNSAFE_OR_LINE = re.compile(_UNSAFE.pattern[:-1] + "\t\n]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x09:
        return "\\t"
    if code == 0x0A:
        return "\\n"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: Any, newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\x9b``, ``\\u202e``).

    By default the result is one line: a newline or tab in the data is shown as ``\\n``/``\\t`` too, for a
    string that goes into one line or one table cell. ``newlines=True`` keeps newlines and tabs, for a
    string the renderer lays out over several lines (:func:`indented`)."""
    return (_UNSAFE if newlines else _UNSAFE_OR_LINE).sub(_visible, str(text))


def printable(data: Any, newlines: bool = True) -> Any:
    """A copy of a report (or facts, or a merged fleet) with every string, keys included, passed through
    :func:`terminal`: cleaned once, before a renderer reads it. Numbers, booleans and None are kept, so
    the renderers' arithmetic and lookups work as on the original. Idempotent."""
    if isinstance(data, str):
        return terminal(data, newlines)
    if isinstance(data, dict):
        return {printable(k, newlines): printable(v, newlines) for k, v in data.items()}
    if isinstance(data, list):
        return [printable(v, newlines) for v in data]
    if isinstance(data, tuple):
        return tuple(printable(v, newlines) for v in data)
    return data


def indented(text: Any, indent: str) -> str:
    """Multi-line data (a traceback in a finding's detail) under the renderer's indentation: every line
    after the first starts with ``indent`` too, so no line of the data can start at the margin and pass
    for a line of the report."""
    return "\n".join(line if i == 0 or not line else indent + line
                     for i, line in enumerate(terminal(text, newlines=True).split("\n")))


# XML ---------------------------------------------------------------------------------------------

def xml_text(text: Any) -> str:
    """Text for ElementTree (which escapes ``<``, ``&`` and quotes itself): every character XML 1.0 does
    not allow (C0 controls, lone surrogates, U+FFFE/U+FFFF), and C1 controls, shown as escapes instead."""
    return terminal(text, newlines=True)


def xml(text: Any) -> str:
    """Text for XML written by hand, as element content or a quoted attribute: :func:`xml_text` with the
    markup characters escaped."""
    return (xml_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&apos;"))


# Markdown (GitHub) -------------------------------------------------------------------------------

#: A mention GitHub would notify (``@user``, ``@org/team``, ``@everyone``): an @ not preceded by a word
#: character and followed by one. A word joiner after the @ keeps it readable and makes it no mention.
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9_])")
#: A character reference (``&lt;``, ``&#64;``) that GitHub would decode: its & is escaped.
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
#: What starts a block when first on a line: a heading, a quote, a list item, a setext underline, a
#: thematic break, a tilde fence, an ordered list item ("1." / "1)": its dot or parenthesis is escaped).
_LEADING = re.compile(r"^(\s*)([#>=+*_~-]|\d{1,9}(?=[.)](?:\s|$)))")
WORD_JOINER = "\u2060"


def markdown_inline(text: Any, table: bool = True) -> str:
    """Data as literal text in one line or one table cell of GitHub Markdown.

    Newlines become spaces. Outside code spans: ``\\``, ``|`` and ``[`` are backslash-escaped (no table
    cell split, no link or image); ``<`` becomes ``&lt;`` (no HTML tag, comment or autolink:
    ``</details>``, ``<img>``, ``<!--``); an entity's ``&`` becomes ``&amp;``; a mention gets a word joiner
    after its ``@``; what would start a block at the start of a line (``#``, ``>``, ``-``, ``+``, ``*``,
    ``=``, ``_``, ``~``, ``1.``) is escaped, in case the string is placed there. A code span that opens
    and closes within the string (gpudoctor's own ``check --deep``) is kept: its content is literal to
    GitHub, only a pipe in it is escaped in a table (``table``), as GFM asks. A backtick that closes
    nothing is escaped, so it cannot open a span that swallows the renderer's text after it. Not for code
    blocks: see :func:`fence`."""
    s = terminal(text, newlines=True).replace("\n", " ")
    out = []
    for literal, span in _code_spans(s):
        if span:
            out.append(span.replace("|", "\\|") if table else span)
            continue
        literal = _MENTION.sub("@" + WORD_JOINER, literal)
        literal = (literal.replace("\\", "\\\\").replace("`", "\\`").replace("|", "\\|")
                   .replace("[", "\\["))
        out.append(_ENTITY.sub("&amp;", literal).replace("<", "&lt;"))
    joined = "".join(out)
    match = _LEADING.match(joined)
    if not match:
        return joined
    if match.group(2)[0].isdigit():  # "1. x": escape the dot, "\\1" would show a backslash
        return joined[:match.end()] + "\\" + joined[match.end():]
    return f"{match.group(1)}\\{joined[match.start(2):]}"


def _code_spans(s: str) -> list[tuple[str, str]]:
    """``s`` cut into (text, code span) pieces as CommonMark reads them: a run of n backticks opens a span
    closed by the next run of exactly n backticks; a run with no such partner is text."""
    pieces, start, pos = [], 0, 0
    runs = [(m.start(), m.end()) for m in re.finditer("`+", s)]
    i = 0
    while i < len(runs):
        a, b = runs[i]
        if a < pos:
            i += 1
            continue
        close = next((j for j in range(i + 1, len(runs)) if runs[j][1] - runs[j][0] == b - a), None)
        if close is None:
            i += 1
            continue
        pieces.append((s[start:a], ""))
        pieces.append(("", s[a:runs[close][1]]))
        start = pos = runs[close][1]
        i = close + 1
    pieces.append((s[start:], ""))
    return pieces


def markdown_lines(text: Any, indent: str) -> str:
    """Multi-line data (a traceback) as lines of one Markdown paragraph under ``indent``: each line
    :func:`markdown_inline`, so none can start a heading, a list, a quote, a fence or a table."""
    lines = [markdown_inline(line, table=False) for line in terminal(text, newlines=True).split("\n")]
    return "\n".join(line if i == 0 or not line else indent + line for i, line in enumerate(lines))


def code_span(text: Any) -> str:
    """Data as a Markdown code span: delimited by more backticks than the longest run in it."""
    s = terminal(text)
    ticks = "`" * (max((len(r) for r in re.findall("`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def fence(text: str, info: str = "") -> tuple[str, str]:
    """The opening and closing fence for a code block holding ``text``: three backticks, or one more than
    the longest run of backticks in it, so no line of the data can close the block early."""
    ticks = "`" * max(3, max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    return ticks + info, ticks


_JSON_UNSAFE = re.compile(_UNSAFE.pattern[:-1] + "]")
#: In Markdown, also what looks like a tag, a mention or a backtick, inside JSON strings.
_JSON_MARKDOWN = re.compile(_UNSAFE.pattern[:-1] + r"`]|<(?=[A-Za-z/!?])|(?<![A-Za-z0-9_])@(?=[A-Za-z0-9_])")


def json_text(data: Any, markdown: bool = False) -> str:
    """``data`` as indented JSON that still parses to exactly ``data``, with what a terminal would act on
    (C1 controls, DEL, bidirectional overrides, which ``json`` leaves raw) written as ``\\uXXXX`` escapes;
    ``markdown=True`` also escapes ``<`` before a tag name, a mention's ``@`` and backticks."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return (_JSON_MARKDOWN if markdown else _JSON_UNSAFE).sub(lambda m: f"\\u{ord(m.group()):04x}", text)
