"""What a reporter says they saw, in their own words or as one printed line, where no message or session
holds it: "torch.cuda.is_available() is False" / "returns False", TensorFlow's tutorial line "Num GPUs
Available: 0", a TensorFlow device list with an ``XLA_GPU`` or its log's "Found device 0 with properties" (the
CUDA driver saw a GPU), and "the GPU fell off the bus".

A sentence counts only as a statement of what happened: not a question ("why does it return False?"), not
a condition ("if is_available() is False, ..."), not denied ("no longer returns False"), and not over ("returned
False before I installed the driver, now True"; or a later line says is_available() is True). Each line is
tested with plain substrings first; the expressions after are short and bounded.
"""

from __future__ import annotations

import re
from typing import Any, Optional

#: Lowercase words a line must hold for each statement: tested before any expression.
_AVAILABLE_WORDS = "is_available"
_TF_WORDS = "num gpus"
_BUS_WORDS = "off the bus"
_XLA_WORDS = "xla_gpu"
_AVAILABLE = re.compile(r"is_available(?:\(\))?[`'\"*]{0,2}\s{0,3}(?:(?:still|always)\s{1,3})?(?:(?:is|was|returns?|returned|returning|gives|gave|shows|"
                        r"showed|prints|printed|outputs|=|==|->|:)\s{0,3})?(?:(?:still|always|only|just)\s{1,3})?[`'\"*]{0,2}false\b",
                        re.I)
_TF_ZERO = re.compile(r"^\W{0,4}num gpus(?: available)?\s{0,3}[:=]\s{0,3}[`'\"]?0\b", re.I)
_BUS = re.compile(r"\b(?:fell|falls|falling|fallen|fall|dropped|drops|dropping|drop)\s{1,3}off\s{1,3}the\s{1,3}bus\b", re.I)
#: An answer written as a comment after the code that printed it: "torch.cuda.is_available() # false is returned",
#: "tf.config.list_physical_devices('GPU') # [] is returned".
_COMMENTED_AVAILABLE = re.compile(r"is_available\(\)\)?;?\s{0,8}#\s{0,3}(?:->\s{0,3}|returns?\s{1,3})?[`'\"]?(true|false)\b", re.I)
_COMMENTED_TF_NONE = re.compile(r"list_physical_devices\(\s{0,2}['\"]GPU['\"]\s{0,2}\)\)?;?\s{0,8}#\s{0,3}(?:->\s{0,3}|returns?\s{1,3})?"
                                r"\[\s{0,2}\]", re.I)
#: TensorFlow's log once the CUDA driver enumerated a GPU: "gpu_device.cc:1720] Found device 0 with properties:".
_TF_FOUND = re.compile(r"gpu_device\.cc:\d{1,5}\] Found device \d{1,2} with properties")
_XLA = re.compile(r"(?:device_type\s{0,2}=\s{0,2}['\"]XLA_GPU['\"]|/device:XLA_GPU:\d)", re.I)
#: Words on a statement's line that put it in the past, over now: "returned False before I installed the driver, now
#: True", "fell off the bus last week ... fine now", "solved". A line that says "still" or "again" is not over.
_OVER = re.compile(r"\b(?:now\b[^.;!?]{0,30}\btrue|true\s{1,3}now|(?:works?|working|fine|ok|okay)\s{1,3}now|"
                   r"now\s{1,3}(?:it\s{1,3})?(?:works?|working|fine)|until\s{1,3}(?:i|we)|before\s{1,3}(?:i|we)\s{1,3}"
                   r"(?:installed|reinstalled|updated|upgraded|rebooted|restarted|fixed|replaced|set)|used\s{1,3}to|solved|"
                   r"resolved|fixed\s{1,3}it|is\s{1,3}fixed)\b", re.I)
_STILL = re.compile(r"\b(?:still|again)\b", re.I)
#: PyTorch's answer True, stated: a later line saying so makes an earlier "is_available() is False" the past.
_AVAILABLE_TRUE = re.compile(r"is_available(?:\(\))?[`'\"*]{0,2}\s{0,3}(?:(?:is|returns?|gives|shows|prints|outputs|=|==|->|:)"
                             r"\s{0,3})?(?:now\s{1,3})?[`'\"*]{0,2}true\b", re.I)
#: Words before a statement on its sentence that make it a question, a condition, or a denial.
_NOT_SAID = re.compile(r"\b(?:if|whether|why|how|could|might|maybe|unless|not|no longer|never|instead of|"
                       r"don't|doesn't|didn't|won't|isn't|wasn't)\b", re.I)


def read(lines: list[str]) -> Optional[dict[str, Any]]:
    """The statements in ``lines``, the first of each kind, each with its line; None when there are none."""
    evidence: list[dict[str, Any]] = []
    kinds: set[str] = set()
    for number, line in enumerate(lines, 1):
        lowered = line.lower()
        true = _AVAILABLE_TRUE.search(line) if _AVAILABLE_WORDS in lowered else None
        if true and _stated(line, *true.span()):
            # the reporter says PyTorch answers True now: what they said it answered before is over
            evidence = [e for e in evidence if not (e["kind"] == "no_gpu_seen" and e.get("framework") == "PyTorch"
                                                    and e.get("how") == "said")]
            kinds.discard("no_gpu_seenPyTorch")
        for item in _items(line, lowered):
            if item["kind"] + str(item.get("framework")) not in kinds:
                kinds.add(item["kind"] + str(item.get("framework")))
                evidence.append({**item, "line": number, "text": line.strip()[:300]})
    return {"evidence": evidence, "notes": []} if evidence else None


def _over(line: str) -> bool:
    """Whether the line says that what it states is over (fixed, or true only before something the reporter did)."""
    return bool(_OVER.search(line)) and not _STILL.search(line)


def _items(line: str, lowered: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if _AVAILABLE_WORDS in lowered:
        framework = "TensorFlow" if "tf.test.is_gpu_available" in lowered else "PyTorch"
        m = _AVAILABLE.search(line)
        commented = _COMMENTED_AVAILABLE.search(line) if "#" in line else None
        if m and _stated(line, m.start(), m.end()) and not _over(line):
            out.append({"kind": "no_gpu_seen", "framework": framework, "how": "said"})
        elif commented and commented.group(1).lower() == "false":
            out.append({"kind": "no_gpu_seen", "framework": framework, "how": "printed"})
        elif commented and framework == "PyTorch":  # PyTorch answered True there: the machine has a GPU CUDA can use
            out.append({"kind": "gpu_present", "how": "torch.cuda.is_available() True"})
    if "list_physical_devices" in lowered and "#" in line and _COMMENTED_TF_NONE.search(line):
        out.append({"kind": "no_gpu_seen", "framework": "TensorFlow", "how": "printed"})
    if _TF_WORDS in lowered:
        if _TF_ZERO.match(line):  # the line TensorFlow's install guide prints, as printed
            out.append({"kind": "no_gpu_seen", "framework": "TensorFlow", "how": "printed"})
    if _XLA_WORDS in lowered and _XLA.search(line):
        out.append({"kind": "gpu_present", "how": "XLA_GPU"})
    if "found device" in lowered and "with properties" in lowered and _TF_FOUND.search(line):
        out.append({"kind": "gpu_present", "how": "TensorFlow found the device"})
    if _BUS_WORDS in lowered:
        m = _BUS.search(line)
        if m and _stated(line, m.start(), m.end()) and not _over(line):
            out.append({"kind": "gpu_lost_said"})
    return out


def _stated(line: str, start: int, end: int) -> bool:
    """Whether the words at ``start:end`` state what happened: their sentence is no question and nothing before
    them on it makes them a condition or a denial."""
    opened = max(line.rfind(". ", 0, start), line.rfind("? ", 0, start), line.rfind("! ", 0, start))
    closed = min((i for i in (line.find(". ", end), line.find("?", end), line.find("! ", end)) if i >= 0), default=len(line))
    if line[closed:closed + 1] == "?":
        return False
    return not _NOT_SAID.search(line[opened + 1:start][-80:])
