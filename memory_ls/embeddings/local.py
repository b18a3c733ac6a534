"""The local embedding provider: a GGUF embedding model run by llama-cpp-python on the CPU.

llama_cpp is imported only when a model is opened, so the package works (keyword-only or with a
remote provider) where llama-cpp-python is not installed.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..models.bf16_copy import weights_for
from ..models.gguf_meta import GgufError, check_complete, metadata
from ..models.profile import ModelProfile, profile_from_metadata, tokenizer_hazard
from ..models.registry import GGUF_MAGIC, pulled_model, read_magic
from ..settings import Settings
from .base import NO_LLAMA_CPP, EmbeddingError, ProviderUnavailable, check_vectors, normalize
from .query_context import QueryContext
from .threads import BatchThreads, default_threads

log = logging.getLogger(__name__)

PROVIDER_ID = "local"
# Architectures that are embedding encoders even when the file states no pooling type.
ENCODER_ARCHS = frozenset(
    {
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "jina-bert-v3",
        "modern-bert",
        "neo-bert",
        "t5encoder",
        "eurobert",
    }
)
# CLS and SEP (or BOS/EOS) take two positions of the context window.
SPECIAL_TOKENS = 2
# Dense scripts (CJK) take about 3 UTF-8 bytes per token and English about 4.5, so 4 bytes per
# token keeps most chunks whole; anything still too long is truncated by tokens, never rejected.
BYTES_PER_TOKEN = 4
_FINGERPRINT_BYTES = 1 << 20


def find_local_model(settings: Settings) -> Path | None:
    """``local.modelPath``, else the pulled model ``local.model`` names (without a name: the
    default model, else any pulled one), else None."""
    configured = settings.local.model_path.strip()
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise ProviderUnavailable(
                f"local: local.modelPath {str(path)!r} does not exist or is not a file"
            )
        return path
    name = settings.local.model.strip()
    pulled = pulled_model(name)
    if pulled is None and name:
        raise ProviderUnavailable(
            f"local: model {name!r} is not installed: run `memory-ls model pull {name}`"
        )
    return pulled


def open_local(path: Path, settings: Settings) -> LocalProvider:
    """Load ``path`` with llama.cpp; ProviderUnavailable when that is impossible."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ProviderUnavailable(f"local: {NO_LLAMA_CPP}") from exc
    path = Path(path)
    _check_magic(path)
    return LocalProvider(path, settings, llama_cpp)


def _check_magic(path: Path) -> None:
    try:
        magic = read_magic(path)
    except OSError as exc:
        raise ProviderUnavailable(f"local: cannot read model {path}: {exc}") from exc
    if magic != GGUF_MAGIC:
        raise ProviderUnavailable(f"local: {path} is not a GGUF file")


def file_fingerprint(path: Path) -> str:
    """A fast content fingerprint: size plus the first and last MiB (not the whole file)."""
    h = hashlib.sha256()
    size = path.stat().st_size
    h.update(str(size).encode())
    with path.open("rb") as fh:
        h.update(fh.read(_FINGERPRINT_BYTES))
        if size > _FINGERPRINT_BYTES:
            fh.seek(max(_FINGERPRINT_BYTES, size - _FINGERPRINT_BYTES))
            h.update(fh.read())
    return h.hexdigest()


class _TurnLock:
    """A mutex that lets waiting queries in before waiting document batches.

    llama.cpp contexts are not thread-safe, so every call takes a turn; a search must not sit
    behind a whole indexing batch, and a plain Lock is not even fair.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._queries_waiting = 0

    @contextmanager
    def turn(self, *, query: bool) -> Iterator[None]:
        with self._cond:
            self._queries_waiting += int(query)
            try:
                while self._busy or (not query and self._queries_waiting):
                    self._cond.wait()
            finally:
                self._queries_waiting -= int(query)
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


class LocalProvider:
    """EmbeddingProvider over one llama.cpp context; safe to share between threads."""

    id = PROVIDER_ID

    def __init__(self, path: Path, settings: Settings, llama_cpp: Any) -> None:
        self.path = path
        self.model = path.stem
        self._turns = _TurnLock()
        self._batch_size = max(1, settings.local.batch_size)
        fixed = settings.local.threads
        self._query_threads = fixed or default_threads()
        # Queries on their own context pick their threads as batches do: on 2 idle cores a
        # MiniLM query took 3.4-4.1 ms on both against 6.0 on one, but 7.5 against 5.7-6.6
        # with the other core busy (p95 12 against 8), so the measured rate decides.
        self._query_pick = BatchThreads((fixed,)) if fixed else BatchThreads.auto()
        self._batch_threads = BatchThreads((fixed,)) if fixed else BatchThreads.auto()
        self._threads = self._query_threads
        self._set_threads = llama_cpp.llama_set_n_threads
        fingerprint = file_fingerprint(path)
        # The copy is the same model (see models/bf16_copy.py): the key below stays the file's.
        self.weights = weights_for(path, settings.local.weights, fingerprint, llama_cpp)
        n_ctx = settings.local.context_size
        try:
            self._llm: Any = _load(llama_cpp, self.weights, n_ctx, self._threads)
        except ProviderUnavailable as exc:
            if self.weights == path:
                raise
            log.warning("local: %s; using %s as it is", exc, path)
            self.weights = path
            self._llm = _load(llama_cpp, path, n_ctx, self._threads)
        # Queries run on a context of their own, never behind an indexing batch.
        self._query_lock = threading.Lock()
        self._queries: QueryContext | None = _query_context(self._llm, llama_cpp, self._threads)
        self.dims = int(self._llm.n_embd())
        self.profile: ModelProfile = profile_from_metadata(self._llm.metadata)
        self._special_ids = set(self._tokens(""))
        # llama.cpp may round the context up (to 256); the batch is what one input must fit.
        self._n_ctx = min(int(self._llm.n_ctx()), int(self._llm.n_batch))
        window = settings.local.window_tokens or self.profile.window_tokens
        self._window = min(window, self._n_ctx) if window > SPECIAL_TOKENS else self._n_ctx
        # Every document window carries the passage prefix, so its tokens come off the budget.
        self._passage_tokens = len(self._tokens(self.profile.passage_prefix)) - SPECIAL_TOKENS
        self.max_input_tokens = self._n_ctx - SPECIAL_TOKENS - self._passage_tokens
        self.max_input_bytes = self.max_input_tokens * BYTES_PER_TOKEN
        fingerprint = (
            f"{fingerprint}:ctx={self._n_ctx}:pool={self._llm.pooling_type()}:win={self._window}"
        )
        self.provider_key = hashlib.sha256(fingerprint.encode()).hexdigest()[:16]

    def embed_query(self, text: str) -> np.ndarray:
        text = self.profile.query_prefix + self.profile.prepare(text)
        with self._query_lock:
            if self._llm is None:
                raise EmbeddingError("local: provider is closed")
            ctx = self._queries
            ids = self._tokens(text) if ctx is not None else []
            if ctx is not None and len(ids) <= ctx.max_tokens:
                try:
                    ctx.set_threads(threads := self._query_pick.choose())
                    began = time.perf_counter()
                    vector = ctx.embed(ids)
                    self._query_pick.record(threads, len(ids), time.perf_counter() - began)
                except RuntimeError as exc:
                    raise EmbeddingError(f"local: embedding failed: {exc}") from exc
                return check_vectors(PROVIDER_ID, vector[None, :], 1, self.dims)[0]
        with self._turns.turn(query=True):  # a long query: the indexing context's next turn
            self._use_threads(self._query_threads)
            vectors, _, _ = self._embed_group([text], 0)
        return vectors[0]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text; a text over the window is the mean of its windows' vectors
        (a 400-token chunk cut at 256 tokens would lose its end, and past its training length
        the model's vectors get worse)."""
        pieces: list[str] = []
        owner: list[int] = []
        with self._turns.turn(query=True):  # tokenising is quick: do not queue behind batches
            if self._llm is None:
                raise EmbeddingError("local: provider is closed")
            prefix = self.profile.passage_prefix
            for i, text in enumerate(texts):
                for piece in self._windows(self.profile.prepare(text)):
                    pieces.append(prefix + piece)
                    owner.append(i)
        parts = [np.zeros((0, self.dims), dtype=np.float32)]
        done = 0
        while done < len(pieces):
            # One llama.cpp batch per turn, so a query waits for one batch (~0.2 s), not all.
            with self._turns.turn(query=False):
                threads = self._use_threads(self._batch_threads.choose())
                began = time.perf_counter()
                vectors, used, tokens = self._embed_group(pieces, done)
                self._batch_threads.record(threads, tokens, time.perf_counter() - began)
            parts.append(vectors)
            done += used
        flat = np.concatenate(parts)
        if len(pieces) == len(texts):
            return flat
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        np.add.at(out, np.asarray(owner), flat)
        return normalize(out)

    def _windows(self, text: str) -> list[str]:
        """``text`` cut at line ends into pieces that fit the window with the passage prefix."""
        limit = self._window - self._passage_tokens
        if self._count(text) <= limit:
            return [text]
        pieces: list[str] = []
        buf: list[str] = []
        used = SPECIAL_TOKENS
        for line in text.split("\n"):
            n = self._count(line) - SPECIAL_TOKENS + 1
            if buf and used + n > limit:
                pieces.append("\n".join(buf))
                buf, used = [], SPECIAL_TOKENS
            if SPECIAL_TOKENS + n > limit:  # one long line: cut it into window-sized pieces
                rest = line
                while rest:
                    head, _ = self._fit(rest, limit)
                    head = head or rest[: max(1, len(rest) // 2)]
                    pieces.append(head)
                    rest = rest[len(head) :]
                continue
            buf.append(line)
            used += n
        if buf:
            pieces.append("\n".join(buf))
        return [p for p in pieces if p.strip()] or [text[:1000]]

    def _use_threads(self, threads: int) -> int:
        """Give the context ``threads`` threads (the caller holds a turn); return the count."""
        if threads != self._threads and self._llm is not None:
            self._set_threads(self._llm.ctx, threads, threads)
            self._threads = threads
        return threads

    def _embed_group(self, texts: Sequence[str], start: int) -> tuple[np.ndarray, int, int]:
        """Embed texts from ``start`` on, as many as fit one llama.cpp batch (at least one);
        return their vectors, how many texts and how many tokens.

        The caller holds a turn."""
        llm = self._llm
        if llm is None:
            raise EmbeddingError("local: provider is closed")
        group: list[str] = []
        tokens = 0
        try:
            for text in texts[start : start + self._batch_size]:
                fitted, n = self._fit(text)
                if group and tokens + n > self._n_ctx:
                    break
                group.append(fitted)
                tokens += n
            raw = llm.embed(group, normalize=False, truncate=False)
        except (RuntimeError, ValueError) as exc:
            raise EmbeddingError(f"local: embedding failed: {exc}") from exc
        vectors = check_vectors(PROVIDER_ID, np.asarray(raw, np.float32), len(group), self.dims)
        return vectors, len(group), tokens

    def unknown_ratio(self, text: str) -> float:
        """Share of the text's tokens the vocabulary does not know ([UNK]).

        An English model turns most of a Chinese query into [UNK]; its vector then says
        nothing, and fusing it in only dilutes the keyword ranking (cmrc2018: hybrid nDCG@10
        0.926 vs 0.938 keyword-only), so the engine skips the vector side for such queries.
        """
        unk = self.profile.unk_id
        with self._query_lock:  # tokenising only: never behind an indexing batch
            if self._llm is None or unk is None:
                return 0.0
            ids = self._tokens(self.profile.prepare(text))
        ids = [i for i in ids if i not in self._special_ids]
        return sum(i == unk for i in ids) / len(ids) if ids else 0.0

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without CLS/SEP, as the model sees it (for callers that budget)."""
        with self._query_lock:
            if self._llm is None:
                raise EmbeddingError("local: provider is closed")
            return self._count(self.profile.prepare(text)) - SPECIAL_TOKENS

    def _tokens(self, text: str) -> list[int]:
        """Token ids with the model's CLS/SEP (or BOS/EOS); the caller holds a turn."""
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    def _count(self, text: str) -> int:
        return len(self._tokens(text))

    def _fit(self, text: str, limit: int = 0) -> tuple[str, int]:
        """The longest prefix of ``text`` that fits ``limit`` tokens (default: the context,
        with CLS/SEP), and its tokens.

        Cutting the text rather than the token list keeps the original characters: WordPiece
        detokenising is lossy ([UNK], case, accents) and can re-tokenise to more tokens.
        """
        limit = limit or self._n_ctx
        n = self._count(text)
        if n <= limit:
            return text, n
        # No WordPiece token covers more than a few dozen characters of real text, so this cap
        # only bounds the search on huge inputs.
        hi = min(len(text), limit * 32)
        n = self._count(text[:hi])
        if n <= limit:
            return text[:hi], n
        lo, n_lo = 0, SPECIAL_TOKENS
        while hi - lo > 1:  # invariant: text[:lo] fits, text[:hi] does not
            mid = (lo + hi) // 2
            n = self._count(text[:mid])
            if n <= limit:
                lo, n_lo = mid, n
            else:
                hi = mid
        return text[:lo], n_lo

    def close(self) -> None:
        with self._query_lock, self._turns.turn(query=True):
            llm, self._llm = self._llm, None
            queries, self._queries = self._queries, None
        if queries is not None:
            queries.close()
        if llm is not None:
            llm.close()

    def __repr__(self) -> str:
        return f"LocalProvider({self.path}, dims={self.dims}, ctx={self._n_ctx})"


def _load(llama_cpp: Any, path: Path, context_size: int, threads: int) -> Any:
    """Open the model; reject files that are corrupt or not embedding models."""
    llm = _open(llama_cpp, path, context_size, threads, llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED)
    problem = tokenizer_hazard(llm.metadata)
    if problem:
        llm.close()
        raise ProviderUnavailable(f"local: {path}: {problem}")
    arch = str(llm.metadata.get("general.architecture", "?"))
    n_train = int(llm.metadata.get(f"{arch}.context_length", 0) or 0)
    pooling = int(llm.pooling_type())
    reopen_ctx = min(context_size, n_train) if n_train > 0 else context_size
    if pooling == llama_cpp.LLAMA_POOLING_TYPE_NONE and arch in ENCODER_ARCHS:
        # An encoder converted without a pooling type: mean pooling is the usual choice.
        llm.close()
        return _open(llama_cpp, path, reopen_ctx, threads, llama_cpp.LLAMA_POOLING_TYPE_MEAN)
    if pooling == llama_cpp.LLAMA_POOLING_TYPE_NONE:
        llm.close()
        raise ProviderUnavailable(
            f"local: {path} is a {arch!r} model without a pooling type, not an embedding model"
        )
    if reopen_ctx != context_size:
        # Past the trained context the position embeddings run out: never exceed it.
        llm.close()
        return _open(llama_cpp, path, reopen_ctx, threads, pooling)
    return llm


def _query_context(llm: Any, llama_cpp: Any, threads: int) -> QueryContext | None:
    try:
        return QueryContext(llm, llama_cpp, threads)
    except (ImportError, AttributeError, ValueError, RuntimeError) as exc:
        # Another llama-cpp-python layout: queries share the indexing context, as before.
        log.warning("local: no separate query context (%s: %s)", type(exc).__name__, exc)
        return None


def _open(llama_cpp: Any, path: Path, n_ctx: int, threads: int, pooling: int) -> Any:
    try:
        return llama_cpp.Llama(
            model_path=str(path),
            embedding=True,
            n_ctx=n_ctx,
            # A whole input must fit one micro-batch: encoders cannot split a sequence.
            n_batch=n_ctx,
            n_ubatch=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            # Flash attention: the same vectors (cosine 0.99999) 2.4x (MiniLM) to 2.9x (E5) as
            # fast on CPU, and a batch of several texts no longer costs more than one by one.
            flash_attn=True,
            pooling_type=pooling,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise ProviderUnavailable(f"local: cannot load {path}: {_diagnose(path, exc)}") from exc


def _diagnose(path: Path, exc: Exception) -> str:
    """Why llama.cpp refused a file, in words a user can act on (only on the error path)."""
    try:
        check_complete(path)
        arch = metadata(path, ["general.architecture"]).get("general.architecture") or "unknown"
    except (GgufError, OSError) as read_exc:
        return f"the file is corrupt or truncated ({read_exc})"
    return f"llama.cpp cannot load this {arch!r} model ({exc}); it may need a newer llama.cpp"
