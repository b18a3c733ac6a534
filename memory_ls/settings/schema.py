"""Every setting, declared once: its type, default, bounds, choices and description.

Validation (``loading.py``), the manual's settings tables (``docs.py``) and the VS Code
extension's ``contributes.configuration`` (``editors/vscode/scripts/gen_settings.py``) all read
these declarations (the search ones are in ``query.py``), so a setting cannot say one thing in
one place and another elsewhere.
Descriptions are Markdown; a setting named in backquotes (`` `query.maxResults` ``) becomes a
link in VS Code. Every description was checked against the code that reads the setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .hygiene import HygieneSettings
from .query import QuerySettings, RerankSettings
from .spec import setting

PROVIDERS = (
    "auto",
    "none",
    "local",
    "openai",
    "openai-compatible",
    "ollama",
    "gemini",
    "voyage",
    "mistral",
)


@dataclass
class ChunkingSettings:
    tokens: int = setting(
        400,
        "Chunk size in estimated tokens (about 4 characters, or one CJK character, each), "
        "lowered to the embedding model's input limit. Changing it rebuilds the index.",
        minimum=1,
    )
    overlap: int = setting(
        80,
        "Overlap between consecutive chunks in estimated tokens: below `chunking.tokens`, and "
        "at most half a chunk is used. Changing it rebuilds the index.",
        minimum=0,
    )


@dataclass
class LocalSettings:
    model: str = setting(
        "",
        "Which model pulled with `memory-ls model pull NAME` the `local` provider uses: "
        "`all-MiniLM-L6-v2` (English) or `multilingual-e5-small` (about 100 languages). Empty: "
        "the default model if pulled, else any pulled one. Changing it rebuilds the index.",
        choices=("", "all-MiniLM-L6-v2", "multilingual-e5-small"),
    )
    model_path: str = setting(
        "",
        "A GGUF embedding model for the `local` provider; `~` is expanded and a relative path "
        "is relative to the workspace folder; it wins over `local.model` (empty: a model "
        "fetched by `memory-ls model pull`).",
    )
    threads: int = setting(
        0,
        "llama.cpp threads. 0: indexing batches and queries each measure all usable cores but "
        "one (at least 1, at most 8) and all cores, and keep the faster (all cores on an idle "
        "machine, one fewer as soon as another process holds a core).",
        minimum=0,
    )
    batch_size: int = setting(32, "Texts embedded per llama.cpp call while indexing.", minimum=0)
    weights: str = setting(
        "auto",
        "`auto`: where llama.cpp was built for AVX512-BF16, a float16 model runs from a "
        "bfloat16 copy made once in the cache folder (MiniLM: 1.3-1.4x the chunks a second, "
        "the same vectors at cosine 0.99998, so the index is kept). `bf16`: that copy "
        "whatever the build. `file`: the file as it is.",
        choices=("auto", "bf16", "file"),
    )
    context_size: int = setting(
        512,
        "llama.cpp context size in tokens, capped at the model's trained length; it bounds "
        "the longest input, and chunks are sized to fit.",
        minimum=0,
    )
    window_tokens: int = setting(
        0,
        "Documents longer than this many tokens are embedded as the mean of windows of this "
        "size, at most `local.contextSize`. 0: the window the model was trained on "
        "(all-MiniLM-L6-v2: 256, multilingual-e5-small: 512).",
        minimum=0,
    )


@dataclass
class RemoteSettings:
    base_url: str = setting(
        "",
        "Base URL of the remote embedding API (empty: the provider's default; "
        "`openai-compatible` needs one). For `ollama`, a URL ending in `/v1` uses its "
        "OpenAI-compatible API.",
    )
    api_key: str = setting(
        "",
        "API key for the remote provider (empty: `OPENAI_API_KEY`, `GEMINI_API_KEY`, "
        "`VOYAGE_API_KEY` or `MISTRAL_API_KEY`, the provider's own; `openai-compatible` and "
        "`ollama` use this key only). Prefer the environment: settings files are often shared.",
        secret=True,
    )
    headers: dict[str, str] = setting(
        {},
        "Extra HTTP headers sent to the remote provider; they win over the defaults, and the "
        "values of secret-looking ones are scrubbed from errors and logs.",
        secret=True,
    )
    dimensions: int = setting(
        0, "Embedding dimensions to request (0: the model's default).", minimum=0
    )
    query_timeout_ms: int = setting(
        2000,
        "The whole time budget of a query embedding, retries included, in milliseconds; past "
        "it the search answers with keywords.",
        minimum=0,
    )
    batch_timeout_ms: int = setting(
        60000, "Timeout of each attempt of an indexing request, in milliseconds.", minimum=0
    )
    batch_size: int = setting(64, "Texts per remote embedding request while indexing.", minimum=0)
    retries: int = setting(
        3,
        "Retries on HTTP 408, 409, 425, 429, 5xx, connection errors and timeouts (other 4xx "
        "fail at once).",
        minimum=0,
    )
    backoff_min_ms: int = setting(
        500,
        "First retry delay in milliseconds; it doubles each retry (with jitter) up to "
        "`remote.backoffMaxMs`. A `Retry-After` of up to 60 s is honoured instead.",
        minimum=0,
    )
    backoff_max_ms: int = setting(8000, "Longest retry delay, in milliseconds.", minimum=0)
    max_input_tokens: int = setting(
        0,
        "Largest single input in tokens (0: the provider's own limit, 512 for Ollama and "
        "OpenAI-compatible servers, whose models vary). Chunks are sized to fit.",
        minimum=0,
    )
    batch_api: bool = setting(
        False,
        "Use the provider's asynchronous batch API for large backfills (OpenAI, Gemini, Voyage; "
        "cheaper, slower).",
    )
    batch_api_min_texts: int = setting(
        1000, "Backfills of fewer texts than this use the synchronous endpoint.", minimum=0
    )
    batch_api_concurrency: int = setting(2, "Batch jobs in flight at once.", minimum=0)
    batch_api_poll_ms: int = setting(
        30000, "How often to poll a batch job, in milliseconds.", minimum=0
    )
    batch_api_timeout_minutes: int = setting(
        24 * 60,
        "Cancel a batch job after this many minutes and embed the rest synchronously (0: no "
        "limit but the provider's own).",
        minimum=0,
    )


@dataclass
class CacheSettings:
    enabled: bool = setting(
        True,
        "Cache embeddings by provider, model and text hash; the cache survives full rebuilds.",
    )
    max_entries: int = setting(
        100_000,
        "Vectors kept for texts that no chunk holds any more (deleted or edited chunks); the "
        "least recently used past it are evicted. Vectors of current chunks are never evicted.",
        minimum=0,
    )


@dataclass
class SessionsSyncSettings:
    delta_bytes: int = setting(
        100_000,
        "A transcript still being written is reindexed once it grew by this many bytes (or by "
        "`sync.sessions.deltaMessages` messages), or after two minutes without writes.",
        minimum=0,
    )
    delta_messages: int = setting(
        50,
        "A transcript still being written is also reindexed once this many messages were "
        "added to it (0: on every append).",
        minimum=0,
    )


@dataclass
class SyncSettings:
    watch: bool = setting(
        True,
        "Language server: watch memory files for changes made outside the editor (e.g. by an "
        "agent), through the client when it can, else in the server.",
    )
    watch_debounce_ms: int = setting(
        1500,
        "Language server: files changed outside the editor are indexed this many milliseconds "
        "after the last change (a search before that indexes them first).",
        minimum=0,
    )
    edit_debounce_ms: int = setting(
        300,
        "Language server: an edited buffer is indexed this many milliseconds after the last "
        "change (a search before that applies the edit first).",
        minimum=0,
    )
    interval_minutes: int = setting(
        0,
        "Language server: sync every file this often, in minutes, as a safety net (0: off).",
        minimum=0,
    )
    search_budget_ms: int = setting(
        250,
        "A search first indexes the files known to have changed, waiting at most this many "
        "milliseconds for the index writer (the language server waits at least 1 s for "
        "pending edits). A search that asks for no mode also waits at most this long for the "
        "vectors to load (seconds at a million chunks) and answers with keywords meanwhile.",
        minimum=0,
    )
    sessions: SessionsSyncSettings = field(default_factory=SessionsSyncSettings)


@dataclass
class SessionRoot:
    """A folder of agent transcripts outside the workspace, opted in by name."""

    path: str = setting("", "The folder: absolute or starting with `~`.")
    globs: list[str] = setting(["**/*.jsonl"], "Transcripts under it, relative to it.")
    name: str = setting(
        "",
        "Its citation prefix `sessions:<name>/` (empty: `claude`, `codex` or `openclaw` for "
        "those agents' folders, else the folder's name).",
    )


@dataclass
class SessionsSettings:
    globs: list[str] = setting(
        [],
        "Glob patterns, relative to the workspace folder, of JSONL agent transcripts to index "
        "when `sources` includes `sessions`.",
    )
    roots: list[SessionRoot] = setting(
        [],
        "Folders of agent transcripts outside the workspace, read when `sources` includes "
        "`sessions`: tables `{path, globs, name}` (`path` absolute or `~`; `globs` default "
        '`["**/*.jsonl"]`). Their files are cited as `sessions:<name>/<path>#L3-L9`; nothing '
        "else outside the workspace is read, and symlinks below a root never are. "
        "`memory-ls sessions detect` prints them for the agents found on this machine.",
    )
    retention_days: int = setting(
        0,
        "Transcripts not written to for this many days are dropped from the index, never from "
        "disk (0: keep all).",
        minimum=0,
    )


@dataclass
class MemoryRoot:
    """A folder of an agent's own Markdown memory outside the workspace, opted in by name."""

    path: str = setting("", "The folder: absolute or starting with `~`.")
    globs: list[str] = setting(["**/*.md"], "Its notes, relative to it.")
    name: str = setting(
        "",
        "Its citation prefix `memory:<name>/` (empty: `openclaw` for ~/.openclaw/workspace, "
        "`claude-<project>` for a Claude Code project's memory folder, else the folder's name).",
    )


@dataclass
class MemorySettings:
    roots: list[MemoryRoot] = setting(
        [],
        "Folders where agents keep their own Markdown memory, outside the workspace (Claude "
        "Code's `~/.claude/projects/<project>/memory`, OpenClaw's `~/.openclaw/workspace`): "
        "tables `{path, globs, name}` (`path` absolute or `~`; `globs` default "
        '`["**/*.md"]`). Their notes are indexed, searched and checked as memory, cited as '
        "`memory:<name>/<path>#L3-L9`; a root's `MEMORY.md` is its agent's always-loaded index. "
        "Read only: nothing is written there, and symlinks below a root are never read. "
        "`memory-ls sessions detect` prints them for the agents found on this machine.",
    )


@dataclass
class SessionWriterSettings:
    base_url: str = setting(
        "",
        "OpenAI-compatible chat-completions endpoint that names saved sessions (the file "
        "slug), e.g. `http://127.0.0.1:11434/v1`. Empty (or no `sessionWriter.model`): slugs "
        "come from the conversation's keywords.",
    )
    model: str = setting("", "Chat model that names saved sessions.")
    api_key: str = setting(
        "", "API key for `sessionWriter.baseUrl`, sent as a bearer token.", secret=True
    )
    timeout_ms: int = setting(
        15000,
        "Timeout of the session-naming request in milliseconds; then keywords name the session.",
        minimum=0,
    )


@dataclass
class PostgresSettings:
    url: str = setting(
        "",
        "PostgreSQL URL of the team index when `store.backend` is `postgres`, e.g. "
        "`postgresql://memory@db.internal/memory?sslmode=require` (empty: the "
        "`MEMORY_LS_PG_URL` environment variable). Keep the password in `~/.pgpass` or that "
        "variable; it never appears in logs, status or errors.",
        secret=True,
    )
    namespace: str = setting(
        "default",
        "The team memory this folder reads and writes: several folders and machines may share "
        "one; a client never sees another namespace's rows.",
    )
    timeout_ms: int = setting(
        2000,
        "Connect and query budget of a search in milliseconds: past it (or when the server is "
        "unreachable) the folder's local SQLite index answers, keyword-only.",
        minimum=100,
    )
    retry_after_s: float = setting(
        30.0,
        "After PostgreSQL failed, the local index answers for this many seconds before the "
        "primary is tried again; writes made meanwhile are then replayed.",
        minimum=0,
    )
    pool_size: int = setting(4, "Connections a language server keeps open for searches.", minimum=1)
    pooler: str = setting(
        "none",
        "`transaction` when the URL points at a pooler in transaction mode (PgBouncer "
        "`pool_mode = transaction`, Supabase's port 6543, Neon's `-pooler` host): statements "
        "are not prepared, no startup options are sent, and a search's budget "
        "(`timeoutMs`) is kept by the client, which cancels what runs past it (a pooler "
        "holds statements while it cannot reach the server). `none`: a direct connection, "
        "or a pooler in session mode.",
        choices=("none", "transaction"),
    )


@dataclass
class StoreSettings:
    backend: str = setting(
        "sqlite",
        "Where the index lives: `sqlite` (one file per folder) or `postgres` (a shared team "
        "index, see `store.postgres.url`; the SQLite file stays as the local fallback).",
        choices=("sqlite", "postgres"),
    )
    path: str = setting(
        "",
        "Index file; `~` is expanded, a relative path is relative to the server's working "
        "folder (empty: one file per workspace folder in `$XDG_CACHE_HOME/memory-ls/index/`). "
        "An index holds one folder: in a multi-root workspace, a later folder that names the "
        "same file keeps its own.",
    )
    vector_backend: str = setting(
        "auto",
        "Vector search backend: `auto` and `numpy` search an in-memory matrix; `sqlite-vec` "
        "the sqlite-vec extension (numpy when it does not load). A team index "
        '(`store.backend = "postgres"`) searches with pgvector\'s HNSW instead.',
        choices=("auto", "numpy", "sqlite-vec"),
    )
    postgres: PostgresSettings = field(default_factory=PostgresSettings)


@dataclass
class Settings:
    provider: str = setting(
        "auto",
        "Embedding provider. `auto`: the local model if one is configured or was pulled "
        "(`memory-ls model pull`), else OpenAI, Gemini, Voyage or Mistral, the first whose API "
        "key is set, else keyword-only. `none`: keyword-only search.",
        choices=PROVIDERS,
    )
    model: str = setting(
        "",
        "The remote provider's embedding model (empty: its default); the `local` provider "
        "uses `local.modelPath`.",
    )
    fallback: str = setting(
        "none",
        "Provider to switch to when the primary one fails to embed documents; the index is "
        "then rebuilt with it. It gets `remote.*` and `model` only when the primary is not a "
        "remote API (`none`: no fallback).",
        choices=PROVIDERS,
    )
    sources: list[str] = setting(
        ["memory"],
        "What to index: `memory` (Markdown notes) and `sessions` (JSONL agent transcripts, "
        "see `sessions.globs`). Changing it rebuilds the index.",
        choices=("memory", "sessions"),
        min_items=1,
    )
    extra_paths: list[str] = setting(
        [], "More Markdown files or folders to index, relative to the workspace folder."
    )
    max_file_bytes: int = setting(
        5 * 1024 * 1024, "Files larger than this many bytes are skipped.", minimum=0
    )
    log_level: str = setting(
        "info",
        "Language server log level; the log goes to the client (in VS Code, the *Memory* "
        "output channel). The first workspace folder's level applies.",
        choices=("error", "warning", "info", "debug"),
    )
    query: QuerySettings = field(default_factory=QuerySettings)
    chunking: ChunkingSettings = field(default_factory=ChunkingSettings)
    local: LocalSettings = field(default_factory=LocalSettings)
    remote: RemoteSettings = field(default_factory=RemoteSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    sync: SyncSettings = field(default_factory=SyncSettings)
    sessions: SessionsSettings = field(default_factory=SessionsSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    session_writer: SessionWriterSettings = field(default_factory=SessionWriterSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    rerank: RerankSettings = field(default_factory=RerankSettings)
    hygiene: HygieneSettings = field(default_factory=HygieneSettings)
