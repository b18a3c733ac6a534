// A team index (PostgreSQL): a note a teammate pushed, found by Memory: Search on a machine that
// does not have the file, opens read-only from the team index through the extension's memory-ls:
// content provider. The teammate is this checkout's `memory-ls index` on a folder of its own; the
// workbench opens another folder with the same .memory-ls.toml (namespace) and the URL in the
// environment of code-server, hence of the server it starts.

import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { Check, description, searchFor } from './checks';
import { teamIndexUrl } from './env';
import { Parts, Setup } from './suite';
import { MEMORY_STATUS } from './workbench';

const NOTE = 'memory/fresh.md';
const NOTE_TEXT = '# Fresh\n\nThe quokka migration is scheduled.\n';
const NOTE_LINE = 3; // "The quokka migration is scheduled."

/** How the server finds the team index's URL (no password in any file). */
const URL_ENV = 'MEMORY_LS_PG_URL';

function write(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

/**
 * A new namespace on the test PostgreSQL server, the teammate's note pushed into it with the CLI,
 * and the folder the workbench opens (same namespace, no such note). Throws MissingPart without a
 * server URL.
 */
export function prepareTeam(parts: Parts, home: string): Setup {
  const url = teamIndexUrl();
  const namespace = `e2e_${crypto.randomBytes(5).toString('hex')}`;
  // Both sides embed with the same model (or none): the test model when the suite has one.
  const toml =
    `[store]\nbackend = "postgres"\n\n[store.postgres]\nnamespace = "${namespace}"\n` +
    (parts.model ? `\n[local]\nmodel_path = ${JSON.stringify(parts.model)}\n` : '');

  const theirs = path.join(home, 'theirs');
  write(path.join(theirs, '.memory-ls.toml'), toml);
  write(path.join(theirs, 'MEMORY.md'), '# Memory of a teammate\n\nSee memory/fresh.md.\n');
  write(path.join(theirs, NOTE), NOTE_TEXT);

  const ours = path.join(home, 'ours');
  write(path.join(ours, '.memory-ls.toml'), toml);
  write(path.join(ours, 'MEMORY.md'), '# Memory of this machine\n\nNothing about migrations here.\n');

  // The teammate's machine: a profile of its own, so neither a user config nor a pulled model leaks in.
  const cli = path.join(home, 'teammate-home');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: cli,
    XDG_CONFIG_HOME: path.join(cli, 'config'),
    XDG_CACHE_HOME: path.join(cli, 'cache'),
    LANG: 'C.UTF-8',
    [URL_ENV]: url,
  };
  if (process.env.PYTHONPATH) {
    env.PYTHONPATH = process.env.PYTHONPATH;
  }
  fs.mkdirSync(cli, { recursive: true });
  try {
    execFileSync(parts.server.command, ['index', '--workspace', theirs], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  } catch (error) {
    const e = error as { stderr?: string; stdout?: string };
    throw new Error(`memory-ls index --workspace ${theirs} failed (team index ${namespace}): ${(e.stderr || e.stdout || String(error)).trim()}`);
  }
  assert.ok(!fs.existsSync(path.join(ours, NOTE)), 'the workbench folder has no copy of the note');
  return { workspace: ours, env: { [URL_ENV]: url } };
}

export const TEAM_CHECK: Check = {
  name: "a teammate's file opens read-only from the team index",
  async run({ wb, hybrid }) {
    // The server answers once it has synced with the team index.
    const want = hybrid ? /^\s*Memory: hybrid\s*$/ : /^\s*Memory: keyword-only\s*$/;
    await wb.page.locator(MEMORY_STATUS, { hasText: want }).waitFor({ timeout: 60_000 });

    const row = await searchFor(wb, 'quokka migration', NOTE);
    const desc = await description(row);
    assert.match(desc, /^memory\/fresh\.md:\d+(-\d+)?\s+·\s+.*·\s+team$/, `the hit is marked as the team's: "${desc}"`);
    await row.click();

    await wb.waitForTab('fresh.md');
    await wb.waitForCursorLine(NOTE_LINE);
    assert.equal(await wb.line(NOTE_LINE), 'The quokka migration is scheduled.');
    const tab = wb.page.locator('.editor-group-container.active .tab.active');
    // VS Code shows the name and its suffix in two parts ("fresh" ".md").
    assert.equal((await tab.locator('.tab-label').innerText()).replace(/\s/g, ''), 'fresh.md', 'the tab is named after the note');

    // Read-only: a key typed changes nothing, and VS Code says why.
    await wb.activeEditor.click();
    await wb.page.keyboard.press('End');
    await wb.type('x');
    await wb.page.locator('.monaco-editor-overlaymessage', { hasText: 'Cannot edit in read-only editor' }).waitFor();
    assert.equal(await wb.line(NOTE_LINE), 'The quokka migration is scheduled.', 'the text is unchanged');
    assert.equal(await wb.page.locator('.tab.dirty').count(), 0, 'no unsaved change');
  },
};
