import type { CwsConnectClient, SyncedRecord } from '@cws-connect/node-client';

/** Where the demo keeps each user's place in the change feed; a real app keeps it with its own data. */
export interface CursorStore {
  get(userId: string): string | undefined;
  set(userId: string, cursor: string): void;
}

/** What the page shows of a workflow: its id, name, step, version and when it changed (not the whole object). */
export interface ShownWorkflow {
  id: string;
  name: string;
  step: string;
  version: number | null;
  lastModified: string | null;
}

/** One user's list as the page shows it, sent again whole whenever it changes. */
export interface RecordsView {
  userId: string;
  /** `starting`, `following` (the change feed), or `retrying` (cws-connect did not answer; the demo tries again). */
  state: 'starting' | 'following' | 'retrying';
  workflows: ShownWorkflow[];
  /** How many changes were applied, and how often the copy was read again after `410 cursor_expired`. */
  changes: number;
  rereads: number;
  /** Whether the feed was resumed from a stored cursor (rather than from a fresh read of the copy). */
  resumed: boolean;
  lastChangeAt: string | null;
  error: string | null;
}

const RETRY_MS = 2000;

/**
 * One user's synced workflows, followed live: the copy read once (or the feed resumed from the stored cursor), then
 * `changes()` applied as they arrive, the cursor stored after each; a `reset` (the stored cursor had expired:
 * 410 cursor_expired) replaces everything. `onView` gets the list after every change.
 */
export class RecordsFeed {
  private readonly held = new Map<string, ShownWorkflow>();
  private readonly abort = new AbortController();
  private readonly view: RecordsView;
  private readonly done: Promise<void>;

  constructor(
    private readonly cws: CwsConnectClient,
    readonly userId: string,
    private readonly cursors: CursorStore,
    private readonly onView: (view: RecordsView) => void,
    private readonly pollIntervalMs: number,
  ) {
    this.view = { userId, state: 'starting', workflows: [], changes: 0, rereads: 0, resumed: false, lastChangeAt: null, error: null };
    this.done = this.run();
  }

  current(): RecordsView {
    return { ...this.view, workflows: [...this.held.values()].sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id)) };
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.done;
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        let cursor = this.cursors.get(this.userId);
        if (cursor === undefined) {
          cursor = await this.readCopy();
          this.cursors.set(this.userId, cursor);
        } else if (this.view.state === 'starting') this.view.resumed = true;
        this.set({ state: 'following', error: null });
        for await (const item of this.cws.changes({ userId: this.userId, cursor, pollIntervalMs: this.pollIntervalMs, signal })) {
          if (item.kind === 'reset') {
            this.replace(item.records);
            this.view.rereads++;
          } else {
            if (item.action === 'deleted') this.held.delete(item.id);
            else this.held.set(item.id, shown(item.id, item.version, item.data));
            this.view.changes++;
          }
          this.cursors.set(this.userId, item.cursor);
          this.set({ lastChangeAt: new Date().toISOString() });
        }
      } catch (e) {
        if (signal.aborted) return;
        // The stored cursor stays: the next attempt resumes there, nothing applied twice or missed.
        this.set({ state: 'retrying', error: e instanceof Error ? e.message : String(e) });
        await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    }
  }

  /** The whole copy, page after page; answers the cursor of its first page (the moment of the read). */
  private async readCopy(): Promise<string> {
    const first = await this.cws.listRecords(this.userId, { limit: 1000 });
    const records = [...first.items];
    for (let next = first.next; next;) {
      const page = await this.cws.listRecords(this.userId, { limit: 1000, after: next });
      records.push(...page.items);
      next = page.next;
    }
    this.replace(records);
    return first.cursor;
  }

  private replace(records: SyncedRecord[]): void {
    this.held.clear();
    for (const r of records) this.held.set(r.id, shown(r.id, r.version, r.data));
  }

  private set(patch: Partial<RecordsView>): void {
    Object.assign(this.view, patch);
    this.onView(this.current());
  }
}

function shown(id: string, version: number | null, data: unknown): ShownWorkflow {
  const o = (data ?? {}) as Record<string, unknown>;
  return {
    id,
    name: typeof o.name === 'string' ? o.name : id,
    step: typeof o.step === 'string' ? o.step : '—',
    version,
    lastModified: typeof o.lastModified === 'string' ? o.lastModified : null,
  };
}
