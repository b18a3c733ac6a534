"""A real HTTP server on 127.0.0.1 that speaks the embedding APIs, for tests and benchmarks.

It answers, on a random port, every wire format memory-ls uses, chosen by the request path:

* ``.../embeddings`` (POST): OpenAI, Mistral, Voyage, OpenAI-compatible servers, Ollama ``/v1``;
* ``.../api/embed`` (POST): Ollama's native API;
* ``.../models/{model}:embedContent`` and ``:batchEmbedContents`` (POST): Gemini;
* ``.../files``, ``.../files/{id}/content``, ``.../batches``, ``.../batches/{id}`` and
  ``.../batches/{id}/cancel``: OpenAI's and Voyage's Batch APIs (upload, create, poll, download;
  a Voyage job is told by its ``request_params`` and its ``{"custom_id", "body"}`` input lines);
* ``.../models/{model}:asyncBatchEmbedContent`` (POST), ``.../batches/{id}`` (GET) and
  ``.../batches/{id}:cancel`` (POST): Gemini's asynchronous batch embeddings (a long-running
  operation, results inline).
* ``.../v2/rerank`` (POST): Cohere's rerank API v2 (and the servers copying it);
  ``.../v1/rerank`` (POST): Voyage's or Jina's rerank API, as ``rerank_format`` says
  (``"voyage"``: ``top_k`` in, ``data`` out; ``"jina"``: ``top_n`` in, ``results`` out). A
  document's relevance is a deterministic function of how often it holds ``rerank_marker``
  (``rerank_score``), so tests know the order a reranker must give.

Batch jobs move through their API's states on each poll (``batch_polls`` polls in each of the
waiting states), can be told to fail items (``batch_fail_ids``: custom ids, or Gemini request
keys), to corrupt vectors (``batch_nan_ids``) or to end ``failed`` or ``expired``
(``batch_outcome``); ``max_in_flight`` records how many jobs were ever unfinished at once.

It checks the request shape of each format (a malformed request gets a 400 naming the problem),
checks the API key when given one (``Authorization: Bearer``, or ``x-goog-api-key`` for Gemini;
a wrong key gets a 401 that echoes it, as real APIs partly do, so tests can prove the client
scrubs it), records every request (method, path, query, headers, JSON body) in ``requests``, and
can be scripted to misbehave, one fault per request in order (``script``) or on every request
(``always``): 429 + Retry-After, 500, a hang past the client's timeout, a truncated or cut
body, a wrong vector count, NaN values, wrong dimensions, shuffled ``index`` order, a 401.

Vectors are deterministic functions of the text (``vector_for``), so tests can compare them.

    with StubServer(api_key="sk-test") as stub:
        stub.script(fault_status(429, retry_after="1"))
        ...  # point remote.baseUrl at stub.url + "/v1"
        assert stub.count("/v1/embeddings") == 2
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import math
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

# -- faults -----------------------------------------------------------------------------------


@dataclass
class Fault:
    """One scripted misbehaviour.

    kind: ``status`` (answer ``status`` with ``headers`` and ``body``), ``hang`` (wait
    ``seconds`` before answering normally), ``truncate`` (a 200 whose JSON body stops halfway,
    with a matching Content-Length), ``cut`` (Content-Length of the full body, half of it sent,
    then the connection closes), ``count`` (one vector too few), ``nan`` (a NaN in the first
    vector), ``null`` (a null in the first vector), ``dims`` (the last vector one dimension
    short), ``shuffle`` (``data`` reversed, ``index`` kept: a valid answer), ``garbage`` (a 200
    with an HTML page). On a rerank answer ``count``, ``nan``, ``null`` and ``shuffle`` act on
    its results, ``index`` puts an index out of range and ``dup`` scores one document twice.
    """

    kind: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    seconds: float = 0.0


def fault_status(
    status: int, *, retry_after: str | None = None, body: Any = None, **headers: str
) -> Fault:
    hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
    if retry_after is not None:
        hdrs["Retry-After"] = retry_after
    return Fault("status", status=status, headers=hdrs, body=body)


def fault_hang(seconds: float) -> Fault:
    return Fault("hang", seconds=seconds)


def fault(kind: str) -> Fault:
    return Fault(kind)


# -- recorded requests -------------------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: Any  # decoded JSON, or None
    raw: bytes


def vector_for(text: str, dims: int) -> list[float]:
    """A deterministic pseudo-random vector for ``text`` (not normalised)."""
    out: list[float] = []
    counter = 0
    while len(out) < dims:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        out += [(b - 127.5) / 127.5 for b in digest]
        counter += 1
    return out[:dims]


_GEMINI = re.compile(
    r"/models/(?P<model>[^/:]+):(?P<verb>embedContent|batchEmbedContents|asyncBatchEmbedContent)$"
)
_GEMINI_BATCH = re.compile(r"/batches/(?P<id>gembatch-[^/:]+)(?P<cancel>:cancel)?$")
_GEMINI_OP_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.EmbedContentBatch"
_GEMINI_INLINE_LIMIT = 20 * 1024 * 1024
_GEMINI_TASKS = {
    "TASK_TYPE_UNSPECIFIED",
    "RETRIEVAL_QUERY",
    "RETRIEVAL_DOCUMENT",
    "SEMANTIC_SIMILARITY",
    "CLASSIFICATION",
    "CLUSTERING",
    "QUESTION_ANSWERING",
    "FACT_VERIFICATION",
    "CODE_RETRIEVAL_QUERY",
}


class BadRequest(Exception):
    pass


class StubServer:
    """The server; use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(
        self,
        *,
        dims: int = 8,
        api_key: str | None = None,
        latency: float = 0.0,
        batch_polls: int = 1,
    ) -> None:
        self.dims = dims
        self.api_key = api_key
        self.latency = latency
        # Polls spent in each of validating and in_progress before a batch completes.
        self.batch_polls = batch_polls
        self.requests: list[Recorded] = []
        self.batch_fail_ids: set[str] = set()  # custom_ids (Gemini: keys) reported as failed
        self.batch_nan_ids: set[str] = set()  # custom_ids (Gemini: keys) answered with a NaN
        self.batch_outcome = "completed"  # or "failed" (no output) or "expired" (partial)
        self.files: dict[str, bytes] = {}
        self.file_kinds: dict[str, str] = {}  # file id -> "openai" | "voyage" input lines
        self.batches: dict[str, dict[str, Any]] = {}
        self.gemini_batches: dict[str, dict[str, Any]] = {}
        self.rerank_format = "voyage"  # what POST .../v1/rerank speaks: "voyage" or "jina"
        self.rerank_marker = "relevant"
        self.in_flight = 0  # batch jobs created and not finished
        self.max_in_flight = 0
        self._faults: deque[Fault] = deque()
        self._always: Fault | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ids = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> StubServer:
        handler = type("Handler", (_Handler,), {"stub": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() the stub first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # -- scripting and inspection --

    def script(self, *faults: Fault) -> None:
        """Misbehave on the next requests, one fault each, in order; then behave."""
        with self._lock:
            self._faults.extend(faults)

    def always(self, f: Fault | None) -> None:
        """Misbehave on every request (after the scripted faults), or stop with None."""
        with self._lock:
            self._always = f

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self._always = None
            self.requests.clear()

    def count(self, suffix: str = "") -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.path.endswith(suffix))

    def last(self) -> Recorded:
        with self._lock:
            return self.requests[-1]

    def _next_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else self._always

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}-{self._ids:04d}"

    # -- the wire formats --

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Any:
        """Return (status, headers, body) for a well-behaved answer; raise BadRequest."""
        gem = _GEMINI.search(path)
        if method == "POST" and gem and gem["verb"] == "asyncBatchEmbedContent":
            _require(len(raw) <= _GEMINI_INLINE_LIMIT, "inline batch request over 20 MB")
            return self._gemini_create_batch(gem["model"], _json(raw))
        if method == "POST" and gem:
            return self._gemini(gem["model"], gem["verb"], _json(raw))
        m = _GEMINI_BATCH.search(path)
        if m and (method == "GET" or m["cancel"]):
            return self._gemini_batch(m["id"], cancel=bool(m["cancel"]) and method == "POST")
        if method == "POST" and path.endswith("/api/embed"):
            return self._ollama(_json(raw))
        if method == "POST" and path.endswith("/embeddings"):
            return self._openai(_json(raw))
        if method == "POST" and path.endswith("/v2/rerank"):
            return self._rerank("cohere", _json(raw))
        if method == "POST" and path.endswith("/v1/rerank"):
            return self._rerank(self.rerank_format, _json(raw))
        if path.endswith("/files") and method == "POST":
            return self._upload(headers, raw)
        m = re.search(r"/files/(?P<id>[^/]+)/content$", path)
        if m and method == "GET":
            if m["id"] not in self.files:
                return 404, {}, {"error": {"message": f"no file {m['id']}"}}
            return 200, {"Content-Type": "application/jsonl"}, self.files[m["id"]]
        if path.endswith("/batches") and method == "POST":
            return self._create_batch(_json(raw))
        m = re.search(r"/batches/(?P<id>[^/]+)(?P<cancel>/cancel)?$", path)
        if m:
            return self._batch(m["id"], cancel=bool(m["cancel"]) and method == "POST")
        return 404, {}, {"error": {"message": f"no route for {method} {path}"}}

    def embed(self, texts: list[str], dims: int | None = None) -> list[list[float]]:
        return [vector_for(t, dims or self.dims) for t in texts]

    def _openai(self, body: Any) -> Any:
        _require(isinstance(body, dict), "body must be a JSON object")
        _require(isinstance(body.get("model"), str) and body["model"], "'model' is required")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        _require(
            isinstance(texts, list) and texts and all(isinstance(t, str) and t for t in texts),
            "'input' must be a non-empty string or list of non-empty strings",
        )
        if "input_type" in body:
            _require(body["input_type"] in ("query", "document", None), "bad 'input_type'")
        dims = body.get("dimensions") or body.get("output_dimension")
        _require(dims is None or (isinstance(dims, int) and dims > 0), "bad dimensions")
        vectors = self.embed(texts, dims)
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        tokens = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {}, {"object": "list", "data": data, "model": body["model"], "usage": usage}

    # -- rerank APIs --

    def rerank_score(self, document: str) -> float:
        """A document's relevance: 0 without the marker word, 1/2 with one, 2/3 with two..."""
        n = len(re.findall(rf"\b{re.escape(self.rerank_marker)}\b", document, re.IGNORECASE))
        return n / (n + 1)

    def _rerank(self, kind: str, body: Any) -> Any:
        _require(isinstance(body, dict), "body must be a JSON object")
        top = "top_k" if kind == "voyage" else "top_n"
        allowed = {"model", "query", "documents", top, "return_documents"}
        allowed |= {"truncation"} if kind == "voyage" else set()
        allowed |= {"max_tokens_per_doc"} if kind == "cohere" else set()
        unknown = sorted(set(body) - allowed)
        _require(not unknown, f"unexpected fields for {kind}: {unknown}")
        _require(isinstance(body.get("model"), str) and body["model"], "'model' is required")
        _require(isinstance(body.get("query"), str) and body["query"], "'query' is required")
        docs = body.get("documents")
        _require(
            isinstance(docs, list) and docs and all(isinstance(d, str) and d for d in docs),
            "'documents' must be a non-empty list of non-empty strings",
        )
        _require(len(docs) <= 1000, "at most 1000 documents")
        n = body.get(top, len(docs))
        _require(isinstance(n, int) and not isinstance(n, bool) and n > 0, f"bad {top!r}")
        order = sorted(range(len(docs)), key=lambda i: (-self.rerank_score(docs[i]), i))[:n]
        items = [{"index": i, "relevance_score": self.rerank_score(docs[i])} for i in order]
        tokens = sum(len(d.split()) for d in docs) + len(body["query"].split()) * len(docs)
        if kind == "voyage":
            out = {
                "object": "list",
                "data": items,
                "model": body["model"],
                "usage": {"total_tokens": tokens},
            }
        elif kind == "jina":
            out = {"model": body["model"], "results": items, "usage": {"total_tokens": tokens}}
        else:
            out = {
                "id": self._new_id("rerank"),
                "results": items,
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
            }
        return 200, {}, out

    def _ollama(self, body: Any) -> Any:
        _require(isinstance(body, dict), "body must be a JSON object")
        _require(isinstance(body.get("model"), str) and body["model"], "'model' is required")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        _require(isinstance(texts, list) and texts, "'input' must be a string or list")
        dims = body.get("dimensions")
        vectors = self.embed(texts, dims)
        tokens = sum(len(t.split()) for t in texts)
        return 200, {}, {"model": body["model"], "embeddings": vectors, "prompt_eval_count": tokens}

    def _gemini_request(self, model: str, req: Any) -> tuple[str, int | None]:
        _require(isinstance(req, dict), "request must be an object")
        _require(req.get("model", f"models/{model}") == f"models/{model}", "model mismatch")
        parts = (req.get("content") or {}).get("parts")
        _require(
            isinstance(parts, list) and parts and isinstance(parts[0].get("text"), str),
            "'content.parts[].text' is required",
        )
        task = req.get("taskType", "TASK_TYPE_UNSPECIFIED")
        _require(task in _GEMINI_TASKS, f"bad taskType {task!r}")
        dims = req.get("outputDimensionality")
        return "".join(p.get("text", "") for p in parts), dims

    def _gemini(self, model: str, verb: str, body: Any) -> Any:
        _require(isinstance(body, dict), "body must be a JSON object")
        if verb == "embedContent":
            text, dims = self._gemini_request(model, body)
            return 200, {}, {"embedding": {"values": self.embed([text], dims)[0]}}
        reqs = body.get("requests")
        _require(isinstance(reqs, list) and reqs, "'requests' must be a non-empty list")
        _require(len(reqs) <= 100, "at most 100 requests in a batch")
        out = []
        for req in reqs:
            text, dims = self._gemini_request(model, req)
            out.append({"values": self.embed([text], dims)[0]})
        return 200, {}, {"embeddings": out}

    # -- OpenAI Batch API --

    def _upload(self, headers: dict[str, str], raw: bytes) -> Any:
        ctype = headers.get("content-type", "")
        _require(ctype.startswith("multipart/form-data"), "upload must be multipart/form-data")
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw
        )
        fields: dict[str, bytes] = {}
        filename = None
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = part.get_payload(decode=True) or b""
            if name == "file":
                filename = part.get_filename()
        _require(fields.get("purpose") == b"batch", "purpose must be 'batch'")
        _require("file" in fields, "a 'file' part is required")
        kinds = set()
        ids: set[str] = set()
        for line in fields["file"].splitlines():
            if line.strip():
                item = json.loads(line)
                _require(isinstance(item, dict) and "custom_id" in item, "bad batch input line")
                _require(item["custom_id"] not in ids, "duplicate custom_id")
                ids.add(item["custom_id"])
                if {"custom_id", "method", "url", "body"} <= set(item):
                    kinds.add("openai")
                elif set(item) == {"custom_id", "body"} and isinstance(item["body"], dict):
                    _require(set(item["body"]) == {"input"}, "a Voyage line's body is its input")
                    kinds.add("voyage")
                else:
                    raise BadRequest("bad batch input line")
        _require(len(kinds) == 1, "an input file holds one kind of line")
        file_id = self._new_id("file")
        self.files[file_id] = fields["file"]
        self.file_kinds[file_id] = kinds.pop()
        return (
            200,
            {},
            {
                "id": file_id,
                "object": "file",
                "bytes": len(fields["file"]),
                "filename": filename,
                "purpose": "batch",
            },
        )

    def _create_batch(self, body: Any) -> Any:
        _require(isinstance(body, dict), "body must be a JSON object")
        if "request_params" in body:
            return self._voyage_create_batch(body)
        _require(body.get("input_file_id") in self.files, "unknown input_file_id")
        _require(self.file_kinds.get(body["input_file_id"]) == "openai", "not an OpenAI file")
        _require(body.get("endpoint") == "/v1/embeddings", "endpoint must be /v1/embeddings")
        _require(body.get("completion_window") == "24h", "completion_window must be 24h")
        self._start_job()
        batch_id = self._new_id("batch")
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": body["input_file_id"],
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "_polls": 0,
        }
        self.batches[batch_id] = batch
        return 200, {}, _public(batch)

    def _start_job(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _end_job(self, batch: dict[str, Any]) -> None:
        with self._lock:
            if not batch.get("_ended"):
                batch["_ended"] = True
                self.in_flight -= 1

    def _batch(self, batch_id: str, cancel: bool) -> Any:
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, {}, {"error": {"message": f"no batch {batch_id}"}}
        if batch.get("_kind") == "voyage":
            return self._voyage_batch(batch, cancel)
        if cancel:
            batch["status"] = "cancelled"
            self._end_job(batch)
            return 200, {}, _public(batch)
        if batch["status"] in ("validating", "in_progress"):
            batch["_polls"] += 1
            if batch["_polls"] > 2 * self.batch_polls:
                self._complete(batch)
            elif batch["_polls"] > self.batch_polls:
                batch["status"] = "in_progress"
        return 200, {}, _public(batch)

    def _complete(self, batch: dict[str, Any]) -> None:
        self._end_job(batch)
        if self.batch_outcome == "failed":
            batch["status"] = "failed"
            batch["errors"] = {"data": [{"code": "invalid_model", "message": "no such model"}]}
            return
        out, err = [], []
        lines = [ln for ln in self.files[batch["input_file_id"]].splitlines() if ln.strip()]
        for n, line in enumerate(lines):
            item = json.loads(line)
            cid = item["custom_id"]
            if cid in self.batch_fail_ids:
                err.append(
                    {
                        "id": f"batch_req_{n}",
                        "custom_id": cid,
                        "response": {
                            "status_code": 400,
                            "request_id": f"req_{n}",
                            "body": {"error": {"message": "input too long", "type": "invalid"}},
                        },
                        "error": None,
                    }
                )
                continue
            status, _, body = self._openai(item["body"])
            if cid in self.batch_nan_ids:
                body = _tamper(body, "nan")
            out.append(
                {
                    "id": f"batch_req_{n}",
                    "custom_id": cid,
                    "response": {"status_code": status, "request_id": f"req_{n}", "body": body},
                    "error": None,
                }
            )
        out.reverse()  # output order is not input order: map back by custom_id
        if self.batch_outcome == "expired":
            out = out[: len(out) // 2]  # what finished before the window closed
        if out:
            fid = self._new_id("file")
            self.files[fid] = "".join(json.dumps(o) + "\n" for o in out).encode()
            batch["output_file_id"] = fid
        if err:
            fid = self._new_id("file")
            self.files[fid] = "".join(json.dumps(e) + "\n" for e in err).encode()
            batch["error_file_id"] = fid
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}
        batch["status"] = "expired" if self.batch_outcome == "expired" else "completed"

    # -- Voyage Batch API --

    def _voyage_create_batch(self, body: dict[str, Any]) -> Any:
        _require(body.get("input_file_id") in self.files, "unknown input_file_id")
        _require(self.file_kinds.get(body["input_file_id"]) == "voyage", "not a Voyage file")
        _require(body.get("endpoint") == "/v1/embeddings", "endpoint must be /v1/embeddings")
        _require(body.get("completion_window") == "12h", "completion_window must be 12h")
        params = body.get("request_params")
        _require(isinstance(params, dict), "request_params must be an object")
        _require(isinstance(params.get("model"), str) and params["model"], "model is required")
        _require("input" not in params, "the input belongs in the input file")
        _require(params.get("input_type") in (None, "query", "document"), "bad input_type")
        dims = params.get("output_dimension")
        _require(dims is None or (isinstance(dims, int) and dims > 0), "bad output_dimension")
        self._start_job()
        batch_id = self._new_id("batch")
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": "/v1/embeddings",
            "errors": None,
            "input_file_id": body["input_file_id"],
            "completion_window": "12h",
            "model": params["model"],
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
            "_kind": "voyage",
            "_params": params,
            "_polls": 0,
        }
        self.batches[batch_id] = batch
        return 200, {}, _public(batch)

    def _voyage_batch(self, batch: dict[str, Any], cancel: bool) -> Any:
        status = batch["status"]
        if cancel:
            if status in ("validating", "in_progress", "finalizing"):
                batch["status"] = "cancelling"
            return 200, {}, _public(batch)
        if status == "cancelling":
            batch["status"] = "cancelled"
            self._end_job(batch)
        elif status in ("validating", "in_progress", "finalizing"):
            batch["_polls"] += 1
            if status == "finalizing":
                self._voyage_complete(batch)
            elif batch["_polls"] > 2 * self.batch_polls:
                if self.batch_outcome == "failed":  # the input did not validate
                    batch["status"] = "failed"
                    batch["errors"] = {"data": [{"code": "invalid_input", "message": "bad"}]}
                    self._end_job(batch)
                else:
                    batch["status"] = "finalizing"
            elif batch["_polls"] > self.batch_polls:
                batch["status"] = "in_progress"
        return 200, {}, _public(batch)

    def _voyage_complete(self, batch: dict[str, Any]) -> None:
        self._end_job(batch)
        out, err = [], []
        lines = [ln for ln in self.files[batch["input_file_id"]].splitlines() if ln.strip()]
        for line in lines:
            item = json.loads(line)
            cid = item["custom_id"]
            head = {"batch_id": batch["id"], "custom_id": cid}
            if cid in self.batch_fail_ids:
                response = {"status_code": 500, "message": "Internal Server Error"}
                err.append({**head, "response": response, "error": None})
                continue
            status, _, body = self._openai({**batch["_params"], **item["body"]})
            if cid in self.batch_nan_ids:
                body = _tamper(body, "nan")
            out.append({**head, "response": {"status_code": status, "body": body}, "error": None})
        out.reverse()  # output order is not input order: map back by custom_id
        if self.batch_outcome == "expired":  # the window closed: the rest is in the error file
            keep = len(out) // 2
            expired = {
                "code": "batch_expired",
                "message": "This request could not be executed before the completion "
                "window expired.",
            }
            for o in out[keep:]:
                err.append({**o, "response": None, "error": expired})
            out = out[:keep]
        if out:
            fid = self._new_id("file")
            self.files[fid] = "".join(json.dumps(o) + "\n" for o in out).encode()
            batch["output_file_id"] = fid
        if err:
            fid = self._new_id("file")
            self.files[fid] = "".join(json.dumps(e) + "\n" for e in err).encode()
            batch["error_file_id"] = fid
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}
        batch["status"] = "completed"

    # -- Gemini asynchronous batch embeddings --

    def _gemini_create_batch(self, model: str, body: Any) -> Any:
        _require(isinstance(body, dict) and isinstance(body.get("batch"), dict), "'batch' needed")
        batch = body["batch"]
        _require(batch.get("model", f"models/{model}") == f"models/{model}", "model mismatch")
        config = batch.get("inputConfig")
        _require(isinstance(config, dict), "'batch.inputConfig' is required")
        reqs = (config.get("requests") or {}).get("requests")
        _require(isinstance(reqs, list) and reqs, "'inputConfig.requests.requests' is required")
        keys: list[str] = []
        for item in reqs:
            _require(isinstance(item, dict) and "request" in item, "each item has a 'request'")
            self._gemini_request(model, item["request"])
            key = (item.get("metadata") or {}).get("key")
            _require(isinstance(key, str) and key and key not in keys, "bad or duplicate key")
            keys.append(key)
        self._start_job()
        name = "batches/" + self._new_id("gembatch")
        record = {
            "@type": _GEMINI_OP_TYPE,
            "model": f"models/{model}",
            "displayName": batch.get("displayName", ""),
            "state": "BATCH_STATE_PENDING",
            "name": name,
            "batchStats": {"requestCount": str(len(reqs)), "pendingRequestCount": str(len(reqs))},
        }
        op = {"name": name, "metadata": record, "done": False, "_requests": reqs, "_polls": 0}
        self.gemini_batches[name.split("/", 1)[1]] = op
        return 200, {}, _public(op)

    def _gemini_batch(self, batch_id: str, cancel: bool) -> Any:
        op = self.gemini_batches.get(batch_id)
        if op is None:
            return 404, {}, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}
        record = op["metadata"]
        if cancel:
            if not op["done"]:
                record["state"] = "BATCH_STATE_CANCELLED"
                op["done"] = True
                self._end_job(op)
            return 200, {}, {}
        if not op["done"]:
            op["_polls"] += 1
            if op["_polls"] > 2 * self.batch_polls:
                self._gemini_complete(op)
            elif op["_polls"] > self.batch_polls:
                record["state"] = "BATCH_STATE_RUNNING"
        return 200, {}, _public(op)

    def _gemini_complete(self, op: dict[str, Any]) -> None:
        self._end_job(op)
        record = op["metadata"]
        op["done"] = True
        if self.batch_outcome in ("failed", "expired"):
            record["state"] = f"BATCH_STATE_{self.batch_outcome.upper()}"
            if self.batch_outcome == "failed":
                op["error"] = {"code": 13, "message": "internal error", "status": "INTERNAL"}
            return
        model = record["model"].split("/", 1)[1]
        lines = []
        for item in op["_requests"]:
            key = item["metadata"]["key"]
            if key in self.batch_fail_ids:
                error = {"code": 3, "message": "input too long", "status": "INVALID_ARGUMENT"}
                lines.append({"error": error, "metadata": {"key": key}})
                continue
            text, dims = self._gemini_request(model, item["request"])
            values = self.embed([text], dims)[0]
            if key in self.batch_nan_ids:
                values[0] = math.nan
            usage = {"promptTokenCount": len(text.split())}
            response = {"embedding": {"values": values}, "usageMetadata": usage}
            lines.append({"response": response, "metadata": {"key": key}})
        ok = sum(1 for ln in lines if "response" in ln)
        record["state"] = "BATCH_STATE_SUCCEEDED"
        record["batchStats"] = {
            "requestCount": str(len(lines)),
            "successfulRequestCount": str(ok),
            "failedRequestCount": str(len(lines) - ok),
        }
        record["output"] = {"inlinedResponses": {"inlinedResponses": lines}}
        op["response"] = {"@type": _GEMINI_OP_TYPE, "inlinedResponses": {"inlinedResponses": lines}}


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


def _require(ok: Any, message: str) -> None:
    if not ok:
        raise BadRequest(message)


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError as exc:
        raise BadRequest(f"body is not JSON: {exc}") from None


def _tamper(body: Any, kind: str) -> Any:
    """Apply a content fault to the vectors (or rerank results) of a well-formed answer."""
    if not isinstance(body, dict):
        return body
    ranked = body.get("results", body.get("data"))
    if isinstance(ranked, list) and ranked and "relevance_score" in ranked[0]:
        return _tamper_ranked(body, ranked, kind)
    if "data" in body:  # OpenAI / Voyage
        items = body["data"]
        get = lambda i: items[i]["embedding"]  # noqa: E731
    elif "embeddings" in body and body["embeddings"] and isinstance(body["embeddings"][0], dict):
        items = body["embeddings"]  # Gemini batch
        get = lambda i: items[i]["values"]  # noqa: E731
    elif "embeddings" in body:  # Ollama
        items = body["embeddings"]
        get = lambda i: items[i]  # noqa: E731
    elif "embedding" in body:  # Gemini single
        items = [body["embedding"]]
        get = lambda i: items[i]["values"]  # noqa: E731
    else:
        return body
    if kind == "count":
        if "embedding" in body:  # Gemini single: an empty batch answer instead
            return {"embeddings": []}
        items.pop()
    elif kind == "nan":
        get(0)[0] = math.nan
    elif kind == "null":
        get(0)[0] = None
    elif kind == "dims":
        get(len(items) - 1).pop()
    elif kind == "shuffle":
        items.reverse()
    return body


def _tamper_ranked(body: dict[str, Any], items: list[dict[str, Any]], kind: str) -> Any:
    if kind == "count":
        items.pop()
    elif kind == "nan":
        items[0]["relevance_score"] = math.nan
    elif kind == "null":
        items[0]["relevance_score"] = None
    elif kind == "shuffle":
        items.reverse()
    elif kind == "index":
        items[0]["index"] = len(items) + 5
    elif kind == "dup":
        items[-1]["index"] = items[0]["index"]
    return body


class _Handler(BaseHTTPRequestHandler):
    stub: StubServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        stub = self.stub
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw) if raw and "json" in headers.get("content-type", "") else None
        except ValueError:
            body = None
        stub._record(Recorded(method, split.path, parse_qs(split.query), headers, body, raw))
        if stub.latency:
            time.sleep(stub.latency)
        if stub.api_key is not None and not self._authorised(split, headers):
            return
        f = stub._next_fault()
        if f is not None and f.kind == "status":
            body_out = f.body
            if body_out is None:
                body_out = {"error": {"message": f"stub says {f.status}", "code": f.status}}
            self._send(f.status, f.headers, body_out)
            return
        if f is not None and f.kind == "hang" and stub._stop.wait(f.seconds):
            return  # the stub is stopping
        try:
            status, extra, out = stub.handle(method, split.path, headers, raw)
        except BadRequest as exc:
            self._send(400, {}, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        if f is not None and f.kind in ("count", "nan", "null", "dims", "shuffle", "index", "dup"):
            out = _tamper(out, f.kind)
        if f is not None and f.kind == "garbage":
            self._send(200, {"Content-Type": "text/html"}, b"<html><body>Welcome</body></html>")
            return
        data = out if isinstance(out, bytes) else json.dumps(out).encode()
        if f is not None and f.kind == "truncate":
            self._send(status, extra, data[: len(data) // 2])
            return
        if f is not None and f.kind == "cut":
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self._send(status, extra, data)

    def _authorised(self, split: Any, headers: dict[str, str]) -> bool:
        stub = self.stub
        if split.path.endswith("/api/embed"):
            return True  # Ollama needs no key
        if _GEMINI.search(split.path) or _GEMINI_BATCH.search(split.path):
            given = headers.get("x-goog-api-key") or parse_qs(split.query).get("key", [""])[0]
        else:
            auth = headers.get("authorization", "")
            given = auth[7:] if auth.lower().startswith("bearer ") else auth
        if given == stub.api_key:
            return True
        self._send(
            401,
            {},
            {
                "error": {
                    "message": f"Incorrect API key provided: {given}. You can find your API "
                    "key at https://example.invalid/api-keys.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        )
        return False

    def _send(self, status: int, headers: dict[str, str], body: Any) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            if not any(k.lower() == "content-type" for k in headers):
                self.send_header("Content-Type", "application/json")
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
