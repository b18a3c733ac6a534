import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

import {
  changeKind,
  documentSelector,
  explicitValue,
  isClientSetting,
  nest,
  serverSettingKeys,
  serverSettings,
} from '../src/settings';

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
const props: Record<string, { default: unknown }> = pkg.contributes.configuration.properties;

test('client-only settings are recognised', () => {
  assert.ok(isClientSetting('memory.server.command'));
  assert.ok(isClientSetting('trace.server'));
  assert.ok(!isClientSetting('memory.query.maxResults'));
  assert.ok(!isClientSetting('sessions.globs'));
});

test('serverSettingKeys lists every contributed server setting and no client one', () => {
  const keys = serverSettingKeys(props);
  assert.ok(keys.includes('provider'));
  assert.ok(keys.includes('query.hybrid.vectorWeight'));
  assert.ok(keys.includes('remote.headers'));
  assert.ok(!keys.some((k) => k.startsWith('server.') || k.startsWith('trace.')));
  assert.equal(keys.length, Object.keys(props).length - Object.keys(props).filter(isClientSetting).length);
});

test('explicitValue: folder over workspace over user; defaults never sent', () => {
  assert.equal(explicitValue({ defaultValue: 6 }), undefined);
  assert.equal(explicitValue({ defaultValue: 6, globalValue: 3 }), 3);
  assert.equal(explicitValue({ globalValue: 3, workspaceValue: 4 }), 4);
  assert.equal(explicitValue({ globalValue: 3, workspaceValue: 4, workspaceFolderValue: 5 }), 5);
  assert.equal(explicitValue({ globalValue: false }), false);
  assert.equal(explicitValue(undefined), undefined);
});

test('nest builds the camelCase tree the server reads', () => {
  assert.deepEqual(nest({ provider: 'none', 'query.maxResults': 3, 'query.hybrid.fusion': 'rrf', 'remote.headers': { A: 'b' } }), {
    provider: 'none',
    query: { maxResults: 3, hybrid: { fusion: 'rrf' } },
    remote: { headers: { A: 'b' } },
  });
});

test('serverSettings sends only what the user set', () => {
  const keys = serverSettingKeys(props);
  const user: Record<string, unknown> = { 'query.maxResults': 2, provider: 'none', 'sync.sessions.deltaBytes': 10 };
  const out = serverSettings(keys, (k) => ({ defaultValue: props[`memory.${k}`].default, globalValue: user[k] }));
  assert.deepEqual(out, { provider: 'none', query: { maxResults: 2 }, sync: { sessions: { deltaBytes: 10 } } });
  assert.deepEqual(serverSettings(keys, (k) => ({ defaultValue: props[`memory.${k}`].default })), {});
});

test('changeKind: client settings restart, server settings are pushed', () => {
  const keys = serverSettingKeys(props);
  const affects = (changed: string[]) => (s: string) => changed.some((c) => c === s || c.startsWith(s + '.'));
  assert.equal(changeKind(affects(['memory.server.command']), keys), 'restart');
  assert.equal(changeKind(affects(['memory.trace.server']), keys), 'none');
  assert.equal(changeKind(affects(['memory.query.maxResults']), keys), 'push');
  assert.equal(changeKind(affects(['memory.provider']), keys), 'push');
  assert.equal(changeKind(affects(['editor.fontSize']), keys), 'none');
});

test('documentSelector: every file (citations in code comments), when asked', () => {
  assert.deepEqual(
    documentSelector({ allFiles: true, allMarkdown: false, folders: ['/w'], extraPaths: [], sources: ['memory', 'sessions'], sessionGlobs: ['a/*.jsonl'] }),
    [{ scheme: 'file' }],
  );
});

test('documentSelector: all Markdown, or memory files, extra paths and transcripts', () => {
  assert.deepEqual(documentSelector({ allMarkdown: true, folders: ['/w'], extraPaths: ['notes'], sources: ['memory'], sessionGlobs: [] }), [
    { scheme: 'file', language: 'markdown' },
  ]);
  const sel = documentSelector({
    allMarkdown: false,
    folders: ['/w', '/v/'],
    extraPaths: ['notes', 'TODO.md', '/abs/more'],
    sources: ['memory', 'sessions'],
    sessionGlobs: ['logs/*.jsonl', '~/.agent/**/*.jsonl'],
    home: '/home/u',
  });
  assert.deepEqual(sel, [
    { scheme: 'file', language: 'markdown', pattern: '**/{MEMORY.md,memory.md}' },
    { scheme: 'file', language: 'markdown', pattern: '**/memory/**/*.md' },
    { scheme: 'file', language: 'markdown', pattern: '/w/notes/**/*.md' },
    { scheme: 'file', language: 'markdown', pattern: '/v/notes/**/*.md' },
    { scheme: 'file', language: 'markdown', pattern: '/w/TODO.md' },
    { scheme: 'file', language: 'markdown', pattern: '/v/TODO.md' },
    { scheme: 'file', language: 'markdown', pattern: '/abs/more/**/*.md' },
    { scheme: 'file', pattern: '/w/logs/*.jsonl' },
    { scheme: 'file', pattern: '/v/logs/*.jsonl' },
    { scheme: 'file', pattern: '/home/u/.agent/**/*.jsonl' },
  ]);
  // transcripts only when the sessions source is on
  assert.equal(
    documentSelector({ allMarkdown: true, folders: ['/w'], extraPaths: [], sources: ['memory'], sessionGlobs: ['a/*.jsonl'] }).length,
    1,
  );
});
