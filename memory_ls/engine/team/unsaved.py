"""An editor's unsaved text, searched on this machine beside the team index.

Unsaved text never leaves its machine, so the team index cannot find it; the folder's local
index holds it (every buffer is indexed as you type). When a search has unsaved files, those
files' chunks in the local index (``UnsavedSource``) join the team index's as candidates of one
pipeline pass (``sources.py``): their BM25 is computed against the team's statistics
(``index/term_counts.py``), and the team's chunks of those files (their saved text) give way to
what the editor shows.

The local index of a team folder keeps no vectors, so the unsaved chunks' vectors and their
lines' are made here, in the background after each edit (``prepare``, from the engine's vector
phase: the chunks an edit left alone come from the team's embedding cache, looked up by
content hash), and kept by hash. A search never embeds: until the vectors are ready a chunk is
scored by its keywords, and by its own vector until its lines are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ...embeddings.base import EmbeddingError, EmbeddingProvider
from ...index.cache import CacheKey
from ...index.chunk_reads import Scope
from ...index.line_vectors import ChunkLines, segments
from ...index.rows import ChunkRow, FileInfo, from_blob, to_blob
from ...index.store import Store
from ...index.term_counts import bm25, frequencies, parse_match, tokenize
from ...search.vector import VectorIndex
from ...text import fts_text
from ..indexer import Indexer
from ..providers import readable

if TYPE_CHECKING:
    from .index import TeamIndex  # psycopg is needed only by a team index

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_K = TypeVar("_K", tuple[CacheKey, str], bytes)
KEPT = 1024  # chunk vectors, and chunks' line vectors, kept by content hash (least recent go)
# ... and at most this many bytes of vectors in each of those two caches: the line vectors of
# 1,024 chunks of 20 lines would take 250 MB with a 3,072-dimension model.
KEPT_BYTES = 32 << 20


@dataclasses.dataclass
class TeamCounts:
    """The team index's keyword statistics that an unsaved chunk's BM25 is counted with: the
    query words' document frequencies among ``total`` chunks (``sources.py`` fills them when
    the pipeline asks the team), its average chunk length, and its chunks of the unsaved files
    (in its counts, taken out here)."""

    avgdl: float
    saved: list[str]
    words: tuple[str, ...] = ()
    df: tuple[int, ...] = ()
    total: int = 0


@dataclasses.dataclass
class UnsavedSource:
    """The local index seen through the unsaved files' chunks only (a ``SearchSource``),
    their keyword matches scored with the team's BM25 statistics."""

    store: Store
    texts: dict[int, str]
    found_lines: dict[int, ChunkLines]
    counts: TeamCounts
    counted: Callable[[Any, dict[int, str]], dict[int, Counter[str]]]  # tokens of texts
    shared: bool = False

    @property
    def lines(self) -> UnsavedSource:
        return self

    def get(self, ids: Sequence[int]) -> dict[int, ChunkLines]:
        return {i: self.found_lines[i] for i in ids if i in self.found_lines}

    def over(self, max_chunks: int) -> bool:
        return False

    def doc_frequencies(self, words: Sequence[str]) -> tuple[list[int], int]:
        return self.store.doc_frequencies(words)  # this machine's: the team's are in counts

    def fts_search(
        self, expr: str, limit: int, postings: int = 0, left_out: str = ""
    ) -> list[tuple[int, float]]:
        """FTS5 says which chunks match; their BM25 is counted as if these chunks were in the
        team index in place of the files' saved ones: the team's chunk and word counts with
        theirs taken out and these put in, the team's average length. The words left out
        count in the score of a chunk the others find, as on a local index (matching them
        here would have FTS5 read their whole lists for an IDF thrown away)."""
        everything = len(self.texts)
        matched = [cid for cid, _ in self.store.fts_within(expr, list(self.texts), everything)]
        if not matched:
            return []
        terms = parse_match(f"{expr} OR {left_out}" if left_out else expr)
        conn = self.store.conn
        words = [list(t) for t in tokenize(conn, dict(enumerate(w for w, _ in terms))).values()]
        counts = self.counted(conn, {c: self.texts[c] for c in matched})
        tf = {c: frequencies(counts[c], words, terms) for c in matched}
        length = {c: sum(counts[c].values()) for c in matched}
        saved = self.counts.saved
        old = self.counted(conn, dict(enumerate(saved))).values() if saved else []
        old_tf = [frequencies(c, words, terms) for c in old]
        team = dict(zip(self.counts.words, self.counts.df, strict=True))
        df = [
            max(0, team.get(w, 0) - sum(1 for t in old_tf if t[i]))
            + sum(1 for c in matched if tf[c][i])
            for i, (w, _) in enumerate(terms)
        ]
        chunks = max(self.counts.total - len(saved) + everything, *df)
        ranked = [(c, bm25(tf[c], length[c], df, chunks, self.counts.avgdl)) for c in matched]
        return sorted(ranked, key=lambda r: (r[1], r[0]))[:limit]

    def fts_within(self, expr: str, ids: Sequence[int], limit: int) -> list[tuple[int, float]]:
        wanted = set(ids)
        return [r for r in self.fts_search(expr, len(self.texts)) if r[0] in wanted][:limit]

    def chunks_by_ids(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        return self.store.chunks_by_ids(ids)

    def chunks_in(self, scope: Scope, cap: int) -> list[int] | None:
        return None  # a few open buffers: the filters after retrieval see every one

    def file_infos(self, paths: Iterable[str]) -> dict[str, FileInfo]:
        return self.store.file_infos(paths)


class UnsavedText:
    def __init__(self, indexer: Indexer, team: TeamIndex):
        self.indexer = indexer
        self.team = team
        self._lock = threading.Lock()
        self._chunks: OrderedDict[tuple[CacheKey, str], np.ndarray] = OrderedDict()
        self._lines: OrderedDict[tuple[CacheKey, str], ChunkLines | None] = OrderedDict()
        self._tokens: OrderedDict[bytes, Counter[str]] = OrderedDict()  # by text digest
        self._team_lines = True  # whether the last team search re-scored by line vectors

    def paths(self) -> frozenset[str]:
        return frozenset(self.team.unsaved) & frozenset(self.indexer.buffers)

    def source(
        self, store: Store, paths: frozenset[str], counts: TeamCounts, vectors: bool, lines: bool
    ) -> tuple[UnsavedSource, VectorIndex]:
        """The unsaved files' chunks in the local index ``store`` as a source of the team's
        search, with the vectors made for them so far (``vectors``: the search has a query
        vector; ``lines``: the team's search re-scores by lines, and so these are made)."""
        self._team_lines = lines
        model = self._model()
        chunks = _chunks(store, paths)
        vecs: dict[int, np.ndarray] = {}
        found_lines: dict[int, ChunkLines] = {}
        if vectors and model is not None:
            vecs, found_lines = self._held(model, chunks)
        texts = {cid: text for cid, (_, text) in chunks.items()}
        source = UnsavedSource(store, texts, found_lines, counts, self._counted)
        ids = np.array(list(vecs), dtype=np.int64)
        mat = np.stack(list(vecs.values())) if vecs else np.zeros((0, 1), np.float32)
        return source, VectorIndex(lambda _large: (ids, mat))

    def prepare(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Make what the unsaved chunks lack: their vectors (the team's embedding cache
        first) and their lines' where line vectors are in use (a background job, after each
        edit). Never raises: the vector phase it follows has done its own work."""
        try:
            self._prepare(should_stop or (lambda: False))
        except Exception:
            log.exception("preparing unsaved text for vector search failed")

    def _prepare(self, should_stop: Callable[[], bool]) -> None:
        provider = self.indexer.policy.current
        model = self._model()
        paths = self.paths()
        if provider is None or model is None or not paths:
            return
        with self.indexer.reader() as store:
            chunks = _chunks(store, paths)
        have, _ = self._held(model, chunks)
        texts = {h: t for cid, (h, t) in chunks.items() if cid not in have}
        if texts:
            found = self.team.read(lambda s: s.cache.get(model, list(texts)), cooldown=False)
            cached = found or {}
            made = {h: from_blob(b) for h, b in cached.items()}
            todo = [h for h in texts if h not in made]
            if got := _embed(provider, [texts[h] for h in todo]):
                made.update(zip(todo, got, strict=True))
            self._keep(self._chunks, {(model, h): v for h, v in made.items()})
        ls = self.indexer.settings.query.lines
        if ls.weight == 0 or self.indexer.line_budget() == 0 or not self._team_lines:
            return  # no search re-scores by lines (or their cost is not wanted)
        with self._lock:
            lacking = {h: t for h, t in chunks.values() if (model, h) not in self._lines}
        for h, text in lacking.items():
            if should_stop():
                return
            parts = segments(text, partial(readable, provider))
            got = _embed(provider, [p for _, p in parts])
            if got or not parts:  # a failed embedding is tried again after the next edit
                held = ChunkLines(np.array([r for r, _ in parts]), np.stack(got)) if got else None
                self._keep(self._lines, {(model, h): held})

    def share(self, path: str) -> None:
        """``path`` was just saved: its chunks' vectors made here go to the team's embedding
        cache, so the team's vector phase does not embed them again (lines it does)."""
        model = self._model()
        if model is None:
            return
        try:
            with self.indexer.reader() as store:
                chunks = _chunks(store, [path])
        except Exception:  # an optimisation: the team embeds them itself otherwise
            log.exception("reading the chunks of %s to share their vectors failed", path)
            return
        held, _ = self._held(model, chunks)
        self.team.share_vectors(model, [(chunks[cid][0], to_blob(v)) for cid, v in held.items()])

    def _counted(self, conn: Any, texts: dict[int, str]) -> dict[int, Counter[str]]:
        """``tokenize`` of the texts (as FTS5 stores them), each text tokenized once."""
        digest = {
            cid: hashlib.blake2b(t.encode("utf-8", "surrogatepass")).digest()
            for cid, t in texts.items()
        }
        with self._lock:
            out = {cid: self._tokens[d] for cid, d in digest.items() if d in self._tokens}
        todo = {cid: fts_text(texts[cid]) for cid in digest if cid not in out}
        if todo:
            made = tokenize(conn, todo)
            out.update(made)
            self._keep(self._tokens, {digest[cid]: c for cid, c in made.items()})
        return out

    def lines_held(self) -> int:
        """How many chunks' line vectors are kept (tests read it)."""
        with self._lock:
            return sum(1 for v in self._lines.values() if v is not None)

    def _model(self) -> CacheKey | None:
        """The current model's key, as the embedding caches name it."""
        p = self.indexer.policy.current
        return None if p is None else (p.id, p.model, p.provider_key)

    def _held(
        self, model: CacheKey, chunks: dict[int, tuple[str, str]]
    ) -> tuple[dict[int, np.ndarray], dict[int, ChunkLines]]:
        """The vectors and line vectors made so far for ``chunks`` (chunk id -> ...)."""
        vecs: dict[int, np.ndarray] = {}
        lines: dict[int, ChunkLines] = {}
        with self._lock:
            for cid, (h, _) in chunks.items():
                if (v := self._chunks.get((model, h))) is not None:
                    self._chunks.move_to_end((model, h))
                    vecs[cid] = v
                    if isinstance(held := self._lines.get((model, h)), ChunkLines):
                        self._lines.move_to_end((model, h))
                        lines[cid] = held
        dims = {v.shape[0] for v in vecs.values()}
        return (vecs, lines) if len(dims) <= 1 else ({}, {})  # a model change half-way

    def _keep(self, into: OrderedDict[_K, _T], items: dict[_K, _T]) -> None:
        with self._lock:
            keep_recent(into, items)


def keep_recent(into: OrderedDict[_K, _T], items: dict[_K, _T]) -> None:
    """Add ``items`` to an LRU cache and let the least recent go past ``KEPT`` entries or
    ``KEPT_BYTES`` of vectors (the newest entry stays whatever its size)."""
    into.update(items)
    used = sum(_vector_bytes(v) for v in into.values())
    while len(into) > KEPT or (used > KEPT_BYTES and len(into) > 1):
        _, gone = into.popitem(last=False)
        used -= _vector_bytes(gone)


def _vector_bytes(value: object) -> int:
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, ChunkLines):
        return value.rows.nbytes + value.vectors.nbytes
    return 0  # word counts: bounded by their number


def _chunks(store: Store, paths: Iterable[str]) -> dict[int, tuple[str, str]]:
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
