// The requests' names and params in src/protocol.generated.ts must match the server's
// declarations (memory_ls/methods.py, parsed by memory_ls/params.py): scripts/gen_protocol.py
// --check compares the file with what the declarations generate.
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { test } from 'node:test';

import { EXTENSION_DIR, findPython } from './helpers';

const python = findPython();

test(
  'protocol.generated.ts matches memory_ls.methods',
  { skip: python ? false : 'no Python that can import memory_ls (set MEMORY_LS_PYTHON)' },
  () => {
    const r = spawnSync(python!, [path.join(EXTENSION_DIR, 'scripts', 'gen_protocol.py'), '--check'], { encoding: 'utf8' });
    assert.equal(r.status, 0, `the protocol drifted from the server:\n${r.stderr}${r.stdout}`);
  },
);
