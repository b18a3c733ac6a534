// The VS Code glue: starts memory-ls, wires commands, the QuickPick and the status bar.
// Everything that can be decided without VS Code lives in the pure modules next to this file.

import * as os from 'os';
import * as vscode from 'vscode';
import {
  CancellationToken,
  CloseAction,
  DocumentSelector,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
  TransportKind,
} from 'vscode-languageclient/node';

import { HealthView } from './healthView';
import * as P from './protocol';
import { citationInsertion, HitItem, Latest, resultToItems, searchSummary } from './searchItems';
import { installCommand, resolveServerCommand, RestartBudget, ServerCommand, startFailureMessage } from './serverCommand';
import { isExecutable, ServerInstaller } from './serverInstall';
import { changeKind, documentSelector, serverSettingKeys, serverSettings } from './settings';
import { ProgressTracker, statusBar, statusMarkdown, syncFailures, syncSummary, UiState } from './statusText';
import { TeamFiles } from './teamFiles';
import { workspaceSymbolName } from './workspaceSymbols';

const STATUS_SCHEME = 'memory-status';
const STATUS_URI = vscode.Uri.parse(`${STATUS_SCHEME}:Memory%20status.md`);
/** How long a restart waits for a server that is still starting before stopping it. */
const START_WAIT_MS = 30_000;

let ext: MemoryExtension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  ext = new MemoryExtension(context);
  await ext.start();
}

export async function deactivate(): Promise<void> {
  await ext?.dispose();
  ext = undefined;
}

interface PickItem extends vscode.QuickPickItem {
  hit?: HitItem;
}

class MemoryExtension {
  private client: LanguageClient | undefined;
  private server: ServerCommand | undefined;
  private readonly output: vscode.OutputChannel;
  private readonly statusItem: vscode.StatusBarItem;
  private readonly progress = new ProgressTracker();
  private state: UiState = { phase: 'starting' };
  /** The findings by kind, from the Health view: kept apart from `state`, which a start replaces. */
  private health: UiState['health'] = [];
  private statusDoc = '';
  private readonly statusChanged = new vscode.EventEmitter<vscode.Uri>();
  private readonly settingKeys: string[];
  private refreshTimer: NodeJS.Timeout | undefined;
  private failureShown = false;
  private failure: { reason: string; install: string; offer?: boolean } | undefined;
  private readonly installer: ServerInstaller;
  /** The restart under way: restarts run one after the other. */
  private restarting: Promise<void> = Promise.resolve();
  private readonly highlight = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor('editor.rangeHighlightBackground'),
  });

  constructor(context: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel('Memory');
    this.statusItem = vscode.window.createStatusBarItem('memoryLs.status', vscode.StatusBarAlignment.Right, 100);
    this.statusItem.name = 'Memory';
    this.statusItem.command = 'memoryLs.showStatus';
    const props = (context.extension.packageJSON?.contributes?.configuration?.properties ?? {}) as Record<string, unknown>;
    this.settingKeys = serverSettingKeys(props);
    this.installer = new ServerInstaller(context.globalStorageUri?.fsPath, String(context.extension.packageJSON?.version ?? '0.0.0'), this.output);
    const sub = context.subscriptions;
    sub.push(this.output, this.statusItem, this.statusChanged, this.highlight);
    sub.push(
      vscode.workspace.registerTextDocumentContentProvider(STATUS_SCHEME, {
        onDidChange: this.statusChanged.event,
        provideTextDocumentContent: () => this.statusDoc,
      }),
      vscode.workspace.registerTextDocumentContentProvider(P.TEAM_SCHEME, new TeamFiles((params) => this.get(params))),
      vscode.commands.registerCommand('memoryLs.search', () => this.search(false)),
      vscode.commands.registerCommand('memoryLs.insertCitation', () => this.search(true)),
      vscode.commands.registerCommand('memoryLs.reindex', () => this.reindex(false)),
      vscode.commands.registerCommand('memoryLs.rebuild', () => this.reindex(true)),
      vscode.commands.registerCommand('memoryLs.showStatus', () => this.showStatus()),
      vscode.commands.registerCommand('memoryLs.restart', () => this.restart()),
      vscode.commands.registerCommand('memoryLs.showOutput', () => this.output.show(true)),
      vscode.commands.registerCommand('memoryLs.installServer', () => this.installServer()),
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfigChange(e)),
      vscode.workspace.onDidSaveTextDocument((d) => d.languageId === 'markdown' && this.scheduleRefresh(1500)),
    );
    sub.push(
      new HealthView((byKind) => {
        this.health = byKind;
        this.render();
      }),
    );
    this.render();
    this.statusItem.show();
  }

  // -- lifecycle --------------------------------------------------------------------------
  private config(scope?: vscode.ConfigurationScope): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration('memory', scope);
  }

  private folders(): string[] {
    return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
  }

  private settingsFor(scope?: vscode.ConfigurationScope): Record<string, unknown> {
    const cfg = this.config(scope);
    return serverSettings(this.settingKeys, (key) => cfg.inspect(key));
  }

  async start(): Promise<void> {
    this.failureShown = false; // a new attempt: its failure is news
    const cfg = this.config();
    const resolved = resolveServerCommand({
      command: cfg.get<string>('server.command', ''),
      args: cfg.get<string[]>('server.args', ['serve']),
      pythonPath: cfg.get<string>('server.pythonPath', ''),
      folders: this.folders(),
      home: os.homedir(),
      platform: process.platform,
      env: process.env,
      isExecutable,
      managed: this.installer.managedServer,
    });
    if (!resolved.ok) {
      this.output.appendLine(`memory-ls: ${resolved.reason}; looked at:\n  ${resolved.tried.join('\n  ')}`);
      if (resolved.notFound && this.installer.canInstall) {
        this.notInstalled();
      } else {
        this.fail(resolved.reason, resolved.install);
      }
      return;
    }
    if (resolved.source === 'managed') {
      await this.installer.upgradeIfNeeded(); // the extension was updated: its server follows
    }
    this.server = resolved;
    let everRunning = false;
    const budget = new RestartBudget();
    const install = installCommand(resolved.source === 'pythonPath' ? resolved.command : undefined);
    this.output.appendLine(`memory-ls: starting ${resolved.command} ${resolved.args.join(' ')} (${resolved.source})`);
    const serverEnv = { ...process.env, ...cfg.get<Record<string, string>>('server.env', {}) };
    const serverOptions: ServerOptions = {
      command: resolved.command,
      args: resolved.args,
      transport: TransportKind.stdio,
      options: {
        cwd: this.folders()[0],
        env: serverEnv,
      },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: documentSelector({
        allFiles: cfg.get<boolean>('server.allFiles', true),
        allMarkdown: cfg.get<boolean>('server.allMarkdown', true),
        folders: this.folders(),
        extraPaths: cfg.get<string[]>('extraPaths', []),
        sources: cfg.get<string[]>('sources', ['memory']),
        sessionGlobs: cfg.get<string[]>('sessions.globs', []),
        home: os.homedir(),
      }) as DocumentSelector,
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: this.settingsFor(),
      middleware: {
        workspace: {
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (!Array.isArray(answers)) {
              return answers;
            }
            return params.items.map((item, i) => {
              if (item.section !== 'memory') {
                return answers[i];
              }
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
              return this.settingsFor(scope);
            });
          },
        },
        provideWorkspaceSymbols: async (query, token, next) => {
          const symbols = await next(query, token);
          for (const symbol of symbols ?? []) {
            symbol.name = workspaceSymbolName(symbol.name, query);
          }
          return symbols;
        },
        handleWorkDoneProgress: (token, params, next) => {
          this.progress.update(token, params as P.WorkDoneValue);
          this.state.progress = this.progress.current();
          this.render();
          if (params.kind === 'end') {
            this.scheduleRefresh(200);
          }
          next(token, params);
        },
      },
      initializationFailedHandler: (error) => {
        this.fail(`${resolved.command} ${resolved.args.join(' ')}: ${error instanceof Error ? error.message : String(error)}`, install);
        return false;
      },
      // Our own messages instead of the default pop-ups; a server that never came up is not
      // restarted (the start failure already said why), one that crashes later is, a few times.
      errorHandler: {
        error: (_error, _message, count) => ({ action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: true }),
        closed: () => {
          if (!everRunning || this.client !== client) {
            return { action: CloseAction.DoNotRestart, handled: true };
          }
          if (budget.allow(Date.now())) {
            this.output.appendLine('memory-ls: the server stopped; restarting it');
            return { action: CloseAction.Restart, handled: true };
          }
          this.fail('it stopped 5 times in 3 minutes (see the Memory output)', install);
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
    };
    // The id makes vscode-languageclient read `memory.trace.server`.
    const client = new LanguageClient('memory', 'Memory', serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client !== client) {
        return; // a client being replaced: the restart says what happens
      }
      if (e.newState === State.Running) {
        everRunning = true;
        this.state = { phase: 'running' };
        this.scheduleRefresh(0);
      } else if (e.newState === State.Stopped && this.state.phase !== 'failed') {
        this.progress.clear();
        this.state = { phase: 'stopped' };
      }
      this.render();
    });
    try {
      await client.start();
    } catch (error) {
      if (this.client !== client) {
        return; // replaced by a restart meanwhile
      }
      this.client = undefined;
      this.fail(`${resolved.command} ${resolved.args.join(' ')}: ${error instanceof Error ? error.message : String(error)}`, install);
      return;
    }
    if (resolved.source === 'managed' && this.installer.wantsModel()) {
      void this.pullModel(serverEnv); // keyword search meanwhile
    }
  }

  /** Nothing found and nothing configured: offer to install memory-ls (never silently). */
  private notInstalled(): void {
    const reason = 'memory-ls is not installed';
    this.state = { phase: 'failed', error: reason };
    this.failure = { reason, install: installCommand(), offer: true };
    this.render();
    if (this.failureShown) {
      return;
    }
    this.failureShown = true;
    void this.installer.offer().then((ok) => (ok ? this.restart() : undefined));
  }

  private async installServer(): Promise<void> {
    if (!this.installer.canInstall) {
      void vscode.window.showErrorMessage('Memory: this VS Code gives the extension no storage folder to install memory-ls into.');
      return;
    }
    if (await this.installer.install()) {
      await this.restart();
    }
  }

  /** The model after the install: pulled in the background, then the server restarted to load it. */
  private async pullModel(env: NodeJS.ProcessEnv): Promise<void> {
    if (!(await this.installer.pullModel(env))) {
      return;
    }
    await this.restart();
    const deadline = Date.now() + 5 * 60_000;
    let status: P.StatusResult | undefined;
    while (Date.now() < deadline) {
      status = await this.refreshStatus();
      if (status?.mode === 'hybrid') {
        void vscode.window.showInformationMessage('memory-ls: semantic search is ready');
        return;
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
    const why = status?.providerReason ? `: ${status.providerReason}` : '';
    void vscode.window.showWarningMessage(`Memory: the model was installed, but search is ${status?.mode ?? 'not answering'}${why}.`, 'Show Output').then((choice) => choice && this.output.show(true));
  }

  private fail(reason: string, install = 'pipx install memory-ls'): void {
    this.state = { phase: 'failed', error: reason };
    this.failure = { reason, install };
    this.render();
    const message = startFailureMessage(reason, install);
    this.output.appendLine(message);
    if (this.failureShown) {
      return; // one pop-up per start attempt; the output has every detail
    }
    this.failureShown = true;
    void vscode.window.showErrorMessage(message, 'Open Settings', 'Copy Install Command', 'Show Output').then((choice) => {
      if (choice === 'Open Settings') {
        void vscode.commands.executeCommand('workbench.action.openSettings', 'memory.server');
      } else if (choice === 'Copy Install Command') {
        void vscode.env.clipboard.writeText(install);
      } else if (choice === 'Show Output') {
        this.output.show(true);
      }
    });
  }

  /** One restart at a time: two at once (the command run twice, a setting typed into the
   * Settings editor) each started a server, and the first was never stopped. */
  private restart(): Promise<void> {
    const next = this.restarting.then(() => this.restartNow());
    this.restarting = next.catch(() => undefined);
    return next;
  }

  private async restartNow(): Promise<void> {
    const old = this.client;
    this.client = undefined;
    this.progress.clear();
    this.state = { phase: 'starting' };
    this.render();
    if (old) {
      try {
        if (old.state === State.Starting) {
          // vscode-languageclient cannot stop a client that is starting (it throws, and the
          // server would run on): let it come up (or fail) first.
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([old.start().catch(() => undefined), new Promise((r) => (timer = setTimeout(r, START_WAIT_MS)))]);
          clearTimeout(timer);
        }
        await old.stop();
      } catch (error) {
        this.output.appendLine(`memory-ls: stopping the old server failed: ${String(error)}`);
      }
    }
    await this.start();
  }

  private onConfigChange(e: vscode.ConfigurationChangeEvent): void {
    let kind = changeKind((s) => e.affectsConfiguration(s), this.settingKeys);
    // The document selector depends on these: a new one needs a new client.
    if (kind === 'push' && ['memory.extraPaths', 'memory.sources', 'memory.sessions.globs'].some((s) => e.affectsConfiguration(s))) {
      kind = 'restart';
    }
    if (kind === 'restart') {
      void this.restart();
    } else if (kind === 'push') {
      // vscode-languageclient forwards the change (the server registers for the `memory`
      // section) and the server pulls the new values through the middleware above.
      this.scheduleRefresh(1500);
    }
  }

  async dispose(): Promise<void> {
    if (this.refreshTimer) {
      clearTimeout(this.refreshTimer);
    }
    try {
      await this.client?.stop();
    } catch {
      /* never started, or already gone */
    }
  }

  // -- status -----------------------------------------------------------------------------
  private render(): void {
    const view = statusBar({ ...this.state, health: this.health });
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    this.statusItem.backgroundColor = view.error
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : view.warning
        ? new vscode.ThemeColor('statusBarItem.warningBackground')
        : undefined;
  }

  private scheduleRefresh(delayMs: number): void {
    if (this.refreshTimer) {
      clearTimeout(this.refreshTimer);
    }
    this.refreshTimer = setTimeout(() => void this.refreshStatus(), delayMs);
  }

  private async refreshStatus(): Promise<P.StatusResult | undefined> {
    const client = this.client;
    if (!client?.isRunning()) {
      return undefined;
    }
    try {
      const status = await client.sendRequest<P.StatusResult>(P.STATUS, {});
      this.state = { ...this.state, phase: 'running', status };
      this.render();
      return status;
    } catch (error) {
      this.output.appendLine(`memory-ls: ${P.STATUS} failed: ${String(error)}`);
      return undefined;
    }
  }

  private async showStatus(): Promise<void> {
    if (this.state.phase === 'failed') {
      if (this.failure?.offer) {
        this.failureShown = false; // the user asked: offer again
        this.notInstalled();
      } else {
        this.output.show(true);
      }
      return;
    }
    const client = await this.ready();
    if (!client) {
      return;
    }
    const status = await this.refreshStatus();
    if (!status) {
      void vscode.window.showErrorMessage('Memory: the server did not answer memory/status; see the Memory output.');
      return;
    }
    const info = client.initializeResult?.serverInfo;
    this.statusDoc = statusMarkdown(status, {
      command: this.server ? [this.server.command, ...this.server.args].join(' ') : undefined,
      version: info?.version,
    });
    this.statusChanged.fire(STATUS_URI);
    const doc = await vscode.workspace.openTextDocument(STATUS_URI);
    await vscode.window.showTextDocument(doc, { preview: true });
  }

  private async ready(): Promise<LanguageClient | undefined> {
    if (!this.client) {
      if (this.state.phase === 'failed') {
        this.failureShown = false; // the user asked for something: say why again
        if (this.failure?.offer) {
          this.notInstalled();
        } else {
          this.fail(this.failure?.reason ?? 'it is not running', this.failure?.install);
        }
      }
      return undefined;
    }
    if (!this.client.isRunning()) {
      try {
        await this.client.start();
      } catch {
        return undefined;
      }
    }
    return this.client;
  }

  private async get(params: P.GetParams): Promise<P.GetResult> {
    const client = await this.ready();
    if (!client) {
      throw new Error('the memory-ls server is not running');
    }
    return client.sendRequest<P.GetResult>(P.GET, params);
  }

  // -- commands ---------------------------------------------------------------------------
  private async reindex(force: boolean): Promise<void> {
    const client = await this.ready();
    if (!client) {
      return;
    }
    const title = force ? 'Memory: rebuilding the index' : 'Memory: reindexing';
    try {
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title, cancellable: false },
        () => client.sendRequest(ExecuteCommandRequest.type, { command: P.CMD_REINDEX, arguments: [{ force }] }),
      );
      const text = `Memory: ${syncSummary(result)}`;
      void (syncFailures(result).length ? vscode.window.showErrorMessage(text) : vscode.window.showInformationMessage(text));
    } catch (error) {
      void vscode.window.showErrorMessage(`Memory: reindex failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    this.scheduleRefresh(0);
  }

  private async search(insert: boolean): Promise<void> {
    const client = await this.ready();
    if (!client) {
      return;
    }
    const target = vscode.window.activeTextEditor;
    if (insert && !target) {
      void vscode.window.showInformationMessage('Memory: open an editor to insert a citation into.');
      return;
    }
    const selected = target && !target.selection.isEmpty ? target.document.getText(target.selection) : '';
    const initial = selected && !selected.includes('\n') && selected.length <= 200 ? selected : '';

    const copyButton: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('copy'), tooltip: 'Copy the citation' };
    const insertButton: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('insert'), tooltip: 'Insert the citation' };
    const sideButton: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('split-horizontal'), tooltip: 'Open to the side' };

    const qp = vscode.window.createQuickPick<PickItem>();
    qp.title = insert ? 'Memory: Insert Citation' : 'Memory: Search';
    qp.placeholder = 'Search memory (filters: file:memory/2026- after:2026-01-01 source:sessions +must -not)';
    qp.matchOnDescription = false;
    qp.matchOnDetail = false;
    try {
      // Keep the server's ranking; a proposed API, so this may be refused: then VS Code may move
      // items whose label matches the query up, which is harmless.
      (qp as unknown as { sortByLabel: boolean }).sortByLabel = false;
    } catch {
      /* not available without the proposal */
    }
    const latest = new Latest();
    let pending: vscode.CancellationTokenSource | undefined;
    let timer: NodeJS.Timeout | undefined;

    const run = (query: string): void => {
      pending?.cancel();
      if (!query.trim()) {
        latest.next(); // an answer still on its way is not shown under an empty query
        qp.items = [];
        qp.busy = false;
        qp.title = insert ? 'Memory: Insert Citation' : 'Memory: Search';
        return;
      }
      const id = latest.next();
      const cts = new vscode.CancellationTokenSource();
      pending = cts;
      qp.busy = true;
      client.sendRequest<P.SearchResult>(P.SEARCH, { query } satisfies P.SearchParams, cts.token as CancellationToken).then(
        (result) => {
          if (!latest.isLatest(id)) {
            return;
          }
          const items = resultToItems(result);
          qp.items = items.map((hit) => ({
            label: hit.label,
            description: hit.description,
            detail: hit.detail,
            alwaysShow: true,
            buttons: insert ? [copyButton, sideButton] : [copyButton, insertButton, sideButton],
            hit,
          }));
          qp.title = `${insert ? 'Memory: Insert Citation' : 'Memory: Search'} · ${searchSummary(result)}`;
          qp.busy = false;
        },
        (error: unknown) => {
          if (!latest.isLatest(id) || cts.token.isCancellationRequested) {
            return;
          }
          qp.busy = false;
          qp.items = [{ label: '$(error) Search failed', detail: error instanceof Error ? error.message : String(error), alwaysShow: true }];
        },
      );
    };

    qp.onDidChangeValue((value) => {
      if (timer) {
        clearTimeout(timer);
      }
      timer = setTimeout(() => run(value), 150);
    });
    qp.onDidAccept(async () => {
      const hit = qp.selectedItems[0]?.hit;
      if (!hit) {
        return;
      }
      qp.hide();
      if (insert) {
        await this.insertCitation(target!, hit.citation);
      } else {
        await this.openHit(hit, vscode.ViewColumn.Active);
      }
    });
    qp.onDidTriggerItemButton(async (e) => {
      const hit = e.item.hit;
      if (!hit) {
        return;
      }
      if (e.button === copyButton) {
        await vscode.env.clipboard.writeText(hit.citation);
        vscode.window.setStatusBarMessage(`Copied ${hit.citation}`, 3000);
      } else if (e.button === insertButton) {
        qp.hide();
        if (target) {
          await this.insertCitation(target, hit.citation);
        } else {
          await vscode.env.clipboard.writeText(hit.citation);
          void vscode.window.showInformationMessage(`Memory: no editor to insert into; copied ${hit.citation}.`);
        }
      } else if (e.button === sideButton) {
        qp.hide();
        await this.openHit(hit, vscode.ViewColumn.Beside);
      }
    });
    qp.onDidHide(() => {
      pending?.cancel();
      if (timer) {
        clearTimeout(timer);
      }
      qp.dispose();
    });
    qp.show();
    if (initial) {
      qp.value = initial;
      run(initial);
    }
  }

  private async openHit(hit: HitItem, column: vscode.ViewColumn): Promise<void> {
    const uri = vscode.Uri.parse(hit.uri);
    const cursor = new vscode.Position(hit.cursorLine, 0);
    let editor: vscode.TextEditor;
    try {
      editor = await vscode.window.showTextDocument(uri, {
        viewColumn: column,
        selection: new vscode.Range(cursor, cursor),
        preview: true,
      });
    } catch (error) {
      if (uri.scheme !== P.TEAM_SCHEME) {
        throw error;
      }
      // The team index could not give a teammate's file: TeamFiles already said why.
      this.output.appendLine(`memory-ls: opening ${hit.uri} failed: ${String(error)}`);
      return;
    }
    const start = hit.range.start.line;
    const endLine = Math.max(start, hit.range.end.character === 0 ? hit.range.end.line - 1 : hit.range.end.line);
    const range = new vscode.Range(start, 0, endLine, 0);
    editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    editor.setDecorations(this.highlight, [range]);
    setTimeout(() => editor.setDecorations(this.highlight, []), 2000);
  }

  private async insertCitation(editor: vscode.TextEditor, citation: string): Promise<void> {
    // Insert after each selection (a selection used as the query stays in place).
    const ok = await editor.edit((eb) => {
      for (const sel of editor.selections) {
        const pos = sel.end;
        const before = pos.character > 0 ? editor.document.lineAt(pos.line).text.charAt(pos.character - 1) : '';
        eb.insert(pos, citationInsertion(citation, before));
      }
    });
    if (!ok) {
      await vscode.env.clipboard.writeText(citation);
      void vscode.window.showWarningMessage(`Memory: could not edit the document; copied ${citation}.`);
    }
  }
}
