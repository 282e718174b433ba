// Jest loads global setup outside its ESM transform; tsx runs the TypeScript helper instead.
import { tsImport } from 'tsx/esm/api';

export default async function globalSetup() {
  const { ensureChromium } = await tsImport('./chromium.ts', import.meta.url);
  ensureChromium();
  const { setupDatabase } = await tsImport('./database-setup.ts', import.meta.url);
  await setupDatabase();
}
