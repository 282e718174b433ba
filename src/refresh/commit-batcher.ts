/**
 * Group commit for renewed pairs: while one statement is writing, the pairs that arrive meanwhile wait and
 * go together in the next one. Nothing waits on a timer, so a lone renewal commits at once, and under load
 * one COMMIT (one WAL flush) carries many rows: the database's commit rate stops capping renewals.
 * Each row keeps its own compare-and-swap condition inside the shared statement.
 */
export class CommitBatcher<Item extends { id: string }, Saved> {
  private pending: Array<{ item: Item; resolve: (saved: Saved | null) => void; reject: (e: unknown) => void }> = [];
  private flushing = false;

  constructor(
    private readonly write: (items: Item[]) => Promise<Map<string, Saved>>,
    private readonly maxBatch = 250,
  ) {}

  /** Resolves with the saved row, or null when this row's condition did not hold; rejects when the statement failed. */
  save(item: Item): Promise<Saved | null> {
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
          for (const b of batch) b.resolve(saved.get(b.item.id) ?? null);
        } catch (e) {
          for (const b of batch) b.reject(e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
