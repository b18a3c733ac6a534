"""Providers' asynchronous batch APIs for large embedding backfills (off by default:
``remote.batchApi``).

Cheaper than the synchronous endpoints (OpenAI and Gemini: half the price; Voyage: a third
off), answered within hours. ``batch_embedder_for`` picks the embedder for the provider:

* OpenAI (here): JSONL upload to ``/files``, ``/batches`` job, output and error files;
* Voyage (``batch_voyage.py``): the same Files/Batches shape, model and ``input_type`` set once
  per job in ``request_params``;
* Gemini (``batch_gemini.py``): ``models/{model}:asyncBatchEmbedContent`` with inline requests,
  a long-running operation polled at ``batches/{id}``, results inline in the operation.

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

OpenAI's Batch API, per job:

1. write one JSONL line per request of ``remote.batchSize`` inputs:
   ``{"custom_id": "mls-<start>-<count>-<hash>", "method": "POST", "url": "/v1/embeddings",
   "body": {"model": ..., "input": [...], "dimensions"?: n}}``;
2. upload it: ``POST {baseUrl}/files`` (multipart, ``purpose=batch``) -> ``{"id": "file-..."}``;
3. create the batch: ``POST {baseUrl}/batches`` with ``{"input_file_id", "endpoint":
   "/v1/embeddings", "completion_window": "24h"}``;
4. poll ``GET {baseUrl}/batches/{id}`` through ``validating``, ``in_progress``, ``finalizing``
   to ``completed`` (or ``failed``, ``expired``, ``cancelled``); on timeout
   ``POST {baseUrl}/batches/{id}/cancel``;
5. download ``GET {baseUrl}/files/{output_file_id}/content`` (and the ``error_file_id``) and
   map each line back by ``custom_id``: ``{"custom_id", "response": {"status_code": 200,
   "body": <an embeddings answer>}, "error": null}``.

An input file holds at most 50,000 requests and 200 MB, and an ``/v1/embeddings`` batch at most
50,000 inputs across its requests (OpenAI API reference, "Create batch").
"""

from __future__ import annotations

import contextlib
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
MAX_INPUTS_PER_JOB = 50_000  # an /v1/embeddings batch: inputs across all its requests
MAX_JOB_BYTES = 190 * 1024 * 1024  # under the 200 MB file limit
_POLLS_AFTER_CANCEL = 3

OnVectors = Callable[[int, np.ndarray], None]
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


def batch_embedder_for(provider: Any, remote: RemoteSettings) -> BatchEmbedder | None:
    """The batch embedder for ``provider`` when ``remote.batchApi`` is on and its API has one
    (OpenAI, Gemini, Voyage; not the compatible servers, which have no batch API)."""
    if not remote.batch_api:
        return None
    if type(provider) is OpenAIProvider:
        return OpenAIBatchEmbedder(provider, remote)
    from .gemini import GeminiProvider
    from .voyage import VoyageProvider

    if type(provider) is GeminiProvider:
        from .batch_gemini import GeminiBatchEmbedder

        return GeminiBatchEmbedder(provider, remote)
    if type(provider) is VoyageProvider:
        from .batch_voyage import VoyageBatchEmbedder

        return VoyageBatchEmbedder(provider, remote)
    return None


class BatchEmbedder:
    """The provider-independent flow: plan jobs, run them, deliver, fill the gaps.

    Subclass hooks: ``_submit`` (create the job), ``_fetch`` (poll it), ``_cancel``,
    ``_status`` (its state from a poll answer) and ``_harvest`` (deliver its results).
    """

    label = "batch"  # the provider's name in messages
    terminal: frozenset[str] = TERMINAL
    max_requests_cap = MAX_REQUESTS_PER_JOB
    max_inputs_cap = MAX_INPUTS_PER_JOB
    max_job_bytes = MAX_JOB_BYTES
    requests_per_text = False  # True: every text is its own request (Gemini)
    polls_after_cancel = _POLLS_AFTER_CANCEL

    def __init__(
        self,
        provider: Any,
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
        texts = self.provider._prepare(texts)
        result = _Result(self.label, len(texts), on_vectors, self._lock)
        if not texts:
            return np.zeros((0, self.provider.dims), dtype=np.float32)
        size = self.provider.batch_size
        chunks = [(s, min(size, len(texts) - s)) for s in range(0, len(texts), size)]
        jobs = self._plan(chunks, texts)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(self._run, job, texts, result, on_submitted) for job in jobs]
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
        self._fill([c for job in jobs for c in job.items()], texts, result)
        return result.matrix()

    def resume(
        self, job: BatchJob, texts: Sequence[str], on_vectors: OnVectors | None = None
    ) -> np.ndarray:
        """Collect a batch submitted before (e.g. before a crash) for the same ``texts``."""
        texts = self.provider._prepare(texts)
        result = _Result(self.label, len(texts), on_vectors, self._lock)
        for cid, (start, count) in job.chunks.items():
            if start + count > len(texts) or custom_id(start, texts[start : start + count]) != cid:
                raise EmbeddingError(f"{self.label}: batch to resume was made for other texts")
        with self._lock:
            self.report.jobs.append(job.batch_id)
        try:
            self._collect(job, texts, result)
        except EmbeddingError as exc:
            if result.failed_callback:
                raise
            log.warning("%s: cannot collect batch %s: %s", self.label, job.batch_id, exc)
        size = self.provider.batch_size
        spans: list[tuple[str, tuple[int, int]]] = []
        for start in range(0, len(texts), size):  # texts the job did not cover as well
            count = min(size, len(texts) - start)
            spans.append((custom_id(start, texts[start : start + count]), (start, count)))
        self._fill(spans, texts, result)
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
        result: _Result,
        on_submitted: Callable[[BatchJob], None] | None,
    ) -> None:
        job = self._submit(chunks, texts)
        with self._lock:
            self.report.jobs.append(job.batch_id)
        log.info("%s: batch %s submitted (%d texts)", self.label, job.batch_id, _texts(chunks))
        if on_submitted is not None:
            on_submitted(job)
        self._collect(job, texts, result)

    def _collect(self, job: BatchJob, texts: list[str], result: _Result) -> None:
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

    def _fill(self, spans: list[tuple[str, tuple[int, int]]], texts: list[str], result: _Result):
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
        return self.provider._client.redact(text)

    # -- hooks --------------------------------------------------------------------------------

    def _submit(self, chunks: Chunks, texts: list[str]) -> BatchJob:  # pragma: no cover
        raise NotImplementedError

    def _fetch(self, job: BatchJob) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _cancel(self, job: BatchJob) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _status(self, answer: Any) -> str:
        return str(answer.get("status", "")) if isinstance(answer, dict) else ""

    def _harvest(
        self, job: BatchJob, answer: Any, texts: list[str], result: _Result
    ) -> int:  # pragma: no cover
        raise NotImplementedError

    def _field(self, answer: Any, name: str, what: str) -> str:
        value = answer.get(name) if isinstance(answer, dict) else None
        if not isinstance(value, str) or not value:
            raise EmbeddingError(f"{self.label}: {what} answer has no {name!r}")
        return value


class FileBatchEmbedder(BatchEmbedder):
    """The Files + Batches shape OpenAI introduced and Voyage follows: upload a JSONL file,
    create a batch on it, poll, download the output (and error) file, map by ``custom_id``.

    Subclass hooks: ``_line(cid, texts)`` (one input line) and ``_create_body(file_id)``.
    """

    upload_name = "memory-ls-embeddings.jsonl"

    def _line(self, cid: str, texts: list[str]) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def _create_body(self, file_id: str) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def _submit(self, chunks: Chunks, texts: list[str]) -> BatchJob:
        p = self.provider
        lines = [
            json.dumps(self._line(cid, texts[start : start + count]), ensure_ascii=False)
            for cid, (start, count) in chunks.items()
        ]
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        uploaded = p._client.request(
            "POST",
            f"{p.base_url}/files",
            files={"file": (self.upload_name, payload, "application/jsonl")},
            data={"purpose": "batch"},
        )
        file_id = self._field(uploaded, "id", "file upload")
        created = p._client.request(
            "POST", f"{p.base_url}/batches", json_body=self._create_body(file_id)
        )
        return BatchJob(self._field(created, "id", "batch creation"), file_id, dict(chunks))

    def _fetch(self, job: BatchJob) -> Any:
        p = self.provider
        return p._client.request("GET", f"{p.base_url}/batches/{job.batch_id}")

    def _cancel(self, job: BatchJob) -> Any:
        p = self.provider
        return p._client.request("POST", f"{p.base_url}/batches/{job.batch_id}/cancel")

    def _harvest(self, job: BatchJob, answer: Any, texts: list[str], result: _Result) -> int:
        p = self.provider
        delivered = 0
        output = answer.get("output_file_id") if isinstance(answer, dict) else None
        if output:
            content = p._client.request(
                "GET", f"{p.base_url}/files/{output}/content", expect="bytes"
            )
            delivered = self._deliver(job, content, texts, result)
        errors = answer.get("error_file_id") if isinstance(answer, dict) else None
        if errors:
            self._log_errors(job, errors)
        return delivered

    def _deliver(self, job: BatchJob, content: bytes, texts: list[str], result: _Result) -> int:
        delivered: set[str] = set()
        count_texts = 0
        for raw in content.splitlines():
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                log.warning(
                    "%s: batch %s: unreadable output line skipped", self.label, job.batch_id
                )
                continue
            cid = line.get("custom_id") if isinstance(line, dict) else None
            span = job.chunks.get(cid) if isinstance(cid, str) else None
            if span is None or cid in delivered:
                continue
            response = line.get("response") or {}
            if line.get("error") or not isinstance(response, dict):
                continue
            if response.get("status_code") != 200:
                continue
            start, count = span
            try:
                vectors = self.provider._vectors(response.get("body"), texts[start : start + count])
            except EmbeddingError as exc:
                log.warning(
                    "%s: batch %s: %s (re-sent synchronously)",
                    self.label,
                    job.batch_id,
                    self._redact(str(exc)),
                )
                continue
            if result.put(start, vectors):
                delivered.add(cid)
                count_texts += count
        return count_texts

    def _log_errors(self, job: BatchJob, file_id: str) -> None:
        p = self.provider
        try:
            content = p._client.request(
                "GET", f"{p.base_url}/files/{file_id}/content", expect="bytes"
            )
        except EmbeddingError as exc:
            log.warning(
                "%s: batch %s: cannot read its error file: %s", self.label, job.batch_id, exc
            )
            return
        lines = [ln for ln in content.splitlines() if ln.strip()]
        first = ""
        with contextlib.suppress(ValueError, IndexError):
            first = _error_message(json.loads(lines[0]))
        log.warning(
            "%s: batch %s: %d failed requests (first: %s)",
            self.label,
            job.batch_id,
            len(lines),
            self._redact(first)[:200] or "no detail",
        )


class OpenAIBatchEmbedder(FileBatchEmbedder):
    label = "openai"

    def _line(self, cid: str, texts: list[str]) -> dict[str, Any]:
        body = self.provider._body(texts, False)
        return {"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}

    def _create_body(self, file_id: str) -> dict[str, Any]:
        return {"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h"}


class _Result:
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
            gaps = ~self.done[start : start + count]
        runs: list[tuple[int, int]] = []
        i = 0
        while i < len(gaps):
            if gaps[i]:
                j = i
                while j < len(gaps) and gaps[j]:
                    j += 1
                runs.append((start + i, j - i))
                i = j
            else:
                i += 1
        return runs

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


def _error_message(line: Any) -> str:
    """The error text of an error-file line (OpenAI's and Voyage's shapes)."""
    if not isinstance(line, dict):
        return ""
    error = line.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error.get("message"))
    response = line.get("response")
    if isinstance(response, dict):
        body = response.get("body")
        if isinstance(body, dict):
            inner = body.get("error", body.get("detail"))
            if isinstance(inner, dict):
                inner = inner.get("message")
            if inner:
                return str(inner)
        if response.get("message"):
            return str(response.get("message"))
    return ""
