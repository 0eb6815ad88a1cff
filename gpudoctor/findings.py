"""Findings (what is wrong and how to fix it) and check results (what each check concluded).

A finding's prose and its commands are kept apart: commands are exact, copy-pasteable and never
destructive, so a renderer may print them as a block and a user may paste them; anything riskier
(a reboot, a GPU reset) is explained in ``text`` instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional

# The severities and check statuses live in gpudoctor/status.py with every other layer's words; kept
# importable from here, where most code has always found them.
from gpudoctor.status import (ERROR, FAIL, INFO, PASS, SEVERITIES, SKIP, STATUSES, TIMEOUT, WARN, WARNING,  # noqa: F401
                              severity_rank)

if TYPE_CHECKING:
    from gpudoctor.facts_types import GpuFacts


@dataclass(frozen=True)
class Remediation:
    text: str = ""
    commands: tuple[str, ...] = ()
    links: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "commands": list(self.commands), "links": list(self.links)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Remediation":
        return cls(
            text=str(data.get("text", "")),
            commands=tuple(str(c) for c in data.get("commands", ())),
            links=tuple(str(u) for u in data.get("links", ())),
        )


@dataclass(frozen=True)
class Subject:
    """What a finding concerns: the host, one GPU, or a pair of GPUs."""

    kind: str = "host"  # host | gpu | pair
    gpu_index: Optional[int] = None
    gpu_uuid: Optional[str] = None
    peer_index: Optional[int] = None
    peer_uuid: Optional[str] = None

    def label(self) -> str:
        if self.kind == "gpu":
            return f"GPU {self.gpu_index}"
        if self.kind == "pair":
            return f"GPU {self.gpu_index} <-> GPU {self.peer_index}"
        return "host"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Subject":
        fields: dict[str, Any] = {k: data.get(k) for k in ("kind", "gpu_index", "gpu_uuid", "peer_index", "peer_uuid")}
        fields["kind"] = fields["kind"] or "host"
        return cls(**fields)


def gpu_subject(gpu: GpuFacts) -> Subject:
    uuid = gpu.get("uuid")
    return Subject("gpu", gpu.get("index"), uuid if isinstance(uuid, str) else None)


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    title: str
    detail: str = ""
    subject: Subject = field(default_factory=Subject)
    remediation: Remediation = field(default_factory=Remediation)
    check: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "title": self.title,
            "detail": self.detail,
            "subject": self.subject.to_dict(),
            "remediation": self.remediation.to_dict(),
            "check": self.check,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        return cls(
            code=str(data["code"]),
            severity=str(data["severity"]),
            title=str(data["title"]),
            detail=str(data.get("detail", "")),
            subject=Subject.from_dict(data.get("subject") or {}),
            remediation=Remediation.from_dict(data.get("remediation") or {}),
            check=str(data.get("check", "")),
        )


@dataclass
class CheckResult:
    id: str
    area: str
    title: str
    status: str
    duration_s: float
    findings: list[Finding] = field(default_factory=list)
    reason: str = ""  # why it was skipped or timed out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "title": self.title,
            "status": self.status,
            "duration_s": round(self.duration_s, 6),
            "reason": self.reason,
            "finding_codes": [f.code for f in self.findings],
        }
