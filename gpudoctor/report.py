"""The report: the snapshot's facts plus the checks' verdicts, and the exit code it implies.

A report is the unit that travels: written by ``check --format json``, re-judged by
``analyze`` with this version's checks, compared across nodes by ``merge``.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import math
from typing import Any, Optional, Sequence

from gpudoctor import __version__
from gpudoctor import status
from gpudoctor.findings import CheckResult, Finding
from gpudoctor.snapshot import SCHEMA_VERSION, shape_error
from gpudoctor.status import ERROR, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, FAIL_ON, INFO, SKIP, STATUSES, WARNING  # noqa: F401

TOP_LEVEL_KEYS = ("schema_version", "tool", "created", "facts", "checks", "findings", "summary")
#: A saved report larger than this is refused: real ones are about 100 KB, even of four GPUs with their
#: workloads, and one of 50 MB takes about a minute to re-judge and redact.
MAX_REPORT_BYTES = 16 * 1024 * 1024


class ReportError(ValueError):
    """A saved report that cannot be used; the message is one line for the user."""


def build(facts: dict[str, Any], results: Sequence[CheckResult], created: Optional[str] = None) -> dict[str, Any]:
    findings = [f for r in results for f in r.findings]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "gpudoctor", "version": __version__},
        "created": created or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "facts": facts,
        "checks": [r.to_dict() for r in results],
        "findings": [f.to_dict() for f in findings],
        "summary": summarise(results),
    }


def summarise(results: Sequence[CheckResult]) -> dict[str, Any]:
    findings = [f for r in results for f in r.findings]
    counts = {sev: sum(1 for f in findings if f.severity == sev) for sev in (ERROR, WARNING, INFO)}
    areas: dict[str, str] = {}
    for r in results:
        areas[r.area] = status.worse_status(areas.get(r.area, SKIP),
                                            status.area_status(r.status, [f.code for f in r.findings]))
    verdict = status.report_verdict((f.severity for f in findings), (r.status for r in results))
    return {"verdict": verdict, "counts": counts, "areas": areas,
            "checks": {s: sum(1 for r in results if r.status == s) for s in STATUSES}}


def exit_code(findings: Sequence[Finding], fail_on: str = "error") -> int:
    return status.exit_code((f.severity for f in findings), fail_on)


def judged_anything(report: dict[str, Any]) -> bool:
    """Whether a check outside the doctor's own reached a verdict on a fact. A report whose every check was
    skipped judged nothing, and "no problems found" would claim a pass on what nobody looked at."""
    return any(isinstance(c, dict) and c.get("area") != "doctor" and c.get("status") != SKIP
               for c in report.get("checks") or [])


#: What to do when there is nothing to judge: the one command that gathers every fact.
GATHER_COMMAND = "pipx run gpudoctor check --format markdown"


def findings_of(report: dict[str, Any]) -> list[Finding]:
    return [Finding.from_dict(f) for f in report.get("findings", [])]


def encodable(node: Any) -> Any:
    """A copy with every string and key writable as UTF-8. Bytes that are not UTF-8 in an environment
    variable or a file name reach Python as lone surrogates, which no UTF-8 file or terminal accepts
    (and which ``ensure_ascii=False`` JSON would carry as invalid UTF-8): they become ``\\xNN``."""
    if isinstance(node, str):
        try:
            node.encode("utf-8")
            return node
        except UnicodeEncodeError:
            try:
                return node.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:  # a surrogate that stands for no byte, e.g. "\ud800" in a loaded report
                return node.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(node, dict):
        return {encodable(k): encodable(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [encodable(v) for v in node]
    return node


def to_json(report: dict[str, Any]) -> str:
    """The report as strict JSON: a float that is not finite (a figure computed from extreme values)
    is written as null, as JSON has no NaN or Infinity."""
    text = json.dumps(finite(report), indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False) + "\n"
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


#: What json.dumps leaves raw that a terminal acts on (C1 controls, DEL, bidirectional overrides, line
#: separators): written as \uXXXX escapes, which parse back to the very same strings. JSON's own syntax is
#: ASCII, so these can only occur inside strings.
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def finite(node: Any) -> Any:
    """``node`` with every NaN or infinite float replaced by None; the same object when it holds none."""
    stack, found = [node], False
    while stack and not found:
        item = stack.pop()
        if isinstance(item, float):
            found = not math.isfinite(item)
        elif isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, (list, tuple)):
            stack += item
    if not found:
        return node

    def fix(item: Any) -> Any:
        if isinstance(item, float) and not math.isfinite(item):
            return None
        if isinstance(item, dict):
            return {k: fix(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [fix(v) for v in item]
        return item

    return fix(node)


def load(text: str, source: str = "report") -> dict[str, Any]:
    """Parse and validate a saved report; raise ReportError with a one-line reason.

    Beyond the envelope, the values the checks and renderers read must have their documented types
    (``snapshot.SHAPE``: "report.json: facts.gpus[0].index must be an integer"), nesting is bounded
    (``snapshot.MAX_DEPTH``), and ``NaN``/``Infinity`` (which Python's json accepts and JSON does not)
    and numbers too large for a float are refused, so every report gpudoctor prints is valid JSON."""
    try:
        data = json.loads(text, parse_constant=_not_json, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        raise ReportError(f"{source} is not valid JSON ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise ReportError(f"{source} is not a gpudoctor report (expected a JSON object)")
    missing = [k for k in ("schema_version", "facts") if k not in data]
    if missing:
        raise ReportError(f"{source} is not a gpudoctor report (missing {', '.join(missing)})")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise ReportError(f"{source} has an invalid schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise ReportError(f"{source} uses report schema {version}, newer than this gpudoctor understands "
                          f"({SCHEMA_VERSION}); upgrade gpudoctor")
    if not isinstance(data["facts"], dict):
        raise ReportError(f"{source} has malformed facts (expected an object)")
    problem = shape_error(data)
    if problem:
        raise ReportError(f"{source}: {problem}")
    return data


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def changes(saved: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """What re-judging a saved report changed: findings new with this version, and ones no longer reported.
    A finding is identified by its code, subject and title (a reworded title counts as gone and new)."""
    def key(f: dict[str, Any]) -> tuple[str, str, str]:
        return f.get("code", ""), json.dumps(f.get("subject") or {}, sort_keys=True), str(f.get("title", ""))

    before = {key(f): f for f in saved.get("findings") or [] if isinstance(f, dict)}
    after = {key(f): f for f in now.get("findings") or []}
    return {
        "saved_by": str(tool.get("version", "unknown")) if isinstance(tool := saved.get("tool"), dict) else "unknown",
        "new": [after[k] for k in after if k not in before],
        "gone": [before[k] for k in before if k not in after],
        "unchanged": sum(1 for k in after if k in before),
    }
