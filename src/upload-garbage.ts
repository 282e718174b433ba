import { setFlagsFromString } from 'node:v8';

const FLAG = '--scavenger-max-new-space-capacity-mb';

/**
 * How much garbage a streamed body may leave before V8 collects it (docs/facade.md, "Uploads"). Every chunk of an
 * upload arrives in a new buffer outside V8's heap, dropped once written upstream; V8 collects the young
 * generation early when such buffers reach twice its default semi-space size. Node 24's V8 (13) sizes that
 * default at 64 MiB (Node 20's was 16), so the threshold moved from 32 MiB to 128, past the 64 MiB of external
 * memory at which V8 starts a full collection instead, which runs incrementally while the upload goes on: a
 * 1 GiB upload grew the process by 61–71 MiB where Node 20's grew by 36. V8 reads this flag at every such
 * allocation, so setting it at start-up gives the young collection its old threshold back; the young generation's
 * own size is left as configured (--max-semi-space-size). V8 14 (Node 26) has no such flag: nothing is set there,
 * nor when the operator passed the flag to node.
 */
export function boundUploadGarbage(): void {
  if (!canBoundUploadGarbage() || process.execArgv.some((arg) => arg.startsWith(FLAG))) return;
  setFlagsFromString(`${FLAG}=8`);
}

/** Whether this runtime's V8 takes the flag (V8 13: Node 24, the project's runtime). */
export function canBoundUploadGarbage(): boolean {
  return Number(process.versions.v8.split('.')[0]) === 13;
}
