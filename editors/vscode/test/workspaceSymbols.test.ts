import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { workspaceSymbolName } from '../src/workspaceSymbols';

test('a heading that already contains the query keeps its name', () => {
  assert.equal(workspaceSymbolName('Rate limiting', 'rate limit'), 'Rate limiting');
  assert.equal(workspaceSymbolName('People', '  '), 'People');
});

test('any other hit carries the query so VS Code keeps it', () => {
  assert.equal(workspaceSymbolName('People', 'who is  on call\tfor the cache'), 'People · who is on call for the cache');
});
