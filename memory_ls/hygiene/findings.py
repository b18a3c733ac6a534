"""What a check finds: ``Finding`` (1-based inclusive lines), its JSON, and the checks' codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DUPLICATE = "duplicate"
LOAD_CAP = "load-cap"
EXPIRED = "expired"
FRONT_MATTER = "front-matter"
ORPHAN = "orphan"
CONFLICT = "conflict"
CODES = (DUPLICATE, CONFLICT, LOAD_CAP, EXPIRED, FRONT_MATTER, ORPHAN)

# LSP's DiagnosticSeverity order: the lower the rank, the more serious.
SEVERITY_RANK = {"error": 1, "warning": 2, "information": 3, "hint": 4}


@dataclass(frozen=True)
class Related:
    path: str
    start_line: int
    end_line: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "startLine": self.start_line, "endLine": self.end_line}

    @property
    def citation(self) -> str:
        if self.start_line == self.end_line:
            return f"{self.path}#L{self.start_line}"
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    path: str
    start_line: int
    end_line: int
    message: str
    related: list[Related] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "message": self.message,
            "related": [r.to_json() for r in self.related],
        }


def at_or_above(severity: str, threshold: str) -> bool:
    """Whether ``severity`` is as serious as ``threshold`` or more (``error`` >= ``warning``)."""
    return SEVERITY_RANK[severity] <= SEVERITY_RANK[threshold]
