// Which process to start for the language server, and what to tell the user when it fails. Pure:
// the file system and the environment come in as arguments.

import * as path from 'path';

export interface ServerCommandInput {
  /** `memory.server.command` */
  command: string;
  /** `memory.server.args` */
  args: string[];
  /** `memory.server.pythonPath` */
  pythonPath: string;
  /** Workspace folder paths, first one first. */
  folders: string[];
  home: string;
  platform: string;
  env: Record<string, string | undefined>;
  /** Is there an executable file at this absolute path? */
  isExecutable: (p: string) => boolean;
  /** The memory-ls the extension installed in its global storage, tried last. */
  managed?: string;
}

export type ServerSource = 'command' | 'pythonPath' | 'workspaceVenv' | 'path' | 'managed';

export interface ServerCommand {
  ok: true;
  command: string;
  args: string[];
  source: ServerSource;
  tried: string[];
}

export interface ServerCommandError {
  ok: false;
  reason: string;
  tried: string[];
  install: string;
  /** Nothing was configured and nothing found: the extension may offer to install it. */
  notFound?: boolean;
}

export const DEFAULT_ARGS = ['serve'];
export const EXECUTABLE = 'memory-ls';

/** `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~`. */
export function expandVariables(value: string, input: Pick<ServerCommandInput, 'folders' | 'home' | 'env'>): string {
  let v = value.trim();
  if (v === '~' || v.startsWith('~/') || v.startsWith('~\\')) {
    v = input.home + v.slice(1);
  }
  return v
    .replace(/\$\{workspaceFolder\}/g, input.folders[0] ?? '')
    .replace(/\$\{userHome\}/g, input.home)
    .replace(/\$\{env:([^}]+)\}/g, (_m, name: string) => input.env[name] ?? '');
}

function pathApi(platform: string): path.PlatformPath {
  return platform === 'win32' ? path.win32 : path.posix;
}

function hasSeparator(p: string, platform: string): boolean {
  return p.includes('/') || (platform === 'win32' && p.includes('\\'));
}

/** Executable names to try for a bare command (Windows adds PATHEXT extensions). */
function candidateNames(name: string, input: ServerCommandInput): string[] {
  if (input.platform !== 'win32' || path.win32.extname(name)) {
    return [name];
  }
  const exts = (input.env.PATHEXT ?? '.COM;.EXE;.BAT;.CMD').split(';').filter(Boolean);
  return [name, ...exts.map((e) => name + e.toLowerCase())];
}

/** Look a bare command up on PATH; returns the absolute path or undefined. */
export function whichOnPath(name: string, input: ServerCommandInput, tried: string[]): string | undefined {
  const p = pathApi(input.platform);
  const envPath = input.env.PATH ?? input.env.Path ?? '';
  const sep = input.platform === 'win32' ? ';' : ':';
  for (const dir of envPath.split(sep).filter(Boolean)) {
    for (const n of candidateNames(name, input)) {
      const full = p.join(dir, n);
      tried.push(full);
      if (input.isExecutable(full)) {
        return full;
      }
    }
  }
  return undefined;
}

export function installCommand(pythonPath?: string): string {
  if (pythonPath) {
    return `"${pythonPath}" -m pip install memory-ls`;
  }
  return 'pipx install memory-ls';
}

/**
 * Resolution order: `memory.server.command`; `memory.server.pythonPath` (`python -m memory_ls`);
 * a virtual environment in a workspace folder (`.venv`, `venv`); `memory-ls` on PATH; the
 * extension's own install (`managed`).
 */
export function resolveServerCommand(input: ServerCommandInput): ServerCommand | ServerCommandError {
  const tried: string[] = [];
  const args = input.args.length ? input.args.map((a) => expandVariables(a, input)) : [...DEFAULT_ARGS];
  const p = pathApi(input.platform);
  const command = input.command ? expandVariables(input.command, input) : '';
  if (command) {
    if (hasSeparator(command, input.platform)) {
      const full = p.isAbsolute(command) ? command : p.resolve(input.folders[0] ?? input.home, command);
      tried.push(full);
      if (input.isExecutable(full)) {
        return { ok: true, command: full, args, source: 'command', tried };
      }
      return {
        ok: false,
        reason: `memory.server.command is "${input.command}", but ${full} is not an executable file`,
        tried,
        install: installCommand(),
      };
    }
    const found = whichOnPath(command, input, tried);
    if (found) {
      return { ok: true, command: found, args, source: 'command', tried };
    }
    return {
      ok: false,
      reason: `memory.server.command is "${command}", which is not on PATH`,
      tried,
      install: installCommand(),
    };
  }
  const python = input.pythonPath ? expandVariables(input.pythonPath, input) : '';
  if (python) {
    const full = hasSeparator(python, input.platform)
      ? p.isAbsolute(python) ? python : p.resolve(input.folders[0] ?? input.home, python)
      : whichOnPath(python, input, tried);
    if (full) {
      tried.push(full);
    }
    if (full && input.isExecutable(full)) {
      return { ok: true, command: full, args: ['-m', 'memory_ls', ...args], source: 'pythonPath', tried };
    }
    return {
      ok: false,
      reason: `memory.server.pythonPath is "${input.pythonPath}", which is not an executable file`,
      tried,
      install: installCommand(full || python),
    };
  }
  const bin = input.platform === 'win32' ? ['Scripts', 'memory-ls.exe'] : ['bin', 'memory-ls'];
  for (const folder of input.folders) {
    for (const venv of ['.venv', 'venv']) {
      const full = p.join(folder, venv, ...bin);
      tried.push(full);
      if (input.isExecutable(full)) {
        return { ok: true, command: full, args, source: 'workspaceVenv', tried };
      }
    }
  }
  const found = whichOnPath(EXECUTABLE, input, tried);
  if (found) {
    return { ok: true, command: found, args, source: 'path', tried };
  }
  if (input.managed) {
    tried.push(input.managed);
    if (input.isExecutable(input.managed)) {
      return { ok: true, command: input.managed, args, source: 'managed', tried };
    }
  }
  return {
    ok: false,
    reason: 'memory-ls was not found on PATH or in a .venv of the workspace',
    tried,
    install: installCommand(),
    notFound: true,
  };
}

/** The message shown when the server cannot be found or does not start. */
export function startFailureMessage(reason: string, install: string): string {
  return (
    `Memory: the memory-ls language server could not start: ${reason}. ` +
    `Install it with \`${install}\` (or \`pip install -e .\` in a clone of memory-ls), ` +
    'or point memory.server.command (or memory.server.pythonPath) at it.'
  );
}

/** Restarts allowed after the server stops on its own: at most `max` within `windowMs`. */
export class RestartBudget {
  private readonly times: number[] = [];
  constructor(
    private readonly max = 4,
    private readonly windowMs = 3 * 60 * 1000,
  ) {}
  allow(now: number): boolean {
    while (this.times.length && now - this.times[0] > this.windowMs) {
      this.times.shift();
    }
    if (this.times.length >= this.max) {
      return false;
    }
    this.times.push(now);
    return true;
  }
}
