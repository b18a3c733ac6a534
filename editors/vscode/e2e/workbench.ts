// What a user does in the workbench, as keyboard and mouse actions on the real page, and what
// they see, read back from the page.

import { Locator, Page } from 'playwright-core';

export const MEMORY_STATUS = '[id="memory-ls.memory-ls.memoryLs.status"]';

/** Monaco renders spaces as no-break spaces. */
function plain(text: string): string {
  return text.replace(/\u00a0/g, ' ');
}

export class Workbench {
  constructor(readonly page: Page) {}

  get quickInput(): Locator {
    return this.page.locator('.quick-input-widget');
  }

  /** Rows of the open quick input. */
  get rows(): Locator {
    return this.quickInput.locator('.quick-input-list .monaco-list-row');
  }

  row(hasText: string | RegExp): Locator {
    return this.rows.filter({ hasText });
  }

  get activeEditor(): Locator {
    return this.page.locator('.editor-group-container.active .editor-instance .monaco-editor').first();
  }

  /** A command from the palette (F1), by its title. */
  async command(title: string): Promise<void> {
    await this.page.keyboard.press('F1');
    const input = this.quickInput.locator('input');
    await input.waitFor();
    await input.fill(`>${title}`);
    const exact = this.rows.filter({ has: this.page.locator('.label-name', { hasText: new RegExp(`^${escapeRe(title)}$`) }) });
    await exact.first().click();
  }

  /** Quick Open (Ctrl+P) a file of the workspace, and wait for its tab. */
  async openFile(relPath: string): Promise<void> {
    await this.page.keyboard.press('Control+p');
    await this.quickInput.locator('input').fill(relPath);
    const name = relPath.split('/').pop()!;
    // Recently opened files come first until the list is filtered: wait for ours on top.
    await this.rows.and(this.page.locator('.focused')).filter({ has: this.page.locator('.label-name', { hasText: new RegExp(`^${escapeRe(name)}$`) }) }).waitFor();
    await this.page.keyboard.press('Enter');
    await this.waitForTab(name);
  }

  async waitForTab(name: string): Promise<void> {
    await this.page.locator(`.editor-group-container.active .tab.active[data-resource-name="${name}"]`).waitFor();
  }

  /** The cursor as the status bar shows it ("Ln 6, Col 1"). */
  async cursor(): Promise<{ line: number; col: number }> {
    const text = await this.page.locator('[id="status.editor.selection"]').innerText();
    const m = /Ln (\d+), Col (\d+)/.exec(text);
    if (!m) {
      throw new Error(`no cursor position in the status bar: "${text}"`);
    }
    return { line: Number(m[1]), col: Number(m[2]) };
  }

  async waitForCursorLine(line: number): Promise<void> {
    await this.page.locator('[id="status.editor.selection"]', { hasText: new RegExp(`Ln ${line},`) }).waitFor();
  }

  /** Go to line:col with Ctrl+G. */
  async goTo(line: number, col = 1): Promise<void> {
    await this.page.keyboard.press('Control+g');
    await this.quickInput.locator('input').fill(`:${line}:${col}`);
    await this.page.keyboard.press('Enter');
    await this.waitForCursorLine(line);
  }

  /** Line numbers of the active editor's rendered lines, by their CSS top (how Monaco places them). */
  private async lineNumbersByTop(): Promise<Map<string, number>> {
    const numbers = await this.activeEditor.locator('.margin-view-overlays .line-numbers').evaluateAll((els) =>
      els.map((e) => [(e.parentElement as HTMLElement).style.top, (e as HTMLElement).innerText.trim()]),
    );
    return new Map(numbers.filter(([, n]) => /^\d+$/.test(n)).map(([top, n]) => [top, Number(n)]));
  }

  /** The rendered text of every visible line of the active editor, by line number. */
  async lines(): Promise<Map<number, string>> {
    const byTop = await this.lineNumbersByTop();
    const texts = await this.activeEditor.locator('.view-lines .view-line').evaluateAll((els) => els.map((e) => [(e as HTMLElement).style.top, (e as HTMLElement).innerText]));
    const out = new Map<number, string>();
    for (const [top, text] of texts) {
      const n = byTop.get(top);
      if (n !== undefined) {
        out.set(n, plain(text));
      }
    }
    return out;
  }

  /** The text of line `n`, once the editor has rendered it. */
  async line(n: number): Promise<string> {
    for (let i = 0; i < 25; i++) {
      const text = (await this.lines()).get(n);
      if (text !== undefined) {
        return text;
      }
      await this.page.waitForTimeout(200);
    }
    throw new Error(`line ${n} is not on screen`);
  }

  /** Line numbers with a selection on them in the active editor. */
  async selectedLines(): Promise<number[]> {
    const byTop = await this.lineNumbersByTop();
    const tops = await this.activeEditor.locator('.view-overlays .selected-text').evaluateAll((els) => els.map((e) => (e.parentElement as HTMLElement).style.top));
    return [...new Set(tops.map((t) => byTop.get(t)).filter((n): n is number => n !== undefined))].sort((a, b) => a - b);
  }

  /** The screen point over a character of a visible line (1-based line and column). */
  async pointAt(lineNo: number, col: number): Promise<{ x: number; y: number }> {
    for (let i = 0; i < 25; i++) {
      const top = [...(await this.lineNumbersByTop())].find(([, n]) => n === lineNo)?.[0];
      const box = top === undefined ? undefined : await this.activeEditor.locator('.view-lines .view-line').evaluateAll((els, t) => {
        const line = els.find((e) => (e as HTMLElement).style.top === t);
        const span = line?.querySelector(':scope > span') as HTMLElement | null;
        const r = span?.getBoundingClientRect();
        return r && span ? { x: r.x, y: r.y, width: r.width, height: r.height, chars: span.innerText.length } : undefined;
      }, top);
      if (box && box.chars > 0) {
        // A monospace font: every character is as wide.
        const charWidth = box.width / box.chars;
        return { x: box.x + (col - 0.5) * charWidth, y: box.y + box.height / 2 };
      }
      await this.page.waitForTimeout(200);
    }
    throw new Error(`line ${lineNo} has no text on screen`);
  }

  /** Types into the focused editor as a person would, key by key. */
  async type(text: string): Promise<void> {
    await this.page.keyboard.type(text, { delay: 10 });
  }

  /** Closes every editor without saving, the panel, and any open quick input or hover. */
  async reset(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      await this.page.keyboard.press('Escape');
    }
    await this.command('View: Close All Editor Groups');
    const dontSave = this.page.locator('.monaco-dialog-box').getByRole('button', { name: "Don't Save" });
    const deadline = Date.now() + 10_000;
    while ((await this.page.locator('.tab').count()) > 0) {
      if (Date.now() > deadline) {
        throw new Error('editors still open after Close All Editor Groups');
      }
      if (await dontSave.isVisible()) {
        await dontSave.click(); // unsaved edits of a check are dropped
      }
      await this.page.waitForTimeout(100);
    }
    if (await this.page.locator('.part.panel').isVisible()) {
      await this.command('View: Hide Panel');
    }
  }

  /** The text field of the quick input once it shows `placeholder` (or holds `value`). */
  async quickInputReady(want: { placeholder?: string; value?: string }): Promise<Locator> {
    const input = this.quickInput.locator('input');
    await this.page.waitForFunction(
      ({ placeholder, value }) => {
        const el = document.querySelector<HTMLInputElement>('.quick-input-widget input');
        const shown = !!el && el.offsetParent !== null && document.activeElement === el;
        return shown && (placeholder === undefined || el.placeholder.startsWith(placeholder)) && (value === undefined || el.value === value);
      },
      want,
    );
    return input;
  }

  async statusBarMessage(hasText: string | RegExp): Promise<void> {
    await this.page.locator('.statusbar-item', { hasText }).first().waitFor();
  }

  /** The clipboard once something was written to it (the extension host writes it a moment later). */
  async clipboard(): Promise<string> {
    for (let i = 0; i < 25; i++) {
      const text = await this.page.evaluate(() => navigator.clipboard.readText());
      if (text) {
        return text;
      }
      await this.page.waitForTimeout(200);
    }
    return '';
  }
}

export function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** `path:a-b` (the hit's description) -> the citation `path#La-Lb`. */
export function citationOf(description: string): string {
  const m = /(\S+\.md):(\d+)(?:-(\d+))?/.exec(description);
  if (!m) {
    throw new Error(`no path:lines in "${description}"`);
  }
  return m[3] && m[3] !== m[2] ? `${m[1]}#L${m[2]}-L${m[3]}` : `${m[1]}#L${m[2]}`;
}
