import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import {
  chooseInstaller,
  commandLine,
  DEFAULT_SOURCE,
  installSource,
  installSteps,
  manualInstallText,
  modelPullStep,
  needsUpgrade,
  parseRecord,
  recordFile,
  serializeRecord,
  upgradeSteps,
  venvDir,
  venvServer,
} from '../src/install';
import { choosePython, isSupported, parsePythonVersion, PythonCandidate, pythonNames } from '../src/python';
import { resolveServerCommand, ServerCommandInput } from '../src/serverCommand';

const py311: PythonCandidate = { path: '/usr/bin/python3', origin: 'PATH', version: [3, 11, 2] };

test('parsePythonVersion: the probe, --version output, pre-releases', () => {
  assert.deepEqual(parsePythonVersion('3.11.7\n'), [3, 11, 7]);
  assert.deepEqual(parsePythonVersion('Python 3.12.0rc1'), [3, 12, 0]);
  assert.deepEqual(parsePythonVersion('Python 3.13'), [3, 13, 0]);
  assert.equal(parsePythonVersion('command not found'), undefined);
  assert.equal(parsePythonVersion(''), undefined);
});

test('isSupported: 3.11 and newer', () => {
  assert.ok(isSupported([3, 11, 0]));
  assert.ok(isSupported([3, 13, 1]));
  assert.ok(isSupported([4, 0, 0]));
  assert.ok(!isSupported([3, 10, 14]));
  assert.ok(!isSupported([2, 7, 18]));
});

test('pythonNames: python3 first; the py launcher on Windows', () => {
  assert.deepEqual(pythonNames('linux').slice(0, 2), ['python3', 'python']);
  assert.equal(pythonNames('win32')[0], 'python');
  assert.ok(pythonNames('win32').includes('py'));
});

test("choosePython: the Python extension's interpreter first, then PATH, 3.11+", () => {
  const ext: PythonCandidate = { path: '/ws/.venv/bin/python', origin: 'python extension', version: [3, 12, 1] };
  const r = choosePython([py311, ext]);
  assert.ok(r.ok);
  assert.equal(r.python.path, '/ws/.venv/bin/python');

  // Too old in the Python extension: PATH's python3 is used.
  const old: PythonCandidate = { ...ext, version: [3, 9, 6] };
  const r2 = choosePython([old, py311]);
  assert.ok(r2.ok);
  assert.equal(r2.python.path, '/usr/bin/python3');
});

test('choosePython: says which interpreters were too old or did not run', () => {
  const r = choosePython([
    { path: '/usr/bin/python3', origin: 'PATH', version: [3, 10, 12] },
    { path: '/usr/bin/python', origin: 'PATH' },
  ]);
  assert.ok(!r.ok);
  assert.match(r.reason, /needs Python 3\.11 or newer/);
  assert.match(r.reason, /\/usr\/bin\/python3 \(PATH\) is Python 3\.10\.12/);
  assert.match(r.reason, /\/usr\/bin\/python \(PATH\) did not run/);
  const none = choosePython([]);
  assert.ok(!none.ok);
  assert.match(none.reason, /no Python was found/);
});

test('chooseInstaller: uv when it is on PATH, else the Python, else none', () => {
  assert.deepEqual(chooseInstaller('/usr/bin/uv', py311), { kind: 'uv', uv: '/usr/bin/uv' });
  assert.deepEqual(chooseInstaller(undefined, py311), { kind: 'python', python: py311 });
  assert.equal(chooseInstaller(undefined, undefined), undefined);
});

test('installSteps with uv: a seeded venv (pip for model pull), then uv pip install into it', () => {
  const venv = venvDir('/gs', 'linux');
  assert.equal(venv, '/gs/venv');
  const steps = installSteps({ kind: 'uv', uv: '/bin/uv' }, venv, 'memory-ls', 'linux');
  assert.deepEqual(
    steps.map((s) => [s.command, ...s.args]),
    [
      ['/bin/uv', 'venv', '--seed', '--python', '>=3.11', '/gs/venv'],
      ['/bin/uv', 'pip', 'install', '--python', '/gs/venv/bin/python', 'memory-ls'],
    ],
  );
});

test('installSteps with a Python: python -m venv, then the venv pip', () => {
  const steps = installSteps({ kind: 'python', python: py311 }, '/gs/venv', '/w/dist/memory_ls-0.1.0-py3-none-any.whl', 'linux');
  assert.deepEqual(
    steps.map((s) => [s.command, ...s.args]),
    [
      ['/usr/bin/python3', '-m', 'venv', '/gs/venv'],
      ['/gs/venv/bin/python', '-m', 'pip', 'install', '--disable-pip-version-check', '/w/dist/memory_ls-0.1.0-py3-none-any.whl'],
    ],
  );
  const win = installSteps({ kind: 'python', python: { ...py311, path: 'C:\\Python312\\python.exe' } }, 'C:\\gs\\venv', 'memory-ls', 'win32');
  assert.equal(win[1].command, 'C:\\gs\\venv\\Scripts\\python.exe');
  assert.equal(venvServer('C:\\gs\\venv', 'win32'), 'C:\\gs\\venv\\Scripts\\memory-ls.exe');
});

test('upgradeSteps: the same source with --upgrade, through uv or the venv pip', () => {
  assert.deepEqual(
    upgradeSteps('/bin/uv', '/gs/venv', 'memory-ls', 'linux').map((s) => [s.command, ...s.args]),
    [['/bin/uv', 'pip', 'install', '--python', '/gs/venv/bin/python', '--upgrade', 'memory-ls']],
  );
  assert.deepEqual(
    upgradeSteps(undefined, '/gs/venv', 'memory-ls==0.2.0', 'linux').map((s) => [s.command, ...s.args]),
    [['/gs/venv/bin/python', '-m', 'pip', 'install', '--disable-pip-version-check', '--upgrade', 'memory-ls==0.2.0']],
  );
});

test('modelPullStep and commandLine', () => {
  const step = modelPullStep('/gs/venv', 'linux');
  assert.deepEqual([step.command, ...step.args], ['/gs/venv/bin/memory-ls', 'model', 'pull']);
  assert.equal(commandLine(step), '/gs/venv/bin/memory-ls model pull');
  assert.equal(commandLine({ command: '/bin/uv', args: ['venv', '--python', '>=3.11', '/a b'] }), '/bin/uv venv --python ">=3.11" "/a b"');
});

test('installSource: the default, a requirement, a wheel path', () => {
  assert.equal(installSource('', '/home/u', 'linux'), DEFAULT_SOURCE);
  assert.equal(installSource(undefined, '/home/u', 'linux'), 'memory-ls');
  assert.equal(installSource(' memory-ls==0.2.0 ', '/home/u', 'linux'), 'memory-ls==0.2.0');
  assert.equal(installSource('memory-ls[local]>=0.1', '/home/u', 'linux'), 'memory-ls[local]>=0.1');
  assert.equal(installSource('~/dist/memory_ls-0.1.0-py3-none-any.whl', '/home/u', 'linux'), '/home/u/dist/memory_ls-0.1.0-py3-none-any.whl');
  assert.equal(installSource('dist/m.whl', '/home/u', 'linux'), '/home/u/dist/m.whl');
  assert.equal(installSource('/abs/m.whl', '/home/u', 'linux'), '/abs/m.whl');
  assert.equal(installSource('https://example.org/m.whl', '/home/u', 'linux'), 'https://example.org/m.whl');
});

test('the install record: round trip, tolerant parse, upgrade when the extension version changed', () => {
  const r = { extensionVersion: '0.1.0', source: 'memory-ls', installer: 'uv' as const, tool: '/bin/uv', modelPulled: true };
  assert.deepEqual(parseRecord(serializeRecord(r)), r);
  assert.equal(parseRecord('not json'), undefined);
  assert.equal(parseRecord('{}'), undefined);
  assert.equal(parseRecord(undefined), undefined);
  assert.deepEqual(parseRecord('{"extensionVersion":"0.1.0","source":"x"}'), { extensionVersion: '0.1.0', source: 'x', installer: 'python', tool: '', modelPulled: false });
  assert.equal(recordFile('/gs', 'linux'), '/gs/install.json');
  assert.ok(!needsUpgrade(r, '0.1.0'));
  assert.ok(needsUpgrade(r, '0.1.1'));
  assert.ok(needsUpgrade(undefined, '0.1.0'));
});

test('manualInstallText names the tool installs and model pull', () => {
  const text = manualInstallText('memory-ls');
  assert.match(text, /uv tool install memory-ls/);
  assert.match(text, /pipx install memory-ls/);
  assert.match(text, /memory-ls model pull/);
});

function input(over: Partial<ServerCommandInput> = {}, files: string[] = []): ServerCommandInput {
  return { command: '', args: [], pythonPath: '', folders: ['/ws'], home: '/home/u', platform: 'linux', env: { PATH: '/usr/bin' }, isExecutable: (p) => files.includes(p), ...over };
}

test("resolveServerCommand: the extension's own install comes last, and nothing found may be offered", () => {
  const managed = '/gs/venv/bin/memory-ls';
  const own = resolveServerCommand(input({ managed }, [managed]));
  assert.ok(own.ok);
  assert.equal(own.source, 'managed');
  assert.equal(own.command, managed);
  // PATH wins over the extension's install.
  const onPath = resolveServerCommand(input({ managed }, [managed, '/usr/bin/memory-ls']));
  assert.ok(onPath.ok);
  assert.equal(onPath.source, 'path');
  const none = resolveServerCommand(input({ managed }));
  assert.ok(!none.ok);
  assert.equal(none.notFound, true);
  assert.ok(none.tried.includes(managed));
  // A configured command that is missing is an error, not an offer.
  const configured = resolveServerCommand(input({ command: '/opt/memory-ls', managed }, [managed]));
  assert.ok(!configured.ok);
  assert.ok(!configured.notFound);
});
