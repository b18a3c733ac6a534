// The glue of the extension's own install, in a child process each (see glueInstallMain.ts):
// nothing found means the offer (never an install by itself); a server installed by an older
// extension version is upgraded from the same source before it starts.
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';

import { OFFER } from '../src/install';

interface Seen {
  messages: { kind: string; text: string; items: string[] }[];
  bar: string;
  output: string[];
}

function run(storage: string, version: string): Seen {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'memory-ls-glue-ws-'));
  try {
    const r = spawnSync(process.execPath, [path.join(__dirname, 'glueInstallMain.js'), storage, ws, version], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout.trim().split('\n').pop()!) as Seen;
  } finally {
    fs.rmSync(ws, { recursive: true, force: true });
  }
}

test('no memory-ls anywhere: the offer with its three choices, and nothing installed', () => {
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'memory-ls-glue-gs-'));
  try {
    const seen = run(storage, '0.1.0');
    const offers = seen.messages.filter((m) => m.text === OFFER);
    assert.equal(offers.length, 1, JSON.stringify(seen.messages, null, 1));
    assert.deepEqual(offers[0].items, ['Install', 'Show install commands', 'Not now']);
    assert.ok(!seen.messages.some((m) => m.kind === 'error'), 'no error pop-up besides the offer');
    assert.equal(seen.bar, '$(error) Memory');
    assert.ok(!fs.existsSync(path.join(storage, 'venv')), 'nothing was installed without asking');
  } finally {
    fs.rmSync(storage, { recursive: true, force: true });
  }
});

test('an extension update upgrades its server from the same source before starting it', { skip: process.platform === 'win32' }, () => {
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'memory-ls-glue-gs-'));
  try {
    const bin = path.join(storage, 'venv', 'bin');
    fs.mkdirSync(bin, { recursive: true });
    const calls = path.join(storage, 'calls.txt');
    // The venv's python records how it was called; its memory-ls exits at once.
    fs.writeFileSync(path.join(bin, 'python'), `#!/bin/sh\necho "$@" >> ${JSON.stringify(calls)}\n`, { mode: 0o755 });
    fs.writeFileSync(path.join(bin, 'memory-ls'), '#!/bin/sh\nexit 3\n', { mode: 0o755 });
    const record = { extensionVersion: '0.1.0', source: '/w/memory_ls-0.1.0-py3-none-any.whl', installer: 'python', tool: '/usr/bin/python3', modelPulled: true };
    fs.writeFileSync(path.join(storage, 'install.json'), JSON.stringify(record));

    const seen = run(storage, '0.2.0');
    assert.equal(fs.readFileSync(calls, 'utf8').trim(), '-m pip install --disable-pip-version-check --upgrade /w/memory_ls-0.1.0-py3-none-any.whl');
    const after = JSON.parse(fs.readFileSync(path.join(storage, 'install.json'), 'utf8'));
    assert.equal(after.extensionVersion, '0.2.0');
    assert.equal(after.source, record.source);
    assert.ok(!seen.messages.some((m) => m.text === OFFER), 'an installed server is not offered again');
    assert.ok(seen.output.some((l) => l.includes(`starting ${path.join(bin, 'memory-ls')} serve (managed)`)), seen.output.join('\n'));

    // The same version again: no upgrade.
    fs.rmSync(calls);
    run(storage, '0.2.0');
    assert.ok(!fs.existsSync(calls), 'no upgrade when the version did not change');
  } finally {
    fs.rmSync(storage, { recursive: true, force: true });
  }
});
