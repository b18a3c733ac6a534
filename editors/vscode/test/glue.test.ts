// Loads the compiled glue (out/src/extension.js) with a stand-in `vscode` module: activation
// registers every command, and a server that cannot be found gives the install message and a
// red status bar item instead of an exception. A teammate's file (a `memory-ls:` URI) opens with
// the text `memory/get` answers.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';

import { installFakeVscode, newRecorder, Recorder } from './fakeVscode';
import { EXTENSION_DIR } from './helpers';

test('activation without a server: commands registered, clear message, status bar says so', async () => {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'memory-ls-glue-'));
  const rec: Recorder = newRecorder({ 'memory.server.command': path.join(ws, 'no-such-memory-ls') });
  installFakeVscode(rec, [ws]);
  const pkg = JSON.parse(fs.readFileSync(path.join(EXTENSION_DIR, 'package.json'), 'utf8'));
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ext = require(path.join(EXTENSION_DIR, 'out', 'src', 'extension.js'));
  const context = { subscriptions: [] as unknown[], extension: { packageJSON: pkg } };
  await ext.activate(context);

  const contributed = (pkg.contributes.commands as { command: string }[]).map((c) => c.command).sort();
  assert.deepEqual([...rec.commands.keys()].sort(), contributed);

  const err = rec.messages.find((m) => m.kind === 'error');
  assert.ok(err, 'no error message');
  assert.match(err!.text, /could not start/);
  assert.match(err!.text, /no-such-memory-ls/);
  assert.match(err!.text, /pipx install memory-ls/);
  assert.deepEqual(err!.items, ['Open Settings', 'Copy Install Command', 'Show Output']);

  const bar = rec.statusItems[0];
  assert.equal(bar.text, '$(error) Memory');
  assert.equal(bar.command, 'memoryLs.showStatus');

  // Commands fail softly while the server is down: the message again, no exception.
  const before = rec.messages.length;
  await rec.commands.get('memoryLs.reindex')!();
  assert.ok(rec.messages.length > before);
  // A teammate's file cannot be read without the server either: an error, no empty document.
  const team = rec.providers.get('memory-ls');
  assert.ok(team, 'no memory-ls: content provider');
  const shown = rec.messages.length;
  await assert.rejects(team.provideTextDocumentContent({ toString: () => 'memory-ls:///x/memory/a.md' }), /server is not running/);
  assert.equal(
    rec.messages.at(-1)!.text,
    'Memory: cannot open memory-ls:///x/memory/a.md from the team index: the memory-ls server is not running',
  );
  assert.ok(rec.messages.length > shown);
  // memory.server.command changed to another wrong path (VS Code restarts the server on that),
  // or Memory: Restart Server: the new attempt says why it failed too.
  rec.config['memory.server.command'] = path.join(ws, 'still-no-memory-ls');
  const errors = rec.messages.filter((m) => m.kind === 'error').length;
  await rec.commands.get('memoryLs.restart')!();
  const again = rec.messages.filter((m) => m.kind === 'error');
  assert.equal(again.length, errors + 1, 'the restart failed silently');
  assert.match(again.at(-1)!.text, /still-no-memory-ls/);
  assert.match(bar.tooltip, /still-no-memory-ls/);
  await ext.deactivate();
  fs.rmSync(ws, { recursive: true, force: true });
});

test('a teammate\'s file (memory-ls: URI) opens with the text memory/get gives, or says why not', async () => {
  const rec: Recorder = newRecorder();
  installFakeVscode(rec, []);
  // Loaded afresh: the copy the activation above loaded holds that test's fake `vscode`.
  const module = path.join(EXTENSION_DIR, 'out', 'src', 'teamFiles.js');
  delete require.cache[module];
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { TeamFiles } = require(module);
  const uri = 'memory-ls:///home/u/notes/memory/fresh.md';
  const asked: unknown[] = [];
  const files = new TeamFiles(async (params: unknown) => {
    asked.push(params);
    const text = '# Fresh\n\nThe quokka migration is scheduled.';
    return { uri, path: 'memory/fresh.md', from: 1, to: 3, totalLines: 3, text, remote: true };
  });
  const text = await files.provideTextDocumentContent({ toString: () => uri });
  assert.deepEqual(asked, [{ path: uri }]);
  assert.equal(text, '# Fresh\n\nThe quokka migration is scheduled.');
  assert.equal(rec.messages.length, 0);

  const failing = new TeamFiles(async () => {
    throw new Error('no such file in the team index');
  });
  await assert.rejects(failing.provideTextDocumentContent({ toString: () => uri }), /no such file in the team index/);
  assert.equal(rec.messages.length, 1);
  assert.equal(rec.messages[0].kind, 'error');
  assert.equal(rec.messages[0].text, `Memory: cannot open ${uri} from the team index: no such file in the team index`);
});
