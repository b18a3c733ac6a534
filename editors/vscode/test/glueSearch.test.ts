// Memory: Search against a server that answers slowly (a remote embedding provider, a team
// index): what the quick pick shows follows what is typed, whatever answers come late. The
// real `memory-ls serve`, its answers held back by a relay. Skipped when memory-ls is not
// installed.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, test } from 'node:test';

import { installFakeVscode, newRecorder, Recorder } from './fakeVscode';
import { activateExtension, demoCopy, findServer, waitFor } from './helpers';

const server = findServer();
const skip = server ? false : 'memory-ls is not installed (set MEMORY_LS_COMMAND or create the repository .venv)';
const DELAY_MS = 600;

let tmp = '';
let rec: Recorder;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let ext: any;

const until = <T>(f: () => T | undefined, ms: number, what: string): Promise<T> =>
  waitFor(f, ms, what, () => rec.output, 20);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

before(async () => {
  if (!server) {
    return;
  }
  let ws: string;
  ({ tmp, ws } = demoCopy());
  const slow = path.join(tmp, 'slow-memory-ls');
  const relay = path.join(__dirname, 'slowServerMain.js');
  fs.writeFileSync(slow, `#!/bin/sh\nexec '${process.execPath}' '${relay}' '${server}' "$@"\n`, { mode: 0o755 });
  rec = newRecorder({
    'memory.server.command': slow,
    'memory.server.env': {
      XDG_CACHE_HOME: path.join(tmp, 'cache'),
      XDG_CONFIG_HOME: path.join(tmp, 'config'),
      MEMORY_LS_TEST_DELAY_MS: String(DELAY_MS),
    },
    'memory.provider': 'none',
  });
  installFakeVscode(rec, [ws]);
  ({ ext } = await activateExtension());
  await until(() => /keyword-only/.test(rec.statusItems[0].text) || undefined, 90_000, 'the server to run');
});

after(async () => {
  if (ext) {
    await ext.deactivate();
  }
  if (tmp) {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('a query cleared while its search runs leaves the list empty', { skip }, async () => {
  await rec.commands.get('memoryLs.search')!();
  const qp = rec.quickPicks.at(-1)!;
  // A first search: the server's first is slow enough for the cancel below to reach it in time.
  qp.changeValue('rate limiting');
  await until(() => qp.items.length || undefined, 10_000, 'a first search');
  qp.changeValue('token bucket');
  await until(() => qp.busy || undefined, 5_000, 'the search to be sent');
  qp.changeValue(''); // select all, Backspace
  await sleep(DELAY_MS + 1_000); // the answer to "token bucket" has come
  assert.deepEqual(qp.items, [], 'results of a query no longer typed');
  assert.equal(qp.busy, false);
  assert.equal(qp.title, 'Memory: Search');
  qp.hide();
});
