// The glue of the extension's own memory-ls (install.ts and python.ts decide; this runs): the
// offer, the install with its progress and log, the upgrade after an extension update, and the
// model pulled in the background.

import { execFile, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as vscode from 'vscode';

import {
  chooseInstaller,
  commandLine,
  describeInstaller,
  InstallRecord,
  installSource,
  installSteps,
  manualInstallText,
  modelPullStep,
  needsUpgrade,
  OFFER,
  parseRecord,
  recordFile,
  serializeRecord,
  Step,
  upgradeSteps,
  venvDir,
  venvServer,
} from './install';
import { choosePython, parsePythonVersion, PythonCandidate, pythonNames, VERSION_PROBE } from './python';
import { ServerCommandInput, whichOnPath } from './serverCommand';

export function isExecutable(p: string): boolean {
  try {
    fs.accessSync(p, process.platform === 'win32' ? fs.constants.F_OK : fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

function which(name: string): string | undefined {
  const input = { platform: process.platform, env: process.env, isExecutable } as unknown as ServerCommandInput;
  return whichOnPath(name, input, []);
}

/** The Python extension's API, as much of it as is used here (its `environments` API). */
interface PythonApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { id: string; path: string };
    resolveEnvironment(env: { id: string; path: string }): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
  };
}

/** The interpreter the Python extension has selected for `folder`, when that extension is installed. */
async function pythonExtensionInterpreter(folder: vscode.Uri | undefined, log: (s: string) => void): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension<PythonApi>('ms-python.python');
  if (!ext) {
    return undefined;
  }
  try {
    const work = (async () => {
      const api = ext.isActive ? ext.exports : await ext.activate();
      const envs = api?.environments;
      if (!envs) {
        return undefined;
      }
      const resolved = await envs.resolveEnvironment(envs.getActiveEnvironmentPath(folder));
      return resolved?.executable?.uri?.fsPath;
    })();
    const timeout = new Promise<undefined>((r) => setTimeout(() => r(undefined), 15_000));
    return await Promise.race([work, timeout]);
  } catch (error) {
    log(`memory-ls: the Python extension gave no interpreter: ${String(error)}`);
    return undefined;
  }
}

function probeVersion(python: string): Promise<PythonCandidate['version']> {
  return new Promise((resolve) => {
    execFile(python, VERSION_PROBE, { timeout: 15_000 }, (error, stdout) => resolve(error ? undefined : parsePythonVersion(stdout)));
  });
}

class InstallError extends Error {}

export class ServerInstaller {
  private busy: Promise<boolean> | undefined;
  private pulling = false;
  /** A pull failed in this session: the next start does not try again (a window reload does). */
  private pullFailed = false;

  constructor(
    /** The extension's global storage folder (undefined: no install of its own, e.g. in tests). */
    private readonly storage: string | undefined,
    private readonly extensionVersion: string,
    private readonly output: vscode.OutputChannel,
  ) {}

  private get venv(): string | undefined {
    return this.storage ? venvDir(this.storage, process.platform) : undefined;
  }

  /** The memory-ls of the extension's own install (there or not). */
  get managedServer(): string | undefined {
    return this.venv ? venvServer(this.venv, process.platform) : undefined;
  }

  get canInstall(): boolean {
    return this.storage !== undefined;
  }

  record(): InstallRecord | undefined {
    if (!this.storage) {
      return undefined;
    }
    try {
      return parseRecord(fs.readFileSync(recordFile(this.storage, process.platform), 'utf8'));
    } catch {
      return undefined;
    }
  }

  private writeRecord(r: InstallRecord): void {
    fs.mkdirSync(this.storage!, { recursive: true });
    fs.writeFileSync(recordFile(this.storage!, process.platform), serializeRecord(r));
  }

  private source(): string {
    return installSource(vscode.workspace.getConfiguration('memory').get<string>('server.installSource', ''), os.homedir(), process.platform);
  }

  /** The offer; true when the user chose Install and it succeeded. */
  async offer(): Promise<boolean> {
    const choice = await vscode.window.showInformationMessage(OFFER, 'Install', 'Show install commands', 'Not now');
    if (choice === 'Install') {
      return this.install();
    }
    if (choice === 'Show install commands') {
      this.output.appendLine(manualInstallText(this.source()));
      this.output.show(true);
    }
    return false;
  }

  /** Installs (or reinstalls) memory-ls into global storage, with progress; one at a time. */
  install(): Promise<boolean> {
    this.busy ??= this.installNow().finally(() => (this.busy = undefined));
    return this.busy;
  }

  private async installNow(): Promise<boolean> {
    const venv = this.venv!;
    const source = this.source();
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    this.output.appendLine(`memory-ls: installing ${source} into ${venv}`);
    try {
      await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Memory: installing memory-ls', cancellable: false }, async (progress) => {
        progress.report({ message: 'looking for uv or Python' });
        const uv = which('uv');
        let python: PythonCandidate | undefined;
        if (!uv) {
          const candidates: PythonCandidate[] = [];
          const fromExtension = await pythonExtensionInterpreter(folder, (s) => this.output.appendLine(s));
          if (fromExtension) {
            candidates.push({ path: fromExtension, origin: 'python extension', version: await probeVersion(fromExtension) });
          }
          for (const name of pythonNames(process.platform)) {
            const found = which(name);
            if (found && !candidates.some((c) => c.path === found)) {
              const version = await probeVersion(found);
              candidates.push({ path: found, origin: 'PATH', version });
              if (choosePython(candidates).ok) {
                break;
              }
            }
          }
          const chosen = choosePython(candidates);
          if (!chosen.ok) {
            throw new InstallError(`${chosen.reason}. Install Python 3.11+ or uv (https://docs.astral.sh/uv/), or select an interpreter in the Python extension`);
          }
          python = chosen.python;
        }
        const installer = chooseInstaller(uv, python)!;
        this.output.appendLine(`memory-ls: installing with ${describeInstaller(installer)}`);
        fs.rmSync(venv, { recursive: true, force: true }); // what a failed attempt left
        fs.mkdirSync(this.storage!, { recursive: true });
        for (const step of installSteps(installer, venv, source, process.platform)) {
          progress.report({ message: `${step.title}…` });
          await this.runStep(step);
        }
        if (!isExecutable(venvServer(venv, process.platform))) {
          throw new InstallError(`the install finished, but ${venvServer(venv, process.platform)} is not there`);
        }
        this.writeRecord({
          extensionVersion: this.extensionVersion,
          source,
          installer: installer.kind,
          tool: installer.kind === 'uv' ? installer.uv : installer.python.path,
          modelPulled: false,
        });
      });
    } catch (error) {
      this.failed('installing memory-ls failed', error);
      return false;
    }
    this.output.appendLine('memory-ls: installed');
    return true;
  }

  /** After an update of the extension: `--upgrade` from the same source, before the server starts. */
  async upgradeIfNeeded(): Promise<void> {
    const record = this.record();
    if (!this.venv || !needsUpgrade(record, this.extensionVersion)) {
      return;
    }
    const source = record?.source ?? this.source();
    const uv = record?.installer === 'uv' ? (isExecutable(record.tool) ? record.tool : which('uv')) : undefined;
    const from = record ? `extension ${record.extensionVersion}` : 'an unknown version';
    this.output.appendLine(`memory-ls: the server was installed by ${from}; updating it for ${this.extensionVersion}`);
    try {
      await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `Memory: updating memory-ls for extension ${this.extensionVersion}`, cancellable: false }, async (progress) => {
        for (const step of upgradeSteps(uv, this.venv!, source, process.platform)) {
          progress.report({ message: `${step.title}…` });
          await this.runStep(step);
        }
      });
      this.writeRecord({ extensionVersion: this.extensionVersion, source, installer: record?.installer ?? 'python', tool: record?.tool ?? '', modelPulled: record?.modelPulled ?? false });
    } catch (error) {
      this.failed('updating memory-ls failed; the installed version starts', error);
    }
  }

  /** Whether the model still has to be pulled into the extension's own install. */
  wantsModel(): boolean {
    const provider = vscode.workspace.getConfiguration('memory').get<string>('provider', 'auto');
    const record = this.record();
    return !!record && !record.modelPulled && !this.pulling && !this.pullFailed && (provider === 'auto' || provider === 'local');
  }

  /**
   * `memory-ls model pull` in the background (llama.cpp may compile for minutes), progress in the
   * status bar; true when it finished. `env` is the server's environment (its cache folders).
   */
  async pullModel(env: NodeJS.ProcessEnv): Promise<boolean> {
    if (!this.venv || this.pulling) {
      return false;
    }
    this.pulling = true;
    try {
      await vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: 'Memory: downloading the model for semantic search' }, () =>
        this.runStep(modelPullStep(this.venv!, process.platform), env),
      );
      const record = this.record();
      if (record) {
        this.writeRecord({ ...record, modelPulled: true });
      }
      return true;
    } catch (error) {
      this.pullFailed = true;
      this.failed('downloading the model failed; search stays keyword-only', error, 'warning');
      return false;
    } finally {
      this.pulling = false;
    }
  }

  private failed(what: string, error: unknown, kind: 'error' | 'warning' = 'error'): void {
    const why = error instanceof Error ? error.message : String(error);
    this.output.appendLine(`memory-ls: ${what}: ${why}`);
    const text = `Memory: ${what}: ${why}`;
    const shown = kind === 'error' ? vscode.window.showErrorMessage(text, 'Show Log') : vscode.window.showWarningMessage(text, 'Show Log');
    void shown.then((choice) => choice === 'Show Log' && this.output.show(true));
  }

  /** Runs one command with its output in the log; throws InstallError saying which step failed. */
  private runStep(step: Step, env: NodeJS.ProcessEnv = process.env): Promise<void> {
    this.output.appendLine(`$ ${commandLine(step)}`);
    return new Promise((resolve, reject) => {
      const proc = spawn(step.command, step.args, { env: { ...env, PYTHONUNBUFFERED: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
      let partial = '';
      const onData = (data: Buffer) => {
        const lines = (partial + data.toString()).split(/\r?\n|\r/);
        partial = lines.pop() ?? '';
        for (const line of lines) {
          this.output.appendLine(line);
        }
      };
      proc.stdout.on('data', onData);
      proc.stderr.on('data', onData);
      proc.on('error', (error) => reject(new InstallError(`${step.title}: ${step.command} did not run (${error.message})`)));
      proc.on('close', (code, signal) => {
        if (partial) {
          this.output.appendLine(partial);
        }
        if (code === 0) {
          resolve();
        } else {
          reject(new InstallError(`${step.title}: \`${commandLine(step)}\` exited with ${code ?? signal}`));
        }
      });
    });
  }
}
