// Settings changed and removed while the server runs: the server pulls the `memory` section
// again (workspace/configuration, answered by the glue) and a search follows the new values.
// The real `memory-ls serve`. Skipped when memory-ls is not installed.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, test } from 'node:test';

import { installFakeVscode, newRecorder, Recorder } from './fakeVscode';
import { activateExtension, demoCopy, findServer, waitFor } from './helpers';

const server = findServer();
const skip = server ? false : 'memory-ls is not installed (set MEMORY_LS_COMMAND or create the repository .venv)';

let tmp = '';
let rec: Recorder;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let ext: any;

const until = <T>(f: () => T | undefined, ms: number, what: string): Promise<T> =>
  waitFor(f, ms, what, () => rec.output);

before(async () => {
  if (!server) {
    return;
  }
  let ws: string;
  ({ tmp, ws } = demoCopy());
  rec = newRecorder({
    'memory.server.command': server,
    'memory.server.env': { XDG_CACHE_HOME: path.join(tmp, 'cache'), XDG_CONFIG_HOME: path.join(tmp, 'config') },
    'memory.provider': 'none',
    'memory.query.maxResults': 1,
  });
  installFakeVscode(rec, [ws]);
  ({ ext } = await activateExtension());
  await until(() => /keyword-only/.test(rec.statusItems[0].text) || undefined, 60_000, 'the server to run');
});

after(async () => {
  if (ext) {
    await ext.deactivate();
  }
  if (tmp) {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

/** The number of hits Memory: Search lists for `query`. */
async function hits(query: string): Promise<number> {
  await rec.commands.get('memoryLs.search')!();
  const qp = rec.quickPicks.at(-1)!;
  qp.changeValue(query);
  await until(() => /results?\b/.test(qp.title ?? '') || undefined, 10_000, 'results');
  const n = qp.items.length;
  qp.hide();
  return n;
}

/** Searches until `ok(number of hits)` (the server reopens its index after a change). */
async function hitsUntil(query: string, ok: (n: number) => boolean): Promise<number> {
  const end = Date.now() + 10_000;
  let n = await hits(query);
  while (!ok(n) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 200));
    n = await hits(query);
  }
  return n;
}

test('a memory.* setting changed, then removed, at runtime takes effect', { skip }, async () => {
  const query = 'Redis'; // in three notes and MEMORY.md
  assert.equal(await hits(query), 1);
  rec.config['memory.query.maxResults'] = 2;
  rec.configChanged(['memory.query.maxResults']);
  assert.equal(await hitsUntil(query, (n) => n === 2), 2, 'memory.query.maxResults changed to 2');
  delete rec.config['memory.query.maxResults'];
  rec.configChanged(['memory.query.maxResults']);
  const n = await hitsUntil(query, (n) => n > 2);
  assert.ok(n > 2, `memory.query.maxResults removed: the default (6) applies, got ${n}`);
});
