// Run by glueStartFailure.test.ts in a child process: activates the glue with a server command
// that exits at once and prints what the user would have seen as JSON on stdout.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { installFakeVscode, newRecorder } from './fakeVscode';
import { EXTENSION_DIR } from './helpers';

// vscode-languageclient leaves rejected promises behind when the process dies during
// `initialize`; VS Code's extension host only logs those, and so does this script.
process.on('unhandledRejection', () => undefined);

async function main(): Promise<void> {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'memory-ls-glue-'));
  const rec = newRecorder({ 'memory.server.command': process.argv[2] });
  installFakeVscode(rec, [ws]);
  const pkg = JSON.parse(fs.readFileSync(path.join(EXTENSION_DIR, 'package.json'), 'utf8'));
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ext = require(path.join(EXTENSION_DIR, 'out', 'src', 'extension.js'));
  await ext.activate({ subscriptions: [], extension: { packageJSON: pkg } });
  await new Promise((r) => setTimeout(r, 1500));
  await ext.deactivate().catch(() => undefined);
  fs.rmSync(ws, { recursive: true, force: true });
  process.stdout.write(JSON.stringify({ messages: rec.messages, bar: rec.statusItems[0]?.text }) + '\n');
  process.exit(0);
}

void main();
