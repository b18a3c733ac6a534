"""Voyage AI's Batch API for large embedding backfills (``remote.batchApi``).

A third cheaper than the synchronous endpoint, answered within a 12-hour window. Source:
Voyage AI documentation, "Batch Inference" (docs.voyageai.com/docs/batch-inference) and the
Files / Batch API reference. Per job:

1. write one JSONL line per request of ``remote.batchSize`` inputs (at most 1,000):
   ``{"custom_id": "mls-<start>-<count>-<hash>", "body": {"input": [...]}}`` -- the model and
   the other parameters are set once for the whole job, not per line;
2. upload it: ``POST {baseUrl}/files`` (multipart, ``purpose=batch``) -> ``{"id": "file-..."}``;
3. create the batch: ``POST {baseUrl}/batches`` with ``{"endpoint": "/v1/embeddings",
   "completion_window": "12h", "request_params": {"model": ..., "input_type": "document",
   "output_dimension"?: n}, "input_file_id": ...}``;
4. poll ``GET {baseUrl}/batches/{id}`` through ``validating``, ``in_progress``, ``finalizing``
   to ``completed`` (or ``failed``: the input did not validate; ``cancelling`` ->
   ``cancelled``); on timeout ``POST {baseUrl}/batches/{id}/cancel`` (results finished before
   the cancellation still come in the output file);
5. download ``GET {baseUrl}/files/{output_file_id}/content``: one line per successful request,
   in any order, ``{"batch_id", "custom_id", "response": {"status_code": 200, "body":
   <an embeddings answer>}, "error": null}``, mapped back by ``custom_id``; failed requests,
   and those unfinished when the window closed (``error.code == "batch_expired"``), are in
   the ``error_file_id`` file and are embedded again synchronously.

Limits: 100K inputs per batch; 1,000 inputs per request.
"""

from __future__ import annotations

from typing import Any

from .batch_openai import ENDPOINT, FileBatchEmbedder

COMPLETION_WINDOW = "12h"
MAX_INPUTS_PER_JOB = 100_000


class VoyageBatchEmbedder(FileBatchEmbedder):
    label = "voyage"
    terminal = frozenset({"completed", "failed", "cancelled", "canceled", "expired"})
    max_inputs_cap = MAX_INPUTS_PER_JOB
    max_requests_cap = MAX_INPUTS_PER_JOB
    # cancelling takes up to 10 minutes; keep collecting what finished meanwhile
    polls_after_cancel = 20

    def _line(self, cid: str, texts: list[str]) -> dict[str, Any]:
        return {"custom_id": cid, "body": {"input": texts}}

    def _create_body(self, file_id: str) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.provider.model, "input_type": "document"}
        if self.provider.dimensions:
            params["output_dimension"] = self.provider.dimensions
        return {
            "endpoint": ENDPOINT,
            "completion_window": COMPLETION_WINDOW,
            "request_params": params,
            "input_file_id": file_id,
        }
