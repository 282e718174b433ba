/**
 * Writes the CommonJS copy of the module (dist/connect-browser.cjs, with its declarations): the module itself,
 * connect-browser.js, is what ships for `import` and what the service serves; this copy is for `require`.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const ts = createRequire(import.meta.url)('typescript');
const at = (path) => new URL(`../${path}`, import.meta.url);

rmSync(at('dist'), { recursive: true, force: true });
mkdirSync(at('dist'));
const { outputText } = ts.transpileModule(readFileSync(at('connect-browser.js'), 'utf8'), {
  fileName: 'connect-browser.js',
  compilerOptions: { allowJs: true, module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
});
writeFileSync(at('dist/connect-browser.cjs'), outputText);
copyFileSync(at('connect-browser.d.ts'), at('dist/connect-browser.d.cts'));
