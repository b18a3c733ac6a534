// OpenClaw memory plugin: memory-ls answers the agent's memory_search and memory_get.
// Compiled to plain ESM (dist/) that imports nothing from openclaw: OpenClaw loads it natively.
// The contract it implements, with the openclaw package files it comes from: NOTES.md.
import {
  DEFAULT_TIMEOUT_MS,
  MemoryLsError,
  MemoryLsManager,
  childEnv,
  resolveOpenClawMemorySettings,
} from "./memory-ls.js";
import type {
  AgentTool,
  MemoryPluginRuntime,
  MemorySearchResult,
  OpenClawConfig,
  OpenClawPluginApi,
  ToolContext,
} from "./openclaw.js";

export type * from "./openclaw.js";

const PLUGIN_ID = "memory-ls";

/** memory-core's tool parameter schemas (dist/memory-tool-contract-*.mjs), without the wiki corpus. */
const MemorySearchSchema = {
  type: "object",
  properties: {
    query: { type: "string" },
    maxResults: { type: "integer", minimum: 1 },
    minScore: { type: "number" },
    corpus: { type: "string", enum: ["memory", "all", "sessions"] },
  },
  required: ["query"],
  additionalProperties: false,
};
const MemoryGetSchema = {
  type: "object",
  properties: {
    path: { type: "string" },
    from: { type: "integer", minimum: 1 },
    lines: { type: "integer", minimum: 1 },
  },
  required: ["path"],
  additionalProperties: false,
};

/** OpenClaw's jsonResult (dist/tool-results-*.mjs). */
function jsonResult(payload: unknown) {
  return { content: [{ type: "text" as const, text: JSON.stringify(payload, null, 2) }], details: payload };
}

/** memory-core's degraded answer (buildMemorySearchUnavailableResult, tools.shared.ts). */
export interface UnavailableResult {
  results: [];
  disabled: true;
  unavailable: true;
  indexing?: true;
  timedOut?: true;
  error: string;
  warning: string;
  action: string;
  debug: Record<string, unknown>;
}

/**
 * memory-core's degraded answer (dist/tools-*.mjs buildMemorySearchUnavailableResult): no
 * results, and a reason, a warning and an action the model can pass on.
 */
export function unavailableResult(error: unknown, agentId?: string): UnavailableResult {
  const reason = error instanceof Error ? error.message : String(error ?? "memory search unavailable");
  const timedOut = error instanceof MemoryLsError && error.timedOut;
  const code = error instanceof MemoryLsError ? error.code : undefined;
  const missing = code === "MEMORY_LS_MISSING";
  if (code === "MEMORY_LS_INDEXING" || code === "MEMORY_LS_TOO_OLD") {
    const indexing = code === "MEMORY_LS_INDEXING";
    const warning = indexing
      ? "Memory search is not ready yet: memory-ls is indexing this workspace for the first time."
      : "Memory search is unavailable because the installed memory-ls is too old for this plugin.";
    const action = indexing
      ? "Retry memory_search in a moment; the first sync keeps running."
      : "Tell the user to upgrade memory-ls (pip install -U memory-ls) and restart the OpenClaw gateway.";
    return { results: [], disabled: true, unavailable: true, ...(indexing ? { indexing: true as const } : {}), error: reason, warning, action, debug: { warning, action, error: reason, code, backend: "memory-ls" } };
  }
  const warning = timedOut
    ? "Memory search did not finish within its time limit."
    : missing
      ? "Memory search is unavailable because memory-ls is not installed where OpenClaw can start it."
      : "Memory search is unavailable because memory-ls is not answering.";
  const action = timedOut
    ? `Retry memory_search after a short wait. If it keeps timing out, run: openclaw status${agentId ? ` (agent ${agentId})` : ""} and memory-ls status -w <workspace>.`
    : missing
      ? "Install memory-ls (pip install memory-ls), or set plugins.entries.memory-ls.config.command to its full path, then retry memory_search. To go back to the built-in memory, set plugins.slots.memory to memory-core."
      : "Check the gateway log for memory-ls, then retry memory_search.";
  return {
    results: [],
    disabled: true,
    unavailable: true,
    ...(timedOut ? { timedOut: true as const } : {}),
    error: reason,
    warning,
    action,
    debug: { warning, action, error: reason, backend: "memory-ls" },
  };
}

type CitationsMode = "on" | "off" | "auto";

function citationsMode(cfg: OpenClawConfig | undefined): CitationsMode {
  const mode = cfg?.memory?.citations;
  return mode === "on" || mode === "off" || mode === "auto" ? mode : "auto";
}

/** memory-core's rule (dist/tools-*.mjs shouldIncludeCitations): auto cites in direct chats. */
function includeCitations(mode: CitationsMode, sessionKey: string | undefined): boolean {
  if (mode === "on") return true;
  if (mode === "off") return false;
  const rest = typeof sessionKey === "string" ? sessionKey.split(":").slice(2).join(":").toLowerCase() : "";
  const tokens = new Set(rest.split(":").filter(Boolean));
  return !(tokens.has("channel") || tokens.has("group"));
}

function formatCitation(e: { startLine: number; endLine: number; path: string }): string {
  return e.startLine === e.endLine ? `${e.path}#L${e.startLine}` : `${e.path}#L${e.startLine}-L${e.endLine}`;
}

/** The plugin's own settings (plugins.entries.memory-ls.config, openclaw.plugin.json). */
interface PluginConfig {
  command?: unknown;
  timeoutMs?: unknown;
  provider?: string;
  model?: string;
}

interface SearchParams {
  query?: unknown;
  maxResults?: unknown;
  minScore?: unknown;
  corpus?: unknown;
}

interface GetParams {
  path?: unknown;
  from?: unknown;
  lines?: unknown;
}

function register(api: OpenClawPluginApi): void {
  const pluginConfig: PluginConfig = api.pluginConfig ?? {};
  const command = typeof pluginConfig.command === "string" && pluginConfig.command.trim() ? pluginConfig.command.trim() : "memory-ls";
  const timeoutMs = typeof pluginConfig.timeoutMs === "number" && pluginConfig.timeoutMs > 0 ? pluginConfig.timeoutMs : DEFAULT_TIMEOUT_MS;
  /** one memory-ls per agent workspace */
  const managers = new Map<string, { key: string; manager: MemoryLsManager }>();

  const currentConfig = () => api.runtime?.config?.current?.() ?? api.config;

  // OpenClaw loads memory-core beside the slot owner as its "dreaming sidecar" while dreaming is on
  // (the default; dist/loader-shared-*.mjs resolveAuthorizedDreamingSidecar), and the sidecar
  // registers memory-core's own memory_search / memory_get first: they win the name conflict and
  // search the built-in index. Say so once, with the fix.
  const coreEntry = api.config?.plugins?.entries?.["memory-core"];
  const shadowed = coreEntry?.enabled !== false && coreEntry?.config?.dreaming?.enabled !== false;
  if (shadowed) {
    api.logger?.warn?.(
      "memory-ls: memory-core stays loaded for dreaming and its memory_search / memory_get shadow memory-ls's: set plugins.entries.memory-core.enabled to false (openclaw config set plugins.entries.memory-core.enabled false)",
    );
  }

  function workspaceOf(cfg: OpenClawConfig, agentId: string): string {
    return api.runtime.agent.resolveAgentWorkspaceDir(cfg, agentId);
  }

  function managerFor(cfg: OpenClawConfig, agentId: string): MemoryLsManager {
    const workspace = workspaceOf(cfg, agentId);
    const settings = resolveOpenClawMemorySettings(cfg, agentId);
    const stateDir = api.runtime.state.resolveStateDir();
    const key = JSON.stringify([workspace, settings, command]);
    const existing = managers.get(agentId);
    if (existing && existing.key === key) return existing.manager;
    if (existing) void existing.manager.close();
    const { env, problems } = childEnv({ stateDir, agentId, settings, provider: pluginConfig.provider, model: pluginConfig.model });
    for (const problem of problems) api.logger?.warn?.(`memory-ls: ${problem}`);
    const manager = new MemoryLsManager({ command, workspace, env, timeoutMs, settings, logger: api.logger, configProblems: problems });
    managers.set(agentId, { key, manager });
    return manager;
  }

  const runtime = {
    async getMemorySearchManager(params) {
      const started = Date.now();
      try {
        const manager = managerFor(params.cfg, params.agentId);
        manager.shadowedBy = shadowed ? "memory-core (dreaming sidecar): set plugins.entries.memory-core.enabled to false" : undefined;
        if (params.purpose === "status") await manager.sync();
        return { manager, debug: { backend: "builtin", purpose: params.purpose ?? "default", managerMs: Date.now() - started } };
      } catch (error) {
        return { manager: null, error: error instanceof Error ? error.message : String(error) };
      }
    },
    resolveMemoryBackendConfig() {
      return { backend: "builtin" as const };
    },
    /** Session hits: only for the agent that owns them, never in a sandbox (memory-core's rule of thumb). */
    async authorizeSearchHits(params: { sandboxed: boolean; hits: MemorySearchResult[] }) {
      return params.sandboxed ? params.hits.filter((h) => h.source !== "sessions") : params.hits;
    },
    async closeMemorySearchManager(params: { agentId: string }) {
      const entry = managers.get(params.agentId);
      managers.delete(params.agentId);
      await entry?.manager.close();
    },
    async closeAllMemorySearchManagers() {
      const all = [...managers.values()];
      managers.clear();
      await Promise.allSettled(all.map((e) => e.manager.close()));
    },
  } satisfies MemoryPluginRuntime;

  api.registerMemoryCapability({
    deterministicRecallToolName: "memory_search",
    promptBuilder: (params) => {
      if (!params.availableTools.has("memory_search") && !params.availableTools.has("memory_get")) return [];
      return [
        "## Memory Recall",
        "Before answering anything about prior work, decisions, dates, people, preferences, or todos: run memory_search; for memory-file hits, use memory_get to pull only the needed lines. If low confidence after search, say you checked.",
        "Report partial, unavailable, or stale recall to the user, including returned warning and action guidance.",
        params.citationsMode === "off"
          ? "Citations are disabled: do not mention file paths or line numbers in replies unless the user explicitly asks."
          : "Citations: include Source: <path#line> when it helps the user verify memory snippets.",
        "",
      ];
    },
    runtime,
  });

  const toolConfig = (ctx: ToolContext | undefined): OpenClawConfig =>
    (ctx?.getRuntimeConfig?.() ?? ctx?.runtimeConfig ?? ctx?.config ?? currentConfig()) as OpenClawConfig;

  /** The agent's memory settings as a tool of its run sees them; null: memory is off. */
  const toolSettings = (ctx: ToolContext | undefined) => {
    const settings = resolveOpenClawMemorySettings(toolConfig(ctx), ctx?.agentId ?? "main");
    return settings.enabled ? settings : null;
  };
  /** What the tools' descriptions say they read, as memory-core's say it. */
  const memoryFiles = (settings: { extraPaths: unknown[] }): string =>
    `MEMORY.md, Markdown files recursively under memory/${settings.extraPaths.length ? ", configured extra paths" : ""}`;

  api.registerTool(
    (ctx): AgentTool | null => {
      const settings0 = toolSettings(ctx);
      if (!settings0) return null;
      const files = memoryFiles(settings0);
      const search = settings0.sessions ? `${files}, indexed session transcripts` : files;
      return {
        label: "Memory Search",
        name: "memory_search",
        description: `Mandatory recall step: search ${search} (memory-ls: keywords and meaning, any language) before answering questions about prior work, decisions, dates, people, preferences, or todos. Each hit carries a citation path#Lstart-Lend; read the cited lines with memory_get before relying on them. \`corpus=memory\` restricts hits to memory files, \`corpus=sessions\` to session transcripts. If the response has disabled=true or unavailable=true, tell the user and include the warning/action guidance.`,
        parameters: MemorySearchSchema,
        execute: async (_id, rawParams, signal) => {
          const params = (rawParams ?? {}) as SearchParams;
          const cfg = toolConfig(ctx);
          const agentId = ctx?.agentId ?? "main";
          try {
            const query = typeof params.query === "string" ? params.query.trim() : "";
            if (!query) return jsonResult({ results: [], error: "query is required" });
            const corpus = params.corpus;
            const sources = corpus === "memory" ? ["memory"] : corpus === "sessions" ? ["sessions"] : undefined;
            const settings = resolveOpenClawMemorySettings(cfg, agentId);
            if (corpus === "sessions" && !settings.sessions) {
              return jsonResult({ ...unavailableResult(new MemoryLsError("Session transcript search is not enabled.")), warning: "Session transcript search is unavailable for this agent.", action: 'Add "sessions" to memory.search.sources and enable memory.search.experimental.sessionMemory.' });
            }
            const manager = managerFor(cfg, agentId);
            const started = Date.now();
            let hits = await manager.search(query, {
              maxResults: typeof params.maxResults === "number" ? params.maxResults : undefined,
              minScore: typeof params.minScore === "number" ? params.minScore : undefined,
              sources,
              signal,
            });
            hits = await runtime.authorizeSearchHits({ sandboxed: ctx?.sandboxed === true, hits });
            const mode = citationsMode(cfg);
            const cite = includeCitations(mode, ctx?.sessionKey);
            const results = hits.map((h) => {
              const citation = cite ? formatCitation(h) : undefined;
              return { ...h, corpus: h.source, citation, snippet: cite ? `${String(h.snippet).trimEnd()}\n\nSource: ${citation}` : h.snippet };
            });
            const answer = manager.lastSearch ?? {};
            // memory-ls's first sync still running: the hits so far, marked as memory-core marks
            // a partial recall (partial, warning, action; tools.shared.ts).
            const indexing = answer.indexing === true
              ? {
                  partial: true,
                  indexing: true,
                  warning: `Memory index is still being built: memory-ls's first sync of ${manager.opts.workspace} is still running, so the results come from the files indexed so far and may be incomplete.`,
                  action: "Retry memory_search in a moment for complete results.",
                }
              : {};
            return jsonResult({
              results,
              provider: answer.provider?.id ?? "none",
              model: answer.provider?.model,
              ...(answer.fallbackReason ? { fallback: { from: answer.provider?.id ?? "auto", reason: answer.fallbackReason } } : {}),
              citations: mode,
              mode: answer.mode === "keyword" ? "keyword-only" : answer.mode,
              ...(answer.belowMinScore ? { belowMinScore: answer.belowMinScore } : {}),
              ...indexing,
              ...(manager.pathProblems.length || manager.configProblems.length ? { warnings: [...manager.pathProblems, ...manager.configProblems] } : {}),
              debug: { backend: "memory-ls", searchMs: Date.now() - started, hits: results.length, tookMs: answer.tookMs },
            });
          } catch (error) {
            if (signal?.aborted) throw error;
            api.logger?.warn?.(`memory-ls: memory_search failed: ${error instanceof Error ? error.message : String(error)}`);
            return jsonResult(unavailableResult(error, agentId));
          }
        },
      };
    },
    { names: ["memory_search"] },
  );

  api.registerTool(
    (ctx): AgentTool | null => {
      const settings0 = toolSettings(ctx);
      if (!settings0) return null;
      const files = memoryFiles(settings0);
      return {
        label: "Memory Get",
        name: "memory_get",
        description: `Safe exact excerpt read from ${files}: pass a hit's path (or its citation path#Lstart-Lend) and from/lines. Defaults to a bounded excerpt when lines are omitted and includes truncation/continuation info when more content exists. status=ok means the requested excerpt was read; status=not_found means the file does not exist; status=error means the read failed, not that memory is disabled.`,
        parameters: MemoryGetSchema,
        execute: async (_id, rawParams) => {
          const params = (rawParams ?? {}) as GetParams;
          const cfg = toolConfig(ctx);
          const agentId = ctx?.agentId ?? "main";
          let relPath = typeof params.path === "string" ? params.path.trim() : "";
          let from = typeof params.from === "number" ? params.from : undefined;
          let lines = typeof params.lines === "number" ? params.lines : undefined;
          const cited = /^(.*)#L(\d+)(?:-L(\d+))?$/.exec(relPath);
          if (cited) {
            relPath = cited[1] ?? "";
            if (from === undefined) {
              from = Number(cited[2]);
              if (lines === undefined) lines = Number(cited[3] ?? cited[2]) - from + 1;
            }
          }
          try {
            if (!relPath) throw new MemoryLsError("path is required");
            return jsonResult(await managerFor(cfg, agentId).readFile({ relPath, from, lines }));
          } catch (error) {
            return jsonResult({
              path: relPath,
              text: "",
              status: "error",
              code: error instanceof MemoryLsError ? error.code : "MEMORY_READ_FAILED",
              error: error instanceof Error ? error.message : String(error),
            });
          }
        },
      };
    },
    { names: ["memory_get"] },
  );

  api.on?.("gateway_stop", async () => {
    await runtime.closeAllMemorySearchManagers();
  });
}

/** The plugin entry OpenClaw loads (resolvePluginModuleExport: {id, name, description, kind, register}). */
const plugin = {
  id: PLUGIN_ID,
  name: "memory-ls",
  description: "memory-ls (hybrid keyword + vector search, any language, with citations) as OpenClaw's memory engine",
  kind: "memory" as const,
  register,
};
export default plugin;
