// A server command that exists but dies at once (here /bin/false): one clear message with the
// install command, a red status bar item, no restart loop. Runs in a child process, because
// vscode-languageclient leaves rejected promises behind in that case, which node:test would
// count against the test.
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

const FALSE = ['/bin/false', '/usr/bin/false'].find((p) => fs.existsSync(p));

test('a server that exits at once: one message with the install command', { skip: FALSE ? false : 'no /bin/false' }, () => {
  const r = spawnSync(process.execPath, [path.join(__dirname, 'startFailureMain.js'), FALSE!], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const seen = JSON.parse(r.stdout.trim().split('\n').pop()!) as { messages: { kind: string; text: string }[]; bar: string };
  const ours = seen.messages.filter((m) => m.kind === 'error' && m.text.startsWith('Memory: the memory-ls language server could not start'));
  assert.equal(ours.length, 1, JSON.stringify(seen.messages, null, 1));
  assert.match(ours[0].text, /\/bin\/false serve/);
  assert.match(ours[0].text, /pipx install memory-ls/);
  assert.ok(!seen.messages.some((m) => /crashed \d+ times/.test(m.text)), 'no restart loop');
  assert.equal(seen.bar, '$(error) Memory');
});
