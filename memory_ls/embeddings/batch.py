"""The machinery shared by providers' asynchronous batch APIs for large embedding backfills
(off by default: ``remote.batchApi``).

Cheaper than the synchronous endpoints (OpenAI and Gemini: half the price; Voyage: a third
off), answered within hours. Each remote provider says whether it has such an API
(``RemoteProvider.batch_embedder``); ``batch_embedder_for`` asks it. One module per API:
``batch_openai.py`` (Files + Batches, whose shape ``batch_voyage.py`` reuses) and
``batch_gemini.py`` (inline requests, a long-running operation).

All share this module's flow (``BatchEmbedder``): the texts are cut into chunks of
``remote.batchSize`` (one request each for OpenAI and Voyage, one request a text for Gemini),
the chunks into jobs within each API's limits; jobs run ``remote.batchApiConcurrency`` at a
time (default 2), each polled every ``remote.batchApiPollMs`` until a terminal state; past
``remote.batchApiTimeoutMinutes`` a job is cancelled. Every answer is validated (count,
dimensions, finite numbers) by the provider's own parser. Whatever a job did not answer (a
failed or missing item, a failed, expired, cancelled or timed-out job, an invalid vector) is
embedded again through the provider's synchronous endpoint, with its retries.

Results are handed to ``on_vectors(start, vectors)`` as soon as they are parsed, so the caller
can put them in the embedding cache at once: a crash later loses nothing already paid for.
``on_submitted(job)`` hands over each created job (id and ``custom_id`` map, never a secret) so
a caller may journal it and ``resume`` it after a restart instead of paying twice. The custom
ids carry a hash of their texts: ``resume`` with other texts never mixes vectors up.

This module imports no provider and no per-API batch module: they import it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from ..settings import RemoteSettings
from .base import BatchCapable, Batcher, EmbeddingError, EmbeddingProvider, OnVectors
from .remote import RemoteClient

log = logging.getLogger(__name__)

Chunks = dict[str, tuple[int, int]]  # custom_id -> (start, count)


def custom_id(start: int, texts: Sequence[str]) -> str:
    """The id of the request embedding ``texts`` at offset ``start`` (at most 64 chars)."""
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()[:12]
    return f"mls-{start}-{len(texts)}-{digest}"


@dataclass
class BatchJob:
    """A submitted batch: what ``resume`` needs after a restart (no secrets in it)."""

    batch_id: str  # OpenAI / Voyage: "batch_..."; Gemini: "batches/..."
    input_file_id: str  # "" when the requests went inline (Gemini)
    chunks: Chunks


@dataclass
class BatchReport:
    jobs: list[str] = field(default_factory=list)  # batch ids
    statuses: dict[str, str] = field(default_factory=dict)  # batch id -> final status
    texts_from_batch: int = 0
    texts_retried_sync: int = 0
    failed_requests: list[str] = field(default_factory=list)  # custom ids re-sent sync


class BatchTarget(Protocol):
    """What a batch embedder uses of its provider: the public batch face of
    ``remote_provider.RemoteProvider``."""

    model: str
    base_url: str
    dimensions: int  # requested dimensions, 0: the model's own
    dims: int  # known dimensions, 0 until the first answer
    batch_size: int  # inputs per request
    client: RemoteClient

    def prepare(self, texts: Sequence[str]) -> list[str]:
        """``texts`` as they are sent (no empty strings)."""
        ...

    def request_body(self, texts: list[str], query: bool) -> dict[str, Any]:
        """The synchronous endpoint's JSON body for ``texts``."""
        ...

    def read_vectors(self, answer: Any, texts: Sequence[str]) -> np.ndarray:
        """Validated vectors from a synchronous-endpoint answer for ``texts``."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...


P = TypeVar("P", bound=BatchTarget)


def batch_embedder_for(
    provider: EmbeddingProvider | None, remote: RemoteSettings
) -> Batcher | None:
    """The batch embedder for ``provider`` when ``remote.batchApi`` is on and its API has one
    (OpenAI, Gemini, Voyage; not the compatible servers, which have no batch API)."""
    if not remote.batch_api or not isinstance(provider, BatchCapable):
        return None
    return provider.batch_embedder(remote)


class BatchEmbedder(Generic[P]):
    """The provider-independent flow: plan jobs, run them, deliver, fill the gaps.

    Subclasses set the API's limits and states and define the hooks: ``_submit`` (create the
    job), ``_fetch`` (poll it), ``_cancel``, ``_status`` (its state from a poll answer) and
    ``_harvest`` (deliver its results).
    """

    label: ClassVar[str]  # the provider's name in messages
    terminal: ClassVar[frozenset[str]]  # the job states after which polling stops
    max_requests_cap: ClassVar[int]  # requests per job
    max_inputs_cap: ClassVar[int]  # texts per job, across its requests
    max_job_bytes: ClassVar[int]  # size of a job's input (file or request body)
    requests_per_text: ClassVar[bool] = False  # True: every text is its own request (Gemini)
    polls_after_cancel: ClassVar[int] = 3  # polls to collect what finished before a cancel

    def __init__(
        self,
        provider: P,
        remote: RemoteSettings | None = None,
        *,
        max_requests_per_job: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        remote = remote or RemoteSettings()
        self.provider = provider
        self.min_texts = max(1, remote.batch_api_min_texts)
        self.concurrency = max(1, remote.batch_api_concurrency)
        self.poll_s = max(0.0, remote.batch_api_poll_ms / 1000.0)
        # 0: no limit of our own (the provider expires the job after its window anyway)
        self.timeout_s = max(0.0, remote.batch_api_timeout_minutes * 60.0) or float("inf")
        cap = self.max_requests_cap
        self.max_requests_per_job = max(1, min(max_requests_per_job or cap, cap))
        self.report = BatchReport()
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()

    def should_use(self, count: int) -> bool:
        return count >= self.min_texts

    # -- public API ---------------------------------------------------------------------------

    def embed(
        self,
        texts: Sequence[str],
        on_vectors: OnVectors | None = None,
        on_submitted: Callable[[BatchJob], None] | None = None,
    ) -> np.ndarray:
        """Vectors for ``texts`` in order, through batch jobs, the gaps filled synchronously."""
        prepared = self.provider.prepare(texts)
        result = BatchResult(self.label, len(prepared), on_vectors, self._lock)
        if not prepared:
            return np.zeros((0, self.provider.dims), dtype=np.float32)
        size = self.provider.batch_size
        chunks = [(s, min(size, len(prepared) - s)) for s in range(0, len(prepared), size)]
        jobs = self._plan(chunks, prepared)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(self._run, job, prepared, result, on_submitted) for job in jobs]
            for future in futures:
                try:
                    future.result()
                except EmbeddingError as exc:
                    if result.failed_callback:
                        raise
                    log.warning(
                        "%s batch job failed, embedding its texts synchronously: %s",
                        self.label,
                        self._redact(str(exc)),
                    )
        self._fill([c for job in jobs for c in job.items()], prepared, result)
        return result.matrix()

    def resume(
        self, job: BatchJob, texts: Sequence[str], on_vectors: OnVectors | None = None
    ) -> np.ndarray:
        """Collect a batch submitted before (e.g. before a crash) for the same ``texts``."""
        prepared = self.provider.prepare(texts)
        result = BatchResult(self.label, len(prepared), on_vectors, self._lock)
        for cid, (start, count) in job.chunks.items():
            end = start + count
            if end > len(prepared) or custom_id(start, prepared[start:end]) != cid:
                raise EmbeddingError(f"{self.label}: batch to resume was made for other texts")
        with self._lock:
            self.report.jobs.append(job.batch_id)
        try:
            self._collect(job, prepared, result)
        except EmbeddingError as exc:
            if result.failed_callback:
                raise
            log.warning("%s: cannot collect batch %s: %s", self.label, job.batch_id, exc)
        size = self.provider.batch_size
        spans: list[tuple[str, tuple[int, int]]] = []
        for start in range(0, len(prepared), size):  # texts the job did not cover as well
            count = min(size, len(prepared) - start)
            spans.append((custom_id(start, prepared[start : start + count]), (start, count)))
        self._fill(spans, prepared, result)
        return result.matrix()

    # -- the flow -----------------------------------------------------------------------------

    def _plan(self, chunks: list[tuple[int, int]], texts: list[str]) -> list[Chunks]:
        """Chunks grouped into jobs within the API's request, input and size limits."""
        jobs: list[Chunks] = []
        current: Chunks = {}
        size = requests = inputs = 0
        for start, count in chunks:
            piece = self._piece_bytes(texts[start : start + count])
            reqs = count if self.requests_per_text else 1
            if current and (
                requests + reqs > self.max_requests_per_job
                or inputs + count > self.max_inputs_cap
                or size + piece > self.max_job_bytes
            ):
                jobs.append(current)
                current, size, requests, inputs = {}, 0, 0, 0
            current[custom_id(start, texts[start : start + count])] = (start, count)
            size += piece
            requests += reqs
            inputs += count
        if current:
            jobs.append(current)
        return jobs

    def _piece_bytes(self, texts: Sequence[str]) -> int:
        """About how many bytes a chunk adds to a job's input (file or request body)."""
        return sum(len(t.encode("utf-8")) for t in texts) + 256

    def _run(
        self,
        chunks: Chunks,
        texts: list[str],
        result: BatchResult,
        on_submitted: Callable[[BatchJob], None] | None,
    ) -> None:
        job = self._submit(chunks, texts)
        with self._lock:
            self.report.jobs.append(job.batch_id)
        log.info("%s: batch %s submitted (%d texts)", self.label, job.batch_id, _texts(chunks))
        if on_submitted is not None:
            on_submitted(job)
        self._collect(job, texts, result)

    def _collect(self, job: BatchJob, texts: list[str], result: BatchResult) -> None:
        """Wait for the batch to end (or cancel it on timeout), then deliver what it made."""
        deadline = self._clock() + self.timeout_s
        answer = self._fetch(job)
        cancelled_polls = 0
        while self._status(answer) not in self.terminal:
            if self._clock() >= deadline:
                if cancelled_polls == 0:
                    log.warning("%s: batch %s timed out; cancelling", self.label, job.batch_id)
                    try:
                        answer = self._cancel(job) or answer
                    except EmbeddingError as exc:
                        log.warning("%s: cannot cancel batch %s: %s", self.label, job.batch_id, exc)
                cancelled_polls += 1
                if cancelled_polls > self.polls_after_cancel:
                    break
            self._sleep(self.poll_s)
            answer = self._fetch(job)
        status = self._status(answer)
        with self._lock:
            self.report.statuses[job.batch_id] = status
        delivered = self._harvest(job, answer, texts, result)
        with self._lock:
            self.report.texts_from_batch += delivered
        log.info(
            "%s: batch %s %s: %d of %d texts answered",
            self.label,
            job.batch_id,
            status or "unknown",
            delivered,
            _texts(job.chunks),
        )

    def _fill(
        self, spans: list[tuple[str, tuple[int, int]]], texts: list[str], result: BatchResult
    ) -> None:
        """Embed what the batches did not answer through the synchronous endpoint."""
        for cid, (start, count) in sorted(spans, key=lambda kv: kv[1][0]):
            runs = result.missing(start, count)
            if not runs:
                continue
            for run_start, run_count in runs:
                vectors = self.provider.embed_documents(texts[run_start : run_start + run_count])
                result.put(run_start, vectors)
                with self._lock:
                    self.report.texts_retried_sync += run_count
            with self._lock:
                self.report.failed_requests.append(cid)

    def _redact(self, text: str) -> str:
        return self.provider.client.redact(text)

    # -- hooks --------------------------------------------------------------------------------

    def _submit(self, chunks: Chunks, texts: list[str]) -> BatchJob:  # pragma: no cover
        raise NotImplementedError

    def _fetch(self, job: BatchJob) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _cancel(self, job: BatchJob) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _status(self, answer: Any) -> str:  # pragma: no cover
        raise NotImplementedError

    def _harvest(
        self, job: BatchJob, answer: Any, texts: list[str], result: BatchResult
    ) -> int:  # pragma: no cover
        raise NotImplementedError

    def _field(self, answer: Any, name: str, what: str) -> str:
        value = answer.get(name) if isinstance(answer, dict) else None
        if not isinstance(value, str) or not value:
            raise EmbeddingError(f"{self.label}: {what} answer has no {name!r}")
        return value


class BatchResult:
    """The output matrix, filled run by run; each run goes to the callback first."""

    def __init__(
        self, label: str, count: int, on_vectors: OnVectors | None, lock: threading.Lock
    ) -> None:
        self.label = label
        self.count = count
        self.on_vectors = on_vectors
        self.pieces: dict[int, np.ndarray] = {}
        self.done = np.zeros(count, dtype=bool)
        self.failed_callback = False
        self._lock = lock

    def put(self, start: int, vectors: np.ndarray) -> bool:
        """Hand ``vectors`` (for texts ``start``...) to the callback and keep them; False
        (nothing done) when some of those texts already have vectors."""
        end = start + len(vectors)
        with self._lock:
            if start < 0 or end > self.count or self.done[start:end].any():
                return False
        if self.on_vectors is not None:
            try:
                self.on_vectors(start, vectors)
            except BaseException:
                self.failed_callback = True
                raise
        with self._lock:
            self.pieces[start] = vectors
            self.done[start:end] = True
        return True

    def missing(self, start: int, count: int) -> list[tuple[int, int]]:
        """The runs of texts in ``[start, start + count)`` that have no vectors yet."""
        with self._lock:
            gaps = list(~self.done[start : start + count])
        return [(start + i, n) for i, n in runs(gaps)]

    def matrix(self) -> np.ndarray:
        parts = [self.pieces[s] for s in sorted(self.pieces)]
        out = np.vstack(parts) if parts else np.zeros((0, 0), dtype=np.float32)
        if out.shape[0] != self.count or not self.done.all():
            raise EmbeddingError(
                f"{self.label}: batch produced {out.shape[0]} of {self.count} vectors"
            )
        return out


def _texts(chunks: Chunks) -> int:
    return sum(count for _, count in chunks.values())


def runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """``(offset, length)`` of each run of true values in ``flags``."""
    found: list[tuple[int, int]] = []
    i = 0
    while i < len(flags):
        j = i
        while j < len(flags) and flags[j]:
            j += 1
        if j > i:
            found.append((i, j - i))
        i = j + 1
    return found
