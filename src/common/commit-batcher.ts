/**
 * Group commit: while one statement is writing, the items that arrive meanwhile wait and go together in
 * the next one. Nothing waits on a timer, so a lone item commits at once, and under load one COMMIT (one
 * WAL flush, one round trip) carries many rows: the database's commit rate stops capping throughput.
 * Used for inbound deliveries and renewal's commit lane; an item may carry its own condition inside the
 * shared statement (`write` answers the ids saved).
 *
 * Up to `maxInFlight` groups are written at once (1 by default), so that one statement executes while
 * another waits for its WAL flush. A group starts at once when none is in flight; one that would overlap
 * another waits until it holds as many items as the group started last: every commit costs the database
 * a flush and a statement whatever its size, so overlapping must not split the load into smaller groups
 * (under a steady load the groups keep their size and their commits overlap). Groups may commit in any
 * order, so a reader of what they write must not assume commit order (the events table's one cursor
 * reader does not: EventsRepository.listAfter).
 *
 * A group never fails its good members for a bad one: when the database refuses a group's statement,
 * the group is split in halves and each half written again, down to the member that fails alone (about
 * 2·log2(n) extra statements for one bad member of n). Only a failure that is nobody's member's fault
 * (the connection, not the statement: see `statementRefused`) fails the whole group at once, since
 * every retry would meet it too.
 */
export class CommitBatcher<Item extends { id: string }> {
  private pending: Array<Pending<Item>> = [];
  private inFlight = 0;
  private lastGroupSize = 0;

  /** `write` answers the ids whose condition held and that were saved (a Set, or a Map keyed by id); a failed statement saves nothing. */
  constructor(
    private readonly write: (items: Item[]) => Promise<{ has(id: string): boolean }>,
    private readonly maxBatch = 250,
    private readonly isolates: (e: unknown) => boolean = statementRefused,
    private readonly maxInFlight = 1,
  ) {}

  /** Resolves true once the item is committed, false when its condition did not hold; rejects when its own write failed. */
  save(item: Item): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.startGroups();
    });
  }

  private startGroups(): void {
    while (this.inFlight < this.maxInFlight && this.pending.length > 0) {
      if (this.inFlight > 0 && this.pending.length < Math.min(this.maxBatch, this.lastGroupSize)) return;
      const group = this.pending.splice(0, this.maxBatch);
      this.lastGroupSize = group.length;
      this.inFlight++;
      // writeGroup settles every member itself and never rejects.
      void this.writeGroup(group).finally(() => {
        this.inFlight--;
        this.startGroups();
      });
    }
  }

  private async writeGroup(group: Array<Pending<Item>>): Promise<void> {
    let saved: { has(id: string): boolean };
    try {
      saved = await this.write(group.map((g) => g.item));
    } catch (e) {
      if (group.length === 1 || !this.isolates(e)) {
        for (const g of group) g.reject(e);
        return;
      }
      const half = Math.ceil(group.length / 2);
      await this.writeGroup(group.slice(0, half));
      await this.writeGroup(group.slice(half));
      return;
    }
    for (const g of group) g.resolve(saved.has(g.item.id));
  }
}

interface Pending<Item> {
  item: Item;
  resolve: (saved: boolean) => void;
  reject: (e: unknown) => void;
}

/**
 * True when the database answered and refused the statement (a SQLSTATE), so that a member's data may be
 * the cause; false for a lost or refused connection and for the server's own trouble (classes 08, 53, 57,
 * 58), which no split would get past.
 */
export function statementRefused(e: unknown): boolean {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !/^(08|53|57|58)/.test(code);
}
