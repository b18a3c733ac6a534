"""What a check returns (``Check``) and what every check is given (``Env``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    id: str
    status: str  # OK | WARN | FAIL
    summary: str  # the finding, one line
    detail: str = ""  # more lines, for a reader who wants them
    fix: str = ""  # the command or step that fixes it ("" when ok)

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "status": self.status,
            "summary": self.summary,
            "detail": self.detail,
            "fix": self.fix,
        }


@dataclass
class Env:
    root: Path  # the workspace folder, resolved
    settings: Settings  # its settings, model paths made absolute as the engine makes them
    problems: list[str] = field(default_factory=list)  # what loading the settings reported
    index: Path | None = None  # --index, else the settings' index path
    online: bool = False  # --online: one tiny request to the remote provider
    home: Path = field(default_factory=Path.home)
