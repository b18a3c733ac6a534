"""The team index and an editor's unsaved text as one source of the search pipeline.

The pipeline reads one ``SearchSource`` and one ``VectorSource``; here they are two: the team
index (PostgreSQL + pgvector) and the folder's local index seen through the unsaved files'
chunks (``unsaved.UnsavedSource``). Their candidates meet before scoring, so one pass scores
every candidate the same way: the unsaved chunks' BM25 is counted with the team's statistics
(as if they were in the team index in place of their files' saved text), their cosines stand
out from the team's background, and the team's chunks of those files give way to what the
editor shows.

The two indexes number their chunks independently: here a local chunk ``i`` is ``-(i + 1)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ...index.backend import LineReader
from ...index.chunk_reads import Scope
from ...index.line_vectors import ChunkLines
from ...index.postgres import PgStore
from ...index.rows import ChunkRow, FileInfo
from ...search.calibrate import Moments
from ...search.vector import VectorSource
from .unsaved import UnsavedSource


def mine(i: int) -> int:
    """The id here of the local index's chunk ``i``."""
    return -(i + 1)


def split(ids: Iterable[int]) -> tuple[list[int], list[int]]:
    """(the team's chunk ids, the local index's) of ids given here."""
    team: list[int] = []
    local: list[int] = []
    for i in ids:
        (team if i >= 0 else local).append(i if i >= 0 else -i - 1)
    return team, local


def _tagged(found: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    return [(mine(i), v) for i, v in found]


@dataclass
class TeamAndUnsaved:
    """A ``SearchSource``: the team index, with the unsaved files' text in place of theirs."""

    team: PgStore
    unsaved: UnsavedSource
    paths: frozenset[str]  # the unsaved files

    @property
    def lines(self) -> LineReader | None:
        """Line vectors of both, as the team's are kept (none where it keeps none)."""
        team = self.team.lines
        return None if team is None else BothLines(team, self.unsaved, team.shared)

    def doc_frequencies(self, words: Sequence[str]) -> tuple[list[int], int]:
        """The team's counts, which the unsaved chunks' BM25 is counted against too."""
        df, total = self.team.doc_frequencies(words)
        self.unsaved.counts.words, self.unsaved.counts.df = tuple(words), tuple(df)
        self.unsaved.counts.total = total
        return df, total

    def fts_search(
        self, expr: str, limit: int, postings: int = 0, left_out: str = ""
    ) -> list[tuple[int, float]]:
        """The team's best ``limit`` and every unsaved chunk that matches (a few), by BM25."""
        found = self.team.fts_search(expr, limit, postings, left_out)
        found += _tagged(self.unsaved.fts_search(expr, len(self.unsaved.texts), 0, left_out))
        return sorted(found, key=lambda r: (r[1], r[0]))

    def fts_within(self, expr: str, ids: Sequence[int], limit: int) -> list[tuple[int, float]]:
        team, local = split(ids)
        found = self.team.fts_within(expr, team, limit) if team else []
        found += _tagged(self.unsaved.fts_within(expr, local, limit)) if local else []
        return sorted(found, key=lambda r: (r[1], r[0]))[:limit]

    def chunks_by_ids(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        team, local = split(ids)
        rows = {i: r for i, r in self.team.chunks_by_ids(team).items() if r.path not in self.paths}
        rows.update((mine(i), r) for i, r in self.unsaved.chunks_by_ids(local).items())
        return rows

    def chunks_in(self, scope: Scope, cap: int) -> list[int] | None:
        """The team's chunks a filter lets through, and every unsaved one (the filters
        after retrieval see them all); None when the team's are too many."""
        team = self.team.chunks_in(scope, cap)
        return None if team is None else team + [mine(i) for i in self.unsaved.texts]

    def file_infos(self, paths: Iterable[str]) -> dict[str, FileInfo]:
        wanted = set(paths)
        infos = self.team.file_infos(wanted - self.paths)
        infos.update(self.unsaved.file_infos(wanted & self.paths))
        return infos


@dataclass
class BothLines:
    team: LineReader
    unsaved: UnsavedSource
    shared: bool  # the team's: kept for many clients

    def get(self, ids: Sequence[int]) -> dict[int, ChunkLines]:
        team, local = split(ids)
        found = self.team.get(team) if team else {}
        found.update((mine(i), v) for i, v in self.unsaved.get(local).items())
        return found

    def over(self, max_chunks: int) -> bool:
        return self.team.over(max_chunks)


@dataclass
class BothVectors:
    """The team's vector index and the unsaved chunks' vectors (made on this machine)."""

    team: VectorSource
    unsaved: VectorSource
    count: int  # unsaved chunks with a vector

    def knn(self, query: np.ndarray, k: int) -> tuple[list[tuple[int, float]], Moments | None]:
        """The team's ``k`` nearest and every unsaved chunk, by cosine; the team's corpus is
        the background."""
        found, corpus = self.team.knn(query, k)
        mine_found, _ = self.unsaved.knn(query, self.count) if self.count else ([], None)
        both = found + _tagged(mine_found)
        return sorted(both, key=lambda h: (-h[1], h[0])), corpus

    def similarity(self, query: np.ndarray, chunk_ids: Sequence[int]) -> dict[int, float]:
        team, local = split(chunk_ids)
        sims = self.team.similarity(query, team) if team else {}
        sims.update((mine(i), v) for i, v in self.unsaved.similarity(query, local).items())
        return sims
