import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where the built console lives: packages/console/dist in the project, found from this file whether it runs
 * compiled (dist/src/console) or from source (tests).
 */
export function consoleBuildDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'packages', 'console', 'package.json'))) return join(dir, 'packages', 'console', 'dist');
    const parent = dirname(dir);
    if (parent === dir) return join(process.cwd(), 'packages', 'console', 'dist');
    dir = parent;
  }
}

/** What the console's files may do: load only from this origin, talk only to it, never be framed. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Vite's output names: hashed, one level deep. */
export const ASSET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
