// The Memory: Health view's content and the status bar's counts: memory-ls's findings grouped
// by kind. Pure: the glue (healthView.ts) hands in what vscode.languages.getDiagnostics() holds.

/** The memory checks' codes, in the order the view lists them (memory_ls/hygiene/findings.py). */
export const HEALTH_CODES = ['duplicate', 'conflict', 'load-cap', 'expired', 'front-matter', 'orphan'];
/** The broken citations of open documents: per document, in the Problems panel, not findings of the memory. */
export const CITATION_CODE = 'citation';
export const SOURCE = 'memory-ls';

/** What the view needs of a vscode.Diagnostic. */
export interface DiagnosticLike {
  source?: string;
  code?: string | number | { value: string | number };
  message: string;
  severity?: number;
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
}

export interface Finding {
  uri: string;
  /** The file, relative to its workspace folder when it is in one. */
  path: string;
  code: string;
  message: string;
  severity: number;
  /** 0-based, as in the diagnostic. */
  startLine: number;
  startCharacter: number;
  endLine: number;
  endCharacter: number;
}

export interface Group {
  code: string;
  findings: Finding[];
}

export interface Count {
  code: string;
  count: number;
}

export function codeOf(code: DiagnosticLike['code']): string {
  if (code === undefined || code === null) {
    return '';
  }
  return typeof code === 'object' ? String(code.value) : String(code);
}

/** A finding of the memory checks: memory-ls's, and not a broken citation (a check added to
 * the server later counts without a change here). */
export function isHealthDiagnostic(d: DiagnosticLike): boolean {
  return d.source === SOURCE && codeOf(d.code) !== CITATION_CODE && codeOf(d.code) !== '';
}

/** `uri` relative to the longest folder URI it is under, else its path. */
export function relativePath(uri: string, folders: string[]): string {
  const under = folders
    .map((f) => f.replace(/\/+$/, ''))
    .filter((f) => uri.startsWith(`${f}/`))
    .sort((a, b) => b.length - a.length)[0];
  const rest = under !== undefined ? uri.slice(under.length + 1) : uri.replace(/^[a-z][\w+.-]*:\/\/[^/]*/i, '');
  try {
    return decodeURIComponent(rest);
  } catch {
    return rest;
  }
}

/** The health findings of `entries` (uri -> diagnostics, as getDiagnostics() gives them). */
export function findings(entries: Iterable<[string, readonly DiagnosticLike[]]>, folders: string[]): Finding[] {
  const out: Finding[] = [];
  for (const [uri, diags] of entries) {
    for (const d of diags) {
      if (!isHealthDiagnostic(d)) {
        continue;
      }
      out.push({
        uri,
        path: relativePath(uri, folders),
        code: codeOf(d.code),
        message: d.message,
        severity: d.severity ?? 1,
        startLine: d.range.start.line,
        startCharacter: d.range.start.character,
        endLine: d.range.end.line,
        endCharacter: d.range.end.character,
      });
    }
  }
  return out;
}

function codeRank(code: string): number {
  const i = HEALTH_CODES.indexOf(code);
  return i < 0 ? HEALTH_CODES.length : i;
}

/** By kind (the checks' order, then other codes by name), each kind's findings by file and line. */
export function groupFindings(list: Finding[]): Group[] {
  const by = new Map<string, Finding[]>();
  for (const f of list) {
    const g = by.get(f.code) ?? [];
    g.push(f);
    by.set(f.code, g);
  }
  const codes = [...by.keys()].sort((a, b) => codeRank(a) - codeRank(b) || a.localeCompare(b));
  return codes.map((code) => ({
    code,
    findings: by.get(code)!.sort((a, b) => a.path.localeCompare(b.path) || a.startLine - b.startLine || a.startCharacter - b.startCharacter),
  }));
}

export function counts(groups: Group[]): Count[] {
  return groups.map((g) => ({ code: g.code, count: g.findings.length }));
}

export function groupLabel(g: Group): string {
  return `${g.code} (${g.findings.length})`;
}

function basename(p: string): string {
  return p.split('/').pop() || p;
}

/** The last line a range covers (an end at column 0 of a line ends the line before). */
function lastLine(f: Finding): number {
  return f.endLine > f.startLine && f.endCharacter === 0 ? f.endLine - 1 : f.endLine;
}

/** The lines, 1-based: "4" or "4-6". */
export function lines(f: Finding): string {
  const end = lastLine(f);
  return end > f.startLine ? `${f.startLine + 1}-${end + 1}` : `${f.startLine + 1}`;
}

export interface ItemText {
  label: string;
  description: string;
  tooltip: string;
}

/** A finding's row: "2026-01-05.md:4", the message beside it, path, lines and message on hover. */
export function itemText(f: Finding): ItemText {
  return {
    label: `${basename(f.path)}:${lines(f)}`,
    description: f.message,
    tooltip: `${f.path}:${lines(f)} (${f.code})\n${f.message}`,
  };
}

/** "3 findings: 2 duplicate, 1 orphan"; empty when there are none. */
export function countsText(list: Count[]): string {
  const total = list.reduce((n, c) => n + c.count, 0);
  if (!total) {
    return '';
  }
  return `${total} ${total === 1 ? 'finding' : 'findings'}: ${list.map((c) => `${c.count} ${c.code}`).join(', ')}`;
}
