// package.json and the glue agree: every contributed command is registered, activation covers
// the memory files, the entry point exists after a build.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

import { EXTENSION_DIR } from './helpers';

const pkg = JSON.parse(fs.readFileSync(path.join(EXTENSION_DIR, 'package.json'), 'utf8'));
const SRC = path.join(EXTENSION_DIR, 'src');
const glue = fs
  .readdirSync(SRC)
  .filter((f) => f.endsWith('.ts'))
  .map((f) => fs.readFileSync(path.join(SRC, f), 'utf8'))
  .join('\n');

test('every contributed command is registered and vice versa', () => {
  const contributed = (pkg.contributes.commands as { command: string }[]).map((c) => c.command).sort();
  const registered = [...glue.matchAll(/registerCommand\('([^']+)'/g)].map((m) => m[1]).sort();
  assert.deepEqual(registered, contributed);
  // The server's own commands (memory.reindex, ...) are registered by vscode-languageclient
  // under their names: ours must not collide.
  for (const c of contributed) {
    assert.ok(c.startsWith('memoryLs.'), c);
  }
});

test('activation on MEMORY.md, memory.md or memory/', () => {
  assert.deepEqual(pkg.activationEvents, [
    'workspaceContains:MEMORY.md',
    'workspaceContains:memory.md',
    'workspaceContains:memory/**/*.md',
  ]);
});

test('main points at the compiled glue; engines and dependencies', () => {
  assert.equal(pkg.main, './out/src/extension.js');
  assert.ok(fs.existsSync(path.join(EXTENSION_DIR, pkg.main)), 'run tsc first');
  assert.match(pkg.engines.vscode, /^\^1\.\d+\.\d+$/);
  assert.ok(pkg.dependencies['vscode-languageclient']);
});

test('keybindings point at contributed commands', () => {
  const ids = new Set((pkg.contributes.commands as { command: string }[]).map((c) => c.command));
  for (const kb of pkg.contributes.keybindings as { command: string }[]) {
    assert.ok(ids.has(kb.command), kb.command);
  }
});

test('the Health view: in its own panel container, with a welcome for no findings and a command that focuses it', () => {
  const container = pkg.contributes.viewsContainers.panel.find((c: { id: string }) => c.id === 'memoryLs');
  assert.ok(container, 'a Memory container in the panel, beside Problems');
  const views = pkg.contributes.views.memoryLs as { id: string; name: string }[];
  assert.deepEqual(views.map((v) => v.id), ['memoryLs.health']);
  assert.ok(glue.includes(`VIEW_ID = '${views[0].id}'`), 'healthView.ts creates the contributed view');
  const welcome = pkg.contributes.viewsWelcome.find((w: { view: string }) => w.view === 'memoryLs.health');
  assert.match(welcome.contents, /^No findings/);
  assert.ok(glue.includes('${VIEW_ID}.focus'), 'Memory: Show Health focuses the view');
});
