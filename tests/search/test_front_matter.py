"""Front matter in search, over a real index built by the engine (SQLite, FTS5), keyword-only:
it is not body text (its words find nothing, hits start below it), ``tag:`` filters on its
tags, tags and aliases lift a note, ``date:`` dates an undated note, ``expires:`` demotes or
leaves out an expired one, an index of the schema before reads such files again, and the file
on disk is never changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.index.schema import SCHEMA_VERSION
from memory_ls.settings import Settings

FRONT = "---\ntitle: Zanzibar rollout\ntags: [deploy, '#helm']\naliases: [ship it]\n---\n"
BODY = "# Rollout\n\nThe billing service rolls out every Tuesday through Argo.\n"


def engine(root: Path, settings: Settings | None = None) -> MemoryEngine:
    s = settings or Settings()
    s.provider = "none"
    e = MemoryEngine(root, s, index_path=root.parent / f"{root.name}.sqlite")
    e.sync("test", embed=False)
    return e


def paths(e: MemoryEngine, query: str) -> list[str]:
    return [h.path for h in e.search(query, mode="keyword").results]


def test_front_matter_is_not_body_text_and_the_file_is_left_as_it_is(tmp_path: Path):
    root = tmp_path / "ws"
    write(root, "memory/rollout.md", FRONT + BODY)
    before = (root / "memory/rollout.md").read_bytes()
    with engine(root) as e:
        assert paths(e, "Zanzibar") == []  # only in the front matter's title
        hits = e.search("billing rolls out Tuesday", mode="keyword").results
        assert [h.path for h in hits] == ["memory/rollout.md"]
        assert hits[0].start_line == 6  # the body's first line, past the closing ---
        assert "title:" not in hits[0].snippet
    assert (root / "memory/rollout.md").read_bytes() == before


def test_tag_filter_keeps_the_tagged_notes_only(tmp_path: Path):
    root = tmp_path / "ws"
    write(root, "memory/rollout.md", FRONT + BODY)
    write(root, "memory/other.md", "---\ntags: ops\n---\n" + BODY.replace("billing", "search"))
    write(root, "memory/plain.md", BODY.replace("billing", "payments"))
    with engine(root) as e:
        assert sorted(paths(e, "rolls out Tuesday")) == [
            "memory/other.md",
            "memory/plain.md",
            "memory/rollout.md",
        ]
        assert paths(e, "tag:deploy rolls out Tuesday") == ["memory/rollout.md"]
        assert paths(e, "tag:HELM rolls out") == ["memory/rollout.md"]  # '#helm', any case
        assert paths(e, "tag:deploy tag:ops rolls out") == []  # every tag given
        assert paths(e, "tag:ops rolls out") == ["memory/other.md"]
        assert paths(e, "tag:dep rolls out") == []  # a tag, not a prefix of one


def test_a_tag_or_an_alias_of_the_query_lifts_a_note(tmp_path: Path):
    root = tmp_path / "ws"
    same = "The nightly job rotates the deploy keys for the billing cluster.\n"
    write(root, "memory/a.md", same)
    write(root, "memory/b.md", "---\ntags: [keys]\naliases: [key rotation]\n---\n" + same)
    with engine(root) as e:
        by_tag = e.search("rotates keys", mode="keyword").results
        assert [h.path for h in by_tag] == ["memory/b.md", "memory/a.md"]
        assert by_tag[0].score > by_tag[1].score
        assert paths(e, "key rotation nightly rotates")[0] == "memory/b.md"
    s = Settings()
    s.query.tag_boost = 0.0
    with engine(root, s) as e:
        hits = e.search("rotates keys", mode="keyword").results
        assert hits[0].score == hits[1].score


def test_date_in_front_matter_dates_an_undated_note_only(tmp_path: Path):
    root = tmp_path / "ws"
    write(root, "memory/freeze.md", "---\ndate: 2026-03-04\n---\nThe release freeze holds.\n")
    write(root, "memory/2026-01-02.md", "---\ndate: 2026-03-04\n---\nA second freeze note.\n")
    with engine(root) as e:
        assert paths(e, "after:2026-03-01 freeze") == ["memory/freeze.md"]
        assert paths(e, "before:2026-01-31 freeze") == ["memory/2026-01-02.md"]  # by its name


def test_expired_notes_are_demoted_excluded_or_kept(tmp_path: Path):
    root = tmp_path / "ws"
    text = "The on-call rota is Alice this week and Bob next week.\n"
    write(root, "memory/rota-old.md", "---\nexpires: 2020-01-31\n---\n" + text)
    write(root, "memory/rota-new.md", "---\nvalid_until: 2099-01-31\n---\n" + text)
    with engine(root) as e:
        hits = e.search("on-call rota Alice", mode="keyword").results
        assert [h.path for h in hits] == ["memory/rota-new.md", "memory/rota-old.md"]
        assert hits[1].score == hits[0].score * 0.5
    for mode, expected in (("exclude", ["memory/rota-new.md"]), ("keep", None)):
        s = Settings()
        s.query.expired = mode
        with engine(root, s) as e:
            hits = e.search("on-call rota Alice", mode="keyword", explain=True)
            got = [h.path for h in hits.results]
            if expected is None:
                assert sorted(got) == ["memory/rota-new.md", "memory/rota-old.md"]
                assert hits.results[0].score == hits.results[1].score
            else:
                assert got == expected
                assert hits.explain is not None and hits.explain[0]["counts"]["expired"] == 1


def test_unreadable_front_matter_is_kept_out_of_the_body_and_searched_as_a_plain_note(
    tmp_path: Path,
):
    root = tmp_path / "ws"
    write(root, "memory/bomb.md", "---\na: &a [x, x]\nb: [*a, *a]\ntags: deploy\n---\n" + BODY)
    with engine(root) as e:
        assert paths(e, "tag:deploy rolls out") == []  # not read: no tags
        assert paths(e, "rolls out Tuesday") == ["memory/bomb.md"]
        assert paths(e, "x") == []


def test_an_index_of_the_schema_before_reads_front_matter_files_again(tmp_path: Path):
    root = tmp_path / "ws"
    write(root, "memory/rollout.md", FRONT + BODY)
    write(root, "memory/plain.md", BODY)
    index = root.parent / "ws.sqlite"
    with engine(root):
        pass
    # As version 4 left it: no meta column, and the front matter indexed as body text.
    conn = sqlite3.connect(index)
    conn.execute("ALTER TABLE files DROP COLUMN meta")
    conn.execute(
        "UPDATE chunks SET text = ? || text, start_line = 1 WHERE path = 'memory/rollout.md'",
        (FRONT,),
    )
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema'")
    conn.commit()
    conn.close()
    assert SCHEMA_VERSION == 5
    with engine(root) as e:
        assert paths(e, "tag:deploy rolls out") == ["memory/rollout.md"]
    conn = sqlite3.connect(index)
    texts = [r[0] for r in conn.execute("SELECT text FROM chunks")]
    plain_hash = conn.execute("SELECT hash FROM files WHERE path = 'memory/plain.md'").fetchone()
    conn.close()
    assert texts and not any(t.startswith("---") for t in texts)
    assert plain_hash[0] != ""  # a file without front matter was not read again
