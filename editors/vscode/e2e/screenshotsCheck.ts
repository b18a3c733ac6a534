// `npm run screenshots:check`: the manual's pictures still show the UI they picture. Regenerates
// them (screenshots.ts) into e2e/artifacts/screenshots and compares each with the committed
// docs/images/<same name>, decoded by the headless chromium the suite runs on (no image library):
// it fails when a picture's size differs or more than MAX_DIFFERING of its pixels differ by more
// than TOLERANCE in a channel. A missing part (code-server, chromium, memory-ls, nvim, tmux) fails
// the check under CI=true and skips that program's pictures elsewhere, as in the e2e suite.

import * as fs from 'node:fs';
import * as path from 'node:path';

import { Browser, chromium, Page } from 'playwright-core';

import { ARTIFACTS, CHROMIUM, IN_CI, MissingPart } from './env';
import { DOCS_IMAGES, PICTURES, Program, takeScreenshots } from './screenshots';

const OUT = path.join(ARTIFACTS, 'screenshots');
/** A pixel differs when one of its channels (0-255) moved by more than this: antialiasing noise stays under it. */
const TOLERANCE = 16;
/**
 * The share of differing pixels a picture may have: 0.1 %. Measured (2026-12-05, 2 busy cores):
 * on an unchanged tree every picture came out identical to the committed one, run after run
 * (largest channel difference 0) once the known causes of noise were removed at the source
 * (screenshots.ts: a hover caught fading in, 5.1 %; the breadcrumbs' outline provider, 0.56 %;
 * the editor's cursor blinking, 0.023 %) or left out (the search time, 0.9 %: VARYING_ROWS).
 * One word less in the status tooltip ("Click to show the full status." -> "... the status.")
 * gave vscode-status.png 0.44 %; another picture of the same size (neovim-hover.png for
 * neovim-quickfix.png) gives 11.7 %. The limit stays above the cursor's 0.023 %, should another
 * such one-off come back, and under a one-word change.
 */
const MAX_DIFFERING = 0.001;
const FIX = 'run `npm run screenshots` and commit docs/images';
/**
 * Rows of a picture that differ from run to run whatever the UI: left out of the comparison.
 * vscode-search.png's title says how long the search took ("4 results in 3 ms", 15 ms the next
 * run), and the centred title moves with it: about 0.9 % of the picture.
 */
const VARYING_ROWS: Record<string, { from: number; to: number }> = {
  'vscode-search.png': { from: 0, to: 36 },
};

interface Comparison {
  size: string;
  committedSize: string;
  /** Share of pixels differing by more than TOLERANCE in a channel (1 when the sizes differ). */
  differing: number;
  /** Largest channel difference seen. */
  maxDelta: number;
  /** The regenerated picture with its differing pixels in red, as a PNG data: URL (when some differ). */
  diff?: string;
}

function dataUrl(file: string): string {
  return `data:image/png;base64,${fs.readFileSync(file).toString('base64')}`;
}

export async function compare(page: Page, actual: string, committed: string, skipRows = { from: 0, to: 0 }): Promise<Comparison> {
  return page.evaluate(
    async ({ a, b, tolerance, skip }) => {
      const load = async (src: string): Promise<ImageData> => {
        const img = new Image();
        img.src = src;
        await img.decode();
        const canvas = document.createElement('canvas');
        canvas.width = img.naturalWidth;
        canvas.height = img.naturalHeight;
        const ctx = canvas.getContext('2d', { willReadFrequently: true })!;
        ctx.drawImage(img, 0, 0);
        return ctx.getImageData(0, 0, canvas.width, canvas.height);
      };
      const [x, y] = [await load(a), await load(b)];
      const size = `${x.width}x${x.height}`;
      const committedSize = `${y.width}x${y.height}`;
      if (size !== committedSize) {
        return { size, committedSize, differing: 1, maxDelta: 255 };
      }
      let differing = 0;
      let maxDelta = 0;
      const marked = new Uint8ClampedArray(x.data);
      for (let i = 0; i < x.data.length; i += 4) {
        const row = Math.floor(i / 4 / x.width);
        if (row >= skip.from && row < skip.to) {
          marked.set([128, 128, 128, 255], i);
          continue;
        }
        let delta = 0;
        for (let c = 0; c < 4; c++) {
          delta = Math.max(delta, Math.abs(x.data[i + c] - y.data[i + c]));
        }
        maxDelta = Math.max(maxDelta, delta);
        if (delta > tolerance) {
          differing++;
          marked.set([255, 0, 0, 255], i);
        }
      }
      const compared = x.width * (x.height - Math.max(0, Math.min(skip.to, x.height) - skip.from));
      const result: Comparison = { size, committedSize, differing: compared ? differing / compared : 0, maxDelta };
      if (differing) {
        const canvas = document.createElement('canvas');
        canvas.width = x.width;
        canvas.height = x.height;
        canvas.getContext('2d')!.putImageData(new ImageData(marked, x.width, x.height), 0, 0);
        result.diff = canvas.toDataURL('image/png');
      }
      return result;
    },
    { a: dataUrl(actual), b: dataUrl(committed), tolerance: TOLERANCE, skip: skipRows },
  );
}

function percent(share: number): string {
  return `${(share * 100).toFixed(3)} %`;
}

async function main(): Promise<number> {
  const t0 = Date.now();
  fs.rmSync(OUT, { recursive: true, force: true });
  let skipped: Map<Program, string>;
  try {
    skipped = await takeScreenshots(OUT);
  } catch (error) {
    // A missing part (here only under CI=true) needs no stack.
    const why = error instanceof MissingPart ? error.message : String(error instanceof Error ? error.stack : error);
    console.log(`screenshots:check: the pictures could not be regenerated: ${why}`);
    console.log('0 ok, 1 failed');
    return 1;
  }
  const programOf = new Map<string, Program>();
  for (const [program, names] of Object.entries(PICTURES) as [Program, readonly string[]][]) {
    names.forEach((n) => programOf.set(n, program));
  }
  const pngs = (dir: string): string[] => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.png') && !f.endsWith('.diff.png')) : []);
  const names = [...new Set([...pngs(DOCS_IMAGES), ...pngs(OUT)])].sort();
  let ok = 0;
  let failed = 0;
  let skips = 0;
  let compared = 0;
  // Launched for the first comparison: without chromium every picture was skipped (outside CI).
  let browser: Browser | undefined;
  let page: Page | undefined;
  const comparer = async (): Promise<Page> => {
    if (!page) {
      browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
      page = await browser.newPage();
      await page.route('**/*', (route) => (route.request().url().startsWith('about:') ? route.continue() : route.abort()));
    }
    return page;
  };
  try {
    for (const name of names) {
      const actual = path.join(OUT, name);
      const committed = path.join(DOCS_IMAGES, name);
      const program = programOf.get(name);
      if (!fs.existsSync(actual) && program && skipped.has(program)) {
        skips++;
        console.log(`skip ${name}: ${skipped.get(program)}`);
        continue;
      }
      if (!fs.existsSync(actual)) {
        failed++;
        console.log(`FAIL ${name}: committed in docs/images but no longer generated; ${FIX} (remove it)`);
        continue;
      }
      if (!fs.existsSync(committed)) {
        failed++;
        console.log(`FAIL ${name}: generated but not in docs/images; ${FIX}`);
        continue;
      }
      const c = await compare(await comparer(), actual, committed, VARYING_ROWS[name]);
      compared++;
      if (c.diff) {
        fs.writeFileSync(path.join(OUT, name.replace(/\.png$/, '.diff.png')), Buffer.from(c.diff.split(',')[1], 'base64'));
      }
      if (c.size !== c.committedSize) {
        failed++;
        console.log(`FAIL ${name}: ${c.size} px, committed ${c.committedSize} px; ${FIX}`);
      } else if (c.differing > MAX_DIFFERING) {
        failed++;
        console.log(`FAIL ${name}: ${c.size} px, ${percent(c.differing)} of pixels differ by more than ${TOLERANCE} (at most ${percent(MAX_DIFFERING)}; largest difference ${c.maxDelta}); ${FIX}`);
      } else {
        ok++;
        console.log(`ok   ${name}: ${c.size} px, ${percent(c.differing)} of pixels differ by more than ${TOLERANCE} (at most ${percent(MAX_DIFFERING)}; largest difference ${c.maxDelta})`);
      }
    }
  } finally {
    await browser?.close();
  }
  if (IN_CI && compared === 0) {
    failed++;
    console.log('FAIL no picture was compared');
  }
  console.log(`screenshots:check: took ${((Date.now() - t0) / 1000).toFixed(1)} s; regenerated pictures (and *.diff.png, differing pixels in red) in ${OUT}`);
  console.log(`${ok} ok, ${failed} failed, ${skips} skipped`);
  return failed ? 1 : 0;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
