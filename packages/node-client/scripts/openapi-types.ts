import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';

/** The committed output of the generator: src/generated/openapi.ts in this package. */
export const GENERATED_TYPES_FILE = new URL('../src/generated/openapi.ts', import.meta.url);

/** The one command that rewrites GENERATED_TYPES_FILE from the service's current OpenAPI document. */
export const REGENERATE_COMMAND = 'npm run client:generate';

/**
 * TypeScript types for the OpenAPI document, as openapi-typescript prints them. The generator runs on the
 * TypeScript 5 installed beside it in this package (its printer does not work with TypeScript 6).
 */
export async function typesFromDocument(document: object): Promise<string> {
  // A deep copy: openapi-typescript annotates the object it is given.
  const ast = await openapiTS(structuredClone(document) as Parameters<typeof openapiTS>[0], { silent: true, alphabetize: true });
  return (
    COMMENT_HEADER.replace(' */', ` * Regenerate with \`${REGENERATE_COMMAND}\` (from the service's /docs-json).\n */`) + astToString(ast)
  );
}
