"""OpenAI's Batch API for large embedding backfills (``remote.batchApi``), and the Files +
Batches shape it shares with Voyage (``FileBatchEmbedder``, used by ``batch_voyage.py``).

Per job:

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
import json
import logging
from typing import Any

from .base import EmbeddingError
from .batch import BatchEmbedder, BatchJob, BatchResult, BatchTarget, Chunks

log = logging.getLogger(__name__)

ENDPOINT = "/v1/embeddings"
MAX_REQUESTS_PER_JOB = 50_000  # the API's limit per input file
MAX_INPUTS_PER_JOB = 50_000  # an /v1/embeddings batch: inputs across all its requests
MAX_JOB_BYTES = 190 * 1024 * 1024  # under the 200 MB file limit


class FileBatchEmbedder(BatchEmbedder[BatchTarget]):
    """The Files + Batches shape OpenAI introduced and Voyage follows: upload a JSONL file,
    create a batch on it, poll, download the output (and error) file, map by ``custom_id``.

    Subclass hooks: ``_line(cid, texts)`` (one input line) and ``_create_body(file_id)``.
    """

    terminal = frozenset({"completed", "failed", "expired", "cancelled"})
    max_requests_cap = MAX_REQUESTS_PER_JOB
    max_inputs_cap = MAX_INPUTS_PER_JOB
    max_job_bytes = MAX_JOB_BYTES
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
        uploaded = p.client.request(
            "POST",
            f"{p.base_url}/files",
            files={"file": (self.upload_name, payload, "application/jsonl")},
            data={"purpose": "batch"},
        )
        file_id = self._field(uploaded, "id", "file upload")
        created = p.client.request(
            "POST", f"{p.base_url}/batches", json_body=self._create_body(file_id)
        )
        return BatchJob(self._field(created, "id", "batch creation"), file_id, dict(chunks))

    def _status(self, answer: Any) -> str:
        return str(answer.get("status", "")) if isinstance(answer, dict) else ""

    def _fetch(self, job: BatchJob) -> Any:
        p = self.provider
        return p.client.request("GET", f"{p.base_url}/batches/{job.batch_id}")

    def _cancel(self, job: BatchJob) -> Any:
        p = self.provider
        return p.client.request("POST", f"{p.base_url}/batches/{job.batch_id}/cancel")

    def _harvest(self, job: BatchJob, answer: Any, texts: list[str], result: BatchResult) -> int:
        p = self.provider
        delivered = 0
        output = answer.get("output_file_id") if isinstance(answer, dict) else None
        if output:
            content = p.client.request(
                "GET", f"{p.base_url}/files/{output}/content", expect="bytes"
            )
            delivered = self._deliver(job, content, texts, result)
        errors = answer.get("error_file_id") if isinstance(answer, dict) else None
        if errors:
            self._log_errors(job, errors)
        return delivered

    def _deliver(self, job: BatchJob, content: bytes, texts: list[str], result: BatchResult) -> int:
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
            if not isinstance(cid, str) or cid not in job.chunks or cid in delivered:
                continue
            response = line.get("response") or {}
            if line.get("error") or not isinstance(response, dict):
                continue
            if response.get("status_code") != 200:
                continue
            start, count = job.chunks[cid]
            try:
                vectors = self.provider.read_vectors(
                    response.get("body"), texts[start : start + count]
                )
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
            content = p.client.request(
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
        body = self.provider.request_body(texts, False)
        return {"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}

    def _create_body(self, file_id: str) -> dict[str, Any]:
        return {"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h"}


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
