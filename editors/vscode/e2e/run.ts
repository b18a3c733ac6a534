// The end-to-end suite: the packaged extension in a real code-server, driven through headless
// chromium, against this checkout's memory-ls. Ends with "N passed, N failed".
// A missing part (code-server, chromium, memory-ls) fails the run under CI=true, skips it elsewhere;
// so does a missing PostgreSQL ($MEMORY_LS_TEST_PG_URL) for the team index check alone.

import * as fs from 'node:fs';
import * as path from 'node:path';

import { Check, CHECKS, Context, NO_SERVER_CHECK } from './checks';
import { INSTALL_CHECK, launchEmptyProfile } from './installOffer';
import { ARTIFACTS, IN_CI, MissingPart } from './env';
import { Instance, launch, Parts, prepare, Setup } from './suite';
import { prepareTeam, TEAM_CHECK } from './team';

const CHECK_TIMEOUT_MS = 90_000;

function slug(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 60);
}

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

class Results {
  passed = 0;
  failed = 0;

  async run(check: Check, ctx: Context, instance: Instance): Promise<void> {
    const t0 = Date.now();
    try {
      await withTimeout(check.run(ctx), check.timeoutMs ?? CHECK_TIMEOUT_MS);
      this.passed++;
      console.log(`ok   ${check.name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    } catch (error) {
      this.failed++;
      const shot = path.join(ARTIFACTS, `failed-${slug(check.name)}.png`);
      await instance.session.page.screenshot({ path: shot }).catch(() => undefined);
      console.log(`FAIL ${check.name}\n     ${String(error instanceof Error ? error.message : error).split('\n').join('\n     ')}\n     screenshot: ${shot}`);
    }
    await ctx.wb.reset().catch(async (error) => {
      const shot = path.join(ARTIFACTS, `reset-after-${slug(check.name)}.png`);
      await instance.session.page.screenshot({ path: shot }).catch(() => undefined);
      console.log(`     (reset failed: ${String(error).split('\n')[0]}; screenshot: ${shot})`);
    });
  }

  /** Checks whose instance could not be set up: each is a failure, or a skip for a missing part outside CI. */
  notRun(checks: readonly Check[], error: unknown): void {
    const why = String(error instanceof Error ? error.message : error);
    for (const check of checks) {
      if (error instanceof MissingPart && !IN_CI) {
        console.log(`skip ${check.name}\n     ${why}`);
      } else {
        this.failed++;
        console.log(`FAIL ${check.name}\n     ${why.split('\n').join('\n     ')}`);
      }
    }
  }

  /** A part of the run that never got to its checks counts as one failure. */
  broken(what: string, error: unknown): void {
    this.failed++;
    console.log(`FAIL ${what}\n     ${String(error instanceof Error ? error.stack : error)}`);
  }
}

async function main(): Promise<number> {
  const t0 = Date.now();
  for (const old of fs.existsSync(ARTIFACTS) ? fs.readdirSync(ARTIFACTS) : []) {
    if (old.endsWith('.png')) {
      fs.rmSync(path.join(ARTIFACTS, old));
    }
  }
  let parts: Parts;
  try {
    parts = prepare();
  } catch (error) {
    if (error instanceof MissingPart && !IN_CI) {
      console.log(`e2e: skipped: ${error.message}`);
      return 0;
    }
    console.log(`e2e: ${String(error instanceof Error ? error.message : error)}`);
    console.log('0 passed, 1 failed');
    return 1;
  }
  console.log(`e2e: set up in ${((Date.now() - t0) / 1000).toFixed(1)} s; search should be ${parts.model ? 'hybrid' : 'keyword-only'}`);
  const results = new Results();
  const hybrid = parts.model !== undefined;

  const instances: {
    name: string;
    withServer: boolean;
    checks: readonly Check[];
    setup?: (home: string) => Setup;
    /** Starts its own code-server instead of launch(). */
    open?: () => Promise<Instance>;
    hybrid?: boolean;
  }[] = [
    { name: 'with-server', withServer: true, checks: CHECKS },
    { name: 'no-server', withServer: false, checks: [NO_SERVER_CHECK] },
    // A workbench of its own: a team index (PostgreSQL) in the workspace config and environment.
    { name: 'team', withServer: true, checks: [TEAM_CHECK], setup: (home) => prepareTeam(parts, home) },
    // Empty user-data and extensions folders, no memory-ls anywhere: the install offer, accepted.
    { name: 'install-offer', withServer: false, checks: [INSTALL_CHECK], open: () => launchEmptyProfile(parts, 'install-offer'), hybrid: true },
  ];
  // MEMORY_LS_E2E_ONLY=install-offer,no-server: those workbenches alone (while working on them).
  const only = process.env.MEMORY_LS_E2E_ONLY?.split(',').filter(Boolean);
  // MEMORY_LS_E2E_GREP=Health: only the checks whose name holds it.
  const grep = process.env.MEMORY_LS_E2E_GREP;
  for (const { name, withServer, checks, setup, open, hybrid: instanceHybrid } of instances) {
    if (only && !only.includes(name)) {
      continue;
    }
    let prepared: Setup | undefined;
    try {
      prepared = setup?.(path.join(parts.dir, name));
    } catch (error) {
      results.notRun(checks, error);
      continue;
    }
    let instance: Instance | undefined;
    try {
      instance = open ? await open() : await launch(parts, name, withServer, prepared);
      for (const check of checks) {
        if (grep && !check.name.includes(grep)) {
          continue;
        }
        await results.run(check, { wb: instance.wb, hybrid: instanceHybrid ?? hybrid, workspace: instance.workspace }, instance);
      }
    } catch (error) {
      if (open && !instance) {
        results.notRun(checks, error); // a missing part (the llama.cpp wheels) fails under CI only
      } else {
        results.broken(`starting the workbench (${name})`, error);
      }
    } finally {
      await instance?.close();
    }
  }
  fs.rmSync(parts.dir, { recursive: true, force: true });
  console.log(`e2e: took ${((Date.now() - t0) / 1000).toFixed(1)} s; artifacts in ${ARTIFACTS}`);
  console.log(`${results.passed} passed, ${results.failed} failed`);
  return results.failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(error);
    console.log('0 passed, 1 failed');
    process.exit(1);
  },
);
