"""OpenAI's Batch API for large embedding backfills (off by default: ``remote.batchApi``).

Half the price of the synchronous endpoint, answered within 24 h. The flow, per job:

1. write one JSONL line per request of ``remote.batchSize`` inputs:
   ``{"custom_id": "mls-<start>-<count>-<hash>", "method": "POST", "url": "/v1/embeddings",
   "body": {"model": ..., "input": [...], "dimensions"?: n}}``;
2. upload it: ``POST {baseUrl}/files`` (multipart, ``purpose=batch``) -> ``{"id": "file-..."}``;
3. create the batch: ``POST {baseUrl}/batches`` with ``{"input_file_id", "endpoint":
   "/v1/embeddings", "completion_window": "24h"}``;
4. poll ``GET {baseUrl}/batches/{id}`` every ``remote.batchApiPollMs`` through ``validating``,
   ``in_progress``, ``finalizing`` to ``completed`` (or ``failed``, ``expired``,
   ``cancelled``); past ``remote.batchApiTimeoutMinutes`` the batch is cancelled;
5. download ``GET {baseUrl}/files/{output_file_id}/content`` (and the ``error_file_id``) and
   map each line back by ``custom_id``: ``{"custom_id", "response": {"status_code": 200,
   "body": <an embeddings answer>}, "error": null}``.

Every request that failed, is missing, or belongs to a batch that failed, expired or timed out
is embedded again through the synchronous endpoint (with its retries). Results are handed to
``on_vectors(start, vectors)`` as soon as they are parsed, so the caller can put them in the
embedding cache at once: a crash later loses nothing already paid for. ``on_submitted(job)``
hands over each created batch (id and ``custom_id`` map) so a caller may journal it and
``resume`` it after a restart instead of paying twice. Jobs run ``remote.batchApiConcurrency``
at a time (default 2). The custom ids carry a hash of their texts: ``resume`` with other
texts never mixes vectors up.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..settings import RemoteSettings
from .base import EmbeddingError
from .openai import OpenAIProvider

log = logging.getLogger(__name__)

ENDPOINT = "/v1/embeddings"
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
MAX_REQUESTS_PER_JOB = 50_000  # the API's limit per input file
MAX_JOB_BYTES = 190 * 1024 * 1024  # under the 200 MB file limit
_POLLS_AFTER_CANCEL = 3

OnVectors = Callable[[int, np.ndarray], None]


def custom_id(start: int, texts: Sequence[str]) -> str:
    """The id of the request embedding ``texts`` at offset ``start`` (at most 64 chars)."""
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()[:12]
    return f"mls-{start}-{len(texts)}-{digest}"


@dataclass
class BatchJob:
    """A submitted batch: what ``resume`` needs after a restart (no secrets in it)."""

    batch_id: str
    input_file_id: str
    chunks: dict[str, tuple[int, int]]  # custom_id -> (start, count)


@dataclass
class BatchReport:
    jobs: list[str] = field(default_factory=list)  # batch ids
    statuses: dict[str, str] = field(default_factory=dict)  # batch id -> final status
    texts_from_batch: int = 0
    texts_retried_sync: int = 0
    failed_requests: list[str] = field(default_factory=list)  # custom ids re-sent sync


def batch_embedder_for(provider: Any, remote: RemoteSettings) -> OpenAIBatchEmbedder | None:
    """A batch embedder when ``remote.batchApi`` is on and the provider is OpenAI's."""
    if remote.batch_api and type(provider) is OpenAIProvider:
        return OpenAIBatchEmbedder(provider, remote)
    return None


class OpenAIBatchEmbedder:
    def __init__(
        self,
        provider: OpenAIProvider,
        remote: RemoteSettings | None = None,
        *,
        max_requests_per_job: int = MAX_REQUESTS_PER_JOB,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        remote = remote or RemoteSettings()
        self.provider = provider
        self.min_texts = max(1, remote.batch_api_min_texts)
        self.concurrency = max(1, remote.batch_api_concurrency)
        self.poll_s = max(0.0, remote.batch_api_poll_ms / 1000.0)
        # 0: no limit of our own (OpenAI expires the batch after its 24 h window anyway)
        self.timeout_s = max(0.0, remote.batch_api_timeout_minutes * 60.0) or float("inf")
        self.max_requests_per_job = max(1, min(max_requests_per_job, MAX_REQUESTS_PER_JOB))
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
        texts = self.provider._prepare(texts)
        result = _Result(len(texts), on_vectors, self._lock)
        if not texts:
            return np.zeros((0, self.provider.dims), dtype=np.float32)
        size = self.provider.batch_size
        chunks = [(s, min(size, len(texts) - s)) for s in range(0, len(texts), size)]
        jobs = self._plan(chunks, texts)
        missing: dict[str, tuple[int, int]] = {}
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(self._run, job, texts, result, on_submitted) for job in jobs]
            for job, future in zip(jobs, futures, strict=True):
                try:
                    missing.update(future.result())
                except EmbeddingError as exc:
                    if result.failed_callback:
                        raise
                    log.warning("openai batch job failed, embedding synchronously: %s", exc)
                    missing.update(job)
        self._fill(missing, texts, result)
        return result.matrix()

    def resume(
        self, job: BatchJob, texts: Sequence[str], on_vectors: OnVectors | None = None
    ) -> np.ndarray:
        """Collect a batch submitted before (e.g. before a crash) for the same ``texts``."""
        texts = self.provider._prepare(texts)
        result = _Result(len(texts), on_vectors, self._lock)
        for cid, (start, count) in job.chunks.items():
            if start + count > len(texts) or custom_id(start, texts[start : start + count]) != cid:
                raise EmbeddingError("openai: batch to resume was made for other texts")
        with self._lock:
            self.report.jobs.append(job.batch_id)
        missing = self._collect(job, texts, result)
        self._fill(missing, texts, result)
        return result.matrix()

    # -- steps --------------------------------------------------------------------------------

    def _plan(
        self, chunks: list[tuple[int, int]], texts: list[str]
    ) -> list[dict[str, tuple[int, int]]]:
        jobs: list[dict[str, tuple[int, int]]] = []
        current: dict[str, tuple[int, int]] = {}
        size = 0
        for start, count in chunks:
            piece = sum(len(t.encode("utf-8")) for t in texts[start : start + count]) + 256
            if current and (
                len(current) >= self.max_requests_per_job or size + piece > MAX_JOB_BYTES
            ):
                jobs.append(current)
                current, size = {}, 0
            current[custom_id(start, texts[start : start + count])] = (start, count)
            size += piece
        if current:
            jobs.append(current)
        return jobs

    def _run(
        self,
        chunks: dict[str, tuple[int, int]],
        texts: list[str],
        result: _Result,
        on_submitted: Callable[[BatchJob], None] | None,
    ) -> dict[str, tuple[int, int]]:
        p = self.provider
        lines = [
            json.dumps(
                {
                    "custom_id": cid,
                    "method": "POST",
                    "url": ENDPOINT,
                    "body": p._body(texts[start : start + count], False),
                },
                ensure_ascii=False,
            )
            for cid, (start, count) in chunks.items()
        ]
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        uploaded = p._client.request(
            "POST",
            f"{p.base_url}/files",
            files={"file": ("memory-ls-embeddings.jsonl", payload, "application/jsonl")},
            data={"purpose": "batch"},
        )
        file_id = _field(uploaded, "id", "file upload")
        created = p._client.request(
            "POST",
            f"{p.base_url}/batches",
            json_body={"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h"},
        )
        job = BatchJob(_field(created, "id", "batch creation"), file_id, dict(chunks))
        with self._lock:
            self.report.jobs.append(job.batch_id)
        log.info("openai: batch %s submitted (%d requests)", job.batch_id, len(chunks))
        if on_submitted is not None:
            on_submitted(job)
        return self._collect(job, texts, result)

    def _collect(
        self, job: BatchJob, texts: list[str], result: _Result
    ) -> dict[str, tuple[int, int]]:
        """Wait for the batch, deliver what it produced, return the chunks still missing."""
        p = self.provider
        url = f"{p.base_url}/batches/{job.batch_id}"
        deadline = self._clock() + self.timeout_s
        batch = p._client.request("GET", url)
        cancelled_polls = 0
        while _status(batch) not in TERMINAL:
            if self._clock() >= deadline:
                if cancelled_polls == 0:
                    log.warning("openai: batch %s timed out; cancelling", job.batch_id)
                    try:
                        batch = p._client.request("POST", f"{url}/cancel")
                    except EmbeddingError as exc:
                        log.warning("openai: cannot cancel batch %s: %s", job.batch_id, exc)
                cancelled_polls += 1
                if cancelled_polls > _POLLS_AFTER_CANCEL:
                    break
            self._sleep(self.poll_s)
            batch = p._client.request("GET", url)
        status = _status(batch)
        with self._lock:
            self.report.statuses[job.batch_id] = status
        delivered: set[str] = set()
        output = batch.get("output_file_id") if isinstance(batch, dict) else None
        if output:
            content = p._client.request(
                "GET", f"{p.base_url}/files/{output}/content", expect="bytes"
            )
            delivered = self._deliver(job, content, texts, result)
        errors = batch.get("error_file_id") if isinstance(batch, dict) else None
        if errors:
            self._log_errors(job, errors)
        missing = {cid: span for cid, span in job.chunks.items() if cid not in delivered}
        log.info(
            "openai: batch %s %s: %d of %d requests answered",
            job.batch_id,
            status,
            len(delivered),
            len(job.chunks),
        )
        return missing

    def _deliver(
        self, job: BatchJob, content: bytes, texts: list[str], result: _Result
    ) -> set[str]:
        delivered: set[str] = set()
        for raw in content.splitlines():
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                log.warning("openai: batch %s: unreadable output line skipped", job.batch_id)
                continue
            cid = line.get("custom_id") if isinstance(line, dict) else None
            span = job.chunks.get(cid) if isinstance(cid, str) else None
            if span is None or cid in delivered:
                continue
            response = line.get("response") or {}
            if line.get("error") or response.get("status_code") != 200:
                continue
            start, count = span
            try:
                vectors = self.provider._vectors(response.get("body"), texts[start : start + count])
            except EmbeddingError as exc:
                log.warning("openai: batch %s: %s (re-sent synchronously)", job.batch_id, exc)
                continue
            result.put(start, vectors)
            delivered.add(cid)
            with self._lock:
                self.report.texts_from_batch += count
        return delivered

    def _log_errors(self, job: BatchJob, file_id: str) -> None:
        p = self.provider
        try:
            content = p._client.request(
                "GET", f"{p.base_url}/files/{file_id}/content", expect="bytes"
            )
        except EmbeddingError as exc:
            log.warning("openai: batch %s: cannot read its error file: %s", job.batch_id, exc)
            return
        lines = [ln for ln in content.splitlines() if ln.strip()]
        first = ""
        try:
            body = json.loads(lines[0]).get("response", {}).get("body", {})
            first = str((body.get("error") or {}).get("message", ""))[:200]
        except (ValueError, IndexError, AttributeError):
            pass
        log.warning(
            "openai: batch %s: %d failed requests (first: %s)",
            job.batch_id,
            len(lines),
            p._client.redact(first) or "no detail",
        )

    def _fill(self, missing: dict[str, tuple[int, int]], texts: list[str], result: _Result) -> None:
        """Embed what the batches did not answer through the synchronous endpoint."""
        for cid, (start, count) in sorted(missing.items(), key=lambda kv: kv[1][0]):
            if start in result.pieces:
                continue
            vectors = self.provider.embed_documents(texts[start : start + count])
            result.put(start, vectors)
            with self._lock:
                self.report.texts_retried_sync += count
                self.report.failed_requests.append(cid)


class _Result:
    """The output matrix, filled piece by piece; each piece goes to the callback first."""

    def __init__(self, count: int, on_vectors: OnVectors | None, lock: threading.Lock) -> None:
        self.count = count
        self.on_vectors = on_vectors
        self.pieces: dict[int, np.ndarray] = {}
        self.failed_callback = False
        self._lock = lock

    def put(self, start: int, vectors: np.ndarray) -> None:
        if self.on_vectors is not None:
            try:
                self.on_vectors(start, vectors)
            except BaseException:
                self.failed_callback = True
                raise
        with self._lock:
            self.pieces[start] = vectors

    def matrix(self) -> np.ndarray:
        parts = [self.pieces[s] for s in sorted(self.pieces)]
        out = np.vstack(parts) if parts else np.zeros((0, 0), dtype=np.float32)
        if out.shape[0] != self.count:
            raise EmbeddingError(f"openai: batch produced {out.shape[0]} of {self.count} vectors")
        return out


def _status(batch: Any) -> str:
    return str(batch.get("status", "")) if isinstance(batch, dict) else ""


def _field(answer: Any, name: str, what: str) -> str:
    value = answer.get(name) if isinstance(answer, dict) else None
    if not isinstance(value, str) or not value:
        raise EmbeddingError(f"openai: {what} answer has no {name!r}")
    return value
