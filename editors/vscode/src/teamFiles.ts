// Files only a teammate has: a team index hit, workspace symbol or citation may point at a
// `memory-ls:` URI (no such file on this machine). VS Code opens it through this provider,
// read-only, with the text the team index holds; the language follows the path's extension.

import * as vscode from 'vscode';

import * as P from './protocol';

export type GetRequest = (params: P.GetParams) => Promise<P.GetResult>;

export class TeamFiles implements vscode.TextDocumentContentProvider {
  constructor(private readonly get: GetRequest) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    try {
      // The whole file: VS Code puts the cursor on the hit's lines itself.
      return (await this.get({ path: uri.toString() })).text;
    } catch (error) {
      // Thrown on, so VS Code opens no (misleading) empty document.
      const why = error instanceof Error ? error.message : String(error);
      const message = `Memory: cannot open ${uri.toString()} from the team index: ${why}`;
      void vscode.window.showErrorMessage(message);
      throw new Error(message);
    }
  }
}
