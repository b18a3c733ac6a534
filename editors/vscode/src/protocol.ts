// The memory-ls protocol as seen by the client (docs/protocol.md).
// Pure types and names: no `vscode` import, so the logic modules stay testable with `node --test`.

// The requests' names, params and MCP tools are generated from memory_ls/methods.py.
export * from './protocol.generated';

/** The URI scheme of a file only a teammate has (a team index hit): the file URI it would have
 * here, with `file` replaced by this; `memory/get` takes it as `path`. */
export const TEAM_SCHEME = 'memory-ls';

/** Server commands (`workspace/executeCommand`). */
export const CMD_REINDEX = 'memory.reindex';
export const CMD_SYNC = 'memory.sync';
export const CMD_STATUS = 'memory.status';

export interface LspPosition {
  line: number;
  character: number;
}

export interface LspRange {
  start: LspPosition;
  end: LspPosition;
}

export interface SearchHit {
  uri: string;
  path: string;
  range: LspRange;
  /** 1-based inclusive. */
  startLine: number;
  endLine: number;
  score: number;
  vectorScore?: number;
  textScore?: number;
  snippet: string;
  source: string;
  citation: string;
  /** The hit's line (1-based, startLine..endLine) best matching the query, as the server
   * matched it (stop words, stemming, CJK); a transcript's JSONL line. Older servers omit it. */
  bestLine?: number;
  /** The query's terms found in the hit (a CJK word as its two-character grams). */
  matchedTerms?: string[];
  /** The file is only on another machine: `uri` has the TEAM_SCHEME. */
  remote?: boolean;
  /** With `explain`: each stage's figures for this hit (docs/protocol.md, "explain"). */
  explain?: Record<string, unknown>;
}

export interface SearchResult {
  results: SearchHit[];
  mode: 'hybrid' | 'keyword' | 'vector' | string;
  provider: { id: string; model: string } | null;
  fallbackReason?: string;
  tookMs?: number;
  /** Sent when nothing passed minScore: how many candidates fell short, and the best score. */
  belowMinScore?: { count: number; bestScore: number };
  /** With `explain`: one plan per workspace folder searched. */
  explain?: Array<Record<string, unknown>>;
}

export interface GetResult {
  uri: string;
  path: string;
  from: number;
  to: number;
  totalLines: number;
  text: string;
  /** Read from the team index: the file is not on this machine. */
  remote?: boolean;
}

/** A finding of the memory checks (`memory/check`, `memory-ls check --json`); lines are 1-based, inclusive. */
export interface Finding {
  code: 'duplicate' | 'conflict' | 'load-cap' | 'expired' | 'front-matter' | 'orphan';
  severity: 'error' | 'warning' | 'information' | 'hint';
  path: string;
  startLine: number;
  endLine: number;
  message: string;
  /** Where else: the earlier copy of a duplicate, the index file of an orphan. */
  related: Array<{ path: string; startLine: number; endLine: number }>;
}

/** `memory/check`: the findings the draft would cause, all in it (`path`: where it would go). */
export interface CheckResult {
  path: string;
  findings: Finding[];
}

export interface SyncInfo {
  reason?: string;
  full?: boolean;
  startedAt?: string;
  durationMs?: number;
  files?: number;
  indexed?: number;
  unchanged?: number;
  removed?: number;
  embedded?: number;
  cacheHits?: number;
  skipped?: string[];
}

/** One workspace folder's status (the engine's `status()`); every field optional on purpose. */
/** Where the folder's index lives: `{backend: "sqlite", answering: "sqlite"}`, or the team index. */
export interface StoreStatus {
  backend: string;
  /** "postgres", or "sqlite" while the local fallback answers (`problem` says why). */
  answering: string;
  /** The team index's URL, its password masked. */
  url?: string | null;
  namespace?: string;
  problem?: string | null;
  /** The server's buffer cache against the indexes a search reads; `hint` when they do not fit. */
  server?: { sharedBuffersMB: number; searchIndexesMB: Record<string, number>; hint: string | null };
}

export interface FolderStatus {
  root?: string;
  folder?: string;
  indexPath?: string;
  files?: number;
  chunks?: number;
  chunksBySource?: Record<string, number>;
  /** `weights`: the local model's only, "file" or "bf16 copy" (its bfloat16 copy). */
  provider?: { id: string; model: string; dims?: number; weights?: string } | null;
  mode?: string;
  providerReason?: string | null;
  fallbackReason?: string | null;
  vectorBackend?: string;
  sqliteVec?: string;
  fts?: string;
  dirty?: boolean;
  needsRebuild?: boolean;
  pendingEmbeddings?: number;
  cacheEntries?: number;
  openDocuments?: string[];
  lastSync?: SyncInfo | null;
  settingsProblems?: string[];
  /** sessions.roots that are misconfigured, missing, a file or unreadable. */
  rootProblems?: string[];
  /** A sync is running now. */
  syncing?: boolean;
  /** Buffer edits not indexed yet. */
  pendingEdits?: number;
  /** The folder's index could not be opened. */
  error?: string;
  store?: StoreStatus;
  [key: string]: unknown;
}

/** `memory/status` answers one folder's status, or `{folders: [...]}` in a multi-root workspace. */
export type StatusResult = FolderStatus & { folders?: FolderStatus[]; version?: string; watch?: string };

/** `$/progress` work-done values. */
export interface WorkDoneValue {
  kind: 'begin' | 'report' | 'end';
  title?: string;
  message?: string;
  percentage?: number;
  cancellable?: boolean;
}
