// memory/search results -> QuickPick items, and the small helpers around them. Pure.

import type { LspRange, SearchHit, SearchResult } from './protocol';

export interface HitItem {
  /** QuickPick fields. */
  label: string;
  description: string;
  detail: string;
  /** What the commands need to act on the pick. */
  citation: string;
  uri: string;
  range: LspRange;
  /** 0-based line to put the cursor on: the hit's line that best matches the query. */
  cursorLine: number;
  hit: SearchHit;
}

const HEADING_RE = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/;

/** The hit's line best matching the query, as the server found it; startLine when the server
 * is too old to say (or says something outside the hit). */
export function bestLine(hit: Pick<SearchHit, 'startLine' | 'endLine' | 'bestLine'>): number {
  const line = hit.bestLine;
  return typeof line === 'number' && line >= hit.startLine && line <= hit.endLine ? line : hit.startLine;
}

/** Index of the best line in the snippet. A transcript's snippet is rendered messages, not its
 * JSONL lines, so it shows from its start. */
export function snippetOffset(hit: SearchHit): number {
  return hit.source === 'sessions' || hit.path.endsWith('.jsonl') ? 0 : bestLine(hit) - hit.startLine;
}

/** The first heading of a snippet, else its first non-empty line, trimmed to `max` characters. */
export function headline(snippet: string, max = 80): string {
  let first = '';
  for (const line of snippet.split('\n')) {
    const h = HEADING_RE.exec(line);
    if (h && h[1].trim()) {
      return clip(h[1].trim(), max);
    }
    if (!first && line.trim()) {
      first = line.trim();
    }
  }
  return clip(first || '(empty)', max);
}

export function clip(text: string, max: number): string {
  const chars = [...text];
  return chars.length <= max ? text : chars.slice(0, Math.max(1, max - 1)).join('').trimEnd() + '…';
}

/** `path:start-end` (`path:start` for one line). */
export function pathLines(hit: Pick<SearchHit, 'path' | 'startLine' | 'endLine'>): string {
  return hit.startLine === hit.endLine ? `${hit.path}:${hit.startLine}` : `${hit.path}:${hit.startLine}-${hit.endLine}`;
}

export function formatScore(hit: Pick<SearchHit, 'score' | 'vectorScore' | 'textScore'>): string {
  const parts: string[] = [];
  if (typeof hit.vectorScore === 'number') {
    parts.push(`vector ${hit.vectorScore.toFixed(2)}`);
  }
  if (typeof hit.textScore === 'number') {
    parts.push(`keyword ${hit.textScore.toFixed(2)}`);
  }
  const total = hit.score.toFixed(2);
  return parts.length ? `${total} (${parts.join(', ')})` : total;
}

/**
 * The snippet on one line, starting at the best-matching line so the reason for the hit shows
 * first; blank lines and heading marks dropped, whitespace collapsed, clipped to `max`.
 */
export function compactSnippet(snippet: string, fromLine = 0, max = 240): string {
  const lines = snippet.split('\n');
  const from = fromLine < lines.length ? fromLine : 0; // past a snippet cut short: its start
  const ordered = [...lines.slice(from), ...(from > 0 ? ['…'] : [])];
  const text = ordered
    .map((l) => l.replace(/^ {0,3}#{1,6}\s+/, '').trim())
    .filter((l) => l.length > 0)
    .join(' · ')
    .replace(/\s+/g, ' ');
  return clip(text, max);
}

export function hitToItem(hit: SearchHit): HitItem {
  return {
    label: headline(hit.snippet),
    // A teammate's file, not on this machine: it opens read-only from the team index.
    description: `${pathLines(hit)}  ·  ${formatScore(hit)}${hit.remote ? '  ·  team' : ''}`,
    detail: compactSnippet(hit.snippet, snippetOffset(hit)),
    citation: hit.citation,
    uri: hit.uri,
    range: hit.range,
    cursorLine: Math.max(0, bestLine(hit) - 1),
    hit,
  };
}

export function resultToItems(result: SearchResult): HitItem[] {
  return (result.results ?? []).map(hitToItem);
}

/** The QuickPick title line under the input: mode, provider and why search is degraded. */
export function searchSummary(result: SearchResult | undefined): string {
  if (!result) {
    return 'Type to search memory';
  }
  const n = result.results?.length ?? 0;
  const below = result.belowMinScore;
  const short = below
    ? ` (${below.count} below minScore, best ${below.bestScore.toFixed(2)}: rephrase or lower memory.query.minScore)`
    : '';
  const what = n === 0 ? `no results${short}` : n === 1 ? '1 result' : `${n} results`;
  const took = typeof result.tookMs === 'number' ? ` in ${Math.round(result.tookMs)} ms` : '';
  const mode = modeLabel(result.mode);
  const why = result.fallbackReason ? ` (${result.fallbackReason})` : '';
  return `${what}${took} · ${mode}${why}`;
}

export function modeLabel(mode: string | undefined): string {
  switch (mode) {
    case 'hybrid':
      return 'hybrid';
    case 'keyword':
      return 'keyword-only';
    case 'vector':
      return 'vector-only';
    default:
      return mode || 'unknown mode';
  }
}

/** Text to insert for a citation: the citation itself, or a Markdown link to it. */
export function citationText(citation: string, style: 'plain' | 'link' = 'plain'): string {
  return style === 'link' ? `[${citation}](${citation})` : citation;
}

/** The text inserted for a citation after the character `before`: a space first when glued. */
export function citationInsertion(citation: string, before: string, style: 'plain' | 'link' = 'plain'): string {
  const text = citationText(citation, style);
  return before && !/[\s([{"'`<]/.test(before) ? ` ${text}` : text;
}

/** Hands out request numbers; only the answer to the latest one is shown. */
export class Latest {
  private n = 0;
  next(): number {
    return ++this.n;
  }
  isLatest(id: number): boolean {
    return id === this.n;
  }
}
