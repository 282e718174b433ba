import { RingBuffer } from './ring-buffer.js';
import type { SandboxCallRecord, SandboxStats } from './types.js';

/** The record of calls (bounded) and the counters (never bounded, never cleared by clearRecords). */
export class CallRecorder {
  private readonly ring: RingBuffer<SandboxCallRecord>;
  readonly stats: SandboxStats = {
    tokenRequests: 0,
    codeExchanges: 0,
    refreshes: 0,
    refreshReuses: 0,
    expiredTokenCalls: 0,
    unknownTokenCalls: 0,
    resourceCalls: 0,
    quotaRefusals: 0,
    deliveriesDropped: 0,
  };

  constructor(limit: number) {
    this.ring = new RingBuffer(limit);
  }

  /** Added on arrival and completed in place when the response ends, so the order is arrival order. */
  add(record: SandboxCallRecord): void {
    this.ring.push(record);
  }

  records(): SandboxCallRecord[] {
    return this.ring.toArray().map((r) => ({ ...r }));
  }

  clear(): void {
    this.ring.clear();
  }

  snapshot(): SandboxStats {
    return { ...this.stats };
  }
}

// Values of these query parameters are credentials: a record must never hold them.
const SECRET_QUERY_PARAMS = /(^|&)(access_token|refresh_token|client_secret|code|token|password|id_token)=[^&]*/gi;

export function redactQuery(query: string): string {
  if (query === '') return query;
  return query.replace(SECRET_QUERY_PARAMS, (_m, sep: string, name: string) => `${sep}${name}=[REDACTED]`);
}
