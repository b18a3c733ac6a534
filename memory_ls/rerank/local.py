"""A local GGUF reranker (a cross-encoder the user supplies) run by llama-cpp-python.

llama.cpp scores a query and document pair with rank pooling (``LLAMA_POOLING_TYPE_RANK``):
the model's classification head (tensors ``cls.*`` / ``cls.output.*``) turns the pair into
``llama_model_n_cls_out`` numbers, read back with ``llama_get_embeddings_seq``. The pair is
built the way llama.cpp's own server and ``llama-embedding`` build it: the model's
``tokenizer.chat_template.rerank`` with ``{query}`` and ``{document}`` filled in when the file
has one (Qwen3 rerankers), else ``[BOS] query [EOS] [SEP] document [EOS]`` with each special
token only where the vocabulary adds it (BERT: ``[CLS] q [SEP] d [SEP]``; XLM-RoBERTa:
``<s> q </s></s> d </s>``).

``Llama.embed`` is not used: it takes strings only (no special tokens between the two texts)
and reads ``n_embd`` floats from the rank output, which holds ``n_cls_out``.

A file without a classification head is refused before llama.cpp loads it: an embedding model
opened with rank pooling does not fail, it returns a meaningless number per pair.
The score is the sigmoid of the head's first output (what sentence-transformers' CrossEncoder
does with a one-label head), so it reads 0 to 1 like the hosted APIs' relevance.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..embeddings.base import NO_LLAMA_CPP
from ..embeddings.remote import ProviderStats
from ..embeddings.threads import default_threads
from ..models.gguf_meta import GgufError, check_complete, metadata
from ..models.registry import GGUF_MAGIC, read_magic
from ..settings import Settings
from .base import MAX_DOCUMENT_CHARS, RerankError, RerankUnavailable

PROVIDER_ID = "local"
CLASSIFIER_TENSORS = frozenset({"cls.weight", "cls.output.weight"})
RERANK_TEMPLATE_KEY = "tokenizer.chat_template.rerank"


def check_reranker_file(path: Path) -> str:
    """The file's architecture if it is a GGUF model with a classification head; else
    ``RerankUnavailable`` saying what the file is instead."""
    if not path.is_file():
        raise RerankUnavailable(f"local rerank: rerank.modelPath {str(path)!r} is not a file")
    try:
        magic = read_magic(path)
    except OSError as exc:
        raise RerankUnavailable(f"local rerank: cannot read {path}: {exc}") from None
    if magic != GGUF_MAGIC:
        raise RerankUnavailable(f"local rerank: {path} is not a GGUF file")
    try:
        names = set(check_complete(path))
        arch = str(metadata(path, ["general.architecture"]).get("general.architecture", "unknown"))
    except (GgufError, OSError) as exc:
        raise RerankUnavailable(
            f"local rerank: {path} is corrupt or truncated ({type(exc).__name__}: {exc})"
        ) from None
    if not names & CLASSIFIER_TENSORS:
        raise RerankUnavailable(
            f"local rerank: {path.name} is a {arch!r} model without a classification head "
            "(no cls.* tensors): an embedding or chat model, not a reranker"
        )
    return arch


def open_local_reranker(path: Path, settings: Settings) -> LocalReranker:
    """Check and load ``path``; ``RerankUnavailable`` when that is impossible."""
    check_reranker_file(path)
    try:
        import llama_cpp
    except ImportError as exc:
        raise RerankUnavailable(f"local rerank: {NO_LLAMA_CPP}") from exc
    threads = settings.local.threads or default_threads()
    llm = load_rank_model(llama_cpp, path, settings.rerank.context_size, threads)
    return LocalReranker(path, llm, llama_cpp, settings.rerank.timeout_ms / 1000)


def load_rank_model(llama_cpp: Any, path: Path, context_size: int, threads: int) -> Any:
    """``path`` opened for rank pooling, its context capped at the trained length."""

    def open_(n_ctx: int) -> Any:
        try:
            return llama_cpp.Llama(
                model_path=str(path),
                embedding=True,
                pooling_type=llama_cpp.LLAMA_POOLING_TYPE_RANK,
                n_ctx=n_ctx,
                n_batch=n_ctx,  # one pair is one sequence in one micro-batch
                n_ubatch=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise RerankUnavailable(f"local rerank: llama.cpp cannot load {path}: {exc}") from None

    llm = open_(context_size)
    arch = str(llm.metadata.get("general.architecture", "?"))
    n_train = int(llm.metadata.get(f"{arch}.context_length", 0) or 0)
    if 0 < n_train < context_size:
        llm.close()
        llm = open_(n_train)
    return llm


class LocalReranker:
    """A Reranker over one llama.cpp context; safe to share between threads (one pair at a
    time). ``timeout_s`` bounds one ``rerank`` call, checked between pairs."""

    id = PROVIDER_ID

    def __init__(self, path: Path, llm: Any, llama_cpp: Any, timeout_s: float) -> None:
        self.path = path
        self.model = path.stem
        self._llm: Any = llm
        self._lib = llama_cpp
        self._timeout_s = max(0.05, timeout_s)
        self._lock = threading.Lock()
        self.stats = ProviderStats()
        self._n_ctx = min(int(llm.n_ctx()), int(llm.n_batch))
        vocab = llama_cpp.llama_model_get_vocab(llm.model)

        def token(get: Any, wanted: bool) -> list[int]:
            t = int(get(vocab)) if wanted else -1
            return [t] if t >= 0 else []

        add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
        add_eos = bool(llama_cpp.llama_vocab_get_add_eos(vocab))
        add_sep = bool(llama_cpp.llama_vocab_get_add_sep(vocab))
        eos = token(llama_cpp.llama_vocab_eos, add_eos)
        sep = token(llama_cpp.llama_vocab_sep, add_sep)
        self._head = token(llama_cpp.llama_vocab_bos, add_bos)
        self._middle = eos + sep
        self._tail = eos or sep
        template = llm.metadata.get(RERANK_TEMPLATE_KEY)
        self._template = (
            template if isinstance(template, str) and "{document}" in template else None
        )
        self._batch = llama_cpp.llama_batch_init(self._n_ctx, 0, 1)

    def __repr__(self) -> str:
        return f"LocalReranker({self.path}, ctx={self._n_ctx})"

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        deadline = time.monotonic() + self._timeout_s
        scores: list[float] = []
        with self._lock:
            if self._llm is None:
                raise RerankError("local rerank: the reranker is closed")
            for i, doc in enumerate(documents):
                if i and time.monotonic() > deadline:
                    self.stats.add(failures=1)
                    raise RerankError(
                        f"local rerank: over its {self._timeout_s * 1000:.0f} ms budget after "
                        f"{i} of {len(documents)} documents (raise rerank.timeoutMs)"
                    )
                self.stats.add(requests=1)
                scores.append(self._score(query, doc[:MAX_DOCUMENT_CHARS]))
        self.stats.add(texts=len(documents))
        return scores

    def pair_tokens(self, query: str, document: str) -> list[int]:
        """The token ids of one pair, the document cut to fit the context."""
        q = self._tokens(query)[: self._n_ctx // 2]
        d = self._tokens(document)
        if self._template is None:
            before, after = self._head + q + self._middle, self._tail
        else:
            pre, post = self._template.split("{document}", 1)
            before = self._head + self._template_tokens(pre, q)
            after = self._template_tokens(post, q) + self._tail
        room = max(0, self._n_ctx - len(before) - len(after))
        return before + d[:room] + after

    def _template_tokens(self, text: str, query: list[int]) -> list[int]:
        """``text`` of the template, special tokens parsed, with the query's tokens in place
        of ``{query}`` (the texts themselves are never parsed for special tokens)."""
        out: list[int] = []
        for i, part in enumerate(text.split("{query}")):
            if i:
                out += query
            if part:
                out += self._llm.tokenize(
                    part.encode("utf-8", "replace"), add_bos=False, special=True
                )
        return out

    def _tokens(self, text: str) -> list[int]:
        return list(
            self._llm.tokenize(text.encode("utf-8", "replace"), add_bos=False, special=False)
        )

    def _score(self, query: str, document: str) -> float:
        lib, llm, batch = self._lib, self._llm, self._batch
        tokens = self.pair_tokens(query, document)
        if not tokens:  # an empty pair in a vocabulary without special tokens
            return 0.0
        batch.n_tokens = len(tokens)
        for i, t in enumerate(tokens):
            batch.token[i] = t
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True  # pooled outputs need every token marked as output
        memory = lib.llama_get_memory(llm.ctx)
        if memory:  # decoder rerankers keep a KV cache between calls; encoders have none
            lib.llama_memory_clear(memory, True)
        if lib.llama_decode(llm.ctx, batch) != 0:
            self.stats.add(failures=1)
            raise RerankError("local rerank: llama.cpp failed to score a pair")
        out = lib.llama_get_embeddings_seq(llm.ctx, 0)
        logit = float(out[0]) if out else math.nan
        if not math.isfinite(logit):
            self.stats.add(failures=1)
            raise RerankError("local rerank: the model gave no finite score")
        return 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0

    def stats_snapshot(self) -> dict[str, int]:
        return self.stats.snapshot()

    def close(self) -> None:
        with self._lock:
            llm, self._llm = self._llm, None
            if llm is not None:
                self._lib.llama_batch_free(self._batch)
                llm.close()
