// The compiled glue and vscode-languageclient, with a stand-in `vscode` module, against a real
// `memory-ls serve`: the status bar reaches the server's mode, Memory: Search searches as you
// type and opens the hit at its line, Insert Citation edits the editor, Show Status renders the
// document, Reindex reports. Skipped when memory-ls is not installed.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, test } from 'node:test';

import { fakeEditor, installFakeVscode, newRecorder, Recorder } from './fakeVscode';
import { activateExtension, demoCopy, findServer, waitFor } from './helpers';

const server = findServer();
const skip = server ? false : 'memory-ls is not installed (set MEMORY_LS_COMMAND or create the repository .venv)';

let tmp = '';
let ws = '';
let rec: Recorder;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let ext: any;

const until = <T>(f: () => T | undefined, ms: number, what: string): Promise<T> =>
  waitFor(f, ms, what, () => rec.output);

before(async () => {
  if (!server) {
    return;
  }
  ({ tmp, ws } = demoCopy());
  rec = newRecorder({
    'memory.server.command': server,
    'memory.server.env': { XDG_CACHE_HOME: path.join(tmp, 'cache'), XDG_CONFIG_HOME: path.join(tmp, 'config') },
    'memory.provider': 'none',
  });
  installFakeVscode(rec, [ws]);
  ({ ext } = await activateExtension());
});

after(async () => {
  if (ext) {
    await ext.deactivate();
  }
  if (tmp) {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('the status bar shows the mode the server reports, with the reason', { skip }, async () => {
  const bar = rec.statusItems[0];
  // Refreshed when the startup sync's work-done progress ends.
  await until(() => /keyword-only/.test(bar.text) && /5 files/.test(bar.tooltip), 60_000, 'the status bar to show the mode');
  assert.equal(bar.text, '$(search) Memory: keyword-only');
  // Work-done progress of the startup sync showed on the way.
  assert.ok(bar.history.some((t: string) => t.startsWith('$(sync~spin) Memory')), bar.history.join(' | '));
  assert.match(bar.tooltip, /provider/);
  assert.match(bar.tooltip, /5 files/);
});

test('Memory: Search searches as you type and opens the hit at its line', { skip }, async () => {
  await rec.commands.get('memoryLs.search')!();
  const qp = rec.quickPicks.at(-1)!;
  qp.changeValue('tok');
  qp.changeValue('token bucket'); // debounced: only the last value is searched
  const items = await until(() => (qp.items.length ? qp.items : undefined), 10_000, 'results');
  const top = items[0];
  assert.equal(top.label, 'API design review');
  assert.match(top.description, /^memory\/2026-01-10-api-design\.md:\d+-\d+ {2}· {2}\d\.\d\d/);
  assert.match(top.detail, /^We chose a token bucket/);
  assert.equal(top.alwaysShow, true);
  assert.match(qp.title!, /Memory: Search · \d+ results? in \d+ ms · keyword-only/);
  // The copy button puts the citation on the clipboard.
  await qp.triggerButton(top, 0);
  assert.match(rec.clipboard.at(-1)!, /^memory\/2026-01-10-api-design\.md#L\d+(-L\d+)?$/);
  await qp.accept(top);
  const shown = rec.shown.at(-1)!;
  assert.equal(shown.uri, `file://${path.join(ws, 'memory', '2026-01-10-api-design.md')}`);
  assert.equal(shown.options.selection.start.line, 5); // line 6: "We chose a token bucket"
  assert.equal(qp.visible, false);
});

test('Memory: Insert Citation inserts the citation at the cursor', { skip }, async () => {
  const note = path.join(ws, 'memory', 'people.md');
  rec.activeTextEditor = fakeEditor(`file://${note}`, '- Ana: backend lead, see', 0, 24);
  await rec.commands.get('memoryLs.insertCitation')!();
  const qp = rec.quickPicks.at(-1)!;
  qp.changeValue('sliding window log rejected');
  const items = await until(() => (qp.items.length ? qp.items : undefined), 10_000, 'results');
  await qp.accept(items[0]);
  const ins = rec.activeTextEditor.inserted;
  assert.equal(ins.length, 1);
  assert.equal(ins[0].line, 0);
  assert.equal(ins[0].character, 24);
  assert.match(ins[0].text, /^ memory\/2026-01-10-api-design\.md#L\d+(-L\d+)?$/);
  rec.activeTextEditor = undefined;
});

test('Memory: Show Status renders the status document', { skip }, async () => {
  await rec.commands.get('memoryLs.showStatus')!();
  const doc = rec.providers.get('memory-status').provideTextDocumentContent();
  assert.match(doc, /^# Memory status/);
  assert.match(doc, /\| Search mode \| keyword-only \(provider/);
  assert.match(doc, /\| Files \| 5 \|/);
  assert.ok(rec.shown.some((s) => s.uri.startsWith('memory-status:')));
});

test('Memory: Reindex and Rebuild Index report what they did', { skip }, async () => {
  await rec.commands.get('memoryLs.rebuild')!();
  const msg = rec.messages.filter((m) => m.kind === 'info').at(-1);
  assert.ok(msg, JSON.stringify(rec.messages));
  assert.match(msg!.text, /^Memory: (rebuilt|synced) 5 files: /);
  await rec.commands.get('memoryLs.reindex')!();
  assert.match(rec.messages.filter((m) => m.kind === 'info').at(-1)!.text, /^Memory: synced 5 files: .*5 unchanged/);
  assert.deepEqual(
    rec.messages.filter((m) => m.kind === 'error'),
    [],
  );
});
