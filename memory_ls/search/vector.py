"""Vector KNN: an in-memory numpy matrix kept in step with the writer, or sqlite-vec.

A plain matrix-vector product over float32 unit vectors was measured faster than sqlite-vec's
brute-force vec0 scan here (see bench/perf.py), so ``auto`` uses the matrix and sqlite-vec stays
the persistent copy and the fallback. Appends go into spare capacity and deletes only clear a
mask, so a keystroke that re-chunks one file costs O(changed chunks), not a matrix copy.

From ``LARGE`` vectors on (a few hundred thousand chunks) a float32 scan no longer fits the
latency or the memory budget (1M x 384 is 1.5 GB and 150 ms a query here), so the matrix is kept
as float16 beside two sign bits per dimension: a Hamming scan over the bits (96 bytes a vector)
picks ``RESCORE`` candidates, which are scored exactly; the background for calibration comes
from an even sample of rows. Recall against exact search: bench/vector_scale.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from ..embeddings.threads import usable_cores
from ..index.backend import IndexBackend
from ..index.schema import DatabaseError, unit_f32
from ..index.vectors import ROOM, Changes, Mark
from .calibrate import Moments

log = logging.getLogger(__name__)
BACKGROUND_SAMPLE = 4096  # chunk vectors read per query to calibrate sqlite-vec scores
LARGE = 250_000  # vectors from which the matrix is float16 with sign codes (see above)
RESCORE = 2048  # candidates of the sign-code scan scored exactly
CODE_BLOCK = 16384  # rows whose sign codes one thread makes at a time


# (float16_from) -> (ids, matrix); the matrix may have more rows than ids: room for appends.
Loader = Callable[[int], tuple[np.ndarray, np.ndarray]]


class VectorSource(Protocol):
    """What a search reads of the vector side: the nearest chunks with the corpus's moments
    (the query's background), and the cosine of given chunks."""

    def knn(self, query: np.ndarray, k: int) -> tuple[list[tuple[int, float]], Moments | None]: ...
    def similarity(self, query: np.ndarray, chunk_ids: Sequence[int]) -> dict[int, float]: ...


_ROTATIONS: dict[int, np.ndarray] = {}


def _rotation(dims: int) -> np.ndarray:
    """A fixed random orthonormal matrix for ``dims`` (the same in every process)."""
    if dims not in _ROTATIONS:
        gauss = np.random.default_rng(20261203).standard_normal((dims, dims))
        _ROTATIONS[dims] = np.linalg.qr(gauss)[0].astype(np.float32)
    return _ROTATIONS[dims]


def sign_codes(rows: np.ndarray) -> np.ndarray:
    """Two bits per dimension: the signs of the vector and of a fixed random rotation of it,
    packed into 64-bit words: (words, rows), one word of every row after another, so that a
    scan runs over long contiguous arrays. On real embeddings at a million's selectivity,
    recall@10 of the scan plus re-scoring went from 0.972 with the signs alone to 0.99
    (bench/vector_scale.py --real); a rotation alone does not help, more bits do."""
    rows = np.atleast_2d(rows).astype(np.float32, copy=False)
    rotated = rows @ _rotation(rows.shape[1])
    signs = (rows > 0, rotated > 0)
    if rows.shape[1] % 8:  # a half would end inside a byte: pack the bits joined
        bits = np.packbits(np.concatenate(signs, axis=1), axis=1)
    else:  # each half on its own: the same bytes, without a copy of every bit
        bits = np.concatenate([np.packbits(half, axis=1) for half in signs], axis=1)
    pad = -bits.shape[1] % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(bits.view(np.uint64).T)


def hamming(codes: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Differing sign bits between every row's code and the query's (uint16 per row)."""
    words, n = codes.shape
    out = np.zeros(n, dtype=np.uint16)
    buf = np.empty(n, dtype=np.uint64)
    count = np.empty(n, dtype=np.uint8)
    for w in range(words):
        np.bitwise_xor(codes[w], query[w, 0], out=buf)
        np.bitwise_count(buf, out=count)
        np.add(out, count, out=out)
    return out


def nearest_rows(differ: np.ndarray, want: int) -> np.ndarray:
    """Rows whose distance is within the smallest bound that admits ``want`` rows (ties at
    the bound all come along): a histogram instead of a partial sort of every row."""
    counts = np.cumsum(np.bincount(differ))
    bound = int(np.searchsorted(counts, min(want, int(counts[-1]))))
    return np.flatnonzero(differ <= bound)


def _grown(rows: np.ndarray, used: int, cap: int) -> np.ndarray:
    """``rows`` with room for ``cap``; the room is zeros (np.resize repeats the rows, which
    took 30 ms at 100,000 vectors for the first append after a load)."""
    out = np.zeros((cap, *rows.shape[1:]), dtype=rows.dtype)
    out[:used] = rows[:used]
    return out


class VectorIndex:
    def __init__(
        self, loader: Loader, *, large: int = LARGE, marker: Callable[[], Mark | None] | None = None
    ):
        # (float16_from) -> (ids, matrix) from the store; float16 rows from that many vectors on
        self._loader = loader
        self._marker = marker  # where the store's log of changed vectors stands now
        # Where the rows stand in that log: read before each load, moved by what is applied.
        self.mark: Mark | None = None
        # The mark own writes moved the rows to: the other files of that same commit share it.
        self._carried: Mark | None = None
        self._large = large
        self._codes: np.ndarray | None = None  # sign codes, in large mode only
        self._lock = threading.Lock()
        self._loaded = False
        self._loading: threading.Thread | None = None  # a load in the background (``ready``)
        self._starting = threading.Lock()
        self._ids = np.zeros(0, dtype=np.int64)
        self._mat = np.zeros((0, 1), dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._n = 0
        self._row: dict[int, int] = {}
        self._version = 0  # bumped by every change to the rows, under the lock
        # Large mode, per version: (version, dead rows, the background sample as float32, live
        # rows), so a query does not convert 4,096 float16 rows or scan a 1M-long mask.
        self._per_version: tuple[int, np.ndarray, np.ndarray, int] | None = None

    @property
    def size(self) -> int:
        return len(self._row)

    def invalidate(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        self._version += 1
        self._loaded = False
        self.mark = self._carried = None
        self._row = {}
        self._n = 0

    def follow(self, changes: Callable[[Mark | None], Changes | None]) -> None:
        """Apply other writers' changes since ``mark``, which ``changes`` reads from the
        store's log (None: they cannot be told, so the matrix is loaded again). Read under the
        lock, so that no load lands between reading them and applying them."""
        with self._lock:
            if not self._loaded:
                return  # the next load reads everything anyway
            got = changes(self.mark)
            if got is None:
                self._drop()
            else:
                self.mark, gone, changed = got
                self._carried = None
                self._apply(gone, changed)

    def warm(self) -> None:
        """Load the matrix now (from a worker thread), so the first search does not pay for it."""
        with self._lock:
            self._ensure()

    def ready(self, wait_s: float) -> bool:
        """Whether the rows are loaded, waiting at most ``wait_s`` for a load, which starts in
        the background if none runs: a million vectors take seconds to load, and a search
        that loaded them itself held its caller (an editor's request) that long."""
        if self._loaded:
            return True
        with self._starting:
            if self._loading is None or not self._loading.is_alive():
                self._loading = threading.Thread(
                    target=self._load_quietly, name="memory-ls-vectors", daemon=True
                )
                self._loading.start()
            loading = self._loading
        loading.join(wait_s)
        return self._loaded

    def _load_quietly(self) -> None:
        try:
            self.warm()
        except Exception as exc:  # the next search that needs them starts another load
            log.warning("the vectors did not load: %s", exc)

    def _ensure(self) -> None:
        if self._loaded:
            return
        # Read first: what commits during the load is in the log after it, applied again.
        mark = self._marker() if self._marker is not None else None
        ids, mat = self._loader(self._large)  # mat may hold room for rows to come
        self.mark, self._carried = mark, None
        self._version += 1
        self._ids = ids
        self._mat = mat
        self._codes = None
        if len(ids) >= self._large:
            self._go_large()
        self._n = len(ids)
        self._alive = np.ones(self._n, dtype=bool)
        self._row = {int(i): r for r, i in enumerate(ids)}
        self._loaded = True

    def update(
        self,
        removed: Sequence[int],
        added: Sequence[tuple[int, np.ndarray]],
        at: Mark | None = None,
        alone: bool = False,
    ) -> None:
        """Apply this process's committed changes; a no-op until the matrix is first loaded.
        ``at``: the log's position at their commit. Rows loaded or followed at or past it hold
        them already, or newer ones (another process may have changed the same chunks since);
        rows of another log (an index rebuilt meanwhile) are not theirs. ``alone``: no other
        process committed since the rows' mark, so it moves to ``at`` (else the next follow
        re-reads these changes, and a large own backfill would have it load everything)."""
        with self._lock:
            held = self.mark
            if (
                at is not None
                and held is not None
                and at != self._carried
                and (at[0] != held[0] or at[1] <= held[1])
            ):
                return
            self._apply(removed, added)
            if alone and at is not None and self.mark is not None and self._loaded:
                self.mark = self._carried = at

    def _apply(self, removed: Sequence[int], added: Sequence[tuple[int, np.ndarray]]) -> None:
        if not self._loaded:
            return
        self._version += 1
        for cid in removed:
            r = self._row.pop(int(cid), None)
            if r is not None:
                self._alive[r] = False
        if not added:
            return
        dims = len(added[0][1])
        if self._n == 0 or self._mat.shape[1] != dims:
            self._mat = np.zeros((0, dims), dtype=np.float32)
            self._ids = np.zeros(0, dtype=np.int64)
            self._alive = np.zeros(0, dtype=bool)
            self._codes = None
            self._n = 0
            self._row = {}
        need = self._n + len(added)
        if need > len(self._ids):
            cap = max(need, int(len(self._ids) * 1.5) + 64)
            self._ids = _grown(self._ids, self._n, cap)
            self._alive = _grown(self._alive, self._n, cap)
        if need > len(self._mat):  # the loader's room is used up: a copy of every row
            cap = need + min(max(64, len(self._mat) // 2), ROOM)
            self._mat = _grown(self._mat, self._n, cap)
            if self._codes is not None:  # (words, rows): each word's row stays contiguous
                codes = np.zeros((self._codes.shape[0], cap), dtype=np.uint64)
                codes[:, : self._n] = self._codes[:, : self._n]
                self._codes = codes
        for cid, vec in added:
            old = self._row.pop(int(cid), None)
            if old is not None:
                self._alive[old] = False
            r = self._n
            self._mat[r] = vec
            if self._codes is not None:
                self._codes[:, r] = sign_codes(vec)[:, 0]
            self._ids[r] = cid
            self._alive[r] = True
            self._row[int(cid)] = r
            self._n += 1
        if self._n > 1024 and len(self._row) < self._n // 2:
            self._compact()
        if self._codes is None and len(self._row) >= self._large:
            self._compact()  # an index that grew past LARGE while open (a first sync)
            self._go_large()

    def _go_large(self) -> None:
        """float16 rows (half the memory) and their sign codes, built block by block on every
        core (numpy lets go of the GIL): the codes took most of a million vectors' load."""
        mat = self._mat
        self._mat = mat.astype(np.float16, copy=False)
        starts = range(0, len(mat), CODE_BLOCK)
        with ThreadPoolExecutor(usable_cores(), thread_name_prefix="memory-ls-codes") as pool:
            parts = list(pool.map(lambda i: sign_codes(mat[i : i + CODE_BLOCK]), starts))
        self._codes = np.concatenate(parts, axis=1)

    def _scored(self, rows: Any) -> np.ndarray:
        """Rows as float32 unit vectors: the float16 rows of large mode are kept as stored,
        and made unit length here, as every backend scores them (``unit_f32``)."""
        return self._mat[rows] if self._codes is None else unit_f32(self._mat[rows])

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: self._n])
        self._mat = self._mat[keep].copy()
        if self._codes is not None:
            self._codes = np.ascontiguousarray(self._codes[:, keep])
        self._ids = self._ids[keep].copy()
        self._alive = np.ones(len(keep), dtype=bool)
        self._n = len(keep)
        self._row = {int(i): r for r, i in enumerate(self._ids)}

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) best first; ties broken by chunk id."""
        return self.knn(query, k)[0]

    def knn(self, query: np.ndarray, k: int) -> tuple[list[tuple[int, float]], Moments | None]:
        """The k nearest chunks, and the moments of the query's similarity to every chunk
        (its background, for calibration: computed from the same product, nearly free)."""
        with self._lock:
            self._ensure()
            if self._n == 0 or k <= 0 or self._mat.shape[1] != len(query):
                return [], None
            q = query.astype(np.float32)
            alive = self._alive[: self._n]
            if self._codes is None:
                scores = self._mat[: self._n] @ q
                moments = Moments.of(scores[alive])
                rows = None
            else:
                rows, scores, moments = self._scan_codes(q, alive, k)
            scores[~alive if rows is None else ~alive[rows]] = -np.inf
            ids = self._ids[: self._n] if rows is None else self._ids[rows]
        k = min(k, len(self._row))
        if k <= 0:
            return [], moments
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        order = sorted(top.tolist(), key=lambda r: (-scores[r], ids[r]))
        hits = [(int(ids[r]), float(scores[r])) for r in order if np.isfinite(scores[r])]
        return hits, moments

    def _scan_codes(
        self, q: np.ndarray, alive: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray, Moments]:
        """Large mode: the rows nearest by sign codes, their exact scores, and the background
        from an even sample (scaled to every live row, so it pools like a full scan's)."""
        assert self._codes is not None
        n = self._n
        if self._per_version is None or self._per_version[0] != self._version:
            step = max(1, n // BACKGROUND_SAMPLE)
            sample = np.flatnonzero(alive[::step]) * step
            dead = np.flatnonzero(~alive)
            self._per_version = (
                self._version,
                dead,
                self._scored(sample),
                int(alive.sum()),
            )
        _, dead, background_rows, live = self._per_version
        differ = hamming(self._codes[:, :n], sign_codes(q))
        differ[dead] = np.iinfo(np.uint16).max  # never within the bound of live rows
        rows = nearest_rows(differ, max(RESCORE, 4 * k))
        scores = self._scored(rows) @ q
        m = Moments.of(background_rows @ q)
        return rows, scores, Moments(live, m.mean, m.mean_sq)

    def similarity(self, query: np.ndarray, chunk_ids: Sequence[int]) -> dict[int, float]:
        """Exact cosine for given chunks (those without a vector are left out)."""
        with self._lock:
            self._ensure()
            rows = [(cid, self._row[cid]) for cid in chunk_ids if cid in self._row]
            if not rows or self._mat.shape[1] != len(query):
                return {}
            sims = self._scored([r for _, r in rows]) @ query.astype(np.float32)
        return {cid: float(s) for (cid, _), s in zip(rows, sims, strict=True)}


class SqliteVecIndex:
    """The same interface over sqlite-vec's vec0 table (``store.vectorBackend = "sqlite-vec"``)."""

    def __init__(self, store: IndexBackend):
        self._store = store

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        try:
            hits = self._store.vec_search(query, k)
        except DatabaseError as exc:  # e.g. a query of other dimensions than the index
            log.warning("sqlite-vec search failed: %s", exc)
            return []
        # vec0 returns cosine distance; ties are broken by id like the numpy path.
        return sorted(((int(i), 1.0 - float(d)) for i, d in hits), key=lambda h: (-h[1], h[0]))

    def knn(self, query: np.ndarray, k: int) -> tuple[list[tuple[int, float]], Moments | None]:
        """vec0 has no cheap pass over every row: the background comes from an even sample."""
        sample = self._store.sample_embeddings(BACKGROUND_SAMPLE)
        moments = Moments.of(sample @ query) if sample.shape[1] == len(query) else None
        return self.search(query, k), moments

    def similarity(self, query: np.ndarray, chunk_ids: Sequence[int]) -> dict[int, float]:
        vecs = self._store.embeddings_for(list(chunk_ids))
        return {cid: float(v @ query) for cid, v in vecs.items()}
