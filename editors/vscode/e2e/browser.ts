// Headless Debian chromium driven by playwright-core, allowed to talk to 127.0.0.1 only.

import { Browser, BrowserContext, chromium, Page } from 'playwright-core';

import { CHROMIUM } from './env';

const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Session {
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** Requests the suite refused: anything not to 127.0.0.1. */
  blocked: string[];
}

export async function openWorkbench(url: string): Promise<Session> {
  // launch() gives every run a fresh temporary profile.
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
  const blocked: string[] = [];
  await context.route('**/*', (route) => {
    const target = new URL(route.request().url());
    if (target.protocol === 'data:' || target.protocol === 'blob:' || target.hostname === '127.0.0.1') {
      return route.continue();
    }
    blocked.push(route.request().url());
    return route.abort('blockedbyclient');
  });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(url).origin });
  const page = await context.newPage();
  await page.goto(url);
  // The workbench is ready 7-15 s after the page opens on 2 busy cores.
  await page.locator('.monaco-workbench .part.statusbar').waitFor({ timeout: 90_000 });
  return { browser, context, page, blocked };
}
