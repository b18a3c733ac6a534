"""An editor's unsaved text, searched on this machine beside the team index.

Unsaved text never leaves its machine, so the team index cannot find it; the folder's local
index holds it (every buffer is indexed as you type). When the team index has answered a
search, the same search runs over the unsaved files' chunks in the local index, scored on the
team search's scale (``hybrid.Scale``: its best keyword match, its vector background and its
calibration, as if these chunks had been among its candidates), and the lists are merged: the
team's hits on those files (their saved text) give way to what the editor shows.

The local index of a team folder keeps no vectors, so the unsaved chunks' vectors and their
lines' are made here and kept by content hash: in the background after each edit
(``prepare``, from the engine's vector phase), and a chunk's own vector also by a search that
finds it missing (at most ``EMBED_PER_SEARCH``; the chunks an edit left alone come from the
team's embedding cache). A search never embeds lines (a chunk of twenty lines took 230 ms
with all-MiniLM-L6-v2): until they are ready a chunk is scored by its own vector, and a chunk
without one by its keywords.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from ..embeddings.base import EmbeddingError, EmbeddingProvider
from ..index.line_vectors import ChunkLines, segments
from ..index.rows import ChunkRow, FileInfo, from_blob
from ..index.store import Store
from ..search.hybrid import TAIL, Outcome
from ..search.hybrid import run as run_search
from ..search.request import SearchRequest
from ..search.results import SearchHit
from ..search.vector import VectorIndex
from ..settings import QuerySettings
from .indexer import Indexer
from .providers import readable

if TYPE_CHECKING:
    from .primary import Primary  # psycopg is needed only by a team index

log = logging.getLogger(__name__)
_T = TypeVar("_T")
EMBED_PER_SEARCH = 16  # chunk texts one search may embed
KEPT = 4096  # chunk and line vectors kept, by content hash


@dataclasses.dataclass
class UnsavedSource:
    """The local index seen through the unsaved files' chunks only (a ``SearchSource``)."""

    store: Store
    ids: list[int]
    found_lines: dict[int, ChunkLines]
    shared: bool = False

    @property
    def lines(self) -> UnsavedSource:
        return self

    def get(self, ids: Sequence[int]) -> dict[int, ChunkLines]:
        return {i: self.found_lines[i] for i in ids if i in self.found_lines}

    def over(self, max_chunks: int) -> bool:
        return False

    def doc_frequencies(self, words: Sequence[str]) -> tuple[list[int], int]:
        return self.store.doc_frequencies(words)

    def fts_search(self, expr: str, limit: int, postings: int = 0) -> list[tuple[int, float]]:
        return self.store.fts_within(expr, self.ids, limit)

    def chunks_by_ids(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        return self.store.chunks_by_ids(ids)

    def file_infos(self, paths: Iterable[str]) -> dict[str, FileInfo]:
        return self.store.file_infos(paths)


class UnsavedText:
    def __init__(self, indexer: Indexer, primary: Primary):
        self.indexer = indexer
        self.primary = primary
        self._lock = threading.Lock()
        self._chunks: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lines: OrderedDict[tuple[str, str], ChunkLines | None] = OrderedDict()

    def paths(self) -> set[str]:
        return self.primary.unsaved & set(self.indexer.buffers)

    def merged(
        self,
        team: Outcome,
        qvec: np.ndarray | None,
        req: SearchRequest,
        qs: QuerySettings,
        reference: np.ndarray | None,
    ) -> Outcome:
        """``team``'s outcome with the unsaved files' chunks in place of their saved text."""
        paths = self.paths()
        if not paths:
            return team
        with self.indexer.reader() as store:
            chunks = _chunks(store, paths)
            vecs, lines = self._vectors(chunks, EMBED_PER_SEARCH, with_lines=False)
            source = UnsavedSource(store, list(chunks), lines)
            ids = np.array(list(vecs), dtype=np.int64)
            mat = np.stack(list(vecs.values())) if vecs else np.zeros((0, 1), dtype=np.float32)
            vectors = VectorIndex(lambda _large: (ids, mat))
            # Gated by the merged list below, not on its own: a hit here under minScore may
            # come along behind a team hit that reaches it.
            wide = dataclasses.replace(req, min_score=req.threshold * TAIL)
            today = datetime.now(UTC).date()
            mine = run_search(source, vectors, qvec, wide, qs, today, reference, team.scale)
        return merge(team, mine.hits, paths, req.limit, req.threshold)

    def prepare(self) -> None:
        """Embed what the unsaved chunks lack, their lines included (a background job)."""
        paths = self.paths()
        if not paths or self.indexer.policy.current is None:
            return
        with self.indexer.reader() as store:
            chunks = _chunks(store, paths)
        self._vectors(chunks, len(chunks), with_lines=True)

    def _vectors(
        self, chunks: dict[int, tuple[str, str]], allowance: int, *, with_lines: bool
    ) -> tuple[dict[int, np.ndarray], dict[int, ChunkLines]]:
        """Chunk id -> vector, and -> its line vectors, for the chunks that have them now:
        up to ``allowance`` chunk vectors made (the team's embedding cache asked first), and
        the lines of chunks that have a vector when ``with_lines``."""
        provider = self.indexer.policy.current
        if provider is None or not chunks:
            return {}, {}
        key = (provider.id, provider.model, provider.provider_key)
        model = "\0".join(key)
        with self._lock:
            known = {
                h: self._chunks[(model, h)]
                for h, _ in chunks.values()
                if (model, h) in self._chunks
            }
        texts = {h: t for h, t in chunks.values() if h not in known}
        if texts:
            cached = self.primary.read(lambda s: s.cache.get(key, list(texts))) or {}
            known.update({h: from_blob(b) for h, b in cached.items()})
            todo = [h for h in texts if h not in known][:allowance]
            if got := _embed(provider, [texts[h] for h in todo]):
                known.update(zip(todo, got, strict=True))
            self._keep(self._chunks, {(model, h): known[h] for h in texts if h in known})
        lines: dict[int, ChunkLines] = {}
        for cid, (h, text) in chunks.items():
            with self._lock:
                held = self._lines.get((model, h), False)
            if held is False and h in known and with_lines:
                parts = segments(text, partial(readable, provider))
                got = _embed(provider, [p for _, p in parts])
                held = ChunkLines(np.array([r for r, _ in parts]), np.stack(got)) if got else None
                if got or not parts:  # a failed embedding is tried again by a later search
                    self._keep(self._lines, {(model, h): held})
            if isinstance(held, ChunkLines):
                lines[cid] = held
        return {cid: known[h] for cid, (h, _) in chunks.items() if h in known}, lines

    def _keep(
        self, into: OrderedDict[tuple[str, str], _T], items: dict[tuple[str, str], _T]
    ) -> None:
        with self._lock:
            into.update(items)
            while len(into) > KEPT:
                into.popitem(last=False)


def _chunks(store: Store, paths: set[str]) -> dict[int, tuple[str, str]]:
    """Chunk id -> (content hash, text) of the files ``paths`` in the local index."""
    hashes = {c.id: c.hash for p in sorted(paths) for c in store.chunk_rows(p)}
    return {cid: (hashes[cid], r.text) for cid, r in store.chunks_by_ids(hashes).items()}


def _embed(provider: EmbeddingProvider, texts: list[str]) -> list[np.ndarray]:
    """One vector per text, or none at all when the model fails (the unsaved text is then
    scored by its keywords)."""
    if not texts:
        return []
    try:
        out = np.asarray(provider.embed_documents(texts), dtype=np.float32)
    except EmbeddingError as exc:
        log.warning("embedding unsaved text failed: %s", exc)
        return []
    return list(out) if len(out) == len(texts) else []


def merge(
    team: Outcome, mine: list[SearchHit], paths: set[str], limit: int, threshold: float
) -> Outcome:
    """The team's hits without ``paths``, with ``mine`` placed by score (the team's order,
    MMR's or balanced, kept among its own); gated by ``threshold`` as one list."""
    theirs = [h for h in team.hits if h.path not in paths]
    ours = sorted((h for h in mine if h.score >= threshold * TAIL), key=lambda h: -h.score)
    out: list[SearchHit] = []
    for h in theirs:
        while ours and ours[0].score > h.score:
            out.append(ours.pop(0))
        out.append(h)
    out += ours
    below, best_below = team.below_min_score, team.best_below
    if out and max(h.score for h in out) < threshold:
        below += len(out)
        best_below = max(best_below or 0.0, max(h.score for h in out))
        out = []
    return dataclasses.replace(team, hits=out[:limit], below_min_score=below, best_below=best_below)
