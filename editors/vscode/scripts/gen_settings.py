#!/usr/bin/env python3
"""Generate (or check) the `memory.*` settings that the VS Code extension contributes.

The server's settings schema lives in ``memory_ls/settings.py`` (dataclasses, defaults, choices).
This script walks it and writes ``contributes.configuration`` in ``package.json``: one
``memory.<camelCaseKey>`` entry per leaf setting, with its JSON type, default, allowed values and
the description below. Client-only settings (``memory.server.*``, ``memory.trace.server``) are
kept as they are.

    python3 scripts/gen_settings.py           rewrite package.json
    python3 scripts/gen_settings.py --check   exit 1 (and say what differs) when out of date

Run it with a Python that can import ``memory_ls`` (the repository's venv). ``npm test`` runs
``--check`` through ``test/settingsDrift.test.ts``, so a setting added to the server without
updating the extension fails the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

HERE = Path(__file__).resolve().parent
PACKAGE_JSON = HERE.parent / "package.json"
REPO = HERE.parent.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from memory_ls import settings as S  # noqa: E402

# One line per server setting; Markdown allowed. A setting missing here fails the check.
DESCRIPTIONS: dict[str, str] = {
    "provider": "Embedding provider. `auto`: the local model if one is configured or was pulled "
    "(`memory-ls model pull`), else the first remote provider whose API key is set, else "
    "keyword-only. `none`: keyword-only search.",
    "model": "The provider's embedding model (empty: the provider's default).",
    "fallback": "Provider to use when the primary one fails (`none`: keyword-only).",
    "sources": "What to index: `memory` (Markdown notes) and optionally `sessions` (JSONL "
    "agent transcripts, see `#memory.sessions.globs#`).",
    "extraPaths": "More Markdown files or folders to index, relative to the workspace folder.",
    "maxFileBytes": "Files larger than this many bytes are skipped.",
    "logLevel": "Server log level (written to the *Memory* output channel).",
    "query.maxResults": "Results per search.",
    "query.minScore": "Results scoring less than this (0-1) are dropped.",
    "query.snippetMaxChars": "Maximum length of a result's snippet, in characters.",
    "query.hybrid.enabled": "Combine keyword (BM25) and vector search. Off: vector-only when a "
    "model is available.",
    "query.hybrid.vectorWeight": "Weight of the vector score in weighted fusion.",
    "query.hybrid.textWeight": "Weight of the keyword (BM25) score in weighted fusion.",
    "query.hybrid.candidateMultiplier": "Candidates taken from each side: `maxResults` times this "
    "(but at least `#memory.query.hybrid.minCandidates#`).",
    "query.hybrid.minCandidates": "The candidate pool of each side never shrinks below this, so "
    "the top hit does not depend on `maxResults`.",
    "query.hybrid.fusion": "How keyword and vector scores are fused: `weighted` "
    "(vectorWeight x vector + textWeight x keyword) or `rrf` (reciprocal rank fusion).",
    "query.hybrid.rrfK": "The `k` constant of reciprocal rank fusion.",
    "query.mmr.enabled": "Re-rank with maximal marginal relevance to diversify results.",
    "query.mmr.lambda": "MMR trade-off between relevance (1) and diversity (0).",
    "query.temporalDecay.enabled": "Lower the score of older dated notes "
    "(`memory/YYYY-MM-DD*.md`); evergreen files never decay.",
    "query.temporalDecay.halfLifeDays": "Age in days at which a dated note's score is halved.",
    "query.commonTermFraction": "Keyword side: query words found in more than this share of "
    "all chunks are left out (near-zero IDF, costly BM25 on a large index); 1 keeps every word.",
    "query.sourceBalance": "When notes and transcripts both match, one source never takes more "
    "than 2/3 of the results.",
    "chunking.tokens": "Chunk size in estimated tokens (about 4 characters each). Changing it "
    "rebuilds the index.",
    "chunking.overlap": "Overlap between consecutive chunks, in estimated tokens.",
    "local.modelPath": "A GGUF embedding model for the `local` provider (empty: the model "
    "fetched by `memory-ls model pull`).",
    "local.threads": "llama.cpp threads (0: llama.cpp decides).",
    "local.batchSize": "Texts embedded per llama.cpp batch.",
    "local.contextSize": "llama.cpp context size in tokens.",
    "local.windowTokens": "Documents longer than this many tokens are embedded as the mean of "
    "windows of this size (0: one window, truncated).",
    "remote.baseUrl": "Base URL of a remote or OpenAI-compatible embedding server (empty: the "
    "provider's default).",
    "remote.apiKey": "API key for the remote provider. Prefer the environment "
    "(`OPENAI_API_KEY`, `GEMINI_API_KEY`, `VOYAGE_API_KEY`, `MISTRAL_API_KEY`): settings files "
    "are often shared.",
    "remote.headers": "Extra HTTP headers sent to the remote provider.",
    "remote.dimensions": "Embedding dimensions to request (0: the model's default).",
    "remote.queryTimeoutMs": "Timeout of a query embedding request, in milliseconds.",
    "remote.batchTimeoutMs": "Timeout of an indexing batch request, in milliseconds.",
    "remote.batchSize": "Texts per remote embedding request.",
    "remote.retries": "Retries on HTTP 429, 5xx and timeouts.",
    "remote.backoffMinMs": "First retry delay, in milliseconds (doubles each retry).",
    "remote.backoffMaxMs": "Longest retry delay, in milliseconds.",
    "remote.maxInputTokens": "Largest single input in tokens (0: the provider's own limit). "
    "Chunks are sized to fit.",
    "remote.batchApi": "Use the provider's asynchronous batch API for large backfills (OpenAI; "
    "half the price, slower).",
    "remote.batchApiMinTexts": "Backfills smaller than this use the synchronous endpoint.",
    "remote.batchApiConcurrency": "Batch jobs in flight at once.",
    "remote.batchApiPollMs": "How often to poll a batch job, in milliseconds.",
    "remote.batchApiTimeoutMinutes": "Cancel a batch job after this many minutes and embed the "
    "rest synchronously.",
    "cache.enabled": "Cache embeddings by (provider, model, text hash); the cache survives full "
    "rebuilds.",
    "cache.maxEntries": "Embedding cache size; least recently used entries are evicted past it.",
    "sync.watch": "Watch memory files for changes made outside the editor (e.g. by an agent).",
    "sync.watchDebounceMs": "Debounce of file watcher events, in milliseconds.",
    "sync.editDebounceMs": "Debounce before an edited (unsaved) buffer is reindexed, in "
    "milliseconds.",
    "sync.intervalMinutes": "Periodic safety-net sync, in minutes (0: off).",
    "sync.searchBudgetMs": "A search first indexes dirty files, waiting at most this many "
    "milliseconds.",
    "sync.sessions.deltaBytes": "Reindex a transcript after it grew by this many bytes.",
    "sync.sessions.deltaMessages": "Reindex a transcript after this many new messages.",
    "sessions.globs": "Glob patterns of JSONL session transcripts to index when `sources` "
    "includes `sessions`.",
    "sessions.retentionDays": "Ignore transcripts older than this many days (0: keep all).",
    "sessionWriter.baseUrl": "OpenAI-compatible chat-completions endpoint used to name saved "
    "sessions (the file slug), e.g. `http://127.0.0.1:11434/v1`. Empty (or no model): slugs "
    "come from the conversation's keywords.",
    "sessionWriter.model": "Chat model that names saved sessions.",
    "sessionWriter.apiKey": "API key for `#memory.sessionWriter.baseUrl#` (prefer the "
    "environment).",
    "sessionWriter.timeoutMs": "Timeout of the session-naming request, in milliseconds.",
    "store.path": "Index file (empty: one file per workspace folder in the user cache folder, "
    "`$XDG_CACHE_HOME/memory-ls/`).",
    "store.vectorBackend": "Vector search backend: `auto`/`numpy` (in-memory matrix) or "
    "`sqlite-vec`.",
}

# Settings of the extension itself: never sent to the server.
CLIENT_SETTINGS: dict[str, dict[str, Any]] = {
    "memory.server.command": {
        "type": "string",
        "default": "",
        "markdownDescription": "The `memory-ls` executable (a name on `PATH` or a path; "
        "`${workspaceFolder}` and `~` are expanded). Empty: `.venv/bin/memory-ls` or "
        "`venv/bin/memory-ls` in the workspace, then `memory-ls` on `PATH`.",
        "scope": "machine-overridable",
        "order": 0,
    },
    "memory.server.pythonPath": {
        "type": "string",
        "default": "",
        "markdownDescription": "Run the server as `<python> -m memory_ls serve` with this "
        "interpreter (used when `#memory.server.command#` is empty).",
        "scope": "machine-overridable",
        "order": 1,
    },
    "memory.server.args": {
        "type": "array",
        "items": {"type": "string"},
        "default": ["serve"],
        "markdownDescription": "Arguments passed to the server command.",
        "scope": "machine-overridable",
        "order": 2,
    },
    "memory.server.env": {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "default": {},
        "markdownDescription": "Extra environment variables for the server process (e.g. "
        "`XDG_CACHE_HOME`). API keys are better set in the environment VS Code starts from.",
        "scope": "machine-overridable",
        "order": 3,
    },
    "memory.server.allMarkdown": {
        "type": "boolean",
        "default": True,
        "markdownDescription": "Attach the server to every Markdown file, so citations "
        "(`memory/x.md#L3-L9`) in READMEs or agent instructions get go-to-definition, hover and "
        "links. Off: memory files only. Only memory files are indexed either way.",
        "order": 4,
    },
    "memory.trace.server": {
        "type": "string",
        "enum": ["off", "messages", "verbose"],
        "default": "off",
        "markdownDescription": "Trace the LSP messages between VS Code and memory-ls in the "
        "*Memory* output channel.",
        "scope": "window",
        "order": 5,
    },
}


def leaves(cls: type, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(camelCase key, type hint, default) of every leaf setting, in declaration order."""
    out: list[tuple[str, Any, Any]] = []
    hints = get_type_hints(cls)
    instance = cls()
    for f in dataclasses.fields(cls):
        key = prefix + S.camel(f.name)
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            out += leaves(hint, key + ".")
        else:
            out.append((key, hint, getattr(instance, f.name)))
    return out


def schema_for(key: str, hint: Any, default: Any) -> dict[str, Any]:
    choices: dict[str, tuple[str, ...]] = getattr(S, "_CHOICES", {})
    sources: tuple[str, ...] = getattr(S, "_SOURCES", ("memory", "sessions"))
    origin = get_origin(hint)
    entry: dict[str, Any]
    if hint is bool:
        entry = {"type": "boolean"}
    elif hint is int:
        entry = {
            "type": "integer",
            "minimum": 1 if key in ("chunking.tokens", "query.maxResults") else 0,
        }
    elif hint is float:
        entry = {"type": "number", "minimum": 0}
        if key.endswith(("Weight", "minScore", "lambda")):
            entry["maximum"] = 1
    elif hint is str:
        entry = {"type": "string"}
        if key in choices:
            entry["enum"] = list(choices[key])
    elif origin is list:
        (item,) = get_args(hint)
        assert item is str, key
        items: dict[str, Any] = {"type": "string"}
        if key == "sources":
            items["enum"] = list(sources)
        entry = {"type": "array", "items": items, "uniqueItems": True}
        if key == "sources":
            entry["minItems"] = 1
    elif origin is dict:
        entry = {"type": "object", "additionalProperties": {"type": "string"}}
    else:  # pragma: no cover - a new kind of setting: teach this script about it
        raise SystemExit(f"gen_settings: {key}: unsupported type {hint!r}")
    entry["default"] = default
    return entry


def build() -> tuple[dict[str, Any], list[str]]:
    problems: list[str] = []
    props: dict[str, Any] = dict(CLIENT_SETTINGS)
    defaults = S.to_dict(S.Settings())
    seen = set()
    for order, (key, hint, _default) in enumerate(leaves(S.Settings), start=10):
        seen.add(key)
        # to_dict is the contract the tests hold us to; read the default through it.
        node: Any = defaults
        for part in key.split("."):
            node = node[part]
        entry = schema_for(key, hint, node)
        desc = DESCRIPTIONS.get(key)
        if desc is None:
            problems.append(f"memory.{key}: no description in {Path(__file__).name}")
            desc = f"`{key}` (see the memory-ls README)."
        entry["markdownDescription"] = desc
        entry["scope"] = "resource"
        entry["order"] = order
        props[f"memory.{key}"] = entry
    for key in DESCRIPTIONS:
        if key not in seen:
            problems.append(f"memory.{key}: described here but not a server setting any more")
    return {
        "title": "Memory",
        "properties": props,
    }, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check package.json")
    ap.add_argument("--print", action="store_true", help="print the generated configuration")
    args = ap.parse_args()
    config, problems = build()
    if args.print:
        print(json.dumps(config, indent=2))
        return 0
    pkg = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    current = pkg.get("contributes", {}).get("configuration")
    if args.check:
        for p in problems:
            print(f"gen_settings: {p}", file=sys.stderr)
        if current != config:
            have = (current or {}).get("properties", {})
            want = config["properties"]
            for key in sorted(set(have) | set(want)):
                if have.get(key) != want.get(key):
                    print(
                        f"gen_settings: {key}: package.json has {json.dumps(have.get(key))}, "
                        f"the server schema says {json.dumps(want.get(key))}",
                        file=sys.stderr,
                    )
            if current is not None and {k: v for k, v in current.items() if k != "properties"} != {
                k: v for k, v in config.items() if k != "properties"
            }:
                print("gen_settings: configuration title differs", file=sys.stderr)
            print(
                "gen_settings: package.json is out of date; run "
                "`npm run gen-settings` in editors/vscode",
                file=sys.stderr,
            )
            return 1
        return 1 if problems else 0
    for p in problems:
        print(f"gen_settings: warning: {p}", file=sys.stderr)
    pkg.setdefault("contributes", {})["configuration"] = config
    PACKAGE_JSON.write_text(json.dumps(pkg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"gen_settings: wrote {len(config['properties'])} settings to {PACKAGE_JSON.name}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
