"""Unsaved editor text beside the team index (real PostgreSQL + pgvector, the real GGUF model):
the editor that holds it finds it, scored as the team index scores it once saved; no other
client sees it; the team's hits on its saved text give way to it until the buffer is closed."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write
from line_notes import ANSWER, NOTE, QUESTION
from model_util import ensure_test_model
from pg_util import shared_url, unique
from team_util import paths, team

from memory_ls.engine import MemoryEngine
from memory_ls.engine.team.route import TeamRoute
from memory_ls.index.writes import SyncReport
from memory_ls.settings import Settings

PLANS = "# Plans\n\nBook the dentist for Tuesday.\nThe walrus exhibit opens in spring.\n"
DRAFT_PATH = "memory/2026-03-03-session-5.md"


def model_team(namespace: str) -> Settings:
    s = team(shared_url(), namespace)
    s.provider = "local"
    s.local.model_path = str(ensure_test_model())
    return s


@pytest.mark.model
def test_unsaved_text_is_searched_beside_the_team_index(tmp_path: Path) -> None:
    ns = unique("unsaved")
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "memory/2026-03-02-plans.md", PLANS)
    write(b, "MEMORY.md", "# Memory of b\n\nPrefers tea.\n")
    with MemoryEngine(a, model_team(ns)) as ea, MemoryEngine(b, model_team(ns)) as eb:
        ea.sync()
        eb.sync()
        assert not ea.search(QUESTION).results  # nothing about a race yet

        # A new note typed in a's editor, not saved: a finds it at once by its keywords (a
        # search never embeds), then by meaning and lines too once the vector phase that
        # follows every edit has embedded them.
        assert ea.set_document(DRAFT_PATH, NOTE)
        first = ea.search(QUESTION)
        assert first.fallback_reason is None and first.mode == "hybrid"
        assert first.results[0].path == DRAFT_PATH and first.results[0].vector_score is None
        ea.embed_pending()
        top = ea.search(QUESTION).results[0]
        assert top.path == DRAFT_PATH and NOTE.split("\n")[top.best_line - 1] == ANSWER
        assert top.vector_score is not None and top.score > first.results[0].score
        assert DRAFT_PATH not in paths(eb.search(QUESTION, min_score=0))  # never shared

        # Saved: the team index answers for it, on the same scale. The vector made while it
        # was unsaved goes to the team's embedding cache before the push, which finds it
        # there: the team has it at once and never embeds the note again (its lines it does).
        write(a, DRAFT_PATH, NOTE)
        ea.set_document(DRAFT_PATH, NOTE)
        assert ea.search(QUESTION).results[0].vector_score is not None
        report = SyncReport("test")
        ea.embed_pending(None, report)
        assert report.embedded == 0
        saved = ea.search(QUESTION).results[0]
        assert saved.path == DRAFT_PATH and saved.best_line == top.best_line
        # the same but for the team's int8 line vectors (0.79597 unsaved, 0.79595 saved)
        assert abs(saved.score - top.score) < 0.005, (saved.score, top.score)
        assert DRAFT_PATH in paths(eb.search(QUESTION))

        # An unsaved edit of a saved note: its new text is found, its removed text is not
        # (the team's hit on the saved text gives way), until the buffer is closed unsaved.
        plans = "memory/2026-03-02-plans.md"
        edited = PLANS.replace("The walrus exhibit opens in spring.", "Renew the passport.")
        ea.set_document(plans, edited)
        assert snippets(ea, "passport renewal", plans) == [edited.strip()]
        assert snippets(ea, "walrus exhibit", plans) == []  # its saved text gave way
        assert snippets(eb, "walrus exhibit", plans) == [PLANS.strip()]
        ea.clear_document(plans)  # closed unsaved: the team's copy answers again
        assert snippets(ea, "walrus exhibit", plans) == [PLANS.strip()]
        assert snippets(ea, "passport renewal", plans) == []


def snippets(engine: MemoryEngine, query: str, path: str) -> list[str]:
    """The snippets of ``path``'s hits that hold the query's first word."""
    word = query.split()[0]
    return [
        h.snippet
        for h in engine.search(query, min_score=0).results
        if h.path == path and word in h.snippet
    ]


def test_unsaved_keywords_are_weighed_by_the_team_not_the_folder(tmp_path: Path) -> None:
    """A folder of one note: its own index gives the unsaved note's rare words no weight at
    all (in half its chunks), where the team's 40 chunks make them rare and "ferry" common.
    Scored as the team would score it, the note comes first, and the team's own hits are
    scored against it, as they are once it is saved."""
    ns = unique("weigh")
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "MEMORY.md", "# Memory\n\nPrefers tea.\n")
    for i in range(40):
        write(b, f"memory/log-{i:02d}.md", f"# Log {i}\n\nThe ferry left at {i} past nine.\n")
    draft = "# Draft\n\nThe axolotl budget is confidential; no ferry.\n"
    with (
        MemoryEngine(a, team(shared_url(), ns)) as ea,
        MemoryEngine(b, team(shared_url(), ns)) as eb,
    ):
        eb.sync()
        ea.sync()
        ea.set_document("memory/draft.md", draft)
        unsaved = ea.search("axolotl budget ferry", mode="keyword", min_score=0).results
        write(a, "memory/draft.md", draft)
        ea.clear_document("memory/draft.md")  # saved and closed: the team answers
        saved = ea.search("axolotl budget ferry", mode="keyword", min_score=0).results
    assert unsaved[0].path == saved[0].path == "memory/draft.md"
    assert [(h.path, round(h.score, 3)) for h in unsaved] == [
        (h.path, round(h.score, 3)) for h in saved
    ]


@pytest.mark.model
def test_unsaved_text_follows_a_team_scored_without_lines(tmp_path: Path) -> None:
    """A team index past this client's `query.lines.maxChunks` scores chunks by their own
    vectors only: unsaved chunks are scored the same way, not boosted by line vectors the
    team's candidates did not get."""
    ns = unique("nolines")
    a = tmp_path / "a"
    write(a, "memory/2026-03-02-plans.md", PLANS)
    write(a, "MEMORY.md", "# Memory\n\nPrefers tea.\n")
    s = model_team(ns)
    s.query.lines.max_chunks = 1  # the team holds 2 chunks, then 3
    with MemoryEngine(a, s) as ea:
        ea.sync()
        ea.set_document(DRAFT_PATH, NOTE)
        ea.embed_pending()
        unsaved = ea.search(QUESTION).results[0]
        overlay = ea.route.unsaved
        assert overlay is not None
        held = overlay.lines_held()
        # After a search that said the team scores without lines, an edit embeds none.
        ea.set_document(DRAFT_PATH, NOTE + "\nOne more line, unsaved, about the marathon.\n")
        ea.embed_pending()
        assert overlay.lines_held() == held
        ea.set_document(DRAFT_PATH, NOTE)
        ea.embed_pending()
        write(a, DRAFT_PATH, NOTE)
        ea.set_document(DRAFT_PATH, NOTE)
        ea.embed_pending()
        saved = ea.search(QUESTION).results[0]
    assert unsaved.path == saved.path == DRAFT_PATH
    # the same but for the team's float16 chunk vectors
    assert unsaved.score == pytest.approx(saved.score, abs=1e-4)


def test_an_unsaved_edit_of_a_team_note_scores_as_its_saved_text(tmp_path: Path) -> None:
    """Editing a note the team holds: its saved chunks leave the team's side of the search
    and its words' counts, the unsaved ones take their place, so an edit that leaves the
    query's words and the chunk's length alone changes no score at all."""
    ns = unique("edit")
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "memory/2026-03-02-plans.md", PLANS)
    for i in range(40):
        write(b, f"memory/log-{i:02d}.md", f"# Log {i}\n\nThe ferry left at {i} past nine.\n")
    with (
        MemoryEngine(a, team(shared_url(), ns)) as ea,
        MemoryEngine(b, team(shared_url(), ns)) as eb,
    ):
        eb.sync()
        ea.sync()

        def ranked() -> list[tuple[str, float]]:
            found = ea.search("walrus ferry", mode="keyword", min_score=0).results
            return [(h.path, round(h.score, 9)) for h in found]

        before = ranked()
        ea.set_document("memory/2026-03-02-plans.md", PLANS.replace("spring", "summer"))
        assert ranked() == before
        assert before[0][0] == "memory/2026-03-02-plans.md"


def test_a_buffer_without_its_files_byte_order_mark_is_saved_text(tmp_path: Path) -> None:
    """Editors hold a file's text without its UTF-8 BOM: such a buffer is the saved file (the
    team answers for it and it is pushed), not unsaved text forever."""
    ns = unique("bom")
    a, b = tmp_path / "a", tmp_path / "b"
    note = "memory/2026-03-04-bom.md"
    write(a, note, "\ufeff" + PLANS)
    write(b, "MEMORY.md", "# Memory of b\n\nPrefers tea.\n")
    with (
        MemoryEngine(a, team(shared_url(), ns)) as ea,
        MemoryEngine(b, team(shared_url(), ns)) as eb,
    ):
        ea.sync()
        assert isinstance(ea.route, TeamRoute)
        ea.set_document(note, PLANS)  # what VS Code sends for it
        assert note not in ea.route.team.unsaved
        edited = PLANS.replace("walrus", "narwhal")
        ea.set_document(note, "\ufeff" + edited)  # an edit is unsaved, BOM or not
        assert note in ea.route.team.unsaved
        assert note not in paths(eb.search("narwhal", min_score=0))
        write(a, note, "\ufeff" + edited)
        ea.set_document(note, edited)  # saved: pushed, found by the other client
        assert note not in ea.route.team.unsaved
        eb.sync()
        assert note in paths(eb.search("narwhal"))
