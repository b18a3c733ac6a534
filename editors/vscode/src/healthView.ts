// The Memory: Health view (a tree in the panel, beside Problems): memory-ls's findings by kind,
// read from the diagnostics VS Code holds, refreshed when they change. What it shows is decided
// in health.ts.

import * as vscode from 'vscode';

import { Count, counts, countsText, Finding, findings, Group, groupFindings, groupLabel, itemText } from './health';

export const VIEW_ID = 'memoryLs.health';
/** A burst of publishDiagnostics (a sync touching many files) is one refresh. */
const DEBOUNCE_MS = 300;

type Node = Group | Finding;

function isGroup(n: Node): n is Group {
  return (n as Group).findings !== undefined;
}

function severityIcon(severity: number): vscode.ThemeIcon {
  switch (severity) {
    case vscode.DiagnosticSeverity.Error:
      return new vscode.ThemeIcon('error', new vscode.ThemeColor('problemsErrorIcon.foreground'));
    case vscode.DiagnosticSeverity.Warning:
      return new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground'));
    default:
      return new vscode.ThemeIcon('info', new vscode.ThemeColor('problemsInfoIcon.foreground'));
  }
}

export class HealthView implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private groups: Group[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly view: vscode.TreeView<Node>;
  private readonly subscriptions: vscode.Disposable[];

  /** `onCounts`: the findings by kind after each refresh (for the status bar). */
  constructor(private readonly onCounts: (c: Count[]) => void) {
    this.view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: this, showCollapseAll: true });
    this.subscriptions = [
      this.view,
      this.changed,
      vscode.languages.onDidChangeDiagnostics(() => this.schedule()),
      vscode.commands.registerCommand('memoryLs.showHealth', () => this.show()),
    ];
    this.refresh();
  }

  private schedule(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => this.refresh(), DEBOUNCE_MS);
  }

  refresh(): void {
    this.timer = undefined;
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.toString());
    const entries: [string, readonly vscode.Diagnostic[]][] = [];
    for (const [uri, diags] of vscode.languages.getDiagnostics()) {
      entries.push([uri.toString(), diags]);
    }
    this.groups = groupFindings(findings(entries, folders));
    const byKind = counts(this.groups);
    const total = byKind.reduce((n, c) => n + c.count, 0);
    this.view.badge = total ? { value: total, tooltip: countsText(byKind) } : undefined;
    this.view.message = undefined; // the welcome content says "No findings"
    this.changed.fire(undefined);
    this.onCounts(byKind);
  }

  private async show(): Promise<void> {
    await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
  }

  getChildren(node?: Node): Node[] {
    if (!node) {
      return this.groups;
    }
    return isGroup(node) ? node.findings : [];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (isGroup(node)) {
      const item = new vscode.TreeItem(groupLabel(node), vscode.TreeItemCollapsibleState.Expanded);
      item.id = `group:${node.code}`;
      item.contextValue = 'memoryHealthGroup';
      item.iconPath = severityIcon(Math.min(...node.findings.map((f) => f.severity)));
      return item;
    }
    const text = itemText(node);
    const item = new vscode.TreeItem(text.label, vscode.TreeItemCollapsibleState.None);
    item.description = text.description;
    item.tooltip = text.tooltip;
    item.resourceUri = vscode.Uri.parse(node.uri);
    item.iconPath = severityIcon(node.severity);
    item.contextValue = 'memoryHealthFinding';
    const selection = new vscode.Range(node.startLine, node.startCharacter, node.endLine, node.endCharacter);
    item.command = {
      command: 'vscode.open',
      title: 'Open',
      arguments: [vscode.Uri.parse(node.uri), { selection, preserveFocus: false } satisfies vscode.TextDocumentShowOptions],
    };
    return item;
  }

  dispose(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.subscriptions.forEach((d) => d.dispose());
  }
}
