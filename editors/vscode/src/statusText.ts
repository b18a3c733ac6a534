// Status bar text, progress tracking and the readable status document. Pure.

import type * as P from './protocol';
import type { FolderStatus, StatusResult, StoreStatus, WorkDoneValue } from './protocol';
import { Count, countsText } from './health';
import { modeLabel } from './searchItems';

export interface ProgressState {
  title: string;
  message?: string;
  percentage?: number;
}

/** Follows `$/progress` work-done tokens; `current()` is the most recently begun active one. */
export class ProgressTracker {
  private readonly active = new Map<string, ProgressState>();

  update(token: string | number, value: WorkDoneValue): void {
    const key = String(token);
    if (value.kind === 'end') {
      this.active.delete(key);
      return;
    }
    const prev = this.active.get(key);
    const next: ProgressState = {
      title: value.title ?? prev?.title ?? 'Indexing',
      message: value.message ?? prev?.message,
      percentage: value.percentage ?? prev?.percentage,
    };
    if (value.kind === 'begin') {
      this.active.delete(key); // re-insert: the newest begin is shown
    }
    this.active.set(key, next);
  }

  current(): ProgressState | undefined {
    let last: ProgressState | undefined;
    for (const v of this.active.values()) {
      last = v;
    }
    return last;
  }

  clear(): void {
    this.active.clear();
  }
}

export type Phase = 'starting' | 'running' | 'stopped' | 'failed';

export interface UiState {
  phase: Phase;
  status?: StatusResult;
  progress?: ProgressState;
  error?: string;
  /** The memory checks' findings by kind (health.ts), shown in the tooltip when there are some. */
  health?: Count[];
}

export interface StatusBarView {
  text: string;
  tooltip: string;
  warning: boolean;
  error: boolean;
}

export function folders(status: StatusResult | undefined): FolderStatus[] {
  if (!status) {
    return [];
  }
  if (Array.isArray(status.folders)) {
    return status.folders;
  }
  return [status];
}

export interface ModeSummary {
  /** "hybrid", "keyword-only", "vector-only", or "mixed" across folders. */
  label: string;
  reason?: string;
  degraded: boolean;
}

export function modeSummary(status: StatusResult | undefined): ModeSummary | undefined {
  const fs = folders(status);
  if (fs.length === 0) {
    return undefined;
  }
  const modes = [...new Set(fs.map((f) => f.mode ?? (f.provider ? 'hybrid' : 'keyword')))];
  const label = modes.length === 1 ? modeLabel(modes[0]) : 'mixed';
  const reasons = [
    ...new Set(
      fs.flatMap((f) => [f.fallbackReason, f.mode !== 'hybrid' ? f.providerReason : undefined]).filter((r): r is string => !!r),
    ),
  ];
  const degraded = fs.some((f) => !!f.fallbackReason);
  return { label, reason: reasons.length ? reasons.join('; ') : undefined, degraded };
}

function progressText(p: ProgressState): string {
  if (p.message && /\d+\s*\/\s*\d+/.test(p.message)) {
    return p.message.match(/\d+\s*\/\s*\d+/)![0].replace(/\s+/g, '');
  }
  if (typeof p.percentage === 'number') {
    return `${Math.round(p.percentage)}%`;
  }
  return p.message ?? '';
}

export function statusBar(state: UiState): StatusBarView {
  if (state.phase === 'failed') {
    return {
      text: '$(error) Memory',
      tooltip: `memory-ls is not running: ${state.error ?? 'it failed to start'}. Click for details.`,
      warning: false,
      error: true,
    };
  }
  if (state.phase === 'stopped') {
    return { text: '$(circle-slash) Memory', tooltip: 'memory-ls is stopped. Click to see the status.', warning: false, error: false };
  }
  if (state.phase === 'starting') {
    return { text: '$(loading~spin) Memory', tooltip: 'memory-ls is starting…', warning: false, error: false };
  }
  const mode = modeSummary(state.status);
  const lines: string[] = [];
  if (state.progress) {
    const p = state.progress;
    lines.push(`${p.title}${p.message ? `: ${p.message}` : ''}`);
  }
  if (mode) {
    lines.push(`Search mode: ${mode.label}${mode.reason ? ` (${mode.reason})` : ''}`);
  }
  const fs = folders(state.status);
  const models = [...new Set(fs.flatMap((f) => (f.provider ? [`${f.provider.id} ${f.provider.model}`] : [])))];
  if (models.length) {
    lines.push(`Embedding model: ${models.join(', ')}`);
  }
  const files = fs.reduce((n, f) => n + (f.files ?? 0), 0);
  const chunks = fs.reduce((n, f) => n + (f.chunks ?? 0), 0);
  // Chunks wait for vectors only where a provider computes them.
  const pending = fs.reduce((n, f) => n + (f.provider ? (f.pendingEmbeddings ?? 0) : 0), 0);
  if (fs.length) {
    lines.push(`${files} files, ${chunks} chunks${pending ? `, ${pending} waiting for vectors` : ''}`);
  }
  const findings = countsText(state.health ?? []);
  if (findings) {
    lines.push(`Memory health: ${findings} (Memory: Show Health)`);
  }
  lines.push('Click to show the full status.');
  const tooltip = lines.join('\n');
  if (state.progress) {
    const t = progressText(state.progress);
    return { text: `$(sync~spin) Memory${t ? ` ${t}` : ''}`, tooltip, warning: false, error: false };
  }
  if (fs.some((f) => f.syncing)) {
    return { text: '$(sync~spin) Memory', tooltip, warning: false, error: false };
  }
  if (fs.some((f) => f.error)) {
    const errors = fs.filter((f) => f.error).map((f) => `${f.root ?? f.folder}: ${f.error}`);
    return { text: '$(warning) Memory', tooltip: `${errors.join('\n')}\n${tooltip}`, warning: true, error: false };
  }
  if (!mode) {
    return { text: '$(database) Memory', tooltip, warning: false, error: false };
  }
  const icon = mode.degraded ? '$(warning)' : mode.label === 'hybrid' ? '$(database)' : '$(search)';
  return { text: `${icon} Memory: ${mode.label}`, tooltip, warning: mode.degraded, error: false };
}

function cell(v: unknown): string {
  const s = v === undefined || v === null || v === '' ? '-' : String(v);
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function yesNo(v: unknown): string {
  return v === undefined ? '-' : v ? 'yes' : 'no';
}

function syncLine(s: FolderStatus['lastSync']): string {
  if (!s) {
    return 'not yet';
  }
  const parts = [
    s.reason ? `${s.reason}${s.full ? ' (full rebuild)' : ''}` : undefined,
    s.startedAt ? `at ${s.startedAt}` : undefined,
    typeof s.durationMs === 'number' ? `took ${Math.round(s.durationMs)} ms` : undefined,
  ].filter(Boolean);
  const counts = [
    s.files !== undefined ? `${s.files} files` : undefined,
    s.indexed !== undefined ? `${s.indexed} indexed` : undefined,
    s.unchanged !== undefined ? `${s.unchanged} unchanged` : undefined,
    s.removed !== undefined ? `${s.removed} removed` : undefined,
    s.embedded !== undefined ? `${s.embedded} chunks embedded` : undefined,
    s.cacheHits !== undefined ? `${s.cacheHits} from cache` : undefined,
  ].filter(Boolean);
  return [parts.join(', '), counts.join(', ')].filter(Boolean).join(': ');
}

function serverLine(s: NonNullable<StoreStatus['server']>): string {
  const indexes = Object.values(s.searchIndexesMB).reduce((a, b) => a + b, 0);
  const sizes = Object.keys(s.searchIndexesMB).length ? `search indexes ${Math.round(indexes)} MB` : 'no search indexes found';
  return `shared_buffers ${Math.round(s.sharedBuffersMB)} MB, ${sizes}${s.hint ? `: ${s.hint}` : ''}`;
}

function folderSection(f: FolderStatus, heading: boolean): string[] {
  const out: string[] = [];
  if (heading) {
    out.push(`## ${f.root ?? f.folder ?? 'workspace'}`, '');
  }
  const prov = f.provider;
  const mode = modeLabel(f.mode ?? (prov ? 'hybrid' : 'keyword'));
  const modeDetail = prov
    ? `${mode}: ${prov.id} ${prov.model}${prov.dims ? ` (${prov.dims} dims${prov.weights ? `, ${prov.weights}` : ''})` : ''}`
    : `${mode}${f.providerReason ? ` (${f.providerReason})` : ''}`;
  const bySource = f.chunksBySource
    ? Object.entries(f.chunksBySource)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')
    : '';
  const team = f.store?.backend === 'postgres' ? f.store : undefined;
  const rows: [string, unknown][] = [
    ['Search mode', modeDetail],
    ['Active fallback', f.fallbackReason],
    ['Team index', team ? `${team.url ?? '(no URL set)'}, namespace ${team.namespace ?? '-'}` : undefined],
    ['Answering', team ? `${team.answering}${team.problem ? `: ${team.problem}` : ''}` : undefined],
    ['Team index server', team?.server ? serverLine(team.server) : undefined],
    ['Files', f.files],
    ['Chunks', f.chunks !== undefined ? `${f.chunks}${bySource ? ` (${bySource})` : ''}` : undefined],
    ['Error', f.error],
    ['Waiting for vectors', prov ? f.pendingEmbeddings : undefined],
    ['Syncing now', f.syncing === undefined ? undefined : yesNo(f.syncing)],
    ['Unsaved edits not indexed yet', f.pendingEdits || undefined],
    ['Vector backend', f.vectorBackend ? `${f.vectorBackend}${f.sqliteVec ? ` (sqlite-vec: ${f.sqliteVec})` : ''}` : undefined],
    ['Full-text index', f.fts],
    ['Embedding cache', f.cacheEntries !== undefined ? `${f.cacheEntries} entries` : undefined],
    ['Needs sync', yesNo(f.dirty)],
    ['Needs rebuild', yesNo(f.needsRebuild)],
    ['Last sync', syncLine(f.lastSync)],
    ['Index file', f.indexPath ? `\`${f.indexPath}\`` : undefined],
  ];
  out.push('| | |', '|---|---|');
  for (const [k, v] of rows) {
    if (v !== undefined && v !== null) {
      out.push(`| ${k} | ${cell(v)} |`);
    }
  }
  const lists: [string, string[] | undefined][] = [
    ['Settings problems', f.settingsProblems],
    ['Transcript folders (sessions.roots)', f.rootProblems],
    ['Skipped in the last sync', f.lastSync?.skipped],
    ['Open (unsaved) documents indexed from the editor', f.openDocuments],
  ];
  for (const [title, items] of lists) {
    if (items && items.length) {
      out.push('', `**${title}**`, '', ...items.map((i) => `- ${i}`));
    }
  }
  out.push('');
  return out;
}

/** `memory/status` as a Markdown document. */
export function statusMarkdown(status: StatusResult, serverInfo?: { command?: string; version?: string }): string {
  const fs = folders(status);
  const out: string[] = ['# Memory status', ''];
  if (serverInfo?.command || serverInfo?.version || status.version) {
    const v = serverInfo?.version ?? status.version;
    out.push(`Server: ${serverInfo?.command ? `\`${serverInfo.command}\`` : 'memory-ls'}${v ? ` (${v})` : ''}`, '');
  }
  if (status.watch) {
    out.push(`File watching: ${status.watch}`, '');
  }
  if (fs.length === 0) {
    out.push('No workspace folder is indexed.', '');
  }
  for (const f of fs) {
    out.push(...folderSection(f, fs.length > 1 || !!f.root));
  }
  out.push('<details><summary>Raw status</summary>', '', '```json', JSON.stringify(status, null, 2), '```', '', '</details>', '');
  return out.join('\n');
}

/** The last part of a folder URI, for messages. */
function folderLabel(uri: string): string {
  let path = uri;
  try {
    path = decodeURIComponent(uri);
  } catch {
    // a malformed escape: show the URI as it is
  }
  return path.replace(/\/+$/, '').split('/').pop() || uri;
}

/** The folders of a `memory.reindex` / `memory.sync` answer that were not synced, each with why. */
export function syncFailures(result: unknown): string[] {
  const list = result && typeof result === 'object' ? (result as { folders?: unknown }).folders : undefined;
  if (!Array.isArray(list)) {
    return [];
  }
  return list.flatMap((f) => {
    const o = (f && typeof f === 'object' ? f : {}) as { folder?: unknown; error?: unknown };
    return typeof o.error === 'string' ? [`${typeof o.folder === 'string' ? folderLabel(o.folder) : 'a folder'}: ${o.error}`] : [];
  });
}

/** One line about a `memory.reindex` / `memory.sync` answer (a sync report, or one per folder). */
export function syncSummary(result: unknown): string {
  const reports: P.SyncInfo[] = [];
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) {
      v.forEach(visit);
    } else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (Array.isArray(o.folders)) {
        visit(o.folders);
      } else if (Array.isArray(o.reports)) {
        visit(o.reports);
      } else if (typeof o.files === 'number' || typeof o.indexed === 'number') {
        reports.push(o as P.SyncInfo);
      } else if (o.report && typeof o.report === 'object') {
        visit(o.report);
      }
    }
  };
  visit(result);
  const failed = syncFailures(result);
  const notSynced = failed.length ? `not synced: ${failed.join('; ')}` : '';
  if (reports.length === 0) {
    return notSynced || 'index updated';
  }
  const sum = (k: keyof P.SyncInfo): number => reports.reduce((n, r) => n + (typeof r[k] === 'number' ? (r[k] as number) : 0), 0);
  const ms = reports.reduce((n, r) => Math.max(n, r.durationMs ?? 0), 0);
  const skipped = reports.reduce((n, r) => n + (r.skipped?.length ?? 0), 0);
  const full = reports.some((r) => r.full);
  return (
    `${full ? 'rebuilt' : 'synced'} ${sum('files')} files: ${sum('indexed')} indexed, ${sum('unchanged')} unchanged, ` +
    `${sum('removed')} removed, ${sum('embedded')} chunks embedded (${sum('cacheHits')} from cache)` +
    `${skipped ? `, ${skipped} skipped` : ''} in ${(ms / 1000).toFixed(2)} s` +
    (notSynced ? `; ${notSynced}` : '')
  );
}
