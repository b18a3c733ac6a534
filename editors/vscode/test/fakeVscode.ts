// Just enough of the `vscode` module to load and run the glue (and vscode-languageclient)
// outside VS Code: every unknown property is a callable, constructible stand-in; what the
// tests look at (commands, messages, the status bar, QuickPicks, editors, edits) is recorded.
/* eslint-disable @typescript-eslint/no-explicit-any */
import Module = require('node:module');

export interface FakeQuickPick {
  value: string;
  items: any[];
  selectedItems: any[];
  title?: string;
  busy: boolean;
  visible: boolean;
  changeValue(v: string): void;
  hide(): void;
  accept(item: any): Promise<void>;
  triggerButton(item: any, index: number): Promise<void>;
}

export interface FakeEditor {
  document: { uri: any; lineAt(line: number): { text: string }; getText(range?: any): string };
  selection: any;
  selections: any[];
  inserted: { line: number; character: number; text: string }[];
  edit(cb: (eb: any) => void): Promise<boolean>;
  revealRange(): void;
  setDecorations(): void;
}

class FakeDisposable {
  constructor(private readonly onDispose: () => unknown = () => undefined) {}
  static from(...items: { dispose(): unknown }[]): FakeDisposable {
    return new FakeDisposable(() => items.forEach((d) => d?.dispose?.()));
  }
  dispose(): void {
    this.onDispose();
  }
}

export interface Recorder {
  commands: Map<string, (...args: any[]) => any>;
  messages: { kind: string; text: string; items: string[] }[];
  statusItems: any[];
  config: Record<string, unknown>;
  output: string[];
  quickPicks: FakeQuickPick[];
  shown: { uri: string; options: any }[];
  providers: Map<string, any>;
  clipboard: string[];
  activeTextEditor?: FakeEditor;
  /** Fires onDidChangeConfiguration for settings changed in `config` (full keys). */
  configChanged(keys: string[]): void;
}

export function newRecorder(config: Record<string, unknown> = {}): Recorder {
  return {
    commands: new Map(),
    messages: [],
    statusItems: [],
    config,
    output: [],
    quickPicks: [],
    shown: [],
    providers: new Map(),
    clipboard: [],
    configChanged: () => undefined,
  };
}

function universal(name: string): any {
  const fn = function () {
    return universal(`${name}()`);
  };
  return new Proxy(fn, {
    get(_t, prop) {
      if (prop === 'then') {
        return undefined; // not a thenable
      }
      if (prop === Symbol.iterator) {
        return function* () {
          /* empty */
        };
      }
      if (prop === Symbol.toPrimitive) {
        return () => name;
      }
      return universal(`${name}.${String(prop)}`);
    },
    apply() {
      return universal(`${name}()`);
    },
    construct() {
      return universal(`new ${name}`);
    },
  });
}

class Emitter<T> {
  private listeners: ((e: T) => any)[] = [];
  event = (fn: (e: T) => any) => {
    this.listeners.push(fn);
    return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== fn)) };
  };
  fire(e: T): any[] {
    return this.listeners.map((l) => l(e));
  }
  dispose(): void {
    this.listeners = [];
  }
}

class Position {
  constructor(
    public line: number,
    public character: number,
  ) {}
}

class Range {
  start: Position;
  end: Position;
  constructor(a: any, b: any, c?: number, d?: number) {
    if (typeof a === 'number') {
      this.start = new Position(a, b);
      this.end = new Position(c!, d!);
    } else {
      this.start = a;
      this.end = b;
    }
  }
  get isEmpty(): boolean {
    return this.start.line === this.end.line && this.start.character === this.end.character;
  }
}

class CancellationTokenSource {
  private emitter = new Emitter<void>();
  token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel(): void {
    if (!this.token.isCancellationRequested) {
      this.token.isCancellationRequested = true;
      this.emitter.fire();
    }
  }
  dispose(): void {}
}

/** An editor over `text`; `edit` records inserts. */
export function fakeEditor(uri: string, text: string, line = 0, character = 0): FakeEditor {
  const lines = text.split('\n');
  const sel = Object.assign(new Range(line, character, line, character), { active: new Position(line, character) });
  const editor: FakeEditor = {
    document: {
      uri: { toString: () => uri },
      lineAt: (l: number) => ({ text: lines[l] ?? '' }),
      getText: () => '',
    },
    selection: sel,
    selections: [sel],
    inserted: [],
    edit: async (cb) => {
      cb({ insert: (pos: Position, t: string) => editor.inserted.push({ line: pos.line, character: pos.character, text: t }) });
      return true;
    },
    revealRange() {},
    setDecorations() {},
  };
  return editor;
}

export function installFakeVscode(rec: Recorder, folders: string[]): void {
  const disposable = { dispose() {} };
  const event = () => disposable;
  const configEvents = new Emitter<any>();
  rec.configChanged = (keys: string[]) =>
    void configEvents.fire({ affectsConfiguration: (s: string) => keys.some((k) => k === s || k.startsWith(s + '.')) });
  const withFallback = (name: string, target: any): any =>
    new Proxy(target, {
      get(t: any, prop) {
        return prop in t ? t[prop] : universal(`${name}.${String(prop)}`);
      },
    });
  const uri = (s: string) => ({ toString: () => s, scheme: s.split(':')[0], fsPath: s.replace(/^file:\/\//, ''), path: s });
  const ns: any = {
    version: '1.90.0',
    Uri: { parse: uri, file: (p: string) => uri(`file://${p}`) },
    EventEmitter: Emitter,
    // A real one: vscode-languageclient's diagnostic pull is stopped only through
    // Disposable.from(...).dispose(); a stand-in left its 2-second re-pull running forever.
    Disposable: FakeDisposable,
    Position,
    Range,
    CancellationTokenSource,
    ThemeColor: class {
      constructor(public id: string) {}
    },
    ThemeIcon: class {
      constructor(public id: string) {}
    },
    StatusBarAlignment: { Left: 1, Right: 2 },
    ViewColumn: { Active: -1, Beside: -2 },
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    TextEditorRevealType: { Default: 0, InCenter: 1, InCenterIfOutsideViewport: 2, AtTop: 3 },
    window: {
      createOutputChannel: () => {
        const log = (s: string) => {
          rec.output.push(s);
          if (process.env.FAKE_VSCODE_DEBUG) {
            process.stderr.write(s + '\n');
          }
        };
        return { appendLine: log, append: log, show() {}, dispose() {}, clear() {}, replace() {}, hide() {} };
      },
      createStatusBarItem: () => {
        let text = '';
        const item: any = {
          history: [] as string[],
          show() {},
          hide() {},
          dispose() {},
          get text() {
            return text;
          },
          set text(t: string) {
            text = t;
            item.history.push(t);
          },
        };
        rec.statusItems.push(item);
        return item;
      },
      createTextEditorDecorationType: () => disposable,
      createQuickPick: () => {
        const change = new Emitter<string>();
        const accept = new Emitter<void>();
        const button = new Emitter<any>();
        const hide = new Emitter<void>();
        const qp: any = {
          value: '',
          items: [],
          selectedItems: [],
          busy: false,
          visible: false,
          onDidChangeValue: change.event,
          onDidAccept: accept.event,
          onDidTriggerItemButton: button.event,
          onDidHide: hide.event,
          show() {
            qp.visible = true;
          },
          hide() {
            if (qp.visible) {
              qp.visible = false;
              hide.fire();
            }
          },
          dispose() {},
          changeValue(v: string) {
            qp.value = v;
            change.fire(v);
          },
          async accept(item: any) {
            qp.selectedItems = [item];
            await Promise.all(accept.fire());
          },
          async triggerButton(item: any, index: number) {
            await Promise.all(button.fire({ item, button: item.buttons[index] }));
          },
        };
        rec.quickPicks.push(qp);
        return qp;
      },
      showTextDocument: async (doc: any, options: any) => {
        rec.shown.push({ uri: String(doc?.uri ?? doc), options });
        return fakeEditor(String(doc?.uri ?? doc), '');
      },
      withProgress: async (_opts: any, task: (p: any, t: any) => Promise<any>) =>
        task({ report() {} }, new CancellationTokenSource().token),
      showErrorMessage: (text: string, ...items: string[]) => {
        rec.messages.push({ kind: 'error', text, items });
        return Promise.resolve(undefined);
      },
      showInformationMessage: (text: string, ...items: string[]) => {
        rec.messages.push({ kind: 'info', text, items });
        return Promise.resolve(undefined);
      },
      showWarningMessage: (text: string, ...items: string[]) => {
        rec.messages.push({ kind: 'warning', text, items });
        return Promise.resolve(undefined);
      },
      setStatusBarMessage: (text: string) => {
        rec.messages.push({ kind: 'statusbar', text, items: [] });
        return disposable;
      },
      get activeTextEditor() {
        return rec.activeTextEditor;
      },
      visibleTextEditors: [],
      onDidChangeActiveTextEditor: event,
      onDidChangeVisibleTextEditors: event,
    },
    commands: {
      registerCommand: (id: string, fn: (...args: any[]) => any) => {
        rec.commands.set(id, fn);
        return disposable;
      },
      executeCommand: () => Promise.resolve(undefined),
    },
    workspace: {
      workspaceFolders: folders.map((f, index) => ({ uri: uri(`file://${f}`), name: f, index })),
      getConfiguration: (section?: string) => ({
        get: (key: string, def: unknown) => {
          const full = section ? `${section}.${key}` : key;
          return full in rec.config ? rec.config[full] : def;
        },
        inspect: (key: string) => ({ globalValue: rec.config[section ? `${section}.${key}` : key] }),
        has: (key: string) => (section ? `${section}.${key}` : key) in rec.config,
      }),
      registerTextDocumentContentProvider: (scheme: string, provider: any) => {
        rec.providers.set(scheme, provider);
        return disposable;
      },
      openTextDocument: async (u: any) => ({ uri: u }),
      onDidChangeConfiguration: configEvents.event,
      onDidSaveTextDocument: event,
      onDidOpenTextDocument: event,
      onDidCloseTextDocument: event,
      onDidChangeTextDocument: event,
      onWillSaveTextDocument: event,
      onDidChangeWorkspaceFolders: event,
      textDocuments: [],
      notebookDocuments: [],
    },
    env: {
      appName: 'Fake Code',
      language: 'en',
      machineId: 'test',
      sessionId: 'test',
      uiKind: 1,
      clipboard: {
        writeText: async (t: string) => {
          rec.clipboard.push(t);
        },
      },
    },
  };
  for (const key of ['window', 'commands', 'workspace', 'env']) {
    ns[key] = withFallback(`vscode.${key}`, ns[key]);
  }
  const fake = withFallback('vscode', ns);
  const M = Module as any;
  const orig = M._load;
  M._load = function (request: string, ...rest: unknown[]) {
    if (request === 'vscode') {
      return fake;
    }
    return orig.call(this, request, ...rest);
  };
}
