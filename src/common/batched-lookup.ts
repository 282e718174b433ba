/**
 * Lookups by key that share their queries: a lookup starts its query at once when none is in flight; those that
 * arrive meanwhile wait and go together in the next query (one per key, however many asked for it), up to
 * `maxBatch` keys a query. One query is in flight at a time, so however many lookups arrive, they cost the
 * database one round trip at a time (the throttle's lane for clients past their bound: docs/security.md).
 * A failed query (a lost connection: a SELECT refuses no key) fails the lookups it carried, and only those.
 */
export class BatchedLookup<K, V> {
  private waiting = new Map<K, Array<Waiter<V>>>();
  private running = false;

  /** `fetch` answers what it found by key; a key it leaves out is not found. */
  constructor(
    private readonly fetch: (keys: K[]) => Promise<Map<K, V>>,
    private readonly maxBatch = 500,
  ) {}

  /** What `fetch` finds for `key`, undefined when nothing. */
  get(key: K): Promise<V | undefined> {
    return new Promise((resolve, reject) => {
      const waiters = this.waiting.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else this.waiting.set(key, [{ resolve, reject }]);
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.waiting.size > 0) {
      const batch = new Map<K, Array<Waiter<V>>>();
      for (const [key, waiters] of this.waiting) {
        if (batch.size >= this.maxBatch) break;
        batch.set(key, waiters);
      }
      for (const key of batch.keys()) this.waiting.delete(key);
      try {
        const found = await this.fetch([...batch.keys()]);
        for (const [key, waiters] of batch) for (const w of waiters) w.resolve(found.get(key));
      } catch (e) {
        for (const waiters of batch.values()) for (const w of waiters) w.reject(e);
      }
    }
    this.running = false;
  }
}

interface Waiter<V> {
  resolve: (value: V | undefined) => void;
  reject: (e: unknown) => void;
}
