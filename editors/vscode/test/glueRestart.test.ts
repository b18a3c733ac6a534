// Restarting the server (Memory: Restart Server, or a `memory.server.*` setting changed) while
// a restart or a start is under way: one server runs afterwards, never two (two would each
// answer hover, definition and workspace symbols, and both write the index). The server runs
// through a script that writes down each process it starts. Skipped when memory-ls is not
// installed.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, test } from 'node:test';

import { installFakeVscode, newRecorder, Recorder } from './fakeVscode';
import { activateExtension, demoCopy, findServer, waitFor } from './helpers';

const server = findServer();
const skip = server ? false : 'memory-ls is not installed (set MEMORY_LS_COMMAND or create the repository .venv)';

let tmp = '';
let pids = '';
let rec: Recorder;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let ext: any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let context: any;

const until = <T>(f: () => T | undefined, ms: number, what: string): Promise<T> =>
  waitFor(f, ms, what, () => rec.output);

function alive(): number[] {
  const started = fs.existsSync(pids) ? fs.readFileSync(pids, 'utf8').split('\n').filter(Boolean).map(Number) : [];
  return started.filter((pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  });
}

/** Every start and stop settled: the status bar shows the mode (when `running`), and at most
 * one server is left (none when not `running`): the servers still running. */
async function settled(running = true): Promise<number[]> {
  const bar = rec.statusItems.at(-1);
  if (running) {
    await until(() => /keyword-only/.test(bar.text), 60_000, 'the server to run');
  }
  const end = Date.now() + 10_000;
  while (alive().length > (running ? 1 : 0) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 100));
  }
  return alive();
}

before(async () => {
  if (!server) {
    return;
  }
  let ws: string;
  ({ tmp, ws } = demoCopy());
  pids = path.join(tmp, 'pids');
  const wrapper = path.join(tmp, 'memory-ls');
  fs.writeFileSync(wrapper, `#!/bin/sh\necho $$ >> '${pids}'\nexec '${server}' "$@"\n`, { mode: 0o755 });
  rec = newRecorder({
    'memory.server.command': wrapper,
    'memory.server.env': { XDG_CACHE_HOME: path.join(tmp, 'cache'), XDG_CONFIG_HOME: path.join(tmp, 'config') },
    'memory.provider': 'none',
  });
  installFakeVscode(rec, [ws]);
  ({ ext, context } = await activateExtension());
});

after(async () => {
  if (ext) {
    await ext.deactivate();
  }
  for (const pid of tmp ? alive() : []) {
    process.kill(pid); // a server the extension lost track of
  }
  if (tmp) {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('two restarts at once leave one server running', { skip }, async () => {
  assert.equal((await settled()).length, 1);
  const restart = rec.commands.get('memoryLs.restart')!;
  await Promise.all([restart(), restart()]);
  const left = await settled();
  assert.equal(left.length, 1, `servers running: ${left.join(', ')}\n${rec.output.join('\n')}`);
});

test('a restart while the server is starting leaves one server running', { skip }, async () => {
  assert.equal((await settled()).length, 1);
  await ext.deactivate();
  assert.equal((await settled(false)).length, 0);
  // VS Code starts the extension (its server is being started: `initialize` not answered
  // yet) and a `memory.server.*` setting changes, or the user runs Restart Server.
  const activating = ext.activate(context);
  await rec.commands.get('memoryLs.restart')!();
  await activating;
  const left = await settled();
  assert.equal(left.length, 1, `servers running: ${left.join(', ')}\n${rec.output.join('\n')}`);
  assert.deepEqual(
    rec.messages.filter((m) => m.kind === 'error'),
    [],
    'no start failure is reported for a server that was replaced',
  );
});
