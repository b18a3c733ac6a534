// The contributed `memory.*` settings must match the server's declarations
// (memory_ls/settings/schema.py): scripts/gen_settings.py --check compares package.json with the
// types, defaults, bounds, choices and descriptions declared there.
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { test } from 'node:test';

import { EXTENSION_DIR, findPython } from './helpers';

const python = findPython();

test(
  'package.json settings match memory_ls.settings',
  { skip: python ? false : 'no Python that can import memory_ls (set MEMORY_LS_PYTHON)' },
  () => {
    const r = spawnSync(python!, [path.join(EXTENSION_DIR, 'scripts', 'gen_settings.py'), '--check'], { encoding: 'utf8' });
    assert.equal(r.status, 0, `settings drifted from the server:\n${r.stderr}${r.stdout}`);
  },
);

test(
  'every default in package.json equals to_dict(Settings())',
  { skip: python ? false : 'no Python that can import memory_ls (set MEMORY_LS_PYTHON)' },
  () => {
    const r = spawnSync(
      python!,
      ['-c', 'import json; from memory_ls.settings import Settings, to_dict; print(json.dumps(to_dict(Settings())))'],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    const defaults = JSON.parse(r.stdout) as Record<string, unknown>;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const pkg = require(path.join(EXTENSION_DIR, 'package.json'));
    const props = pkg.contributes.configuration.properties as Record<string, { default: unknown }>;
    const flat: Record<string, unknown> = {};
    const walk = (o: Record<string, unknown>, prefix: string): void => {
      for (const [k, v] of Object.entries(o)) {
        if (v && typeof v === 'object' && !Array.isArray(v) && k !== 'headers') {
          walk(v as Record<string, unknown>, `${prefix}${k}.`);
        } else {
          flat[`${prefix}${k}`] = v;
        }
      }
    };
    walk(defaults, '');
    for (const [key, value] of Object.entries(flat)) {
      assert.ok(props[`memory.${key}`], `memory.${key} is not contributed`);
      assert.deepEqual(props[`memory.${key}`].default, value, `memory.${key}`);
    }
    const contributed = Object.keys(props).filter((k) => !k.startsWith('memory.server.') && !k.startsWith('memory.trace.'));
    assert.equal(contributed.length, Object.keys(flat).length);
  },
);
