// A real code-server (VS Code in the browser) on 127.0.0.1, with its own profile folders, no
// extension gallery and no telemetry, running the packaged extension.

import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

import { Tools } from './env';

/** Settings that keep the workbench quiet: no welcome page, tips, update checks or AI panels. */
const QUIET_SETTINGS = {
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.welcomePage.walkthroughs.openOnInstall': false,
  'workbench.enableExperiments': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'security.workspace.trust.enabled': false,
  'chat.disableAIFeatures': true,
  'chat.commandCenter.enabled': false,
  'git.enabled': false,
  'editor.minimap.enabled': false,
  'editor.hover.delay': 200,
  // One screen row per line: the suite finds a character's position from its column.
  '[markdown]': { 'editor.wordWrap': 'off' },
  'files.autoSave': 'off',
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
};

export interface CodeServerOptions {
  tools: Tools;
  /** Folder for this instance's profile, config and log. */
  home: string;
  /** Shared folder of installed extensions. */
  extensionsDir: string;
  /** The folder the workbench opens. */
  workspace: string;
  /** PATH of the extension host, hence of the memory-ls it starts. */
  pathEnv: string;
  /** More environment for code-server, its extension host and the memory-ls it starts. */
  env?: Record<string, string>;
  log: string;
}

export function installExtension(tools: Tools, extensionsDir: string, vsix: string, home: string): void {
  execFileSync(tools.node, [bin(tools), '--extensions-dir', extensionsDir, '--user-data-dir', path.join(home, 'install-profile'), '--install-extension', vsix], {
    env: baseEnv(home, process.env.PATH ?? ''),
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 120_000,
  });
}

function bin(tools: Tools): string {
  return path.join(tools.codeServer, 'out', 'node', 'entry.js');
}

/** An environment built from scratch: nothing of the caller's API keys or caches leaks in. */
function baseEnv(home: string, pathEnv: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: pathEnv,
    HOME: path.join(home, 'home'),
    SHELL: '/bin/bash',
    XDG_DATA_HOME: path.join(home, 'xdg-data'),
    XDG_CONFIG_HOME: path.join(home, 'xdg-config'),
    XDG_CACHE_HOME: path.join(home, 'xdg-cache'),
    LANG: 'C.UTF-8',
    // No extension gallery, neither from the server nor from the browser.
    EXTENSIONS_GALLERY: '{}',
  };
  if (process.env.PYTHONPATH) {
    env.PYTHONPATH = process.env.PYTHONPATH; // a development checkout run with the shared venv
  }
  for (const dir of [env.HOME!, env.XDG_DATA_HOME!, env.XDG_CONFIG_HOME!, env.XDG_CACHE_HOME!]) {
    fs.mkdirSync(dir, { recursive: true });
  }
  // The extension host takes PATH from a login shell (as VS Code does for a user), and Debian's
  // /etc/profile resets it: the profile puts it back, the way pipx's ~/.local/bin gets there.
  fs.writeFileSync(path.join(env.HOME!, '.profile'), `export PATH=${JSON.stringify(pathEnv)}\n`);
  return env;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Process groups of running code-servers, killed if the suite itself is stopped or crashes. */
const running = new Set<number>();
process.on('exit', () => {
  for (const group of running) {
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => process.exit(1));
}

export class CodeServer {
  private constructor(
    readonly url: string,
    private readonly proc: ChildProcess,
  ) {
    if (proc.pid !== undefined) {
      running.add(proc.pid);
      proc.once('exit', () => running.delete(proc.pid!));
    }
  }

  static async start(o: CodeServerOptions, settings: Record<string, unknown>): Promise<CodeServer> {
    const port = await freePort();
    const userData = path.join(o.home, 'user-data');
    fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
    fs.writeFileSync(path.join(userData, 'User', 'settings.json'), JSON.stringify({ ...QUIET_SETTINGS, ...settings }, null, 2));
    const config = path.join(o.home, 'config.yaml');
    fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
    const args = [
      bin(o.tools),
      '--auth', 'none',
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--bind-addr', `127.0.0.1:${port}`,
      '--user-data-dir', userData,
      '--extensions-dir', o.extensionsDir,
      '--config', config,
      o.workspace,
    ];
    const log = fs.openSync(o.log, 'w');
    const proc = spawn(o.tools.node, args, { env: { ...baseEnv(o.home, o.pathEnv), ...o.env }, stdio: ['ignore', log, log], detached: true });
    fs.closeSync(log);
    const server = new CodeServer(`http://127.0.0.1:${port}/`, proc);
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) {
        throw new Error(`code-server exited with ${proc.exitCode}; see ${o.log}`);
      }
      try {
        const r = await fetch(`${server.url}healthz`);
        if (r.ok) {
          return server;
        }
      } catch {
        /* not listening yet */
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    await server.stop();
    throw new Error(`code-server did not answer /healthz in 60 s; see ${o.log}`);
  }

  /** Stops code-server with its extension hosts and the language servers they started. */
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.pid === undefined) {
      return;
    }
    const exited = new Promise((r) => this.proc.once('exit', r));
    const group = -this.proc.pid;
    try {
      process.kill(group, 'SIGTERM');
    } catch {
      return;
    }
    const timer = setTimeout(() => {
      try {
        process.kill(group, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, 5000);
    await exited;
    clearTimeout(timer);
  }
}
