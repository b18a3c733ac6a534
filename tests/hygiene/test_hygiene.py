"""The memory checks over a real index built by the engine (SQLite, FTS5), keyword-only:
duplicates (verbatim, reworded, across files and within one; near-misses that are not),
load caps, expired and unreadable front matter (bad input never crashes), orphan topic files,
and a draft checked before it is written."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.hygiene import Finding
from memory_ls.settings import Settings

TODAY = date(2026, 6, 1)


def engine(root: Path, settings: Settings | None = None) -> MemoryEngine:
    s = settings or Settings()
    s.provider = "none"
    e = MemoryEngine(root, s, index_path=root.parent / f"{root.name}.sqlite")
    e.sync("test", embed=False)
    return e


def checked(root: Path, settings: Settings | None = None) -> list[Finding]:
    with engine(root, settings) as e:
        return e.check(TODAY)


def by_code(found: list[Finding], code: str) -> list[Finding]:
    return [f for f in found if f.code == code]


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    write(
        root,
        "MEMORY.md",
        "# Memory\n"
        "\n"
        "- The billing service is deployed with Helm charts from the infra repo.\n"
        "- Alice reviews every database schema change before it ships.\n",
    )
    write(
        root,
        "memory/2026-03-02.md",
        "# Notes\n"
        "\n"
        "- the billing service is DEPLOYED with helm charts, from the infra repo\n"
        "- The search service runs Postgres 16 in the eu-west-1 region.\n",
    )
    write(
        root,
        "memory/2026-03-09.md",
        "# Notes\n"
        "\n"
        "The billing service runs Postgres 14 in the eu-west-1 region.\n"
        "We deploy the billing service using Helm charts kept in the infra repo.\n"
        "\n"
        "```\n"
        "The billing service is deployed with Helm charts from the infra repo.\n"
        "```\n",
    )
    write(
        root,
        "memory/2026-03-10.md",
        "# Standup\n"
        "\n"
        "- Bob is working on the login page redesign this week.\n"
        "- Carol is working on the invoice export redesign this week.\n",
    )
    return root  # fmt: skip


def test_duplicates_sit_on_the_later_copy_and_point_at_the_earlier(notes: Path):
    dup = by_code(checked(notes), "duplicate")
    got = {(f.path, f.start_line, f.end_line): f for f in dup}
    # Verbatim but for case and punctuation, in a later dated note: it points at MEMORY.md.
    f = got[("memory/2026-03-02.md", 3, 3)]
    assert [(r.path, r.start_line, r.end_line) for r in f.related] == [("MEMORY.md", 3, 3)]
    assert f.severity == "warning" and "MEMORY.md#L3" in f.message
    # Reworded in plain prose.
    assert ("memory/2026-03-09.md", 4, 4) in got
    # Not duplicates: two services' different versions, a template with other facts, a
    # code fence.
    assert len(dup) == 2, [f.to_json() for f in dup]


def test_a_run_of_copied_lines_is_one_finding(tmp_path: Path):
    root = tmp_path / "run"
    lines = (
        "- Staging deploys run every weekday at ten in the morning.\n"
        "- The on-call engineer approves every production rollout by hand.\n"
        "- Rollbacks use the previous Helm release, never a rebuild from main.\n"
    )
    write(root, "memory/2026-01-01.md", "# Deploys\n\n" + lines)
    write(
        root,
        "memory/2026-02-01.md",
        "# Deploys again\n\nSomething new happened today in the team.\n\n" + lines,
    )
    dup = by_code(checked(root), "duplicate")
    assert [(f.path, f.start_line, f.end_line) for f in dup] == [("memory/2026-02-01.md", 5, 7)]
    assert [(r.path, r.start_line, r.end_line) for r in dup[0].related] == [
        ("memory/2026-01-01.md", 3, 5)
    ]


def test_a_copy_within_one_file(tmp_path: Path):
    root = tmp_path / "one"
    write(
        root,
        "MEMORY.md",
        "# Memory\n"
        "\n"
        "- Tests run with pytest and the xdist plugin on two cores.\n"
        "\n"
        "## Again\n"
        "\n"
        "- Tests run with pytest and the xdist plugin on two cores.\n",
    )
    dup = by_code(checked(root), "duplicate")
    assert [(f.path, f.start_line, f.related[0].start_line) for f in dup] == [("MEMORY.md", 7, 3)]


def test_a_pleasantry_said_again_is_not_a_duplicate(tmp_path: Path):
    # As in LoCoMo's chats: the same thanks in many sessions, too few content words for a fact.
    root = tmp_path / "chat"
    for day, topic in (("2023-05-25", "the adoption agency"), ("2023-06-09", "a pottery class")):
        write(
            root,
            f"memory/{day}-session.md",
            "# Session\n"
            "\n"
            f"**Priya:** Thanks, Tomas! Your kind words really mean a lot. Tell me about {topic}.\n"
            "**Tomas:** The pottery studio on Elm Street opens at nine every Saturday morning.\n",
        )
    dup = by_code(checked(root), "duplicate")
    # The fact said twice is still a copy; the thanks are not.
    assert [(f.path, f.start_line) for f in dup] == [("memory/2023-06-09-session.md", 4)]


def test_a_short_sentence_inside_a_long_one_is_not_a_duplicate(tmp_path: Path):
    # As in SciFact: a result's few words all sit in a long sentence listing what was measured.
    root = tmp_path / "methods"
    write(
        root,
        "memory/mesh-trial.md",
        "# Mesh trial\n"
        "\n"
        "Rats were examined 3 months after the operation for complications, area and type of "
        "adhesions, strength of incorporation and intensity of the inflammatory response.\n"
        "Adhesions covered less of the coated mesh than of the bare one.\n"
        "Complications, strength of incorporation and intensity of the inflammatory response "
        "were similar.\n",
    )
    write(
        root,
        "memory/statin-trial.md",
        "# Statin trial\n"
        "\n"
        "Baseline characteristics of the two groups were similar at enrolment.\n"
        "Rates of muscle pain were similar in both arms of the trial.\n"
        "Cholesterol fell by a third in the treated group within six weeks.\n",
    )
    assert by_code(checked(root), "duplicate") == []


def test_settings_turn_a_check_off_and_change_its_severity(notes: Path):
    s = Settings()
    s.hygiene.duplicate.severity = "information"
    s.hygiene.expired.enabled = False
    found = checked(notes, s)
    assert {f.severity for f in by_code(found, "duplicate")} == {"information"}


def test_load_cap_on_the_first_line_past_it(tmp_path: Path):
    root = tmp_path / "cap"
    write(
        root, "MEMORY.md", "".join(f"- fact number {i} about the project\n" for i in range(1, 260))
    )
    cap = by_code(checked(root), "load-cap")
    assert [(f.path, f.start_line) for f in cap] == [("MEMORY.md", 201)]
    assert "Claude Code" in cap[0].message and "200 lines" in cap[0].message
    # By bytes: 300-byte lines reach 25,000 bytes before 200 lines.
    write(root, "MEMORY.md", "".join(f"{i:03d} " + "x" * 295 + "\n" for i in range(150)))
    cap = by_code(checked(root), "load-cap")
    assert [f.start_line for f in cap] == [84] and "25,000 bytes" in cap[0].message


def test_agents_md_is_capped_when_the_workspace_indexes_it(tmp_path: Path):
    root = tmp_path / "agents"
    write(root, "AGENTS.md", "".join(f"{i:04d} " + "y" * 995 + "\n" for i in range(40)))
    assert by_code(checked(root), "load-cap") == []  # not memory here: never read
    s = Settings()
    s.extra_paths = ["AGENTS.md"]
    cap = by_code(checked(root, s), "load-cap")
    assert [f.start_line for f in cap] == [33] and "Codex" in cap[0].message


BIG = "".join(f"k{i}: {'v' * 90}\n" for i in range(800))  # 78 KB of plain keys
EXPIRES = "expires: 2020-01-01\n---\n# Rota\n"
FRONT = {
    "past": ("---\nexpires: 2026-01-15\n---\n# Rota\n", "expired", (1, 3)),
    "future": ("---\nvalid_until: 2027-01-15\n---\n# Rota\n", None, None),
    "no such day": ("---\nexpires: 2026-02-30\n---\n# Rota\n", "front-matter", (1, 3)),
    "odd format": ("---\ntitle: x\nexpires: next friday\n---\n# Rota\n", "front-matter", (3, 3)),
    "not yaml": ("---\nexpires: [2026\n---\n# Rota\n", "front-matter", None),
    "list": ("---\n- a\n- b\n---\n# Rota\n", "front-matter", (1, 4)),
    "alias bomb": (
        "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nexpires: 2020-01-01\n---\n# Rota\n",
        "front-matter",
        (3, 3),
    ),
    "huge": ("---\nnote: " + "z" * 70_000 + "\n" + EXPIRES, "front-matter", (1, 4)),
    "big": ("---\n" + BIG + EXPIRES, "front-matter", (1, 803)),
    "unclosed": ("---\nexpires: 2020-01-01\n# Rota\n", None, None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FRONT))
def test_front_matter(case: str, tmp_path: Path):
    text, code, lines = FRONT[case]
    root = tmp_path / "fm"
    write(root, "memory/rota.md", text + "\nThe rota changes every Monday at nine.\n")
    with engine(root) as e:
        found = [f for f in e.check(TODAY) if f.code in ("expired", "front-matter")]
        # The file is indexed as before: its body is found.
        assert e.search("rota changes Monday", mode="keyword").results
    assert [f.code for f in found] == ([code] if code else [])
    if lines:
        assert (found[0].start_line, found[0].end_line) == lines


def test_orphan_topic_files_once_the_index_links_one(tmp_path: Path):
    root = tmp_path / "orphan"
    write(
        root,
        "MEMORY.md",
        "# Memory\n\n- Deploys: see [deploy](memory/deploy.md).\n- Style: memory/style.md\n",
    )
    for name in ("deploy", "style", "runbook"):
        write(root, f"memory/{name}.md", f"# {name}\n\nSomething about {name}.\n")
    write(root, "memory/2026-01-01.md", "# Log\n\nA daily log, not a topic file.\n")
    orphans = by_code(checked(root), "orphan")
    assert [(f.path, f.severity, f.related[0].path) for f in orphans] == [
        ("memory/runbook.md", "information", "MEMORY.md")
    ]
    # An index that links no topic file: the workspace does not use that layout.
    write(root, "MEMORY.md", "# Memory\n\n- Nothing linked.\n")
    assert by_code(checked(root), "orphan") == []


def test_a_draft_is_checked_before_it_is_written(notes: Path):
    with engine(notes) as e:
        path, found = e.check_draft(
            "# Today\n\n- We deploy the billing service with Helm charts from the infra repo.\n"
            "- The payments team moved the cron jobs to Argo Workflows.\n",
            today=TODAY,
        )
        assert path == "memory/2026-06-01-draft.md"
        assert [(f.code, f.path, f.start_line) for f in found] == [("duplicate", path, 3)]
        assert found[0].message == "already known at MEMORY.md#L3"
        # A draft standing in for MEMORY.md itself: its own old lines are not "known".
        path, found = e.check_draft(
            "# Memory\n\n- A brand new fact about the build cache.\n", "MEMORY.md"
        )
        assert (path, found) == ("MEMORY.md", [])
        with pytest.raises(ValueError):
            e.check_draft("text", "../outside.md")


def test_a_draft_that_changes_what_memory_says_is_a_conflict(tmp_path: Path):
    root = tmp_path / "drafts"
    write(root, "MEMORY.md", "# Memory\n\n- We deploy the billing service with Helm charts.\n")
    write(
        root,
        "memory/2026-05-20.md",
        "# Notes\n\n- The search service moved off Elasticsearch to OpenSearch last sprint.\n",
    )
    with engine(root) as e:
        _, found = e.check_draft(
            "# Today\n\n- We moved the billing service off Helm to Kustomize.\n", today=TODAY
        )
        assert [(f.code, f.start_line, f.message) for f in found] == [
            (
                "conflict",
                3,
                "changes what MEMORY.md#L3 says: mark that passage superseded when this is written",
            )
        ]
        # Written as if memory had not said it changed: memory knows better.
        _, found = e.check_draft(
            "# Old\n\n- The search service queries Elasticsearch for every product page.\n",
            "memory/2026-04-01.md",
        )
        assert [(f.code, f.message) for f in found] == [
            ("conflict", "memory says this has changed since: memory/2026-05-20.md#L3")
        ]
        # Unrelated drafts and a passage already struck through are not conflicts.
        _, found = e.check_draft("# Today\n\n- Lunch moved to the third floor kitchen.\n")
        assert found == []
    write(root, "MEMORY.md", "# Memory\n\n- ~~We deploy the billing service with Helm charts.~~\n")
    with engine(root) as e:
        _, found = e.check_draft(
            "# Today\n\n- We moved the billing service off Helm to Kustomize.\n"
        )
        assert found == []
