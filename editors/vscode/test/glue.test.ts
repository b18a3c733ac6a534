// Loads the compiled glue (out/src/extension.js) with a stand-in `vscode` module: activation
// registers every command, and a server that cannot be found gives the install message and a
// red status bar item instead of an exception.
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
  await ext.deactivate();
  fs.rmSync(ws, { recursive: true, force: true });
});
