// The runtime floor is package.json's `engines.node`. `npm ci` installs the project's Node (the
// node-<os>-<cpu> optional dependencies) as node_modules/.bin/node, which npm puts first on every script's PATH;
// on a platform the registry has no such package for, the system's node must meet the floor itself.
import { readFileSync } from 'node:fs';

const { engines } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

/** The lowest supported major version, from `engines.node` (">=24"). */
export const NODE_FLOOR = Number(/^>=\s*(\d+)/.exec(engines.node)[1]);

/** Stops with one line when this process runs on a Node older than the floor. */
export function requireSupportedRuntime() {
  if (Number(process.versions.node.split('.')[0]) >= NODE_FLOOR) return;
  console.error(
    `cws-connect needs Node ${NODE_FLOOR} or newer, this is ${process.version} (${process.execPath}): run it through npm ` +
      `(npm start, npm test) after npm ci, which installs Node ${NODE_FLOOR} for the scripts, or install Node ${NODE_FLOOR}.`,
  );
  process.exit(1);
}
