// VS Code configuration -> the `memory` settings object the server reads, and the document
// selector. Pure.

/** Settings of the extension itself (`memory.server.*`, `memory.trace.*`): never sent. */
export function isClientSetting(key: string): boolean {
  const k = key.replace(/^memory\./, '');
  return k.startsWith('server.') || k.startsWith('trace.');
}

/** Server setting keys (`query.maxResults`, ...) from the contributed configuration. */
export function serverSettingKeys(properties: Record<string, unknown>): string[] {
  return Object.keys(properties)
    .filter((k) => k.startsWith('memory.') && !isClientSetting(k))
    .map((k) => k.slice('memory.'.length));
}

/** What `WorkspaceConfiguration.inspect()` returns, reduced to what matters here. */
export interface Inspected<T = unknown> {
  defaultValue?: T;
  globalValue?: T;
  workspaceValue?: T;
  workspaceFolderValue?: T;
}

/**
 * The value the user set explicitly (folder over workspace over user), or undefined.
 * Defaults are left out on purpose: the server has the same defaults, and sending them would
 * override `~/.config/memory-ls/config.toml` and `.memory-ls.toml`, which rank below the client.
 */
export function explicitValue<T>(inspected: Inspected<T> | undefined): T | undefined {
  if (!inspected) {
    return undefined;
  }
  for (const v of [inspected.workspaceFolderValue, inspected.workspaceValue, inspected.globalValue]) {
    if (v !== undefined) {
      return v;
    }
  }
  return undefined;
}

/** `{'query.maxResults': 3}` -> `{query: {maxResults: 3}}`. */
export function nest(flat: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(flat)) {
    const parts = key.split('.');
    let node = out;
    for (const part of parts.slice(0, -1)) {
      const next = node[part];
      if (typeof next !== 'object' || next === null || Array.isArray(next)) {
        node[part] = {};
      }
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = value;
  }
  return out;
}

/** The nested `memory` section for the server: explicitly set server settings only. */
export function serverSettings(keys: string[], inspect: (key: string) => Inspected | undefined): Record<string, unknown> {
  const flat: Record<string, unknown> = {};
  for (const key of keys) {
    const v = explicitValue(inspect(key));
    if (v !== undefined) {
      flat[key] = v;
    }
  }
  return nest(flat);
}

/**
 * What a configuration change needs: `memory.server.*` restarts the server; a server setting
 * reaches the server (it pulls the new values); anything else (`memory.trace.server`, which
 * vscode-languageclient follows itself) nothing.
 */
export function changeKind(affects: (section: string) => boolean, serverKeys: string[]): 'restart' | 'push' | 'none' {
  if (affects('memory.server')) {
    return 'restart';
  }
  return serverKeys.some((k) => affects(`memory.${k}`)) ? 'push' : 'none';
}

export interface DocumentFilterLike {
  scheme?: string;
  language?: string;
  pattern?: string;
}

export interface SelectorInput {
  allFiles?: boolean;
  allMarkdown: boolean;
  folders: string[];
  extraPaths: string[];
  sources: string[];
  sessionGlobs: string[];
  home?: string;
}

function joinPath(folder: string, rel: string): string {
  const f = folder.replace(/[\\/]+$/, '');
  return `${f}/${rel.replace(/^\.\//, '').replace(/^[\\/]+/, '')}`;
}

function isAbsolute(p: string): boolean {
  return p.startsWith('/') || /^[A-Za-z]:[\\/]/.test(p) || p.startsWith('\\\\');
}

function expandHome(p: string, home?: string): string {
  return home && (p === '~' || p.startsWith('~/')) ? home + p.slice(1) : p;
}

/**
 * Which documents the client sends to the server. Memory files always; every Markdown file when
 * `allMarkdown` (citations in READMEs and agent instructions get definition/hover/links);
 * `extraPaths`; session transcripts (`.jsonl`) when `sources` includes `sessions`. Every file
 * when `allFiles`: a citation in a code comment works as in a note (the server reads such a
 * file for its citations only, and gives no outline for anything but Markdown).
 */
export function documentSelector(input: SelectorInput): DocumentFilterLike[] {
  if (input.allFiles) {
    return [{ scheme: 'file' }];
  }
  const out: DocumentFilterLike[] = [];
  if (input.allMarkdown) {
    out.push({ scheme: 'file', language: 'markdown' });
  } else {
    out.push({ scheme: 'file', language: 'markdown', pattern: '**/{MEMORY.md,memory.md}' });
    out.push({ scheme: 'file', language: 'markdown', pattern: '**/memory/**/*.md' });
    for (const extra of input.extraPaths) {
      const e = expandHome(extra, input.home);
      const globs = e.endsWith('.md') ? [e] : [`${e.replace(/[\\/]+$/, '')}/**/*.md`];
      for (const g of globs) {
        if (isAbsolute(g)) {
          out.push({ scheme: 'file', language: 'markdown', pattern: g });
        } else {
          for (const folder of input.folders) {
            out.push({ scheme: 'file', language: 'markdown', pattern: joinPath(folder, g) });
          }
        }
      }
    }
  }
  if (input.sources.includes('sessions')) {
    for (const glob of input.sessionGlobs) {
      const g = expandHome(glob, input.home);
      if (isAbsolute(g) || g.startsWith('**')) {
        out.push({ scheme: 'file', pattern: g });
      } else {
        for (const folder of input.folders) {
          out.push({ scheme: 'file', pattern: joinPath(folder, g) });
        }
      }
    }
  }
  return out;
}
