"""A comment a maintainer can post back on a ticket: what `analyze` read in it, the verdict and its causes,
each fix as the reporter's system types it, and the one command that settles what a paste cannot show.

Short on purpose (the full report is `analyze --format json`): a reply that repeats every area's table
buries the answer. Everything from the ticket is untrusted text: written through render/safe.py.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from gpudoctor.findings import ERROR, WARNING
from gpudoctor.render import finding
from gpudoctor.render.safe import fence, markdown_inline, markdown_lines, terminal
from gpudoctor.report import GATHER_COMMAND

#: Python's launcher on Windows is `py` (python.org's installer) and `python` (the Store's); `python3` is often
#: the Store's stub that opens the Store instead of running anything.
_PIP = re.compile(r"\bpython3 -m pip\b")
_SYSTEMS = {"Windows": "Windows", "Darwin": "macOS", "Linux": "Linux"}
#: The one command that settles what a paste leaves unknown, per system: gpudoctor reads Linux's /proc,
#: /sys and /dev (WSL included); elsewhere the framework itself is asked. macOS has no CUDA: MPS is its GPU.
_SETTLE = {
    "Windows": 'py -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available()); '
               'print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"; nvidia-smi',
    "Darwin": 'python3 -c "import torch; print(torch.__version__, torch.backends.mps.is_available())"',
}


def render_reply(report: dict[str, Any], read: Sequence[str]) -> str:
    """The comment: ``read`` names each paste (its kind and where in the ticket it was)."""
    facts = report.get("facts") or {}
    system = str((facts.get("host") or {}).get("os") or "")
    wsl = bool((facts.get("host") or {}).get("wsl"))
    problems = [g for g in finding.group_findings(report.get("findings") or [])
                if g[0].get("severity") in (ERROR, WARNING)]
    out = ["### gpudoctor on this ticket", "",
           f"**Read:** {markdown_inline(', '.join(read), table=False)}"
           + (f" (system: {'WSL' if wsl else _SYSTEMS.get(system, markdown_inline(system, table=False))})" if system else "")
           + ".", ""]
    rocm = next((f for f in report.get("findings") or [] if f.get("code") == ROCM_CODE), None)
    if rocm and not problems:
        return "\n".join(out + _rocm(rocm, system)).rstrip() + "\n"
    if problems:
        out += [f"**Verdict: {len(problems)} problem(s) to fix.**", ""]
        for group in problems:
            out += _problem(group, system)
    else:
        out += ["**Verdict: nothing wrong in what the paste shows.** That is not a clean bill of health: "
                "see below what it cannot show.", ""]
    areas = ", ".join(a for a, status in ((report.get("summary") or {}).get("areas") or {}).items()
                      if status == "skip" and a != "doctor")
    out += [f"**Not known from the paste:** {markdown_inline(areas, table=False) or 'nothing'}. "
            "To settle it, run this on the machine and paste the output here:", ""]
    out += _commands([_SETTLE.get("wsl" if wsl else system, GATHER_COMMAND)], system)
    return "\n".join(out).rstrip() + "\n"


#: The finding that names an AMD ROCm stack (checks/messages.py): its reply says nothing was judged, and why.
ROCM_CODE = "FWK210"


def _rocm(found: dict[str, Any], system: str) -> list[str]:
    """The reply for an AMD ROCm stack: not judged, where that was read, and ROCm's own commands (gpudoctor's
    check would judge the machine by NVIDIA's rules too)."""
    remediation = found.get("remediation") or {}
    out = ["**Verdict: not judged: an AMD GPU stack (ROCm).** No area of this ticket was checked.", ""]
    detail = str(found.get("detail") or "").strip()
    if detail:
        out += [markdown_lines(detail.split(chr(10))[0][:400], ""), ""]
    if remediation.get("text"):
        out += [markdown_lines(str(remediation["text"]), ""), ""]
    links = [str(link) for link in remediation.get("links") or []]
    out += [f"AMD's compatibility matrix: {markdown_inline(links[0], table=False)}", ""] if links else []
    out += ["To look into it, run these on the machine and paste the output here:", ""]
    return out + _commands(list(remediation.get("commands") or []), system)


def _problem(group: list[dict[str, Any]], system: str) -> list[str]:
    """One root cause: code, title, the first line of why, and the fix as this system types it."""
    gp = finding.group_parts(group)
    first = group[0]
    out = [f"- **{markdown_inline(gp.code, table=False)}** {markdown_inline(first.get('title', ''), table=False)}"]
    detail = str(first.get("detail") or "").strip()
    if detail:
        out.append(f"  {markdown_lines(detail.split(chr(10))[0][:400], '  ')}")
    if gp.fix:
        out.append(f"  *Fix:* {markdown_lines(gp.fix, '  ')}")
    if gp.commands:
        out += [f"  {line}" if line else "" for line in _commands(gp.commands, system)]
    return out if out[-1] == "" else out + [""]


#: Commands that exist only on Linux (the kernel log, the loader cache, /proc and /sys, sudo): a reporter on native
#: Windows cannot run them, so their reply leaves them out.
_LINUX_ONLY = re.compile(r"^\s*(?:sudo|dmesg|journalctl|ldconfig|lspci|ls|cat|systemctl|modprobe|nvidia-modprobe|dkms|mokutil|"
                         r"uname|echo \$|grep)\b")


def _commands(commands: Sequence[str], system: str) -> list[str]:
    """A fenced block of commands, `python3 -m pip` written `py -m pip` on Windows (PowerShell's fence), where
    Linux's own commands are left out; no block when none is left."""
    lines = [terminal(_for_system(c, system)) for c in commands
             if not (system == "Windows" and _LINUX_ONLY.match(c))]
    if not lines:
        return []
    opening, closing = fence("\n".join(lines), "powershell" if system == "Windows" else "sh")
    return [opening, *lines, closing, ""]


def _for_system(command: str, system: str) -> str:
    if system != "Windows" or not _PIP.search(command):
        return command
    # the quotes around a requirement are the shell's: PowerShell and cmd take them as part of the word
    return _PIP.sub("py -m pip", command).replace("'", '"')
