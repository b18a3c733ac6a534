// Where the end-to-end suite finds its parts, and the scratch folders it works in.
// Every part is real: code-server and Node 24 from e2e/install.sh, Debian's chromium, this
// checkout's memory-ls, a PostgreSQL for the team index check. A missing part fails the run (or
// that check) under CI=true and skips it elsewhere.

import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { findServer, REPO } from '../test/helpers';

export const EXTENSION_DIR = path.join(REPO, 'editors', 'vscode');
/** Failure screenshots, logs and the packaged vsix (gitignored). */
export const ARTIFACTS = path.join(EXTENSION_DIR, 'e2e', 'artifacts');
export const CHROMIUM = process.env.MEMORY_LS_E2E_CHROMIUM ?? '/usr/bin/chromium';
export const IN_CI = process.env.CI === 'true';

/** A part of the suite that is not there: the caller fails (CI) or skips (elsewhere). */
export class MissingPart extends Error {}

export interface Tools {
  node: string;
  codeServer: string;
}

/** Node 24 and code-server from the cache, installed first when the cache is cold. */
export function installTools(): Tools {
  const script = path.join(EXTENSION_DIR, 'e2e', 'install.sh');
  let out: string;
  try {
    out = execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  } catch (error) {
    throw new MissingPart(`e2e/install.sh failed (code-server needs Debian's libkrb5-dev): ${String(error)}`);
  }
  const vars = Object.fromEntries(
    out
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  return { node: vars.MEMORY_LS_E2E_NODE, codeServer: vars.MEMORY_LS_E2E_CODE_SERVER };
}

export interface Server {
  /** The memory-ls executable the extension will find on PATH. */
  command: string;
  /** Its interpreter, to build the test model with the project's own code. */
  python: string;
}

export function findMemoryLs(): Server {
  const command = findServer();
  if (!command) {
    throw new MissingPart('no memory-ls: set MEMORY_LS_COMMAND or create the repository .venv');
  }
  const python = path.join(path.dirname(command), 'python');
  return { command, python };
}

export function checkChromium(): void {
  if (spawnSync(CHROMIUM, ['--version'], { stdio: 'ignore' }).status !== 0) {
    throw new MissingPart(`no browser at ${CHROMIUM} (apt-get install chromium)`);
  }
}

/**
 * The small real embedding model the Python tests use (tests/support/model_util.py builds it once into
 * <repo>/.cache/models from a PyPI wheel). Undefined when it cannot be had (or with
 * MEMORY_LS_E2E_MODEL=none): search is then keyword-only, and the checks expect that.
 */
export function testModel(server: Server): string | undefined {
  if (process.env.MEMORY_LS_E2E_MODEL === 'none') {
    console.log('e2e: MEMORY_LS_E2E_MODEL=none: no model, expecting keyword-only search');
    return undefined;
  }
  const code = 'import sys; sys.path.insert(0, sys.argv[1]); from tests.support.model_util import ensure_test_model; print(ensure_test_model())';
  const r = spawnSync(server.python, ['-c', code, REPO], { encoding: 'utf8', cwd: REPO, timeout: 15 * 60 * 1000 });
  const model = r.stdout?.trim().split('\n').pop();
  if (r.status === 0 && model && fs.existsSync(model)) {
    return model;
  }
  const why = `the test model could not be built: ${(r.stderr || String(r.error)).trim().split('\n').pop()}`;
  if (IN_CI) {
    throw new MissingPart(why);
  }
  console.log(`e2e: ${why}; expecting keyword-only search`);
  return undefined;
}

/** The PostgreSQL server of the team index check (the one the Python tests use, see .ci/run). */
export const PG_URL_ENV = 'MEMORY_LS_TEST_PG_URL';

/** A PostgreSQL (with pgvector) superuser URL for a team index; MissingPart when none is set. */
export function teamIndexUrl(): string {
  const url = process.env[PG_URL_ENV];
  if (!url) {
    throw new MissingPart(
      `${PG_URL_ENV} is not set: point it at a PostgreSQL server with pgvector, e.g. ` +
        '`bash tests/support/pg_server.sh up "$(mktemp -d)" .venv/bin/python` from the repository (as .ci/run does)',
    );
  }
  return url;
}

/** A fresh scratch folder; everything the suite writes goes under it. */
export function scratch(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'memory-ls-e2e-'));
}

/** A copy of examples/demo to open: the suite never writes into the repository's example. */
export function copyDemo(dest: string): string {
  fs.cpSync(path.join(REPO, 'examples', 'demo'), dest, { recursive: true });
  return dest;
}

/** PATH without any folder that holds a memory-ls executable. */
export function pathWithoutServer(envPath: string): string {
  return envPath
    .split(path.delimiter)
    .filter((dir) => dir && !fs.existsSync(path.join(dir, 'memory-ls')))
    .join(path.delimiter);
}
