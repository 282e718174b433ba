import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export interface BrowserAsset {
  body: Buffer;
  /** A strong validator: the SHA-256 of the body. */
  etag: string;
  /** The first 12 hex digits of that hash: the name under which the asset is cached forever. */
  hash: string;
}

let loaded: BrowserAsset | undefined;

/**
 * The browser module (packages/connect-browser, a workspace package), read once: its ES module, the file its
 * `import` condition names (its `require` condition names a CommonJS copy, for bundlers and tests, not browsers).
 */
export function connectBrowserModule(): BrowserAsset {
  if (!loaded) {
    const manifest = createRequire(import.meta.url).resolve('@cws-connect/connect-browser/package.json');
    const body = readFileSync(join(dirname(manifest), 'connect-browser.js'));
    const digest = createHash('sha256').update(body).digest('hex');
    loaded = { body, etag: `"${digest}"`, hash: digest.slice(0, 12) };
  }
  return loaded;
}
