// Shared helpers for the tests that run outside VS Code (no `vscode` module here).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';

export const EXTENSION_DIR = path.join(__dirname, '..', '..');
export const REPO = path.join(EXTENSION_DIR, '..', '..');

function executable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

function which(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const full = path.join(dir, name);
    if (executable(full)) {
      return full;
    }
  }
  return undefined;
}

/** A Python that can import memory_ls: $MEMORY_LS_PYTHON, the repository's .venv, python3. */
export function findPython(): string | undefined {
  const bin = process.platform === 'win32' ? ['Scripts', 'python.exe'] : ['bin', 'python'];
  const candidates = [
    process.env.MEMORY_LS_PYTHON,
    path.join(REPO, '.venv', ...bin),
    path.join(REPO, 'venv', ...bin),
    which('python3'),
    which('python'),
  ].filter((c): c is string => !!c);
  for (const c of candidates) {
    if (!executable(c)) {
      continue;
    }
    const r = spawnSync(c, ['-c', 'import memory_ls.settings'], { cwd: os.tmpdir(), stdio: 'ignore' });
    if (r.status === 0) {
      return c;
    }
  }
  return undefined;
}

/** The memory-ls executable: $MEMORY_LS_COMMAND, the repository's .venv, PATH. */
export function findServer(): string | undefined {
  const bin = process.platform === 'win32' ? ['Scripts', 'memory-ls.exe'] : ['bin', 'memory-ls'];
  const candidates = [process.env.MEMORY_LS_COMMAND, path.join(REPO, '.venv', ...bin), which('memory-ls')].filter(
    (c): c is string => !!c,
  );
  return candidates.find(executable);
}

/** Poll `f` until it gives something, failing after `ms` with `what` and the lines `log` gives. */
export async function waitFor<T>(
  f: () => T | undefined,
  ms: number,
  what: string,
  log: () => string[],
  everyMs = 50,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) {
      return v;
    }
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}\n${log().join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A copy of examples/demo in a new scratch folder (`tmp`), at `ws`. */
export function demoCopy(): { tmp: string; ws: string } {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'memory-ls-glue-'));
  const ws = path.join(tmp, 'demo');
  fs.cpSync(path.join(REPO, 'examples', 'demo'), ws, { recursive: true });
  return { tmp, ws };
}

/** The compiled extension, activated against the stand-in `vscode` installed before, and the
 * context it was given. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function activateExtension(): Promise<{ ext: any; context: any }> {
  const pkg = JSON.parse(fs.readFileSync(path.join(EXTENSION_DIR, 'package.json'), 'utf8'));
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ext = require(path.join(EXTENSION_DIR, 'out', 'src', 'extension.js'));
  const context = { subscriptions: [], extension: { packageJSON: pkg } };
  await ext.activate(context);
  return { ext, context };
}
