"""One finding as its parts, the one reading of a finding that every format that prints one shares.

Findings are printed by the text, Markdown, JUnit and quiet renderers, by ``gpudoctor matrix check``
(cli/matrix.py) and in the reference of codes (tools/docgen.py). Were each to pick a finding's fields
out itself, each would have its own defaults and its own idea of their order. Here :func:`parts` reads a finding
(a :class:`~gpudoctor.findings.Finding`, or its dict form in a report) once, into its parts in the
order every format shows them: severity, code, title, detail, fix text, commands, links. :func:`lines`
lays them out with a format's own words (``Fix:``, ``why:``, ``$``), so a format is a thin wrapper that
names its words, and a new part of a finding is added here for all of them.

The text and Markdown reports show one root cause seen several times (eight GPUs, three frameworks) as
one entry: the grouping (:func:`group_findings` and the helpers after it) is here too, for both.

Cleaning stays where it was: a renderer cleans the whole report once (``safe.printable``) before it
reads it; :meth:`Parts.for_terminal` is the copy for a terminal (each one-line part kept on its line,
the detail and fix text may keep their lines), and the Markdown renderer escapes each part where it
places it. ``matrix check`` and docgen print the Finding objects they made, as they always have.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional, Union

from gpudoctor.findings import Finding, Subject
from gpudoctor.render.safe import terminal

#: The kinds of a finding's body, after its head (severity, code, title), in the order shown.
DETAIL, FIX, COMMAND, LINK = "detail", "fix", "command", "link"


@dataclass(frozen=True)
class Parts:
    """A finding's parts as strings, in the order every format shows them."""

    severity: str
    code: str
    title: str
    detail: str = ""
    fix: str = ""  # the remediation's text
    commands: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    subject: Subject = field(default_factory=Subject)

    def body(self) -> list[tuple[str, str]]:
        """What follows the head, in order, as (kind, text): the detail, the fix text, each command, each
        link; a part the finding does not have is left out."""
        out = [(DETAIL, self.detail)] if self.detail else []
        if self.fix:
            out.append((FIX, self.fix))
        return out + [(COMMAND, c) for c in self.commands] + [(LINK, u) for u in self.links]

    def head(self, template: str, **extra: Any) -> str:
        """``template`` (``"{severity} {code}: {title}"``) filled with this finding's head and ``extra``."""
        return template.format(severity=self.severity, code=self.code, title=self.title, **extra)

    def for_terminal(self) -> "Parts":
        """A copy whose every part is safe to print in a terminal (render/safe.py): kept on one line, but
        the detail and the fix text, which a renderer lays out over several (``safe.indented``)."""
        return replace(self, severity=terminal(self.severity), code=terminal(self.code), title=terminal(self.title),
                       detail=terminal(self.detail, newlines=True), fix=terminal(self.fix, newlines=True),
                       commands=tuple(terminal(c) for c in self.commands), links=tuple(terminal(u) for u in self.links))


def parts(finding: Union[Finding, Mapping[str, Any]]) -> Parts:
    """The parts of a Finding, or of its dict form as a report holds it (a missing code reads ``?``,
    any other missing part reads empty)."""
    if isinstance(finding, Finding):
        rem = finding.remediation
        return Parts(finding.severity, finding.code, finding.title, finding.detail, rem.text,
                     tuple(rem.commands), tuple(rem.links), finding.subject)
    given = finding.get("remediation")
    fix: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    subject = finding.get("subject")
    return Parts(severity=str(finding.get("severity", "")), code=str(finding.get("code", "?")),
                 title=str(finding.get("title", "")), detail=str(finding.get("detail") or ""),
                 fix=str(fix.get("text") or ""), commands=tuple(str(c) for c in fix.get("commands") or ()),
                 links=tuple(str(u) for u in fix.get("links") or ()),
                 subject=Subject.from_dict(subject if isinstance(subject, Mapping) else {}))


def lines(p: Parts, head: str, detail: Optional[str] = None, fix: Optional[str] = None, command: Optional[str] = None,
          link: Optional[str] = None) -> list[str]:
    """A finding as a format's lines: ``head`` (see :meth:`Parts.head`), then each part of the body through
    its template (``"  Fix: {}"``); a kind given no template is not shown. A part that holds several lines
    (a traceback) stays one item, its lines as the data has them."""
    templates = {DETAIL: detail, FIX: fix, COMMAND: command, LINK: link}
    return [p.head(head)] + [template.format(text) for kind, text in p.body()
                             if (template := templates[kind]) is not None]


# Groups: one root cause seen several times (text and Markdown) -------------------------------------------

def group_findings(findings: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Findings with the same code, severity, fix text and links, in first-seen order: one root cause seen
    on eight GPUs (or by three frameworks) is one problem with one fix, not eight."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for f in findings:
        rem = f.get("remediation") or {}
        key = (f.get("code"), f.get("severity"), rem.get("text"), tuple(str(x) for x in rem.get("links") or []))
        groups.setdefault(key, []).append(f)
    return list(groups.values())


def group_commands(group: list[dict[str, Any]]) -> list[str]:
    """The fix commands of a group, each once, in order."""
    return list(dict.fromkeys(c for f in group for c in parts(f).commands))


def group_parts(group: list[dict[str, Any]]) -> Parts:
    """The parts a group shows once: its first finding's (the severity, code, fix text and links are what
    its findings share), with every finding's commands, each once."""
    return replace(parts(group[0]), commands=tuple(group_commands(group)))


def group_where(group: list[dict[str, Any]]) -> str:
    """"GPU 0, 1, 2, 3" when every finding of the group is about one GPU, else ""."""
    subjects = [parts(f).subject for f in group]
    if len(group) > 1 and all(s.kind == "gpu" for s in subjects):
        indices = list(dict.fromkeys(str(s.gpu_index) for s in subjects))
        return ("GPU " if len(indices) == 1 else "GPUs ") + ", ".join(indices)
    return ""


def titled(p: Parts) -> str:
    """The title on one terminal line, with the GPU it is about in front when the title does not name it."""
    gpu = f"GPU {p.subject.gpu_index}"
    where = f"{gpu}: " if p.subject.kind == "gpu" and gpu not in p.title else ""
    return f"{terminal(where)}{terminal(p.title)}"


#: At most this many details of one group are printed; the rest are in the JSON report.
MAX_DETAILS = 3


def group_items(group: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], str, int]:
    """A group as (title, its own detail or "") items, the detail they all share ("" if none or not
    shared), and how many details were left out past MAX_DETAILS. Titles repeated exactly are shown once."""
    all_parts = [parts(f) for f in group]
    details = list(dict.fromkeys(p.detail for p in all_parts))
    shared = details[0] if len(details) == 1 else ""
    items: dict[tuple[str, str], None] = {}
    shown, left = 0, 0
    for p in all_parts:
        own = "" if shared else p.detail
        if own and shown >= MAX_DETAILS:
            own, left = "", left + 1
        shown += bool(own)
        items[(titled(p), own)] = None
    return list(items), shared, left
