"""Every status word gpudoctor writes, one vocabulary per layer, and the only mappings between layers.

A report carries words from several layers, each with its own meaning: "timeout" is what a probe
did, "warn" what a check concluded, "warning" how bad a finding is and what a whole report
concludes. Keeping each layer's words here, named, with the functions that turn one layer's words
into the next, means one place decides, say, that a timed-out check makes an otherwise clean report
a warning, instead of each command deciding it again (and differently).

layer                 words                                   where
--------------------  --------------------------------------  ---------------------------------------------
probe record status   ok, error, timeout                      facts.probes.<name>.status (runner.py)
probe stop reason     timeout (its own limit),                facts.probes.<name>.reason of a timed-out
                      deadline (check --timeout)              probe; words of snapshot.REASONS
absent fact           snapshot.REASONS                        {"unavailable": REASON} (snapshot.py)
finding severity      info, warning, error                    each Finding (codes.py's catalogue)
check status          pass, warn, fail, skip, timeout         each CheckResult (checks/registry.py)
compat verdict        ok, limited, fail, unknown              compat/rules.py's Verdict.status
matrix verdict        ok, warning, unknown, error             gpudoctor matrix check
report verdict        ok, warning, error                      a report's summary.verdict
exit code             0 ok, 1 findings, 2 bad input,          every command
                      3 internal error

Mappings (the only ones; callers use these functions):

- findings -> check status: ``check_status`` (an error finding fails the check, a warning warns, else pass;
  a check that did not run is skip or timeout, decided by the registry from the probe records).
- check results -> report verdict: ``report_verdict`` (any error finding: error; else any warning, or any
  check that timed out: warning; else ok). Areas take the worst check status (``worse_status``), a check
  that only noted it measured nothing on a GPU counting as skipped (``area_status``).
- findings -> exit code: ``exit_code`` (``check --fail-on``: error, warning or never).
- findings -> matrix verdict: ``matrix_verdict`` (an error finding: error; a stack the matrix cannot judge
  or CMP008: unknown; a warning: warning; else ok); matrix verdict -> exit code: ``matrix_exit_code``.
- compat verdict -> finding: compat/stack.py picks the code for each verdict (fail: CMP001/CMP003,
  limited: CMP002/CMP004, unknown: CMP008, ok: none) and the code's catalogue entry gives the severity;
  there is no second table of it here.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

# probe records (facts.probes.<name>.status) ----------------------------------------------------------
PROBE_OK, PROBE_ERROR, PROBE_TIMEOUT = "ok", "error", "timeout"
PROBE_STATUSES = (PROBE_OK, PROBE_ERROR, PROBE_TIMEOUT)
#: Why a probe was stopped (``facts.probes.<name>.reason``), words of snapshot.REASONS: its own time limit,
#: or the deadline of ``check --timeout`` for the whole run.
STOPPED_TIMEOUT, STOPPED_DEADLINE = "timeout", "deadline"

# findings -------------------------------------------------------------------------------------------------
ERROR = "error"  # will not work
WARNING = "warning"  # works, but degraded or risky
INFO = "info"  # worth knowing; never fails a run
SEVERITIES = (INFO, WARNING, ERROR)

# check results ----------------------------------------------------------------------------------------------
PASS, WARN, FAIL, SKIP, TIMEOUT = "pass", "warn", "fail", "skip", "timeout"
STATUSES = (PASS, WARN, FAIL, SKIP, TIMEOUT)
#: Check statuses from least to most serious, for an area's worst.
_STATUS_ORDER = (SKIP, PASS, WARN, TIMEOUT, FAIL)
#: Notes with which a check that ran says it measured nothing on a GPU, and why. Such a check proved nothing:
#: its area counts it as skipped (``area_status``), and INT005 counts it as not run (checks/gates.py).
NOTHING_MEASURED = {
    "RUN017": "the framework workloads ran on the CPU only (no GPU is visible)",
    "RUN035": "the all-reduce across the torchrun job was not measured",
    "FWK210": "an AMD ROCm stack, which gpudoctor's NVIDIA checks do not judge",
}

# compat/rules.py's Verdict.status ----------------------------------------------------------------------------
COMPAT_OK, COMPAT_LIMITED, COMPAT_FAIL, COMPAT_UNKNOWN = "ok", "limited", "fail", "unknown"
COMPAT_VERDICTS = (COMPAT_OK, COMPAT_LIMITED, COMPAT_FAIL, COMPAT_UNKNOWN)

# `gpudoctor matrix check` ----------------------------------------------------------------------------------------
MATRIX_OK, MATRIX_WARNING, MATRIX_UNKNOWN, MATRIX_ERROR = "ok", "warning", "unknown", "error"
MATRIX_VERDICTS = (MATRIX_OK, MATRIX_WARNING, MATRIX_UNKNOWN, MATRIX_ERROR)

# a report's summary.verdict -----------------------------------------------------------------------------------
VERDICT_OK, VERDICT_WARNING, VERDICT_ERROR = "ok", "warning", "error"
REPORT_VERDICTS = (VERDICT_OK, VERDICT_WARNING, VERDICT_ERROR)

# exit codes --------------------------------------------------------------------------------------------------
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
#: ``check --fail-on``: the severities that make the exit code 1.
FAIL_ON = {"error": (ERROR,), "warning": (ERROR, WARNING), "never": ()}


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else 0


def check_status(severities: Iterable[str]) -> str:
    """A check that ran, from its findings' severities: fail on an error, warn on a warning, else pass."""
    found = set(severities)
    if ERROR in found:
        return FAIL
    if WARNING in found:
        return WARN
    return PASS


def area_status(check: str, codes: Sequence[str]) -> str:
    """What a check's result says of its area: its status, except that a pass whose every finding is a
    NOTHING_MEASURED note counts as skipped (a CPU-only run beside a failed smoke kernel is no pass)."""
    if check == PASS and codes and all(c in NOTHING_MEASURED for c in codes):
        return SKIP
    return check


def worse_status(a: str, b: str) -> str:
    """The more serious of two check statuses (an area's status is its worst check's)."""
    return max(a, b, key=lambda s: _STATUS_ORDER.index(s) if s in _STATUS_ORDER else 0)


def report_verdict(severities: Iterable[str], statuses: Iterable[str]) -> str:
    """A report's verdict from its findings' severities and its checks' statuses: a check that timed out
    checked nothing, so a report without findings but with one is a warning, not ok."""
    found = set(severities)
    if ERROR in found:
        return VERDICT_ERROR
    if WARNING in found or TIMEOUT in set(statuses):
        return VERDICT_WARNING
    return VERDICT_OK


def exit_code(severities: Iterable[str], fail_on: str = "error") -> int:
    """``check``'s exit code: 1 when a finding has a severity ``fail_on`` fails on, else 0."""
    return EXIT_FINDINGS if any(s in FAIL_ON[fail_on] for s in severities) else EXIT_OK


def matrix_verdict(severities: Sequence[str], unknown: bool) -> str:
    """``matrix check``'s verdict: error on an error finding; unknown when part of the stack could not be
    judged (``unknown``: the stack has unknowns, or CMP008 was found); warning on a warning; else ok."""
    if ERROR in severities:
        return MATRIX_ERROR
    if unknown:
        return MATRIX_UNKNOWN
    return MATRIX_WARNING if WARNING in severities else MATRIX_OK


def matrix_exit_code(verdict: Any) -> int:
    """``matrix check``'s exit code: 1 on an error verdict, else 0 (unknown is not a failure)."""
    return EXIT_FINDINGS if verdict == MATRIX_ERROR else EXIT_OK
