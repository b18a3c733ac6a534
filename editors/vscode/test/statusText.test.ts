import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import type { FolderStatus } from '../src/protocol';
import { folders, modeSummary, ProgressTracker, statusBar, statusMarkdown, syncFailures, syncSummary } from '../src/statusText';

const HYBRID: FolderStatus = {
  root: '/ws',
  indexPath: '/cache/memory-ls/index/ws-abc.sqlite',
  files: 5,
  chunks: 6,
  chunksBySource: { memory: 6 },
  provider: { id: 'local', model: 'all-MiniLM-L6-v2', dims: 384 },
  mode: 'hybrid',
  providerReason: null,
  fallbackReason: null,
  vectorBackend: 'numpy',
  sqliteVec: 'loaded',
  fts: 'fts5',
  dirty: false,
  needsRebuild: false,
  pendingEmbeddings: 0,
  cacheEntries: 6,
  openDocuments: [],
  lastSync: { reason: 'startup', full: false, startedAt: '2026-02-21T10:00:00Z', durationMs: 41.2, files: 5, indexed: 5, unchanged: 0, removed: 0, embedded: 6, cacheHits: 0, skipped: [] },
  settingsProblems: [],
};
const KEYWORD: FolderStatus = { ...HYBRID, provider: null, mode: 'keyword', providerReason: 'no embedding model found (run `memory-ls model pull`)' };

test('ProgressTracker follows begin/report/end per token', () => {
  const t = new ProgressTracker();
  assert.equal(t.current(), undefined);
  t.update('a', { kind: 'begin', title: 'Indexing memory', percentage: 0 });
  t.update('a', { kind: 'report', message: '3/10 files', percentage: 30 });
  assert.deepEqual(t.current(), { title: 'Indexing memory', message: '3/10 files', percentage: 30 });
  t.update(7, { kind: 'begin', title: 'Embedding' });
  assert.equal(t.current()?.title, 'Embedding');
  t.update(7, { kind: 'end' });
  assert.equal(t.current()?.title, 'Indexing memory');
  t.update('a', { kind: 'end' });
  assert.equal(t.current(), undefined);
});

test('modeSummary: hybrid, keyword-only with the reason, mixed folders', () => {
  assert.deepEqual(modeSummary({ ...HYBRID }), { label: 'hybrid', reason: undefined, degraded: false });
  assert.deepEqual(modeSummary({ ...KEYWORD }), { label: 'keyword-only', reason: KEYWORD.providerReason!, degraded: false });
  const fb = modeSummary({ ...KEYWORD, fallbackReason: 'openai: 401' });
  assert.ok(fb?.degraded);
  assert.match(fb!.reason!, /openai: 401/);
  assert.equal(modeSummary({ folders: [HYBRID, KEYWORD] })?.label, 'mixed');
  assert.equal(modeSummary(undefined), undefined);
  assert.equal(folders({ folders: [HYBRID, KEYWORD] }).length, 2);
});

test('statusBar shows progress, then the mode', () => {
  assert.equal(statusBar({ phase: 'starting' }).text, '$(loading~spin) Memory');
  const failed = statusBar({ phase: 'failed', error: 'spawn ENOENT' });
  assert.ok(failed.error);
  assert.match(failed.tooltip, /spawn ENOENT/);
  const busy = statusBar({ phase: 'running', status: HYBRID, progress: { title: 'Indexing memory', message: '3/10 files', percentage: 30 } });
  assert.equal(busy.text, '$(sync~spin) Memory 3/10');
  assert.match(busy.tooltip, /Indexing memory: 3\/10 files/);
  assert.equal(statusBar({ phase: 'running', progress: { title: 'Embedding', percentage: 42.4 } }).text, '$(sync~spin) Memory 42%');
  const hybrid = statusBar({ phase: 'running', status: HYBRID });
  assert.equal(hybrid.text, '$(database) Memory: hybrid');
  assert.match(hybrid.tooltip, /5 files, 6 chunks/);
  assert.match(hybrid.tooltip, /Embedding model: local all-MiniLM-L6-v2/);
  const e5 = { ...HYBRID, provider: { id: 'local', model: 'multilingual-e5-small', dims: 384 } };
  assert.match(statusBar({ phase: 'running', status: { folders: [HYBRID, e5] } }).tooltip, /Embedding model: local all-MiniLM-L6-v2, local multilingual-e5-small/);
  const kw = statusBar({ phase: 'running', status: KEYWORD });
  assert.equal(kw.text, '$(search) Memory: keyword-only');
  assert.match(kw.tooltip, /keyword-only \(no embedding model found/);
  assert.doesNotMatch(kw.tooltip, /Embedding model/);
  const fb = statusBar({ phase: 'running', status: { ...KEYWORD, fallbackReason: 'openai: 401' } });
  assert.equal(fb.text, '$(warning) Memory: keyword-only');
  assert.ok(fb.warning);
});

test('statusBar tooltip: the findings by kind when there are some, nothing when there are none', () => {
  const health = [
    { code: 'duplicate', count: 2 },
    { code: 'orphan', count: 1 },
  ];
  const tip = statusBar({ phase: 'running', status: HYBRID, health }).tooltip.split('\n');
  assert.deepEqual(tip.slice(-2), ['Memory health: 3 findings: 2 duplicate, 1 orphan (Memory: Show Health)', 'Click to show the full status.']);
  assert.match(statusBar({ phase: 'running', status: { ...HYBRID, syncing: true }, health }).tooltip, /2 duplicate, 1 orphan/);
  const clean = statusBar({ phase: 'running', status: HYBRID, health: [] }).tooltip;
  assert.equal(clean, statusBar({ phase: 'running', status: HYBRID }).tooltip);
  assert.doesNotMatch(clean, /finding/);
  // Not running: the tooltip says why, not what an old server found.
  assert.doesNotMatch(statusBar({ phase: 'failed', error: 'spawn ENOENT', health }).tooltip, /finding/);
});

test('statusMarkdown is a readable document', () => {
  const md = statusMarkdown(HYBRID, { command: '/usr/bin/memory-ls serve', version: '0.1.0' });
  assert.match(md, /^# Memory status/);
  assert.match(md, /Server: `\/usr\/bin\/memory-ls serve` \(0\.1\.0\)/);
  assert.match(md, /\| Search mode \| hybrid: local all-MiniLM-L6-v2 \(384 dims\) \|/);
  assert.match(md, /\| Chunks \| 6 \(memory 6\) \|/);
  assert.match(md, /\| Last sync \| startup, at 2026-02-21T10:00:00Z, took 41 ms: 5 files, 5 indexed/);
  assert.match(md, /```json/);
  const bf16 = statusMarkdown({ ...HYBRID, provider: { id: 'local', model: 'all-MiniLM-L6-v2', dims: 384, weights: 'bf16 copy' } });
  assert.match(bf16, /\| Search mode \| hybrid: local all-MiniLM-L6-v2 \(384 dims, bf16 copy\) \|/);
  const kw = statusMarkdown({ ...KEYWORD, settingsProblems: ['query.maxResults: expected an integer | got "x"; ignored'] });
  assert.match(kw, /\| Search mode \| keyword-only \(no embedding model found/);
  assert.match(kw, /\*\*Settings problems\*\*\n\n- query\.maxResults/);
  const multi = statusMarkdown({ folders: [HYBRID, { ...KEYWORD, root: '/other' }] });
  assert.match(multi, /## \/ws/);
  assert.match(multi, /## \/other/);
});

test('statusMarkdown shows the team index, why it does not answer, and its server', () => {
  // `store` as `memory-ls status --json` gives it for a team index (PostgreSQL 18, 128 MB).
  const store = {
    backend: 'postgres',
    url: 'postgresql://postgres:***@127.0.0.1:38483/postgres',
    namespace: 'team-platform',
    pooler: 'none',
    answering: 'postgres',
    problem: null,
    retryInS: null,
    pgvector: '0.8.6',
    vectorType: 'halfvec',
    schema: 4,
    server: {
      sharedBuffersMB: 128.0,
      searchIndexesMB: { memory_chunks_tsv: 54.8, memory_vectors_hnsw_384: 127.0 },
      hint: "the search indexes (182 MB) do not fit the server's shared_buffers (128 MB): raise it",
    },
  };
  const md = statusMarkdown({ ...HYBRID, store });
  assert.match(md, /\| Team index \| postgresql:\/\/postgres:\*\*\*@127\.0\.0\.1:38483\/postgres, namespace team-platform \|/);
  assert.match(md, /\| Answering \| postgres \|/);
  assert.match(md, /\| Team index server \| shared_buffers 128 MB, search indexes 182 MB: the search indexes \(182 MB\) do not fit/);
  const down = statusMarkdown({
    ...KEYWORD,
    store: { ...store, answering: 'sqlite', problem: 'PostgreSQL unreachable (connection refused)', server: undefined },
  });
  assert.match(down, /\| Answering \| sqlite: PostgreSQL unreachable \(connection refused\) \|/);
  assert.doesNotMatch(down, /Team index server/);
  const local = statusMarkdown({ ...HYBRID, store: { backend: 'sqlite', answering: 'sqlite' } });
  assert.doesNotMatch(local, /Team index|Answering/);
});

test('syncSummary reads one report or one per folder', () => {
  assert.equal(
    syncSummary(HYBRID.lastSync),
    'synced 5 files: 5 indexed, 0 unchanged, 0 removed, 6 chunks embedded (0 from cache) in 0.04 s',
  );
  assert.match(syncSummary({ folders: [{ report: { ...HYBRID.lastSync, full: true } }, { files: 2, indexed: 0, unchanged: 2 }] }), /^rebuilt 7 files: 5 indexed, 2 unchanged/);
  assert.equal(syncSummary(null), 'index updated');
});

test('syncSummary says which folders were not synced and why', () => {
  const answer = {
    folders: [
      { folder: 'file:///w/good', report: { files: 2, indexed: 1, unchanged: 1, removed: 0, embedded: 0, cacheHits: 0, durationMs: 10 } },
      { folder: 'file:///w/my%20notes', report: null, error: 'cannot open the index: disk full' },
    ],
  };
  assert.deepEqual(syncFailures(answer), ['my notes: cannot open the index: disk full']);
  assert.match(syncSummary(answer), /^synced 2 files: .*; not synced: my notes: cannot open the index: disk full$/);
  const none = { folders: [{ folder: 'file:///w/x', report: null, error: 'sync failed: boom' }] };
  assert.equal(syncSummary(none), 'not synced: x: sync failed: boom');
  assert.deepEqual(syncFailures({ folders: [{ folder: 'file:///w/good', report: {} }] }), []);
  assert.deepEqual(syncFailures(null), []);
});
