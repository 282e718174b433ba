import { tsImport } from 'tsx/esm/api';

export default async function globalTeardown() {
  const { teardownDatabase } = await tsImport('./database-teardown.ts', import.meta.url);
  await teardownDatabase();
}
