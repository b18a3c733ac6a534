"""Gemini API asynchronous batch embeddings for large backfills (``remote.batchApi``).

Half the price of ``batchEmbedContents``. Sources: Gemini API reference, "Embeddings"
(``models.asyncBatchEmbedContent``: "Enqueues a batch of EmbedContent requests for batch
processing", ``POST /v1beta/{batch.model=models/*}:asyncBatchEmbedContent``) and "Batch API"
(``batches.get``, ``batches.cancel``, ``BatchState``); the Google developers blog "Gemini Batch
API now supports Embeddings" (2025-09). Per job:

1. create: ``POST {baseUrl}/models/{model}:asyncBatchEmbedContent`` with the requests inline
   (the request body must stay under 20 MB)::

       {"batch": {"displayName": "memory-ls-...", "model": "models/{model}",
                  "inputConfig": {"requests": {"requests": [
                      {"request": {"model": "models/{model}",
                                   "content": {"parts": [{"text": ...}]},
                                   "taskType": "RETRIEVAL_DOCUMENT",
                                   "outputDimensionality"?: n},
                       "metadata": {"key": "<custom_id>:<i>"}}, ...]}}}}

   answered by a long-running operation ``{"name": "batches/{id}", "metadata": {"@type":
   "...EmbedContentBatch", "state": "BATCH_STATE_PENDING", ...}}``;
2. poll ``GET {baseUrl}/batches/{id}`` through ``BATCH_STATE_PENDING`` and
   ``BATCH_STATE_RUNNING`` to ``BATCH_STATE_SUCCEEDED`` (or ``_FAILED``, ``_CANCELLED``,
   ``_EXPIRED``; the SDKs' ``JOB_STATE_*`` spellings are accepted too); on timeout
   ``POST {baseUrl}/batches/{id}:cancel``;
3. read the results from the finished operation itself: ``metadata.output.inlinedResponses
   .inlinedResponses[]`` (the same list is repeated under ``response.inlinedResponses``), each
   ``{"response": {"embedding": {"values": [...]}}, "metadata": {"key": ...}}`` or
   ``{"error": {"code", "message"}, "metadata": {...}}``, in request order; they are mapped
   back by ``metadata.key`` (by position only if no line carries a key).

Every text is its own request, so a failed item costs one text re-sent synchronously. The key
travels in the ``x-goog-api-key`` header, never in the URL. Jobs are kept to
``MAX_REQUESTS_PER_JOB`` texts: a finished operation carries every vector (twice), so a
bigger job would make one huge poll answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .base import EmbeddingError
from .batch import BatchEmbedder, BatchJob, BatchResult, BatchTarget, Chunks, runs

log = logging.getLogger(__name__)

MAX_REQUESTS_PER_JOB = 500  # texts per job: bounds the size of the final poll answer
MAX_BODY_BYTES = 16 * 1024 * 1024  # under the 20 MB limit of an inline batch request
_STATE_PREFIXES = ("BATCH_STATE_", "JOB_STATE_")
_TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")
_BATCH_NAME = re.compile(r"^batches/[A-Za-z0-9_.\-]+$")


class GeminiTarget(BatchTarget, Protocol):
    """``gemini.GeminiProvider`` as its batch embedder sees it."""

    def content_request(self, text: str, task: str) -> dict[str, Any]:
        """One ``EmbedContentRequest`` for ``text`` with ``taskType`` ``task``."""
        ...


class GeminiBatchEmbedder(BatchEmbedder[GeminiTarget]):
    label = "gemini"
    terminal = frozenset(p + s for p in _STATE_PREFIXES for s in _TERMINAL)
    max_requests_cap = MAX_REQUESTS_PER_JOB
    max_inputs_cap = MAX_REQUESTS_PER_JOB
    max_job_bytes = MAX_BODY_BYTES
    requests_per_text = True

    # -- hooks ----------------------------------------------------------------------------------

    def _piece_bytes(self, texts: Sequence[str]) -> int:
        request = self.provider.content_request("", "RETRIEVAL_DOCUMENT")
        overhead = len(json.dumps({"request": request, "metadata": {"key": "k" * 64}})) + 4
        # JSON escaping can grow a text (quotes, backslashes, control characters)
        return sum(len(json.dumps(t, ensure_ascii=False).encode("utf-8")) for t in texts) + (
            overhead * len(texts)
        )

    def _submit(self, chunks: Chunks, texts: list[str]) -> BatchJob:
        p = self.provider
        requests = [
            {
                "request": p.content_request(texts[start + i], "RETRIEVAL_DOCUMENT"),
                "metadata": {"key": f"{cid}:{i}"},
            }
            for cid, (start, count) in chunks.items()
            for i in range(count)
        ]
        first = min(start for start, _ in chunks.values())
        body = {
            "batch": {
                "displayName": f"memory-ls-{first}-{len(requests)}",
                "model": f"models/{p.model}",
                "inputConfig": {"requests": {"requests": requests}},
            }
        }
        created = p.client.request(
            "POST", f"{p.base_url}/models/{p.model}:asyncBatchEmbedContent", json_body=body
        )
        name = self._field(created, "name", "batch creation")
        if not _BATCH_NAME.match(name):
            meta = created.get("metadata") if isinstance(created, dict) else None
            inner = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(inner, str) or not _BATCH_NAME.match(inner):
                raise EmbeddingError("gemini: batch creation answer has no batch name")
            name = inner
        return BatchJob(name, "", dict(chunks))

    def _fetch(self, job: BatchJob) -> Any:
        p = self.provider
        return p.client.request("GET", f"{p.base_url}/{_checked(job.batch_id)}")

    def _cancel(self, job: BatchJob) -> Any:
        p = self.provider
        p.client.request("POST", f"{p.base_url}/{_checked(job.batch_id)}:cancel", json_body={})
        return None  # an empty answer: the next poll tells the state

    def _status(self, answer: Any) -> str:
        batch = _batch(answer)
        state = str(batch.get("state", "")) if isinstance(batch, dict) else ""
        if not state and isinstance(answer, dict) and answer.get("done") is True:
            return "BATCH_STATE_FAILED" if answer.get("error") else "BATCH_STATE_SUCCEEDED"
        return state

    def _harvest(self, job: BatchJob, answer: Any, texts: list[str], result: BatchResult) -> int:
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            message = str(answer["error"].get("message", ""))[:200]
            log.warning("gemini: batch %s failed: %s", job.batch_id, self._redact(message))
        lines = _lines(answer)
        if lines is None:
            return 0
        keyed: dict[str, Any] = {}
        positional = not any(_key(line) for line in lines)
        keys = [f"{cid}:{i}" for cid, (_, count) in job.chunks.items() for i in range(count)]
        failed: list[str] = []
        for n, line in enumerate(lines):
            key = keys[n] if positional and n < len(keys) else _key(line)
            if not key or key in keyed:
                continue
            out = line.get("output") if isinstance(line.get("output"), dict) else line
            if out.get("error"):
                error = out["error"]
                failed.append(str(error.get("message", "")) if isinstance(error, dict) else "")
                continue
            response = out.get("response")
            embedding = response.get("embedding") if isinstance(response, dict) else None
            keyed[key] = embedding.get("values") if isinstance(embedding, dict) else None
        if failed:
            log.warning(
                "gemini: batch %s: %d failed requests (first: %s)",
                job.batch_id,
                len(failed),
                self._redact(failed[0])[:200] or "no detail",
            )
        delivered = 0
        for cid, (start, count) in job.chunks.items():
            values = [keyed.get(f"{cid}:{i}") for i in range(count)]
            for i, n in runs([v is not None for v in values]):
                delivered += self._deliver_run(job, start + i, values[i : i + n], texts, result)
        return delivered

    # -- helpers --------------------------------------------------------------------------------

    def _deliver_run(
        self, job: BatchJob, start: int, values: list[Any], texts: list[str], result: BatchResult
    ) -> int:
        """Validate and deliver the vectors of texts ``start``...; an invalid vector only
        costs its own text (re-sent synchronously)."""
        try:
            vectors = self._validated(values, texts[start : start + len(values)])
        except EmbeddingError as exc:
            if len(values) == 1:
                log.warning("gemini: batch %s: %s (re-sent synchronously)", job.batch_id, exc)
                return 0
            delivered = 0
            for i, v in enumerate(values):
                delivered += self._deliver_run(job, start + i, [v], texts, result)
            return delivered
        return len(values) if result.put(start, vectors) else 0

    def _validated(self, values: list[Any], texts: list[str]) -> np.ndarray:
        answer = {"embeddings": [{"values": v} for v in values]}
        return self.provider.read_vectors(answer, texts)


def _checked(name: str) -> str:
    """A batch resource name safe to put in a URL path."""
    if not _BATCH_NAME.match(name):
        raise EmbeddingError("gemini: malformed batch name")
    return name


def _batch(answer: Any) -> Any:
    """The batch record of an operation (under ``metadata``), or the answer itself."""
    if isinstance(answer, dict):
        meta = answer.get("metadata")
        if isinstance(meta, dict) and ("state" in meta or "name" in meta):
            return meta
    return answer


def _lines(answer: Any) -> list[Any] | None:
    """The inline response lines of a finished operation, wherever the API put them."""
    if not isinstance(answer, dict):
        return None
    batch = _batch(answer)
    roots = [
        batch.get("output") if isinstance(batch, dict) else None,
        answer.get("response"),
        batch.get("dest") if isinstance(batch, dict) else None,
        batch,
    ]
    for root in roots:
        node = root.get("inlinedResponses") if isinstance(root, dict) else None
        while isinstance(node, dict):  # {"inlinedResponses": {"inlinedResponses": [...]}}
            node = node.get("inlinedResponses")
        if isinstance(node, list):
            return [line for line in node if isinstance(line, dict)]
    return None


def _key(line: dict[str, Any]) -> str:
    meta = line.get("metadata")
    key = meta.get("key") if isinstance(meta, dict) else None
    return key if isinstance(key, str) else ""
