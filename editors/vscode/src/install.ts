// The extension's own memory-ls: a virtual environment in its global storage, made with uv when
// it is on PATH, else with a Python 3.11+ (the Python extension's, else PATH's). Pure: which
// installer, the command lines, the record of what was installed; serverInstall.ts runs them.

import * as path from 'path';

import { PythonCandidate } from './python';

/** The package installed by default; `memory.server.installSource` overrides it. */
export const DEFAULT_SOURCE = 'memory-ls';

export type Installer = { kind: 'uv'; uv: string } | { kind: 'python'; python: PythonCandidate };

/** How to make the environment: uv when it is on PATH, else a Python that fits (undefined: none). */
export function chooseInstaller(uv: string | undefined, python: PythonCandidate | undefined): Installer | undefined {
  if (uv) {
    return { kind: 'uv', uv };
  }
  return python ? { kind: 'python', python } : undefined;
}

export function describeInstaller(i: Installer): string {
  return i.kind === 'uv' ? `uv (${i.uv})` : `${i.python.path} (${i.python.origin})`;
}

function pathApi(platform: string): path.PlatformPath {
  return platform === 'win32' ? path.win32 : path.posix;
}

/** The environment's folder in the extension's global storage. */
export function venvDir(globalStorage: string, platform: string): string {
  return pathApi(platform).join(globalStorage, 'venv');
}

export function venvPython(venv: string, platform: string): string {
  const p = pathApi(platform);
  return platform === 'win32' ? p.join(venv, 'Scripts', 'python.exe') : p.join(venv, 'bin', 'python');
}

export function venvServer(venv: string, platform: string): string {
  const p = pathApi(platform);
  return platform === 'win32' ? p.join(venv, 'Scripts', 'memory-ls.exe') : p.join(venv, 'bin', 'memory-ls');
}

/** The file that says which extension version installed the server, and how. */
export function recordFile(globalStorage: string, platform: string): string {
  return pathApi(platform).join(globalStorage, 'install.json');
}

/**
 * `memory.server.installSource`: a pip requirement (`memory-ls`, `memory-ls==0.2.0`) or a path
 * to a wheel (`~` and `${userHome}` expanded, a relative path made absolute against `home`).
 */
export function installSource(setting: string | undefined, home: string, platform: string): string {
  const v = (setting ?? '').trim();
  if (!v) {
    return DEFAULT_SOURCE;
  }
  const expanded = (v === '~' || v.startsWith('~/') || v.startsWith('~\\') ? home + v.slice(1) : v).replace(/\$\{userHome\}/g, home);
  const p = pathApi(platform);
  const looksLikePath = expanded.includes('/') || (platform === 'win32' && expanded.includes('\\')) || /\.(whl|tar\.gz|zip)$/i.test(expanded);
  // A URL (`https://...`, `git+https://...`) or a `name @ url` requirement is pip's business.
  if (!looksLikePath || /^[a-z+]+:\/\//i.test(expanded) || expanded.includes(' @ ')) {
    return expanded;
  }
  return p.isAbsolute(expanded) ? expanded : p.resolve(home, expanded);
}

export interface Step {
  /** Shown in the progress notification. */
  title: string;
  command: string;
  args: string[];
}

/** A fresh install: make the environment, then install `source` into it. */
export function installSteps(i: Installer, venv: string, source: string, platform: string): Step[] {
  const py = venvPython(venv, platform);
  if (i.kind === 'uv') {
    return [
      // --seed: pip in the environment, which `memory-ls model pull` uses for llama.cpp.
      { title: 'creating its environment with uv', command: i.uv, args: ['venv', '--seed', '--python', '>=3.11', venv] },
      { title: `installing ${source}`, command: i.uv, args: ['pip', 'install', '--python', py, source] },
    ];
  }
  return [
    { title: 'creating its environment', command: i.python.path, args: ['-m', 'venv', venv] },
    { title: `installing ${source}`, command: py, args: ['-m', 'pip', 'install', '--disable-pip-version-check', source] },
  ];
}

/** An update of the extension: the same source, `--upgrade`, with uv when it is still there, else the environment's pip. */
export function upgradeSteps(uv: string | undefined, venv: string, source: string, platform: string): Step[] {
  const py = venvPython(venv, platform);
  if (uv) {
    return [{ title: `updating ${source}`, command: uv, args: ['pip', 'install', '--python', py, '--upgrade', source] }];
  }
  return [{ title: `updating ${source}`, command: py, args: ['-m', 'pip', 'install', '--disable-pip-version-check', '--upgrade', source] }];
}

/** The local model (and llama.cpp, built for this CPU when it is missing). */
export function modelPullStep(venv: string, platform: string): Step {
  return { title: 'downloading the model', command: venvServer(venv, platform), args: ['model', 'pull'] };
}

/** `"a b" c`: a command line to show in the log. */
export function commandLine(step: Pick<Step, 'command' | 'args'>): string {
  return [step.command, ...step.args].map((a) => (/[\s"'<>|&;()$`\\*?]/.test(a) ? JSON.stringify(a) : a)).join(' ');
}

export interface InstallRecord {
  /** The extension version that installed (or last upgraded) the server. */
  extensionVersion: string;
  source: string;
  installer: 'uv' | 'python';
  /** The uv or Python that made the environment. */
  tool: string;
  /** `memory-ls model pull` finished. */
  modelPulled: boolean;
}

export function parseRecord(text: string | undefined): InstallRecord | undefined {
  if (!text) {
    return undefined;
  }
  try {
    const r = JSON.parse(text) as Partial<InstallRecord>;
    if (typeof r.extensionVersion !== 'string' || typeof r.source !== 'string') {
      return undefined;
    }
    return {
      extensionVersion: r.extensionVersion,
      source: r.source,
      installer: r.installer === 'uv' ? 'uv' : 'python',
      tool: typeof r.tool === 'string' ? r.tool : '',
      modelPulled: r.modelPulled === true,
    };
  } catch {
    return undefined;
  }
}

export function serializeRecord(r: InstallRecord): string {
  return JSON.stringify(r, null, 2) + '\n';
}

/** The server in global storage needs `--upgrade` when another extension version installed it (or nothing says which). */
export function needsUpgrade(record: InstallRecord | undefined, extensionVersion: string): boolean {
  return !record || record.extensionVersion !== extensionVersion;
}

export const OFFER = 'memory-ls is not installed. Install it for this extension?';

/** What "Show install commands" writes to the output: the manual ways. */
export function manualInstallText(source: string): string {
  return [
    'memory-ls, the language server of this extension, was not found. To install it yourself:',
    '',
    `  uv tool install ${source}      # or: pipx install ${source}`,
    '  memory-ls model pull           # the local model, for semantic search (optional)',
    '',
    'then run "Memory: Restart Server" (VS Code finds memory-ls on PATH), or point',
    'memory.server.command at it. "Memory: Install Server" installs it into the extension instead.',
  ].join('\n');
}
