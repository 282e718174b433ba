/**
 * Group commit: while one statement is writing, the items that arrive meanwhile wait and go together in
 * the next one. Nothing waits on a timer, so a lone item commits at once, and under load one COMMIT (one
 * WAL flush, one round trip) carries many rows: the database's commit rate stops capping throughput.
 * Used for renewed token pairs (each row keeps its own compare-and-swap condition inside the shared
 * statement) and for inbound deliveries.
 */
export class CommitBatcher<Item extends { id: string }> {
  private pending: Array<{ item: Item; resolve: (saved: boolean) => void; reject: (e: unknown) => void }> = [];
  private flushing = false;

  /** `write` answers the ids whose condition held and that were saved. */
  constructor(
    private readonly write: (items: Item[]) => Promise<Set<string>>,
    private readonly maxBatch = 250,
  ) {}

  /** Resolves true once the item is committed, false when its condition did not hold; rejects when the statement failed. */
  save(item: Item): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, this.maxBatch);
        try {
          const saved = await this.write(batch.map((b) => b.item));
          for (const b of batch) b.resolve(saved.has(b.item.id));
        } catch (e) {
          for (const b of batch) b.reject(e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
