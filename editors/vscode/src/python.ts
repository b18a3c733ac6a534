// Which Python makes the extension's own memory-ls environment, and whether it is new enough.
// Pure: running an interpreter and asking the Python extension happen in serverInstall.ts.

/** memory-ls needs Python 3.11 or newer (pyproject.toml's requires-python). */
export const MIN_PYTHON: readonly [number, number] = [3, 11];

export type Version = [number, number, number];

/** Prints the interpreter's version as `3.11.7`: what `versionProbe` runs. */
export const VERSION_PROBE = ['-c', "import sys; print('%d.%d.%d' % sys.version_info[:3])"];

/** `3.11.7`, `Python 3.12.0rc1`, `Python 3.13.1+`: the first three numbers; undefined when none. */
export function parsePythonVersion(text: string): Version | undefined {
  const m = /(?:^|\s|Python\s*)(\d+)\.(\d+)(?:\.(\d+))?/.exec(text.trim());
  if (!m) {
    return undefined;
  }
  return [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)];
}

export function formatVersion(v: readonly number[]): string {
  return v.join('.');
}

export function isSupported(v: Version): boolean {
  return v[0] > MIN_PYTHON[0] || (v[0] === MIN_PYTHON[0] && v[1] >= MIN_PYTHON[1]);
}

/** Names looked up on PATH, in this order (`py` is the Windows launcher). */
export function pythonNames(platform: string): string[] {
  const names = ['python3', 'python', 'python3.13', 'python3.12', 'python3.11'];
  return platform === 'win32' ? ['python', 'py', ...names.filter((n) => n !== 'python')] : names;
}

/** An interpreter that was looked at, with where it came from and its version (undefined: it did not run). */
export interface PythonCandidate {
  path: string;
  origin: 'python extension' | 'PATH';
  version?: Version;
}

export type PythonChoice = { ok: true; python: PythonCandidate } | { ok: false; reason: string };

/**
 * The first candidate that runs and is new enough (the Python extension's interpreter comes first
 * when it is in the list); else why none fits, naming each one that was too old or did not run.
 */
export function choosePython(candidates: PythonCandidate[]): PythonChoice {
  const ordered = [...candidates.filter((c) => c.origin === 'python extension'), ...candidates.filter((c) => c.origin === 'PATH')];
  for (const c of ordered) {
    if (c.version && isSupported(c.version)) {
      return { ok: true, python: c };
    }
  }
  const need = `memory-ls needs Python ${formatVersion(MIN_PYTHON)} or newer`;
  if (!ordered.length) {
    return { ok: false, reason: `no Python was found (neither uv nor python3 nor python on PATH); ${need}` };
  }
  const seen = ordered.map((c) => `${c.path} (${c.origin}) ${c.version ? `is Python ${formatVersion(c.version)}` : 'did not run'}`);
  return { ok: false, reason: `${need}: ${seen.join('; ')}` };
}
