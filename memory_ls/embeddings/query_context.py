"""A second llama.cpp context on the loaded model, for queries only.

One context cannot run two inputs at once, so with a single context a search waited for the
indexing batch in progress: measured on 2 cores during a backfill, a query took 51 ms p50 / 89
ms p95 with all-MiniLM-L6-v2 and 124 / 199 ms (max 1 s) with multilingual-e5-small, against 9
/ 14 and 14 / 19 ms on a context of its own (docs/evaluation/models.md).
Both contexts share the model's weights and vocabulary; the second one costs its compute
buffers, and llama.cpp's output buffer grows with the longest input it has seen (vocabulary
size x tokens: 1 MB per token with e5's 250,002 pieces). Hence the cap on its input: a longer
query takes the indexing context's next turn, as every query did before.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

# Tokens (with CLS/SEP) a query may have to use this context: questions are 10-40, and e5's
# output buffer for 128 tokens is 128 MB at most.
QUERY_TOKENS = 128


class QueryContext:
    def __init__(self, llm: Any, llama_cpp: Any, threads: int):
        from llama_cpp import _internals  # llama-cpp-python's own context and batch wrappers

        self._llama_cpp = llama_cpp
        params = llama_cpp.llama_context_params()
        ctypes.pointer(params)[0] = llm.context_params  # the model's settings, one sequence
        params.n_seq_max = 1
        params.n_ctx = params.n_batch = params.n_ubatch = min(QUERY_TOKENS, int(llm.n_batch))
        params.n_threads = params.n_threads_batch = threads
        self.threads = threads
        self.max_tokens = int(params.n_batch)
        self.dims = int(llm.n_embd())
        self._ctx = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        self._batch = _internals.LlamaBatch(
            n_tokens=self.max_tokens, embd=0, n_seq_max=1, verbose=False
        )

    def set_threads(self, threads: int) -> None:
        if threads != self.threads:
            self._llama_cpp.llama_set_n_threads(self._ctx.ctx, threads, threads)
            self.threads = threads

    def embed(self, tokens: Sequence[int]) -> np.ndarray:
        """The pooled vector of one input of at most ``max_tokens`` tokens (not normalised)."""
        if not tokens:  # llama-cpp-python's batch would write before its buffer
            raise RuntimeError("no tokens to embed")
        self._batch.reset()
        self._batch.add_sequence(list(tokens), 0, True)  # every token an output, as embed() does
        self._ctx.kv_cache_clear()
        self._ctx.decode(self._batch)
        ptr = self._llama_cpp.llama_get_embeddings_seq(self._ctx.ctx, 0)
        if not ptr:
            raise RuntimeError("llama.cpp returned no pooled embedding")
        return np.ctypeslib.as_array(ptr, shape=(self.dims,)).astype(np.float32)

    def close(self) -> None:
        self._batch.close()
        self._ctx.close()
