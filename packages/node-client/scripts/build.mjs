/**
 * Builds what the package ships, with this package's TypeScript: dist/esm (ES modules and their declarations,
 * type-checked by tsc) and dist/cjs (the same modules transpiled to CommonJS, marked so by its own package.json,
 * with the same declarations, which TypeScript then reads as CommonJS).
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const ts = require('typescript');
const root = fileURLToPath(new URL('..', import.meta.url));
const [src, esm, cjs] = ['src', 'dist/esm', 'dist/cjs'].map((d) => join(root, d));

rmSync(join(root, 'dist'), { recursive: true, force: true });
const built = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
if (built.status !== 0) process.exit(built.status ?? 1);

for (const file of readdirSync(src, { recursive: true }).filter((f) => f.endsWith('.ts'))) {
  const out = join(cjs, file.replace(/\.ts$/, '.js'));
  mkdirSync(dirname(out), { recursive: true });
  const { outputText } = ts.transpileModule(readFileSync(join(src, file), 'utf8'), {
    fileName: file,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
  });
  writeFileSync(out, outputText);
  copyFileSync(join(esm, file.replace(/\.ts$/, '.d.ts')), out.replace(/\.js$/, '.d.ts'));
}
writeFileSync(join(cjs, 'package.json'), `${JSON.stringify({ type: 'commonjs' })}\n`);
console.log(`built ${relative(process.cwd(), esm)} and ${relative(process.cwd(), cjs)}`);
