// A real terminal program in tmux, and its screen turned into a picture: tmux's cells with their
// colours (capture-pane -e) rendered as HTML by the browser.

import { execFileSync } from 'node:child_process';

import { Page } from 'playwright-core';

/** tmux on its own socket, so nothing else's sessions are touched. */
export class Tmux {
  private readonly socket = `memory-ls-shots-${process.pid}`;

  constructor(
    readonly cols: number,
    readonly rows: number,
  ) {
    process.once('exit', () => this.kill());
  }

  private tmux(...args: string[]): string {
    return execFileSync('tmux', ['-L', this.socket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
  }

  start(command: string[], env: Record<string, string>, cwd: string): void {
    // Through env(1): the shell tmux starts may rewrite PATH from its profile.
    const withEnv = ['env', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...command];
    this.tmux('new-session', '-d', '-x', String(this.cols), '-y', String(this.rows), '-c', cwd, ...withEnv);
    this.tmux('set-option', '-g', 'status', 'off');
  }

  keys(...keys: string[]): void {
    this.tmux('send-keys', ...keys);
  }

  /** The screen as text with SGR colour sequences. */
  capture(): string {
    return this.tmux('capture-pane', '-p', '-e', '-N');
  }

  async waitFor(pattern: RegExp, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let screen = '';
    while (Date.now() < deadline) {
      screen = this.capture().replace(/\x1b\[[0-9;:]*m/g, '');
      if (pattern.test(screen)) {
        return;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`the terminal never showed ${pattern}:\n${screen}`);
  }

  /** Waits until the program in the pane has exited (and tmux with it); false on timeout. */
  async waitForExit(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      try {
        execFileSync('tmux', ['-L', this.socket, 'has-session'], { stdio: 'ignore' });
      } catch {
        return true;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    return false;
  }

  kill(): void {
    try {
      execFileSync('tmux', ['-L', this.socket, 'kill-server'], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  }
}

const BASIC = ['#000000', '#cd3131', '#0dbc79', '#e5e510', '#2472c8', '#bc3fbc', '#11a8cd', '#e5e5e5'];
const BRIGHT = ['#666666', '#f14c4c', '#23d18b', '#f5f543', '#3b8eea', '#d670d6', '#29b8db', '#ffffff'];
const FG = '#e0e2ea';
const BG = '#14161b';

function color256(n: number): string {
  if (n < 8) return BASIC[n];
  if (n < 16) return BRIGHT[n - 8];
  if (n < 232) {
    const v = [0, 95, 135, 175, 215, 255];
    const i = n - 16;
    return `rgb(${v[Math.floor(i / 36)]},${v[Math.floor(i / 6) % 6]},${v[i % 6]})`;
  }
  const g = 8 + (n - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

interface Style {
  fg?: string;
  bg?: string;
  bold?: boolean;
  italic?: boolean;
  underline?: boolean;
  reverse?: boolean;
}

function applySgr(style: Style, params: number[]): Style {
  const s = { ...style };
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    if (p === 0) Object.keys(s).forEach((k) => delete (s as Record<string, unknown>)[k]);
    else if (p === 1) s.bold = true;
    else if (p === 3) s.italic = true;
    else if (p === 4) s.underline = true;
    else if (p === 7) s.reverse = true;
    else if (p === 22) s.bold = false;
    else if (p === 23) s.italic = false;
    else if (p === 24) s.underline = false;
    else if (p === 27) s.reverse = false;
    else if (p >= 30 && p <= 37) s.fg = BASIC[p - 30];
    else if (p >= 90 && p <= 97) s.fg = BRIGHT[p - 90];
    else if (p >= 40 && p <= 47) s.bg = BASIC[p - 40];
    else if (p >= 100 && p <= 107) s.bg = BRIGHT[p - 100];
    else if (p === 39) delete s.fg;
    else if (p === 49) delete s.bg;
    else if (p === 38 || p === 48) {
      const key = p === 38 ? 'fg' : 'bg';
      if (params[i + 1] === 5) {
        s[key] = color256(params[i + 2]);
        i += 2;
      } else if (params[i + 1] === 2) {
        s[key] = `rgb(${params[i + 2]},${params[i + 3]},${params[i + 4]})`;
        i += 4;
      }
    }
  }
  return s;
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function span(text: string, style: Style): string {
  let fg = style.fg ?? FG;
  let bg = style.bg;
  if (style.reverse) {
    [fg, bg] = [bg ?? BG, fg];
  }
  const css = [`color:${fg}`, bg ? `background:${bg}` : '', style.bold ? 'font-weight:bold' : '', style.italic ? 'font-style:italic' : '', style.underline ? 'text-decoration:underline' : '']
    .filter(Boolean)
    .join(';');
  return `<span style="${css}">${escapeHtml(text)}</span>`;
}

/** The captured screen as an HTML page of `cols` x `rows` cells. */
export function screenHtml(ansi: string, cols: number, rows: number): string {
  const lines = ansi.replace(/\n$/, '').split('\n').slice(0, rows);
  const html = lines.map((line) => {
    let style: Style = {};
    let out = '';
    let last = 0;
    const re = /\x1b\[([0-9;:]*)m/g;
    for (let m = re.exec(line); m; m = re.exec(line)) {
      out += span(line.slice(last, m.index), style);
      style = applySgr(style, m[1] === '' ? [0] : m[1].split(/[;:]/).map(Number));
      last = re.lastIndex;
    }
    return out + span(line.slice(last), style);
  });
  return `<!doctype html><meta charset="utf-8"><style>
    body { margin: 0; background: ${BG}; }
    pre { margin: 0; padding: 8px 10px; font: 14px/1.3 "DejaVu Sans Mono", monospace; width: ${cols}ch; height: ${rows * 1.3}em; white-space: pre; overflow: hidden; }
    span { white-space: pre; }
  </style><pre>${html.join('\n')}</pre>`;
}

export async function renderScreen(page: Page, ansi: string, cols: number, rows: number, file: string): Promise<void> {
  await page.setContent(screenHtml(ansi, cols, rows));
  await page.locator('pre').screenshot({ path: file });
}
