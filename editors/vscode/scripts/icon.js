// Renders scripts/icon.svg to images/icon.png (128x128, transparent corners) in headless chromium:
//   node scripts/icon.js   (MEMORY_LS_E2E_CHROMIUM: the browser, default /usr/bin/chromium)
const fs = require('node:fs');
const path = require('node:path');
const { chromium } = require('playwright-core');

(async () => {
  const svg = fs.readFileSync(path.join(__dirname, 'icon.svg'), 'utf8');
  const browser = await chromium.launch({ executablePath: process.env.MEMORY_LS_E2E_CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 128, height: 128 } });
  await page.setContent(`<html><body style="margin:0;background:transparent">${svg}</body></html>`);
  await page.locator('svg').screenshot({ path: path.join(__dirname, '..', 'images', 'icon.png'), omitBackground: true });
  await browser.close();
})();
