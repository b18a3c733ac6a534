import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { expandVariables, installCommand, resolveServerCommand, RestartBudget, ServerCommandInput, startFailureMessage } from '../src/serverCommand';

function input(over: Partial<ServerCommandInput> = {}, files: string[] = []): ServerCommandInput {
  return {
    command: '',
    args: [],
    pythonPath: '',
    folders: ['/ws'],
    home: '/home/u',
    platform: 'linux',
    env: { PATH: '/usr/local/bin:/usr/bin' },
    isExecutable: (p) => files.includes(p),
    ...over,
  };
}

test('expandVariables', () => {
  const i = input({ env: { VENV: '/opt/v' } });
  assert.equal(expandVariables('${workspaceFolder}/.venv/bin/memory-ls', i), '/ws/.venv/bin/memory-ls');
  assert.equal(expandVariables('~/bin/memory-ls', i), '/home/u/bin/memory-ls');
  assert.equal(expandVariables('${userHome}/x', i), '/home/u/x');
  assert.equal(expandVariables('${env:VENV}/bin/python', i), '/opt/v/bin/python');
});

test('memory.server.command: a path, then a name on PATH', () => {
  const r = resolveServerCommand(input({ command: '~/bin/memory-ls' }, ['/home/u/bin/memory-ls']));
  assert.ok(r.ok);
  assert.equal(r.command, '/home/u/bin/memory-ls');
  assert.deepEqual(r.args, ['serve']);
  assert.equal(r.source, 'command');

  const rel = resolveServerCommand(input({ command: './tools/memory-ls', args: ['serve', '--stdio'] }, ['/ws/tools/memory-ls']));
  assert.ok(rel.ok);
  assert.equal(rel.command, '/ws/tools/memory-ls');
  assert.deepEqual(rel.args, ['serve', '--stdio']);

  const onPath = resolveServerCommand(input({ command: 'memory-ls' }, ['/usr/bin/memory-ls']));
  assert.ok(onPath.ok);
  assert.equal(onPath.command, '/usr/bin/memory-ls');

  const missing = resolveServerCommand(input({ command: '/nope/memory-ls' }));
  assert.ok(!missing.ok);
  assert.match(missing.reason, /memory\.server\.command.*\/nope\/memory-ls.*not an executable/);
  assert.equal(missing.install, 'pipx install memory-ls');
});

test('memory.server.pythonPath runs python -m memory_ls', () => {
  const r = resolveServerCommand(input({ pythonPath: '${workspaceFolder}/.venv/bin/python' }, ['/ws/.venv/bin/python']));
  assert.ok(r.ok);
  assert.equal(r.command, '/ws/.venv/bin/python');
  assert.deepEqual(r.args, ['-m', 'memory_ls', 'serve']);
  assert.equal(r.source, 'pythonPath');

  const bare = resolveServerCommand(input({ pythonPath: 'python3' }, ['/usr/bin/python3']));
  assert.ok(bare.ok);
  assert.equal(bare.command, '/usr/bin/python3');

  const bad = resolveServerCommand(input({ pythonPath: '/opt/py/bin/python' }));
  assert.ok(!bad.ok);
  assert.equal(bad.install, '"/opt/py/bin/python" -m pip install memory-ls');
});

test('the command setting wins over pythonPath', () => {
  const r = resolveServerCommand(input({ command: '/a/memory-ls', pythonPath: '/usr/bin/python3' }, ['/a/memory-ls', '/usr/bin/python3']));
  assert.ok(r.ok);
  assert.equal(r.source, 'command');
});

test('no setting: a workspace venv, then PATH', () => {
  const venv = resolveServerCommand(input({}, ['/ws/.venv/bin/memory-ls', '/usr/bin/memory-ls']));
  assert.ok(venv.ok);
  assert.equal(venv.command, '/ws/.venv/bin/memory-ls');
  assert.equal(venv.source, 'workspaceVenv');

  const second = resolveServerCommand(input({ folders: ['/a', '/b'] }, ['/b/venv/bin/memory-ls']));
  assert.ok(second.ok);
  assert.equal(second.command, '/b/venv/bin/memory-ls');

  const path = resolveServerCommand(input({}, ['/usr/bin/memory-ls']));
  assert.ok(path.ok);
  assert.equal(path.command, '/usr/bin/memory-ls');
  assert.equal(path.source, 'path');
});

test('nothing found: a reason, what was tried and how to install', () => {
  const r = resolveServerCommand(input());
  assert.ok(!r.ok);
  assert.match(r.reason, /not found/);
  assert.ok(r.tried.includes('/ws/.venv/bin/memory-ls'));
  assert.ok(r.tried.includes('/usr/bin/memory-ls'));
  const msg = startFailureMessage(r.reason, r.install);
  assert.match(msg, /pipx install memory-ls/);
  assert.match(msg, /memory\.server\.command/);
});

test('Windows: Scripts folder and PATHEXT', () => {
  const win = input({ platform: 'win32', folders: ['C:\\ws'], env: { PATH: 'C:\\bin;C:\\tools', PATHEXT: '.EXE;.CMD' } }, [
    'C:\\tools\\memory-ls.exe',
  ]);
  const r = resolveServerCommand(win);
  assert.ok(r.ok);
  assert.equal(r.command, 'C:\\tools\\memory-ls.exe');
  assert.ok(!r.ok || r.tried.includes('C:\\ws\\.venv\\Scripts\\memory-ls.exe'));
});

test('installCommand', () => {
  assert.equal(installCommand(), 'pipx install memory-ls');
  assert.equal(installCommand('/usr/bin/python3'), '"/usr/bin/python3" -m pip install memory-ls');
});

test('RestartBudget allows a few restarts per window', () => {
  const b = new RestartBudget(2, 1000);
  assert.equal(b.allow(0), true);
  assert.equal(b.allow(10), true);
  assert.equal(b.allow(20), false);
  assert.equal(b.allow(1500), true); // the first two left the window
});
