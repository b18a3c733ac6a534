// The part of OpenClaw's plugin SDK this plugin uses, typed locally: openclaw@2026.9.6 ships its
// own .d.ts, but installing it costs 650 MB and half a minute, and the plugin imports nothing
// from it at run time. Each shape names the openclaw source region it mirrors (NOTES.md).

/** Any OpenClaw config object (openclaw.json as loaded); only the keys below are read. */
export interface OpenClawConfig {
  memory?: {
    citations?: string;
    search?: MemorySearchConfig;
  };
  agents?: {
    entries?: Record<string, AgentConfig | undefined>;
    list?: AgentConfig[];
  };
  plugins?: {
    entries?: Record<string, { enabled?: boolean; config?: { dreaming?: { enabled?: boolean } } } | undefined>;
  };
  [key: string]: unknown;
}

export interface AgentConfig {
  id?: string;
  memory?: { search?: MemorySearchConfig };
}

/** memory.search (src/agents/memory-search.ts, resolveMemorySearchIndexConfig). */
export interface MemorySearchConfig {
  enabled?: boolean;
  sources?: string[];
  experimental?: { sessionMemory?: boolean };
  extraPaths?: Array<string | { path?: string; pattern?: string }>;
  query?: { maxResults?: number; minScore?: number };
  provider?: string;
  model?: string;
}

export interface PluginLogger {
  info?: (message: string) => void;
  warn?: (message: string) => void;
}

/** MemorySearchResult (packages/memory-host-sdk/src/host/types.ts). */
export interface MemorySearchResult {
  path: string;
  startLine: number;
  endLine: number;
  score: number;
  vectorScore?: number;
  textScore?: number;
  snippet: string;
  source: "memory" | "sessions";
  citation?: string;
}

/** MemoryReadResult (same file); a result without status is taken as ok. */
export type MemoryReadResult =
  | { status: "ok"; text: string; path: string; truncated?: boolean; from?: number; lines?: number; nextFrom?: number }
  | { status: "not_found"; text: ""; path: string };

/** MemoryProviderStatus (same file), the fields this plugin fills. */
export interface MemoryProviderStatus {
  backend: "builtin";
  provider: string;
  model?: string;
  requestedProvider?: string;
  files?: number;
  chunks?: number;
  dirty?: boolean;
  lastSyncError?: string;
  workspaceDir?: string;
  dbPath?: string;
  extraPaths?: string[];
  sources?: string[];
  sourceCounts?: Array<{ source: string; files: number; chunks: number }>;
  fts?: { enabled: boolean; available: boolean };
  fallback?: { from: string; reason?: string };
  vector?: { enabled: boolean; available?: boolean; dims?: number };
  custom?: Record<string, unknown>;
}

export interface MemorySearchOptions {
  maxResults?: number;
  minScore?: number;
  sessionKey?: string;
  sources?: string[];
  signal?: AbortSignal;
}

/** MemorySearchManager (same file). */
export interface MemorySearchManager {
  search(query: string, opts?: MemorySearchOptions): Promise<MemorySearchResult[]>;
  readFile(params: { relPath: string; from?: number; lines?: number }): Promise<MemoryReadResult>;
  status(): MemoryProviderStatus;
  sync?(params?: unknown): Promise<void>;
  probeEmbeddingAvailability(): Promise<{ ok: boolean; error?: string }>;
  probeVectorAvailability(): Promise<boolean>;
  close?(): Promise<void>;
}

/** MemoryPluginRuntime (src/plugins/memory-state.ts). */
export interface MemoryPluginRuntime {
  getMemorySearchManager(params: {
    cfg: OpenClawConfig;
    agentId: string;
    purpose?: "default" | "status" | "cli";
  }): Promise<{ manager: MemorySearchManager | null; debug?: Record<string, unknown>; error?: string }>;
  resolveMemoryBackendConfig(params?: unknown): { backend: "builtin" };
  authorizeSearchHits?(params: { sandboxed: boolean; hits: MemorySearchResult[] }): Promise<MemorySearchResult[]>;
  closeMemorySearchManager?(params: { agentId: string }): Promise<void>;
  closeAllMemorySearchManagers?(): Promise<void>;
}

/** MemoryPluginCapability (same file), the members this plugin registers. */
export interface MemoryPluginCapability {
  deterministicRecallToolName?: string;
  promptBuilder?: (params: { availableTools: Set<string>; citationsMode?: string }) => string[];
  runtime?: MemoryPluginRuntime;
}

/** What a tool factory gets for one run (src/plugins/tools.ts). */
export interface ToolContext {
  agentId?: string;
  sessionKey?: string;
  sandboxed?: boolean;
  config?: OpenClawConfig;
  runtimeConfig?: OpenClawConfig;
  getRuntimeConfig?: () => OpenClawConfig | undefined;
}

/** An agent tool's answer: jsonResult (dist/tool-results-*.mjs). */
export interface ToolResult {
  content: Array<{ type: "text"; text: string }>;
  details: unknown;
}

export interface AgentTool {
  label: string;
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  execute(toolCallId: string, params: unknown, signal?: AbortSignal): Promise<ToolResult>;
}

/** OpenClawPluginApi, the members used. */
export interface OpenClawPluginApi {
  pluginConfig?: Record<string, unknown>;
  config?: OpenClawConfig;
  logger?: PluginLogger;
  runtime: {
    config?: { current?: () => OpenClawConfig | undefined };
    agent: { resolveAgentWorkspaceDir(cfg: OpenClawConfig, agentId: string): string };
    state: { resolveStateDir(): string };
  };
  registerMemoryCapability(capability: MemoryPluginCapability): void;
  registerTool(factory: (ctx: ToolContext | undefined) => AgentTool | null, opts: { names: string[] }): void;
  on?(event: "gateway_stop", handler: () => Promise<void>): void;
}
