// The top-level files the design names, the ones a NestJS user expects to find (run by CI, .ci/run):
//
//   node tools/check-design-files.mjs [root]      root defaults to this checkout
//
// Exits 1 naming every one that is missing (or is a file where a directory is expected, or the reverse), and a
// nest-cli.json that does not build with SWC from tools/swc-service.json (the options `npm start` compiles with).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The design's top-level entries: a name, and whether it is a directory. */
export const DESIGN_FILES = [
  { name: 'package.json', directory: false },
  { name: 'tsconfig.json', directory: false },
  { name: 'nest-cli.json', directory: false },
  { name: 'src', directory: true },
  { name: 'test', directory: true },
  { name: 'migrations', directory: true },
  { name: '.env.example', directory: false },
  { name: 'README.md', directory: false },
];

/** One line per problem, each naming its file; empty when every design file is there. */
export function designFileProblems(root) {
  const problems = [];
  for (const { name, directory } of DESIGN_FILES) {
    const path = join(root, name);
    if (!existsSync(path)) problems.push(`${name}: missing`);
    else if (statSync(path).isDirectory() !== directory) problems.push(`${name}: is not a ${directory ? 'directory' : 'file'}`);
  }
  const nestCli = join(root, 'nest-cli.json');
  if (existsSync(nestCli) && statSync(nestCli).isFile()) {
    let config = null;
    try {
      config = JSON.parse(readFileSync(nestCli, 'utf8'));
    } catch (e) {
      problems.push(`nest-cli.json: is not JSON (${e.message})`);
    }
    const builder = config?.compilerOptions?.builder;
    if (config && (builder?.type !== 'swc' || builder?.options?.swcrcPath !== 'tools/swc-service.json'))
      problems.push(
        'nest-cli.json: compilerOptions.builder must be SWC with options.swcrcPath "tools/swc-service.json" (as tools/build.mjs)',
      );
  }
  return problems;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const root = resolve(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)));
  const problems = designFileProblems(root);
  if (problems.length) {
    for (const p of problems) console.error(`design file ${p}`);
    process.exit(1);
  }
  console.log(`${DESIGN_FILES.length} design files present: ${DESIGN_FILES.map((f) => f.name).join(', ')}`);
}
