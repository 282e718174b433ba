// The documentation's links resolve: every relative link and every anchor in README.md, docs/*.md and
// packages/*/README.md, checked offline with linkinator (it serves the files on 127.0.0.1 and follows the links
// between them). Links to other hosts (the web, and the examples' http://localhost:3000…) are not followed.
// Then the shape of docs/*.md (tools/doc-rules.mjs): no page over 400 lines, no dated heading outside
// docs/benchmarks.md, every error code of src/common/app-error.ts in docs/troubleshooting.md.
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { check, LinkState } from 'linkinator';
import { docRuleViolations, ERROR_CODES_SOURCE, errorCodesOf } from './doc-rules.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const files = [
  'README.md',
  ...readdirSync(`${root}docs`)
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  ...readdirSync(`${root}packages`, { withFileTypes: true })
    .filter((d) => d.isDirectory() && readdirSync(`${root}packages/${d.name}`).includes('README.md'))
    .map((d) => `packages/${d.name}/README.md`),
];

const port = await new Promise((done, fail) => {
  const srv = createServer();
  srv.once('error', fail);
  srv.listen(0, '127.0.0.1', () => {
    const { port } = srv.address();
    srv.close(() => done(port));
  });
});
const served = `http://127.0.0.1:${port}/`;

process.chdir(root);
const { links } = await check({
  path: files,
  port,
  markdown: true,
  checkFragments: true,
  concurrency: 8,
  linksToSkip: async (link) => !link.startsWith(served),
});
const broken = links.filter((l) => l.state === LinkState.BROKEN);
for (const l of broken)
  console.error(
    `broken link in ${l.parent?.replace(served, '') ?? '?'}: ${l.url.replace(served, '')} (${l.status === 200 ? 'no such anchor' : l.status || 'unreachable'})`,
  );
console.log(
  `${files.length} files, ${links.filter((l) => l.state === LinkState.OK).length} local links and anchors resolve, ${broken.length} broken`,
);
const pages = files.filter((f) => f.startsWith('docs/')).map((path) => ({ path, text: readFileSync(path, 'utf8') }));
const problems = docRuleViolations(pages, { errorCodes: errorCodesOf(readFileSync(ERROR_CODES_SOURCE, 'utf8')) });
for (const p of problems) console.error(p);
console.log(
  `${pages.length} pages of docs/: ${problems.length ? `${problems.length} break the shape rules` : 'each within 400 lines, no dated heading outside docs/benchmarks.md, which opens with its current figures; every error code in docs/troubleshooting.md'}`,
);
process.exitCode = broken.length || problems.length ? 1 : 0;
