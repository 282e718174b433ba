import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chromium, type Browser, type LaunchOptions } from 'playwright-core';

/** Where the browser suite finds Chromium: Debian's package (playwright-core cannot download a browser here). */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Makes sure Debian's Chromium is installed before the suites run, so that `npm ci && npm test` passes on a
 * fresh machine: installed once per machine with apt-get (about a minute) when missing and this is root;
 * otherwise the run stops here, saying how to install it.
 */
export function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    throw new Error(`the browser suite needs Chromium at ${CHROMIUM}: install it first (sudo apt-get install -y chromium)`);
  }
  console.log(`\nChromium is missing: installing Debian's chromium package for the browser suite (once per machine)...`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium, but ${CHROMIUM} is still missing`);
}

/**
 * Debian's Chromium, headless, with what this machine's closed network needs: no background networking, no
 * component updates or sync (each would try to reach the outside, many times a start).
 */
export function launchChromium(options: Omit<LaunchOptions, 'executablePath' | 'args'> = {}): Promise<Browser> {
  return chromium.launch({
    ...options,
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
