import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import type { SearchHit, SearchResult } from '../src/protocol';
import {
  bestLine,
  citationInsertion,
  compactSnippet,
  formatScore,
  headline,
  hitToItem,
  Latest,
  pathLines,
  resultToItems,
  searchSummary,
  snippetOffset,
} from '../src/searchItems';

const API_DESIGN = [
  '# API design review',
  '',
  'Date: 2026-01-10. Present: Ana, Bilal, the coding agent.',
  '',
  '## Rate limiting',
  'We chose a token bucket per API key, stored in Redis.',
  'The bucket holds 100 tokens and refills at 100 per minute.',
].join('\n');

function hit(over: Partial<SearchHit> = {}): SearchHit {
  return {
    uri: 'file:///ws/memory/2026-01-10-api-design.md',
    path: 'memory/2026-01-10-api-design.md',
    range: { start: { line: 0, character: 0 }, end: { line: 7, character: 0 } },
    startLine: 1,
    endLine: 7,
    score: 0.8312,
    vectorScore: 0.61,
    textScore: 1,
    snippet: API_DESIGN,
    source: 'memory',
    citation: 'memory/2026-01-10-api-design.md#L1-L7',
    ...over,
  };
}

test('bestLine is the line the server picked, else the first line of the hit', () => {
  assert.equal(bestLine(hit({ bestLine: 6 })), 6);
  assert.equal(bestLine(hit()), 1); // an older server without bestLine
  assert.equal(bestLine(hit({ bestLine: 9 })), 1); // outside the hit: not trusted
  assert.equal(bestLine(hit({ startLine: 4, endLine: 8, bestLine: 8 })), 8);
});

test('snippetOffset follows bestLine in a note; a transcript snippet shows from its start', () => {
  assert.equal(snippetOffset(hit({ bestLine: 6 })), 5);
  assert.equal(snippetOffset(hit()), 0);
  assert.equal(snippetOffset(hit({ source: 'sessions', path: 's/a.jsonl', bestLine: 5 })), 0);
});

test('headline takes the first heading, else the first line', () => {
  assert.equal(headline(API_DESIGN), 'API design review');
  assert.equal(headline('\n\nplain first line\nsecond'), 'plain first line');
  assert.equal(headline(''), '(empty)');
  assert.equal(headline('x'.repeat(100), 10), 'xxxxxxxxx…');
});

test('pathLines and formatScore', () => {
  assert.equal(pathLines(hit()), 'memory/2026-01-10-api-design.md:1-7');
  assert.equal(pathLines(hit({ startLine: 4, endLine: 4 })), 'memory/2026-01-10-api-design.md:4');
  assert.equal(formatScore(hit()), '0.83 (vector 0.61, keyword 1.00)');
  assert.equal(formatScore({ score: 0.3 }), '0.30');
});

test('compactSnippet starts at the best line and fits on one line', () => {
  const s = compactSnippet(API_DESIGN, 5, 60);
  assert.ok(s.startsWith('We chose a token bucket'), s);
  assert.ok(!s.includes('\n'));
  assert.ok([...s].length <= 60);
  assert.equal(compactSnippet('# Title\n\nbody'), 'Title · body');
  assert.equal(compactSnippet('# Title\nbody…', 5), 'Title · body…'); // best line cut off
});

test('hitToItem maps a result to a QuickPick item at the server\'s best line', () => {
  const item = hitToItem(hit({ bestLine: 6, matchedTerms: ['token', 'bucket'] }));
  assert.equal(item.label, 'API design review');
  assert.equal(item.description, 'memory/2026-01-10-api-design.md:1-7  ·  0.83 (vector 0.61, keyword 1.00)');
  assert.ok(item.detail.startsWith('We chose a token bucket'));
  assert.equal(item.citation, 'memory/2026-01-10-api-design.md#L1-L7');
  assert.equal(item.uri, 'file:///ws/memory/2026-01-10-api-design.md');
  assert.equal(item.cursorLine, 5); // 0-based: line 6
  assert.deepEqual(item.range, hit().range);
  const old = hitToItem(hit());
  assert.equal(old.cursorLine, 0);
  assert.ok(old.detail.startsWith('API design review'));
});

test('a teammate\'s file (remote hit) says so and keeps its memory-ls: URI', () => {
  const item = hitToItem(hit({ remote: true, uri: 'memory-ls:///ws/memory/2026-01-10-api-design.md' }));
  assert.equal(item.description, 'memory/2026-01-10-api-design.md:1-7  ·  0.83 (vector 0.61, keyword 1.00)  ·  team');
  assert.equal(item.uri, 'memory-ls:///ws/memory/2026-01-10-api-design.md');
});

test('resultToItems keeps the server order; searchSummary says mode and why', () => {
  const result: SearchResult = {
    results: [hit({ score: 0.5 }), hit({ score: 0.9, citation: 'b#L1' })],
    mode: 'keyword',
    provider: null,
    fallbackReason: 'no embedding model',
    tookMs: 3.4,
  };
  assert.deepEqual(
    resultToItems(result).map((i) => i.hit.score),
    [0.5, 0.9],
  );
  assert.equal(searchSummary(result), '2 results in 3 ms · keyword-only (no embedding model)');
  assert.equal(searchSummary({ results: [], mode: 'hybrid', provider: { id: 'local', model: 'm' } }), 'no results · hybrid');
  assert.equal(searchSummary(undefined), 'Type to search memory');
  assert.equal(
    searchSummary({ results: [], mode: 'hybrid', provider: null, belowMinScore: { count: 3, bestScore: 0.031 } }),
    'no results (3 below minScore, best 0.03: rephrase or lower memory.query.minScore) · hybrid',
  );
});

test('citationInsertion adds a space only when glued to a word', () => {
  assert.equal(citationInsertion('a.md#L1', ''), 'a.md#L1');
  assert.equal(citationInsertion('a.md#L1', ' '), 'a.md#L1');
  assert.equal(citationInsertion('a.md#L1', '('), 'a.md#L1');
  assert.equal(citationInsertion('a.md#L1', 'e'), ' a.md#L1');
  assert.equal(citationInsertion('a.md#L1', ':', 'link'), ' [a.md#L1](a.md#L1)');
});

test('Latest only accepts the newest request', () => {
  const l = new Latest();
  const a = l.next();
  const b = l.next();
  assert.equal(l.isLatest(a), false);
  assert.equal(l.isLatest(b), true);
});
