"""The memory hygiene settings (``hygiene.*``): each check on or off, and its severity,
declared like every other setting (see ``schema.py``). One class per check: a check's
default severity is its class's default, which the manual and the extension read."""

from __future__ import annotations

from dataclasses import dataclass, field

from .spec import setting

SEVERITIES = ("error", "warning", "information", "hint")  # LSP's DiagnosticSeverity names
SUPERSEDE = ("strikeThrough", "frontMatter")  # how a code action marks a passage superseded


def _enabled(what: str) -> bool:
    out: bool = setting(True, f"Report {what}.")
    return out


def _severity(code: str, default: str) -> str:
    out: str = setting(
        default,
        f"Severity of `{code}` findings: `memory-ls check --fail-on` exits 1 at this one or a "
        "more serious one.",
        choices=SEVERITIES,
    )
    return out


@dataclass
class DuplicateSettings:
    enabled: bool = _enabled("passages that say what an earlier passage already says")
    severity: str = _severity("duplicate", "warning")


@dataclass
class ConflictSettings:
    enabled: bool = _enabled(
        'passages that a newer passage says have changed ("moved from X to Y", "no longer", '
        '"instead of", or a dated note stating the same thing with another value), on the older'
    )
    severity: str = _severity("conflict", "information")


@dataclass
class LoadCapEntry:
    """An agent's cap on a file it always loads, besides the documented ones."""

    agent: str = setting("", "The agent, as the finding names it.")
    files: list[str] = setting(
        [],
        "The files it loads: workspace paths, or paths under a memory root, relative to it "
        "(`MEMORY.md`).",
    )
    max_lines: int = setting(0, "The lines it loads at most (0: no line cap).", minimum=0)
    max_bytes: int = setting(0, "The bytes it loads at most (0: no byte cap).", minimum=0)
    source: str = setting("", "Where the cap is stated (a URL), quoted in the finding.")


@dataclass
class LoadCapSettings:
    enabled: bool = _enabled(
        "the first line past an agent's load cap in an always-loaded file (`MEMORY.md`: "
        "Claude Code; `AGENTS.md` when it is indexed: Codex)"
    )
    severity: str = _severity("load-cap", "warning")
    caps: list[LoadCapEntry] = setting(
        [],
        "More caps, checked beside the documented ones (Claude Code's `MEMORY.md`, Codex's "
        "`AGENTS.md`): tables `{agent, files, maxLines, maxBytes, source}`, for an agent or a "
        "budget of your own. An entry without files or without a cap is skipped.",
    )


@dataclass
class ExpiredSettings:
    enabled: bool = _enabled("notes whose front matter `expires:` or `valid_until:` date is past")
    severity: str = _severity("expired", "warning")


@dataclass
class FrontMatterSettings:
    enabled: bool = _enabled(
        "front matter that cannot be read (not YAML, aliases, over 64 KB, a date that does not "
        "exist)"
    )
    severity: str = _severity("front-matter", "warning")


@dataclass
class OrphanSettings:
    enabled: bool = _enabled(
        "topic files that `MEMORY.md` never links to, once it links at least one"
    )
    severity: str = _severity("orphan", "information")


@dataclass
class HygieneSettings:
    duplicate: DuplicateSettings = field(default_factory=DuplicateSettings)
    conflict: ConflictSettings = field(default_factory=ConflictSettings)
    load_cap: LoadCapSettings = field(default_factory=LoadCapSettings)
    expired: ExpiredSettings = field(default_factory=ExpiredSettings)
    front_matter: FrontMatterSettings = field(default_factory=FrontMatterSettings)
    orphan: OrphanSettings = field(default_factory=OrphanSettings)
    # A conflict is about one passage: striking it through marks that passage alone, in the
    # text every agent reads; a front matter key marks the whole file.
    supersede: str = setting(
        "strikeThrough",
        "How the code action on a `conflict` marks the older passage superseded: "
        "`strikeThrough` wraps its lines in `~~` (list markers kept outside), `frontMatter` "
        "adds `superseded_by: <citation of the newer passage>` to its file's front matter "
        "(the whole file). Either way the check no longer flags it.",
        choices=SUPERSEDE,
    )
    # The editor checks the whole folder after every sync, in the server's own process: past
    # a few thousand files a check from scratch takes tens of seconds of Python (about 70 s
    # at 10,000 notes; 6 s at 2,000), competing with searches for the interpreter.
    editor_max_files: int = setting(
        2000,
        "The editor shows the checks' findings as diagnostics in folders of up to this many "
        "indexed files; `0` turns them off there. `memory-ls check` has no such limit.",
        minimum=0,
    )
