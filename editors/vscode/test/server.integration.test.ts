// The extension's pure logic against a real `memory-ls serve` over stdio, speaking LSP the way
// vscode-languageclient does (workspace/configuration answered by the same settings mapping,
// work-done progress followed by the same tracker). Skipped when memory-ls is not installed.
import { strict as assert } from 'node:assert';
import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { createMessageConnection, MessageConnection, StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';

import * as P from '../src/protocol';
import { resultToItems, searchSummary } from '../src/searchItems';
import { serverSettingKeys, serverSettings } from '../src/settings';
import { ProgressTracker, statusBar, statusMarkdown, syncSummary } from '../src/statusText';
import { EXTENSION_DIR, findServer, REPO } from './helpers';

const server = findServer();
const skip = server ? false : 'memory-ls is not installed (set MEMORY_LS_COMMAND or create the repository .venv)';

let tmp = '';
let ws = '';
let proc: ChildProcess | undefined;
let conn: MessageConnection | undefined;
const tracker = new ProgressTracker();
const progressSeen: P.WorkDoneValue[] = [];
const configAsked: unknown[] = [];
let stderr = '';

// What the user set in VS Code (everything else stays at the server's defaults / TOML files).
const USER: Record<string, unknown> = { provider: 'none', 'query.maxResults': 2 };
const pkg = JSON.parse(fs.readFileSync(path.join(EXTENSION_DIR, 'package.json'), 'utf8'));
const KEYS = serverSettingKeys(pkg.contributes.configuration.properties);
const settings = (): Record<string, unknown> => serverSettings(KEYS, (k) => ({ globalValue: USER[k] }));

async function waitFor(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}; server stderr:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

before(async () => {
  if (!server) {
    return;
  }
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'memory-ls-vscode-'));
  ws = path.join(tmp, 'demo');
  fs.cpSync(path.join(REPO, 'examples', 'demo'), ws, { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_CACHE_HOME: path.join(tmp, 'cache'), XDG_CONFIG_HOME: path.join(tmp, 'config') };
  for (const k of ['OPENAI_API_KEY', 'GEMINI_API_KEY', 'VOYAGE_API_KEY', 'MISTRAL_API_KEY']) {
    delete env[k];
  }
  proc = spawn(server, ['serve'], { cwd: ws, env, stdio: ['pipe', 'pipe', 'pipe'] });
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
  conn.onRequest('workspace/configuration', (params: { items: { section?: string }[] }) => {
    configAsked.push(params);
    return params.items.map((item) => (item.section === 'memory' ? settings() : null));
  });
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onRequest('client/registerCapability', () => null);
  conn.onRequest('client/unregisterCapability', () => null);
  conn.onNotification('$/progress', (p: { token: string; value: P.WorkDoneValue }) => {
    progressSeen.push(p.value);
    tracker.update(p.token, p.value);
  });
  conn.onNotification('window/logMessage', () => undefined);
  conn.onNotification('window/showMessage', () => undefined);
  conn.onNotification('textDocument/publishDiagnostics', () => undefined);
  conn.listen();
  const uri = pathToFileURL(ws).href;
  await conn.sendRequest('initialize', {
    processId: process.pid,
    rootUri: uri,
    workspaceFolders: [{ uri, name: 'demo' }],
    initializationOptions: settings(),
    capabilities: {
      workspace: { configuration: true, workspaceFolders: true, didChangeConfiguration: { dynamicRegistration: true } },
      window: { workDoneProgress: true },
      textDocument: { synchronization: { didSave: true }, hover: { contentFormat: ['markdown'] } },
    },
  });
  await conn.sendNotification('initialized', {});
  // The first sync runs in the background and reports progress.
  await waitFor(() => progressSeen.some((v) => v.kind === 'end'), 60_000, 'the startup sync');
});

after(async () => {
  if (conn) {
    try {
      await Promise.race([conn.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 5000))]);
      await conn.sendNotification('exit');
    } catch {
      /* already gone */
    }
    conn.dispose();
  }
  if (proc && proc.exitCode === null) {
    await Promise.race([new Promise((r) => proc!.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
    proc.kill();
  }
  if (tmp) {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('the server pulls the memory section and gets only what the user set', { skip }, () => {
  assert.ok(configAsked.length > 0, 'workspace/configuration was never asked');
  assert.deepEqual(settings(), { provider: 'none', query: { maxResults: 2 } });
  assert.ok(progressSeen.some((v) => v.kind === 'begin'));
  assert.equal(tracker.current(), undefined, 'every progress ended');
});

test('memory/search results become QuickPick items pointing at the right line', { skip }, async () => {
  const query = 'token bucket';
  const result = await conn!.sendRequest<P.SearchResult>(P.SEARCH, { query } satisfies P.SearchParams);
  assert.equal(result.mode, 'keyword');
  assert.ok(result.results.length >= 1 && result.results.length <= 2, `maxResults 2 from the client: ${result.results.length}`);
  const items = resultToItems(result);
  const top = items[0];
  assert.equal(top.hit.path, 'memory/2026-01-10-api-design.md');
  // The server picks the line and says which query terms it matched.
  assert.equal(top.hit.bestLine, 6);
  assert.deepEqual(top.hit.matchedTerms, ['token', 'bucket']);
  assert.equal(top.uri, pathToFileURL(path.join(ws, 'memory', '2026-01-10-api-design.md')).href);
  // "We chose a token bucket per API key" is line 6 of the file.
  assert.equal(top.cursorLine, 5);
  assert.match(top.citation, /^memory\/2026-01-10-api-design\.md#L\d+(-L\d+)?$/);
  assert.match(top.description, /^memory\/2026-01-10-api-design\.md:\d+-\d+ {2}· {2}\d\.\d\d/);
  assert.match(top.detail, /token bucket/);
  assert.match(searchSummary(result), /keyword-only/);
});

test('an unsaved buffer edit is searchable', { skip }, async () => {
  const file = path.join(ws, 'memory', 'people.md');
  const uri = pathToFileURL(file).href;
  const text = fs.readFileSync(file, 'utf8');
  await conn!.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'markdown', version: 1, text } });
  const edited = text + '- Zoltan: quartermaster of the purple llama fleet.\n';
  await conn!.sendNotification('textDocument/didChange', { textDocument: { uri, version: 2 }, contentChanges: [{ text: edited }] });
  let found: P.SearchHit | undefined;
  const end = Date.now() + 15_000;
  while (!found && Date.now() < end) {
    const r = await conn!.sendRequest<P.SearchResult>(P.SEARCH, { query: 'purple llama quartermaster' });
    found = r.results.find((h) => h.path === 'memory/people.md');
    if (!found) {
      await new Promise((res) => setTimeout(res, 200));
    }
  }
  assert.ok(found, 'the unsaved edit was not found');
  const item = resultToItems({ results: [found!], mode: 'keyword', provider: null })[0];
  assert.equal(found!.bestLine, 6);
  assert.equal(item.cursorLine, 5); // the new line 6
  assert.equal(fs.readFileSync(file, 'utf8'), text, 'the server never writes memory files');
});

test('memory/get returns the cited lines', { skip }, async () => {
  const r = await conn!.sendRequest<P.GetResult>(P.GET, { citation: 'memory/2026-01-10-api-design.md#L5-L9' });
  assert.equal(r.from, 5);
  assert.equal(r.to, 9);
  assert.match(r.text, /^## Rate limiting/);
});

test('memory/status renders as the status bar and the status document', { skip }, async () => {
  const status = await conn!.sendRequest<P.StatusResult>(P.STATUS, {});
  const bar = statusBar({ phase: 'running', status });
  assert.equal(bar.text, '$(search) Memory: keyword-only');
  assert.match(bar.tooltip, /5 files/);
  const md = statusMarkdown(status, { command: `${server} serve`, version: status.version });
  assert.match(md, /\| Search mode \| keyword-only/);
  assert.match(md, /\| Files \| 5 \|/);
});

test('memory.reindex (force) reports a rebuild', { skip }, async () => {
  const r = await conn!.sendRequest('workspace/executeCommand', { command: P.CMD_REINDEX, arguments: [{ force: true }] });
  assert.match(syncSummary(r), /^(rebuilt|synced) 5 files: /);
});
