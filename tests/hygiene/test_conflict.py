"""``conflict`` over a real index built by the engine (SQLite, FTS5), keyword-only: an older
passage a newer note says has changed is flagged, pointing at the newer one; another subject's
value, another day's event and a restatement are not; the finding follows edits."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.hygiene import Finding, check_index
from memory_ls.settings import Settings

TODAY = date(2026, 6, 1)


def engine(root: Path, settings: Settings | None = None) -> MemoryEngine:
    s = settings or Settings()
    s.provider = "none"
    e = MemoryEngine(root, s, index_path=root.parent / f"{root.name}.sqlite")
    e.sync("test", embed=False)
    return e


def conflicts(found: list[Finding]) -> list[tuple[str, int, str]]:
    return sorted(
        (f.path, f.start_line, f.related[0].citation) for f in found if f.code == "conflict"
    )


def test_a_change_flags_the_older_passage_and_points_at_the_newer(tmp_path: Path):
    root = tmp_path / "notes"
    write(
        root,
        "MEMORY.md",
        "# Memory\n\n"
        "- The billing service is deployed with Helm charts from the infra repo.\n"
        "- The search service runs on Elasticsearch 8.11 behind the internal gateway.\n",
    )
    write(
        root,
        "memory/2026-03-02.md",
        "# Notes\n\n"
        "- In March we moved the billing service off Helm to Kustomize overlays.\n"
        "- The analytics service was migrated from Elasticsearch 7.17 to OpenSearch 2.11.\n",
    )
    with engine(root) as e:
        found = e.check(TODAY)
    assert conflicts(found) == [("MEMORY.md", 3, "memory/2026-03-02.md#L3")]
    f = next(f for f in found if f.code == "conflict")
    assert f.severity == "information"
    assert f.message == "probably superseded by memory/2026-03-02.md#L3"  # fmt: skip


def test_the_same_subject_with_another_value_is_a_conflict_another_subject_is_not(
    tmp_path: Path,
):
    root = tmp_path / "notes"
    write(
        root,
        "memory/2026-01-05.md",
        "# Notes\n\n"
        "- The ledger service runs Postgres 15 on the shared database cluster.\n"
        "- The staging deploy took 14 minutes end to end.\n"
        "\nDate: 2:01 pm on 23 January, 2026\n"
        "\nAn edit number 12 of this note, written now.\n"
        "- We deploy the web app with Helm charts from the infra repo.\n",
    )
    write(
        root,
        "memory/2026-03-02.md",
        "# Notes\n\n"
        "- The ledger service runs Postgres 16 on the shared database cluster.\n"
        "- The staging deploy took 22 minutes end to end.\n"
        "\nDate: 2:01 pm on 9 January, 2026\n"
        "\nAn edit number 57 of this note, written now.\n"
        "- We moved the search service off Helm to Kustomize overlays.\n",
    )
    write(
        root,
        "memory/2026-04-01.md",
        "# Notes\n\n- The reporting service runs Postgres 14 on the shared database cluster.\n",
    )
    with engine(root) as e:
        found = e.check(TODAY)
    # Postgres 15 -> 16 for the ledger service; not: the reporting service's 14 (another
    # subject), the deploy that took another time on another day (an event), the search
    # service moving off Helm (the web app's Helm is another subject), a session's date line,
    # a counter in a line that names nothing else.
    assert conflicts(found) == [("memory/2026-01-05.md", 3, "memory/2026-03-02.md#L3")]


def test_the_finding_follows_edits_and_can_be_turned_off(tmp_path: Path):
    root = tmp_path / "notes"
    write(
        root,
        "memory/2026-01-05.md",
        "# Notes\n\n- Exchange rates are cached in Redis and expire after one hour.\n",
    )
    write(root, "memory/2026-02-01.md", "# Notes\n\n- Alice fixed the flaky login test.\n")
    with engine(root) as e:
        assert conflicts(e.check(TODAY)) == []
        later = "# Notes\n\n- Exchange rates are no longer cached in Redis.\n"
        e.set_document("memory/2026-02-01.md", later)
        assert conflicts(e.check(TODAY)) == [("memory/2026-01-05.md", 3, "memory/2026-02-01.md#L3")]
        with e.indexer.reader() as r:
            assert conflicts(check_index(r, e.settings.hygiene, TODAY)) == conflicts(e.check(TODAY))
        e.set_document("memory/2026-02-01.md", "# Notes\n\n- Alice fixed the login test.\n")
        assert conflicts(e.check(TODAY)) == []
    s = Settings()
    s.hygiene.conflict.enabled = False
    write(root, "memory/2026-02-01.md", later)
    with engine(root, s) as e:
        assert conflicts(e.check(TODAY)) == []
