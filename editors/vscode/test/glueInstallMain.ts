// Run by glueInstall.test.ts in a child process (PATH is changed, and vscode-languageclient may
// leave rejected promises behind): activates the glue with no memory-ls on PATH and a global
// storage folder, as argv says, and prints what the user saw and what ran as JSON on stdout.
//   argv[2]: the global storage folder; argv[3]: the workspace folder; argv[4]: extension version
import * as fs from 'node:fs';
import * as path from 'node:path';

import { installFakeVscode, newRecorder } from './fakeVscode';
import { EXTENSION_DIR } from './helpers';

process.on('unhandledRejection', () => undefined);

async function main(): Promise<void> {
  const [storage, ws, version] = process.argv.slice(2);
  process.env.PATH = path.join(storage, 'no-such-bin'); // nothing on PATH: no memory-ls, no uv
  const rec = newRecorder({});
  installFakeVscode(rec, [ws]);
  const pkg = { ...JSON.parse(fs.readFileSync(path.join(EXTENSION_DIR, 'package.json'), 'utf8')), version };
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ext = require(path.join(EXTENSION_DIR, 'out', 'src', 'extension.js'));
  await ext.activate({ subscriptions: [], extension: { packageJSON: pkg }, globalStorageUri: { fsPath: storage } });
  await new Promise((r) => setTimeout(r, 1500));
  await ext.deactivate().catch(() => undefined);
  process.stdout.write(JSON.stringify({ messages: rec.messages, bar: rec.statusItems[0]?.text, output: rec.output }) + '\n');
  process.exit(0);
}

void main();
