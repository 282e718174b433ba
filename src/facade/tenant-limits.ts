/**
 * What one tenant may hold at once: facade calls in flight (each holds an upstream socket of the shared pool
 * until its answer is sent) and, among them, streamed uploads (a slow or stalled body holds its socket for as
 * long as the caller likes). Past either bound the call is refused before anything is sent upstream, so a
 * greedy or stalled tenant cannot take the sockets and the event loop the other tenants need.
 */
export class TenantLimits {
  private readonly held = new Map<string, { calls: number; uploads: number }>();

  constructor(
    private readonly maxCalls: number,
    private readonly maxUploads: number,
  ) {}

  /** A release function, or null when the tenant is at a bound. Release exactly once. */
  acquire(tenantId: string, upload: boolean): (() => void) | null {
    let entry = this.held.get(tenantId);
    if (entry === undefined) {
      entry = { calls: 0, uploads: 0 };
      this.held.set(tenantId, entry);
    }
    if (entry.calls >= this.maxCalls || (upload && entry.uploads >= this.maxUploads)) return null;
    entry.calls++;
    if (upload) entry.uploads++;
    const held = entry;
    return () => {
      held.calls--;
      if (upload) held.uploads--;
      if (held.calls === 0 && this.held.get(tenantId) === held) this.held.delete(tenantId);
    };
  }

  /** What a tenant holds now (for tests and metrics). */
  holding(tenantId: string): { calls: number; uploads: number } {
    const entry = this.held.get(tenantId);
    return { calls: entry?.calls ?? 0, uploads: entry?.uploads ?? 0 };
  }
}
