// memory-ls as OpenClaw's memory engine: one `memory-ls mcp -w <workspace>` child per agent
// workspace, spoken to with MCP JSON-RPC over stdio (one JSON message per line), and a manager
// answering OpenClaw's MemorySearchManager contract (search, readFile, status, sync, probes,
// close) from its tools memory_search, memory_get and memory_status. NOTES.md says where each
// shape comes from in the openclaw package.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import type {
  MemoryProviderStatus,
  MemoryReadResult,
  MemorySearchManager,
  MemorySearchResult,
  OpenClawConfig,
  PluginLogger,
} from "./openclaw.js";

export const PROTOCOL_VERSION = "2025-06-18";
/** The oldest memory-ls this plugin works with (its MCP tools' shapes, memory_status's fields). */
export const MIN_MEMORY_LS_VERSION = "0.1.0";
export const UPGRADE_HINT = "upgrade with pip install -U memory-ls (pipx upgrade memory-ls, or uv tool upgrade memory-ls)";

/** -1, 0 or 1: dotted release numbers compared number by number (a suffix such as .dev1 ignored). */
export function compareVersions(a: string, b: string): -1 | 0 | 1 {
  const parts = (v: string) => (/^\s*v?(\d+(?:\.\d+)*)/.exec(v)?.[1] ?? "0").split(".").map(Number);
  const x = parts(a);
  const y = parts(b);
  for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d) return d < 0 ? -1 : 1;
  }
  return 0;
}
/** memory-core's own read defaults (dist/read-file-*.mjs: DEFAULT_MEMORY_READ_LINES / _MAX_CHARS). */
export const DEFAULT_READ_LINES = 120;
export const DEFAULT_READ_MAX_CHARS = 12000;
/** Under OpenClaw's 15 s tool budget for a whole memory_search, start included. */
export const DEFAULT_TIMEOUT_MS = 12000;
/** A first sync still "running" after this long is taken for a stuck child and stopped. */
export const FIRST_SYNC_PATIENCE_MS = 10 * 60 * 1000;
/** memory-ls's memory_search takes at most 50 results. */
const MAX_RESULTS_CAP = 50;
/** memory-ls's memory_get takes at most 2000 lines. */
const MAX_LINES_CAP = 2000;
const PROVIDERS = new Set(["auto", "none", "local", "openai", "openai-compatible", "ollama", "gemini", "voyage", "mistral"]);

/** An error whose message is meant for the model and the operator, never a stack trace. */
export class MemoryLsError extends Error {
  code: string;
  timedOut: boolean;
  constructor(message: string, extra: { code?: string | undefined; timedOut?: boolean } = {}) {
    super(message);
    this.name = "MemoryLsError";
    this.code = extra.code ?? "MEMORY_LS_UNAVAILABLE";
    this.timedOut = extra.timedOut === true;
  }
}

/** A memory-ls hit as its memory_search tool answers it (memory_ls/search/results.py). */
export interface MemoryLsHit {
  path: string;
  startLine: number;
  endLine: number;
  score: number;
  snippet?: string;
  source?: string;
  citation?: string;
  vectorScore?: number;
  textScore?: number;
}

/** memory-ls's memory_search answer. */
export interface MemoryLsSearch {
  results?: MemoryLsHit[];
  mode?: string;
  provider?: { id?: string; model?: string } | null;
  fallbackReason?: string;
  belowMinScore?: { count: number; bestScore: number };
  tookMs?: number;
  /** set while memory-ls's first sync runs: the results come from the files indexed so far */
  indexing?: boolean;
}

/** memory-ls's memory_status answer (memory-ls status --json), the fields read. */
export interface MemoryLsStatus {
  mode?: string;
  provider?: { id?: string; model?: string; dims?: number } | null;
  providerReason?: string | null;
  fallbackReason?: string | null;
  files?: number;
  chunks?: number;
  chunksBySource?: Record<string, number>;
  dirty?: boolean;
  fts?: boolean;
  indexPath?: string;
  pendingEmbeddings?: number;
  settingsProblems?: string[];
  rootProblems?: string[];
  lastSync?: unknown;
}

/** memory-ls's memory_get answer. */
interface MemoryLsGot {
  path?: string;
  text?: string;
  totalLines?: number;
}

interface McpToolResult {
  content?: Array<{ type?: string; text?: string }>;
  isError?: boolean;
  structuredContent?: unknown;
}

/** A `memory-ls mcp` child and its JSON-RPC requests. */
export class McpChild {
  opts: { command: string; workspace: string; env?: NodeJS.ProcessEnv; logger?: PluginLogger | undefined };
  proc: ChildProcessWithoutNullStreams | null = null;
  pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  nextId = 1;
  ready: Promise<void> | null = null;
  /** why the child is gone, once it is */
  dead: string | null = null;
  deadCode: string | undefined = undefined;
  stderrTail = "";
  /** the memory-ls version its MCP handshake gave (serverInfo.version) */
  version: string | null = null;
  /** set once the handshake is done: the child answers */
  handshaken = false;
  /** when the handshake was done (ms since the epoch) */
  handshakeAt = 0;
  /** set once a memory_search was answered in full: memory-ls's first sync is over */
  synced = false;

  constructor(opts: McpChild["opts"]) {
    this.opts = opts;
  }

  /** Starts the child once; resolves after the MCP handshake. */
  start(): Promise<void> {
    if (this.ready) return this.ready;
    this.ready = new Promise<void>((resolve, reject) => {
      const { command, workspace, env } = this.opts;
      let proc: ChildProcessWithoutNullStreams;
      try {
        proc = spawn(command, ["mcp", "-w", workspace], { env: env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
      } catch (error) {
        this.dead = `cannot start ${command}: ${error instanceof Error ? error.message : String(error)}`;
        reject(new MemoryLsError(this.dead, { code: "MEMORY_LS_MISSING" }));
        return;
      }
      this.proc = proc;
      let buffer = "";
      proc.stdout.setEncoding("utf8");
      proc.stdout.on("data", (chunk: string) => {
        buffer += chunk;
        let newline;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, newline).trim();
          buffer = buffer.slice(newline + 1);
          if (line) this.onLine(line);
        }
      });
      proc.stderr.setEncoding("utf8");
      proc.stderr.on("data", (chunk: string) => {
        this.stderrTail = (this.stderrTail + chunk).slice(-2000);
      });
      proc.on("error", (error: NodeJS.ErrnoException) => {
        const missing = error.code === "ENOENT";
        this.fail(
          missing
            ? `memory-ls is not installed or not on PATH (${command}): install it (pip install memory-ls) or set plugins.entries.memory-ls.config.command to its full path`
            : `cannot start ${command}: ${error.message}`,
          missing ? "MEMORY_LS_MISSING" : "MEMORY_LS_START_FAILED",
        );
      });
      proc.on("exit", (code, signal) => {
        const last = this.stderrTail.trim().split("\n").at(-1) ?? "";
        this.fail(`memory-ls exited (${signal ?? `code ${code}`})${last ? `: ${last}` : ""}`, "MEMORY_LS_EXITED");
      });
      proc.stdin.on("error", () => {});
      this.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: "openclaw-memory-ls", version: "0.1.0" },
      }).then((init) => {
        const serverVersion = (init as { serverInfo?: { version?: unknown } } | null)?.serverInfo?.version;
        const version = typeof serverVersion === "string" ? serverVersion : null;
        this.version = version;
        if (version && compareVersions(version, MIN_MEMORY_LS_VERSION) < 0) {
          const message = `memory-ls ${version} is older than ${MIN_MEMORY_LS_VERSION}, the oldest this plugin works with (${command}): ${UPGRADE_HINT}, then restart the gateway`;
          this.fail(message, "MEMORY_LS_TOO_OLD");
          proc.stdin.end();
          proc.kill("SIGTERM");
          reject(new MemoryLsError(message, { code: "MEMORY_LS_TOO_OLD" }));
          return;
        }
        this.handshaken = true;
        this.handshakeAt = Date.now();
        this.notify("notifications/initialized", {});
        resolve();
      }, reject);
    });
    this.ready.catch(() => {});
    return this.ready;
  }

  fail(message: string, code: string): void {
    if (this.dead) return;
    this.dead = message;
    this.deadCode = code;
    const error = new MemoryLsError(message, { code });
    for (const { reject } of this.pending.values()) reject(error);
    this.pending.clear();
  }

  onLine(line: string): void {
    let message: { id?: unknown; error?: { message?: string }; result?: unknown };
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof message?.id !== "number" || !this.pending.has(message.id)) return;
    const waiter = this.pending.get(message.id);
    this.pending.delete(message.id);
    if (message.error) waiter?.reject(new MemoryLsError(`memory-ls: ${message.error.message ?? "error"}`, { code: "MEMORY_LS_ERROR" }));
    else waiter?.resolve(message.result);
  }

  notify(method: string, params: unknown): void {
    if (!this.proc || this.dead) return;
    this.proc.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method, params })}\n`);
  }

  request(method: string, params: unknown): Promise<unknown> {
    if (this.dead) return Promise.reject(new MemoryLsError(this.dead, { code: this.deadCode }));
    if (!this.proc) return Promise.reject(new MemoryLsError("memory-ls is not started"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.proc?.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    });
  }

  /** Calls an MCP tool; its structured answer, or a MemoryLsError with the tool's own words. */
  async callTool<T = Record<string, unknown>>(name: string, args: Record<string, unknown>): Promise<T> {
    await this.start();
    const result = (await this.request("tools/call", { name, arguments: args })) as McpToolResult | null;
    const text = result?.content?.find?.((c) => c?.type === "text")?.text ?? "";
    if (result?.isError) throw new MemoryLsError(text || `${name} failed`, { code: "MEMORY_LS_TOOL_ERROR" });
    if (result?.structuredContent && typeof result.structuredContent === "object") return result.structuredContent as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new MemoryLsError(`${name}: memory-ls answered something that is not JSON`);
    }
  }

  close(): Promise<void> {
    const proc = this.proc;
    this.fail("memory-ls was stopped", "MEMORY_LS_CLOSED");
    if (!proc || proc.exitCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        proc.kill("SIGKILL");
        resolve(undefined);
      }, 2000);
      timer.unref?.();
      proc.once("exit", () => {
        clearTimeout(timer);
        resolve(undefined);
      });
      proc.stdin.end();
      proc.kill("SIGTERM");
    });
  }
}

/** Runs `run` under a deadline; a MemoryLsError with timedOut set past it. */
export function withDeadline<T>(ms: number, run: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new MemoryLsError(`memory-ls did not answer within ${Math.round(ms / 1000)} s`, { code: "MEMORY_LS_TIMEOUT", timedOut: true })), ms);
    timer.unref?.();
    const onAbort = () => reject(new MemoryLsError("memory search aborted", { code: "ABORTED" }));
    signal?.addEventListener("abort", onAbort, { once: true });
    run().then(resolve, reject).finally(() => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    });
  });
}

/** One agent's memory settings, as the plugin uses them. */
export interface MemorySettings {
  enabled: boolean;
  extraPaths: string[];
  sessions: boolean;
  maxResults: number;
  minScore: number;
  provider: string | undefined;
  model: string | undefined;
}

/**
 * OpenClaw's memory settings for one agent (memory.search, with agents.entries.<id>.memory.search
 * or agents.list[].memory.search
 * over it), as memory-core reads them (dist/memory-search-*.mjs, resolveMemorySearchIndexConfig).
 */
export function resolveOpenClawMemorySettings(cfg: OpenClawConfig | undefined, agentId: string): MemorySettings {
  const defaults = cfg?.memory?.search ?? {};
  // 2026.9.6 keys its roster (agents.entries.<id>); earlier releases listed it (agents.list[]).
  const agent = cfg?.agents?.entries?.[agentId] ?? (cfg?.agents?.list ?? []).find((a) => a?.id === agentId);
  const overrides = agent?.memory?.search ?? {};
  const sources = overrides.sources ?? defaults.sources;
  const sessionMemory = overrides.experimental?.sessionMemory ?? defaults.experimental?.sessionMemory ?? false;
  return {
    enabled: overrides.enabled ?? defaults.enabled ?? true,
    extraPaths: [...(defaults.extraPaths ?? []), ...(overrides.extraPaths ?? [])]
      .map((p) => (typeof p === "string" ? p : p?.path))
      .filter((p): p is string => typeof p === "string" && p.trim() !== ""),
    sessions: Array.isArray(sources) ? sources.includes("sessions") && sessionMemory !== false : false,
    maxResults: overrides.query?.maxResults ?? defaults.query?.maxResults ?? 6,
    minScore: overrides.query?.minScore ?? defaults.query?.minScore ?? 0.35,
    provider: overrides.provider ?? defaults.provider,
    model: overrides.model ?? defaults.model,
  };
}

const tomlString = (s: string) => JSON.stringify(s);

/** What the plugin maps onto memory-ls's settings (see buildMemoryLsConfig for who wins). */
export interface MemoryLsConfigInput {
  /** OpenClaw's memory.search.extraPaths */
  extraPaths: string[];
  /** OpenClaw's memory.search.sources holds sessions (and sessionMemory is on) */
  sessions: boolean;
  /** OpenClaw's memory.search.provider / model */
  provider?: string | undefined;
  model?: string | undefined;
  /** the plugin's own provider / model (plugins.entries.memory-ls.config) */
  pluginProvider?: string | undefined;
  pluginModel?: string | undefined;
  /** OpenClaw's transcript folder of the agent */
  sessionsDir: string;
  /** the user's own memory-ls config.toml ("" when none) */
  userConfigText: string;
  /** where that file is, for the messages */
  userConfigPath?: string;
}

/** Top-level keys of a TOML text (before its first table header), and where they are. */
function topLevelKeys(lines: string[]): Map<string, number> {
  const keys = new Map<string, number>();
  for (const [i, line] of lines.entries()) {
    if (/^\s*\[/.test(line)) break;
    const key = /^\s*([A-Za-z0-9_]+)\s*=/.exec(line)?.[1];
    if (key && !keys.has(key)) keys.set(key, i);
  }
  return keys;
}

/**
 * Whether a TOML text sets sessions.roots other than as [[sessions.roots]] tables (an inline
 * list under [sessions], a dotted sessions.roots or an inline sessions table): a
 * [[sessions.roots]] table after it would make the whole file unreadable to memory-ls.
 */
function inlineSessionRoots(lines: string[]): boolean {
  let table = "";
  for (const line of lines) {
    const header = /^\s*\[\s*([^\]\s]+)\s*\]\s*(#.*)?$/.exec(line);
    if (header?.[1] !== undefined) {
      table = header[1];
      continue;
    }
    if (/^\s*\[\[/.test(line)) {
      table = "[[array]]";
      continue;
    }
    if (table === "" && /^\s*(sessions\s*\.\s*roots|sessions)\s*=/.test(line)) return true;
    if (table === "sessions" && /^\s*roots\s*=/.test(line)) return true;
  }
  return false;
}

/**
 * The memory-ls config.toml the child reads (through XDG_CONFIG_HOME) for the settings that
 * map: extraPaths, sessions (OpenClaw's transcript folder as a sessions root), provider/model,
 * merged with the user's own ~/.config/memory-ls/config.toml, which it stands in for. Who wins,
 * key by key:
 * - a key only one side sets applies;
 * - OpenClaw's memory.search (extraPaths, sources, provider, model) yields to the user's file
 *   where it sets the same key (ours is then left out);
 * - the plugin's own provider / model win over the user's file (its line is dropped): they
 *   are set for memory-ls under OpenClaw only;
 * - sessions.roots add up: OpenClaw's transcripts come as one more [[sessions.roots]] table,
 *   unless the user's file writes its roots inline (then they cannot be added: a problem says so);
 * - the workspace's own .memory-ls.toml wins over all of it (memory-ls's layering).
 * Returns the text (null when nothing maps and no key is dropped) and the problems met.
 */
export function buildMemoryLsConfig(p: MemoryLsConfigInput): { text: string | null; problems: string[] } {
  const problems: string[] = [];
  const userLines = p.userConfigText.split(/\r?\n/);
  const userKeys = topLevelKeys(userLines);
  const drop = new Set<number>();
  const lines = ["# Written by the OpenClaw memory-ls plugin from OpenClaw's memory.search settings."];
  if (p.extraPaths.length && !userKeys.has("extraPaths")) lines.push(`extraPaths = [${p.extraPaths.map(tomlString).join(", ")}]`);
  if (p.sessions && !userKeys.has("sources")) lines.push(`sources = ["memory", "sessions"]`);
  const choose = (key: "provider" | "model", plugin: string | undefined, openclaw: string | undefined, valid: (v: string) => boolean) => {
    const own = typeof plugin === "string" && plugin.trim() && valid(plugin.trim()) ? plugin.trim() : "";
    const mapped = typeof openclaw === "string" && openclaw.trim() && valid(openclaw.trim()) ? openclaw.trim() : "";
    const at = userKeys.get(key);
    if (own) {
      if (at !== undefined) drop.add(at);
      lines.push(`${key} = ${tomlString(own)}`);
    } else if (mapped && at === undefined) {
      lines.push(`${key} = ${tomlString(mapped)}`);
    }
  };
  choose("provider", p.pluginProvider, p.provider, (v) => PROVIDERS.has(v));
  choose("model", p.pluginModel, p.model, () => true);
  const tail: string[] = [];
  if (p.sessions) {
    if (inlineSessionRoots(userLines)) {
      problems.push(
        `OpenClaw's session transcripts (${p.sessionsDir}) are not searched: ${p.userConfigPath ?? "your memory-ls config.toml"} sets sessions.roots inline; write its roots as [[sessions.roots]] tables and the plugin adds OpenClaw's beside them`,
      );
    } else {
      tail.push("", "[[sessions.roots]]", `path = ${tomlString(p.sessionsDir)}`, `globs = ["*.jsonl"]`, `name = "openclaw"`);
    }
  }
  if (lines.length === 1 && tail.length === 0 && drop.size === 0) return { text: null, problems };
  const user = userLines.filter((_, i) => !drop.has(i)).join("\n").trimEnd();
  return { text: [...lines, "", user, ...tail, ""].join("\n"), problems };
}

/** A memory-ls hit as OpenClaw's MemorySearchResult (packages/memory-host-sdk/src/host/types.ts). */
export function toOpenClawResult(hit: MemoryLsHit): MemorySearchResult {
  const out: MemorySearchResult = {
    path: String(hit.path),
    startLine: Number(hit.startLine),
    endLine: Number(hit.endLine),
    score: Number(hit.score),
    snippet: String(hit.snippet ?? ""),
    source: hit.source === "sessions" ? "sessions" : "memory",
    citation: hit.citation,
  } as MemorySearchResult;
  if (typeof hit.vectorScore === "number") out.vectorScore = hit.vectorScore;
  if (typeof hit.textScore === "number") out.textScore = hit.textScore;
  return out;
}

/**
 * memory_get's answer as OpenClaw's MemoryReadResult, cut as memory-core cuts it
 * (dist/read-file-*.mjs buildMemoryReadResultFromSlice): whole lines up to 12,000 characters,
 * then `truncated` and `nextFrom` with the continuation notice.
 */
export function toOpenClawRead(got: MemoryLsGot, relPath: string, from: number, moreLines: boolean): MemoryReadResult {
  const lines = String(got.text ?? "").split("\n");
  if (lines.at(-1) === "") lines.pop();
  let included = 0;
  let chars = 0;
  for (const line of lines) {
    const next = chars + line.length + (included > 0 ? 1 : 0);
    if (included > 0 && next > DEFAULT_READ_MAX_CHARS) break;
    included += 1;
    chars = next;
  }
  const hard = chars > DEFAULT_READ_MAX_CHARS;
  let text = lines.slice(0, included).join("\n").slice(0, DEFAULT_READ_MAX_CHARS);
  const cut = hard || included < lines.length;
  const truncated = cut || moreLines;
  const nextFrom = !hard && (moreLines || included < lines.length) ? from + included : undefined;
  if (truncated && text) {
    text += nextFrom !== undefined ? `\n\n[More content available. Use from=${nextFrom} to continue.]` : "\n\n[More content available. Requested excerpt exceeded the default maxChars budget.]";
  }
  return {
    status: "ok",
    text,
    path: String(got.path ?? relPath),
    from,
    lines: included,
    ...(truncated ? { truncated: true } : {}),
    ...(nextFrom !== undefined ? { nextFrom } : {}),
  };
}

export interface ManagerOptions {
  command: string;
  workspace: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  settings: MemorySettings;
  logger?: PluginLogger | undefined;
  /** what childEnv could not map */
  configProblems?: string[] | undefined;
}

/** OpenClaw's MemorySearchManager over one memory-ls child. */
export class MemoryLsManager implements MemorySearchManager {
  opts: ManagerOptions;
  child: McpChild;
  lastStatus: MemoryLsStatus | null = null;
  lastError: string | null = null;
  /** set when memory-core's tools shadow ours */
  shadowedBy: string | undefined = undefined;
  /** the last memory_search answer (mode, provider, fallbackReason) */
  lastSearch: MemoryLsSearch | null = null;
  /** extraPaths memory-ls skips: outside the workspace (it only logs them) */
  pathProblems: string[];
  /** OpenClaw settings that could not be passed on to memory-ls (buildMemoryLsConfig) */
  configProblems: string[];

  constructor(opts: ManagerOptions) {
    this.opts = opts;
    this.child = new McpChild({ command: opts.command, workspace: opts.workspace, env: opts.env, logger: opts.logger });
    this.pathProblems = outsideExtraPaths(opts.workspace, opts.settings.extraPaths);
    this.configProblems = opts.configProblems ?? [];
  }

  /** The first sync's message while it runs (memory-ls's own words, server/requests.py INDEXING). */
  indexingMessage(): string {
    return `memory-ls's first sync of ${this.opts.workspace} is still running: search again in a moment`;
  }

  /** Restarts a child that died (memory-ls upgraded, killed); keeps one that runs. */
  ensureChild(): McpChild {
    if (this.child.dead && this.child.ready) {
      this.child = new McpChild({ command: this.opts.command, workspace: this.opts.workspace, env: this.opts.env, logger: this.opts.logger });
    }
    return this.child;
  }

  async guarded<T>(run: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      const out = await withDeadline(this.opts.timeoutMs, run, signal);
      this.lastError = null;
      return out;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.lastError = message;
      // A child that answered its handshake but not yet a search is still in its first sync
      // (memory-ls holds a search until then): say so and let it finish.
      const child = this.child;
      if (error instanceof MemoryLsError && error.timedOut && child.handshaken && !child.synced && !child.dead && Date.now() - (child.handshakeAt ?? 0) < FIRST_SYNC_PATIENCE_MS) {
        const indexing = new MemoryLsError(this.indexingMessage(), { code: "MEMORY_LS_INDEXING" });
        this.lastError = indexing.message;
        throw indexing;
      }
      // A child that did not answer in time is stopped: the next call starts a fresh one
      // rather than queueing behind a stuck request.
      if (error instanceof MemoryLsError && error.timedOut) void this.child.close();
      if (error instanceof MemoryLsError) throw error;
      throw new MemoryLsError(message);
    }
  }

  async search(query: string, opts: { maxResults?: number | undefined; minScore?: number | undefined; sources?: string[] | undefined; signal?: AbortSignal | undefined } = {}): Promise<MemorySearchResult[]> {
    const args: Record<string, unknown> = { query };
    const max = opts.maxResults ?? this.opts.settings.maxResults;
    if (typeof max === "number" && max > 0) args.maxResults = Math.min(MAX_RESULTS_CAP, Math.floor(max));
    const minScore = opts.minScore ?? this.opts.settings.minScore;
    if (typeof minScore === "number" && Number.isFinite(minScore)) args.minScore = Math.min(1, Math.max(0, minScore));
    if (Array.isArray(opts.sources) && opts.sources.length) args.sources = opts.sources;
    const child = this.ensureChild();
    const answer = await this.guarded(() => child.callTool<MemoryLsSearch>("memory_search", args), opts.signal);
    // memory-ls answers a search during its first sync from what it indexed so far, saying so
    // (indexing); an older one held the search until the sync was done.
    if (answer.indexing !== true) child.synced = true;
    this.lastSearch = answer;
    return (answer.results ?? []).map(toOpenClawResult);
  }

  async readFile(params: { relPath: string; from?: number | undefined; lines?: number | undefined }): Promise<MemoryReadResult> {
    const from = params.from && params.from > 0 ? Math.floor(params.from) : 1;
    const want = params.lines && params.lines > 0 ? Math.floor(params.lines) : DEFAULT_READ_LINES;
    const ask = Math.min(MAX_LINES_CAP, want + 1);
    try {
      const got = await this.guarded(() => this.ensureChild().callTool<MemoryLsGot>("memory_get", { path: params.relPath, from, lines: ask }));
      const text = String(got.text ?? "");
      const lines = text.split("\n");
      if (lines.at(-1) === "") lines.pop();
      const moreLines = lines.length > want || (typeof got.totalLines === "number" && from - 1 + Math.min(lines.length, want) < got.totalLines);
      return toOpenClawRead({ ...got, text: lines.slice(0, want).join("\n") }, params.relPath, from, moreLines);
    } catch (error) {
      if (error instanceof MemoryLsError && error.code === "MEMORY_LS_TOOL_ERROR" && /no such file|does not exist/.test(error.message)) {
        return { status: "not_found", text: "", path: params.relPath };
      }
      throw error;
    }
  }

  /** Refreshes the status OpenClaw reads synchronously; memory-ls syncs before each search. */
  async sync(): Promise<void> {
    try {
      this.lastStatus = await this.guarded(() => this.ensureChild().callTool<MemoryLsStatus>("memory_status", {}));
    } catch {
      /* status() reports lastError */
    }
  }

  /** OpenClaw's MemoryProviderStatus (status() is synchronous: the last memory_status seen). */
  status(): MemoryProviderStatus {
    const s = this.lastStatus;
    const indexing = Boolean(s) && s?.lastSync == null && !this.child.synced && !this.child.dead;
    const custom = {
      engine: "memory-ls",
      command: this.opts.command,
      ...(this.child.version ? { version: this.child.version } : {}),
      minVersion: MIN_MEMORY_LS_VERSION,
      ...(indexing ? { indexing: this.indexingMessage() } : {}),
      ...(this.pathProblems.length ? { pathProblems: this.pathProblems } : {}),
      ...(this.configProblems.length ? { configProblems: this.configProblems } : {}),
      ...(s ? { mode: s.mode, providerReason: s.providerReason ?? undefined, indexPath: s.indexPath, pendingEmbeddings: s.pendingEmbeddings, settingsProblems: s.settingsProblems ?? [], rootProblems: s.rootProblems ?? [], lastSync: s.lastSync ?? null } : {}),
      ...(this.lastError ? { error: this.lastError } : {}),
      ...(this.shadowedBy ? { toolsShadowedBy: this.shadowedBy } : {}),
    };
    const bySource = s?.chunksBySource ?? {};
    return {
      backend: "builtin",
      provider: s?.provider?.id ?? "none",
      ...(s?.provider?.model ? { model: s.provider.model } : {}),
      requestedProvider: this.opts.settings.provider ?? "auto",
      ...(s ? { files: s.files, chunks: s.chunks, dirty: Boolean(s.dirty) } : {}),
      ...(this.lastError ? { lastSyncError: this.lastError } : {}),
      workspaceDir: this.opts.workspace,
      ...(s?.indexPath ? { dbPath: s.indexPath } : {}),
      extraPaths: this.opts.settings.extraPaths,
      sources: this.opts.settings.sessions ? ["memory", "sessions"] : ["memory"],
      sourceCounts: Object.entries(bySource).map(([source, chunks]) => ({ source, files: source === "memory" ? (s?.files ?? 0) : 0, chunks })),
      fts: { enabled: true, available: s ? Boolean(s.fts) : false },
      ...(s?.mode === "keyword" ? { fallback: { from: this.opts.settings.provider ?? "auto", reason: s.providerReason ?? s.fallbackReason ?? "keyword-only" } } : {}),
      vector: { enabled: true, available: s?.mode === "hybrid", ...(s?.provider?.dims ? { dims: s.provider.dims } : {}) },
      custom: { memoryLs: custom },
    } as MemoryProviderStatus;
  }

  async probeEmbeddingAvailability(): Promise<{ ok: boolean; error?: string }> {
    await this.sync();
    const s = this.lastStatus;
    if (!s) return { ok: false, error: this.lastError ?? "memory-ls is not answering" };
    return s.mode === "hybrid" ? { ok: true } : { ok: false, error: s.providerReason ?? "keyword-only" };
  }

  async probeVectorAvailability(): Promise<boolean> {
    await this.sync();
    return this.lastStatus?.mode === "hybrid";
  }

  close(): Promise<void> {
    return this.child.close();
  }
}

/**
 * The extraPaths memory-ls skips because they resolve outside the workspace (memory_ls/workspace.py
 * logs "extraPaths: X is outside the workspace; skipped" and indexes nothing of them), in its words.
 */
export function outsideExtraPaths(workspace: string, extraPaths: string[]): string[] {
  const real = (p: string) => {
    try {
      return fs.realpathSync(p);
    } catch {
      return path.resolve(p);
    }
  };
  const root = real(workspace);
  const home = process.env.HOME ?? "";
  return extraPaths
    .filter((extra) => {
      const expanded = extra.startsWith("~") && home ? path.join(home, extra.slice(1)) : extra;
      const rel = path.relative(root, real(path.resolve(workspace, expanded)));
      return rel === ".." || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel);
    })
    .map((extra) => `extraPaths: ${extra} is outside the workspace ${workspace}; memory-ls skips it (it reads only files under the workspace): move those notes under the workspace or drop the entry`);
}

/**
 * The environment of a child: the gateway's, with XDG_CONFIG_HOME pointing at a generated
 * config.toml when OpenClaw's settings map onto memory-ls's; and the problems of that mapping.
 */
export function childEnv(p: { stateDir: string; agentId: string; settings: MemorySettings; provider?: string | undefined; model?: string | undefined }): { env: NodeJS.ProcessEnv; problems: string[] } {
  const env = { ...process.env };
  const home = process.env.HOME ?? "";
  const userConfigPath = path.join(process.env.XDG_CONFIG_HOME || path.join(home, ".config"), "memory-ls", "config.toml");
  let userConfigText = "";
  try {
    userConfigText = fs.readFileSync(userConfigPath, "utf8");
  } catch {
    /* none */
  }
  const { text, problems } = buildMemoryLsConfig({
    extraPaths: p.settings.extraPaths,
    sessions: p.settings.sessions,
    provider: p.settings.provider,
    model: p.settings.model,
    pluginProvider: p.provider,
    pluginModel: p.model,
    sessionsDir: path.join(p.stateDir, "agents", p.agentId, "sessions"),
    userConfigText,
    userConfigPath,
  });
  if (text === null) return { env, problems };
  const dir = path.join(p.stateDir, "memory-ls", p.agentId.replace(/[^A-Za-z0-9_.-]/g, "_"));
  fs.mkdirSync(path.join(dir, "memory-ls"), { recursive: true });
  fs.writeFileSync(path.join(dir, "memory-ls", "config.toml"), text);
  env.XDG_CONFIG_HOME = dir;
  return { env, problems };
}
