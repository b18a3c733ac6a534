// Run by glueSearch.test.ts as the server: runs the command in its arguments with everything it
// writes held back by MEMORY_LS_TEST_DELAY_MS, in order, as a slow server (a remote embedding
// provider, a team index far away) answers.
import { spawn } from 'node:child_process';

const [command, ...args] = process.argv.slice(2);
const delay = Number(process.env.MEMORY_LS_TEST_DELAY_MS ?? '0');
const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
process.stdin.pipe(child.stdin);
child.stdout.on('data', (data: Buffer) => setTimeout(() => process.stdout.write(data), delay));
child.on('exit', (code) => setTimeout(() => process.exit(code ?? 0), delay + 50));
