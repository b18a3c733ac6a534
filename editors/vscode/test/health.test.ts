import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { counts, countsText, DiagnosticLike, findings, groupFindings, groupLabel, isHealthDiagnostic, itemText, relativePath } from '../src/health';

const WS = 'file:///home/me/notes';

function diag(code: DiagnosticLike['code'], line: number, message = `a ${String(code)}`, extra: Partial<DiagnosticLike> = {}): DiagnosticLike {
  return {
    source: 'memory-ls',
    code,
    message,
    severity: 1,
    range: { start: { line, character: 0 }, end: { line: line + 1, character: 0 } },
    ...extra,
  };
}

test('only memory-ls findings of the checks: not broken citations, not other sources', () => {
  assert.ok(isHealthDiagnostic(diag('duplicate', 0)));
  assert.ok(isHealthDiagnostic(diag({ value: 'orphan' }, 0)));
  assert.ok(isHealthDiagnostic(diag('a-check-added-later', 0)), 'a new check counts without a change here');
  assert.ok(!isHealthDiagnostic(diag('citation', 0)), 'a broken citation of an open document is not a finding');
  assert.ok(!isHealthDiagnostic(diag('duplicate', 0, 'x', { source: 'markdownlint' })));
  assert.ok(!isHealthDiagnostic(diag(undefined, 0)));
});

test('grouped by kind in the checks order, each kind by file then line, with counts', () => {
  const list = findings(
    [
      [`${WS}/memory/2026-01-05.md`, [diag('duplicate', 7), diag('citation', 2), diag('duplicate', 3)]],
      [`${WS}/memory/runbook.md`, [diag('orphan', 0)]],
      [`${WS}/MEMORY.md`, [diag('load-cap', 200), diag('duplicate', 10, 'later', { source: 'other' })]],
      [`${WS}/memory/2026-01-02.md`, [diag('duplicate', 4)]],
      ['untitled:Untitled-1', [diag('zzz-new', 1)]],
    ],
    [WS],
  );
  const groups = groupFindings(list);
  assert.deepEqual(
    groups.map(groupLabel),
    ['duplicate (3)', 'load-cap (1)', 'orphan (1)', 'zzz-new (1)'],
  );
  assert.deepEqual(
    groups[0].findings.map((f) => `${f.path}:${f.startLine}`),
    ['memory/2026-01-02.md:4', 'memory/2026-01-05.md:3', 'memory/2026-01-05.md:7'],
  );
  assert.deepEqual(counts(groups), [
    { code: 'duplicate', count: 3 },
    { code: 'load-cap', count: 1 },
    { code: 'orphan', count: 1 },
    { code: 'zzz-new', count: 1 },
  ]);
  assert.deepEqual(groupFindings([]), []);
});

test('a finding row: basename and 1-based lines, the message beside, path and kind on hover', () => {
  const [one] = findings([[`${WS}/memory/2026-01-05.md`, [diag('duplicate', 3, 'says what MEMORY.md#L4 already says')]]], [WS]);
  // The server's range ends at column 0 of the next line: one line.
  assert.deepEqual(itemText(one), {
    label: '2026-01-05.md:4',
    description: 'says what MEMORY.md#L4 already says',
    tooltip: 'memory/2026-01-05.md:4 (duplicate)\nsays what MEMORY.md#L4 already says',
  });
  const [span] = findings(
    [[`${WS}/MEMORY.md`, [diag('expired', 0, 'expired on 2026-03-31', { range: { start: { line: 0, character: 0 }, end: { line: 2, character: 3 } } })]]],
    [WS],
  );
  assert.equal(itemText(span).label, 'MEMORY.md:1-3');
});

test('paths: relative to the innermost folder, decoded; outside every folder the whole path', () => {
  assert.equal(relativePath(`${WS}/memory/a%20b.md`, [WS]), 'memory/a b.md');
  assert.equal(relativePath(`${WS}/sub/MEMORY.md`, [WS, `${WS}/sub/`]), 'MEMORY.md');
  assert.equal(relativePath('file:///elsewhere/MEMORY.md', [WS]), '/elsewhere/MEMORY.md');
  assert.equal(relativePath(`${WS}2/MEMORY.md`, [WS]), '/home/me/notes2/MEMORY.md', 'a folder name is not a prefix of another');
});

test('countsText: total and each kind; nothing for no findings', () => {
  assert.equal(countsText([]), '');
  assert.equal(countsText([{ code: 'orphan', count: 1 }]), '1 finding: 1 orphan');
  assert.equal(
    countsText([
      { code: 'duplicate', count: 2 },
      { code: 'orphan', count: 1 },
    ]),
    '3 findings: 2 duplicate, 1 orphan',
  );
});
