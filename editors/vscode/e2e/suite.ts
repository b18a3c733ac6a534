// Setting up what the checks and the screenshots run against: the packaged extension installed
// into code-server, a copy of examples/demo, and a browser on the workbench.

import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { openWorkbench, Session } from './browser';
import { CodeServer, installExtension } from './codeServer';
import { ARTIFACTS, checkChromium, copyDemo, EXTENSION_DIR, findMemoryLs, installTools, pathWithoutServer, scratch, Server, testModel, Tools } from './env';
import { MEMORY_STATUS, Workbench } from './workbench';

export interface Parts {
  tools: Tools;
  server: Server;
  /** The test embedding model, when it could be had: search is then hybrid. */
  model: string | undefined;
  dir: string;
  extensionsDir: string;
}

/** Everything outside the browser; throws MissingPart when a part is not there. */
export function prepare(): Parts {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const tools = installTools();
  const server = findMemoryLs();
  checkChromium();
  const model = testModel(server);
  const vsix = path.join(ARTIFACTS, 'memory-ls.vsix');
  execFileSync('npx', ['vsce', 'package', '--allow-missing-repository', '-o', vsix], { cwd: EXTENSION_DIR, stdio: ['ignore', 'ignore', 'inherit'] });
  const dir = scratch();
  const extensionsDir = path.join(dir, 'extensions');
  installExtension(tools, extensionsDir, vsix, path.join(dir, 'install'));
  return { tools, server, model, dir, extensionsDir };
}

export interface Instance {
  codeServer: CodeServer;
  session: Session;
  wb: Workbench;
  workspace: string;
  close(): Promise<void>;
}

/** What an instance opens instead of a copy of examples/demo, with what more environment and user settings. */
export interface Setup {
  /** Default: a fresh copy of examples/demo. */
  workspace?: string;
  env?: Record<string, string>;
  settings?: Record<string, unknown>;
}

/**
 * code-server on a fresh copy of examples/demo (or on `setup`'s folder), and the workbench open
 * on it. `withServer`: memory-ls on the PATH of the extension host (as after `pipx install`),
 * else nowhere on it.
 */
export async function launch(parts: Parts, name: string, withServer: boolean, setup?: Setup): Promise<Instance> {
  const home = path.join(parts.dir, name);
  const workspace = setup?.workspace ?? copyDemo(path.join(home, 'demo'));
  if (parts.model) {
    fs.mkdirSync(path.join(workspace, '.vscode'), { recursive: true });
    fs.writeFileSync(path.join(workspace, '.vscode', 'settings.json'), JSON.stringify({ 'memory.local.modelPath': parts.model }, null, 2));
  }
  const envPath = pathWithoutServer(process.env.PATH ?? '/usr/bin:/bin');
  const codeServer = await CodeServer.start(
    {
      tools: parts.tools,
      home,
      extensionsDir: parts.extensionsDir,
      workspace,
      pathEnv: withServer ? `${path.dirname(parts.server.command)}${path.delimiter}${envPath}` : envPath,
      env: setup?.env,
      log: path.join(ARTIFACTS, `code-server-${name}.log`),
    },
    // The LSP traffic in the Memory output channel, kept with the other logs.
    { 'memory.trace.server': 'verbose', ...setup?.settings },
  );
  return attach(codeServer, name, home, workspace);
}

/** A started code-server opened in chromium, once the Memory status item shows, as an
 * Instance whose close() stops both and keeps the workbench logs with the artifacts. */
export async function attach(codeServer: CodeServer, name: string, home: string, workspace: string): Promise<Instance> {
  let session: Session;
  try {
    session = await openWorkbench(codeServer.url);
  } catch (error) {
    await codeServer.stop();
    throw error;
  }
  session.page.setDefaultTimeout(20_000);
  const wb = new Workbench(session.page);
  await session.page.locator(MEMORY_STATUS).waitFor({ timeout: 60_000 });
  return {
    codeServer,
    session,
    wb,
    workspace,
    close: async () => {
      if (session.blocked.length) {
        console.log(`e2e: blocked ${session.blocked.length} requests not to 127.0.0.1: ${session.blocked.slice(0, 5).join(', ')}`);
      }
      await session.browser.close();
      await codeServer.stop();
      const logs = path.join(ARTIFACTS, `logs-${name}`);
      fs.rmSync(logs, { recursive: true, force: true });
      fs.cpSync(path.join(home, 'user-data', 'logs'), logs, { recursive: true });
    },
  };
}

/** The status bar text once the server has answered memory/status. */
export function expectedMode(parts: Parts): string {
  return parts.model ? 'Memory: hybrid' : 'Memory: keyword-only';
}
