import pg from 'pg';
import { CommitBatcher, statementRefused } from '../../common/commit-batcher.js';

/**
 * A renewal's hold on the commit lane, taken before its token call, so that once the upstream has rotated
 * the pair, nothing stands between the answer and its COMMIT but the one commit already in flight on the
 * lane. Released (after its save) by whoever took it.
 */
export interface LaneHold<Item> {
  /** Resolves true once the pair is committed, false when its compare-and-swap did not hold; rejects when its statement failed. */
  save(owner: string, item: Item): Promise<boolean>;
  release(broken?: boolean): void;
}

export interface CommitLaneOptions {
  connectionString: string | undefined;
  applicationName: string;
  /** Session settings of the lane's connection (`-c name=value ...`). */
  options: string;
  /** How many holds may be out at once: every hold is a renewal in flight, which a SIGKILL can cost. */
  holds: number;
  /** The lane's connection closes after this long without a hold. */
  idleMs: number;
  connectTimeoutMs: number;
}

/**
 * Renewal's commit lane: one database connection of its own and a group commit on it. A pair that arrives
 * while no commit is running is committed at once, alone; the pairs that arrive while one is running go
 * together in the next statement, which starts the moment the running one ends (CommitBatcher: no timer,
 * no batch size to wait for). So a received pair waits for at most the one commit already in flight, and
 * under load one COMMIT (one WAL flush, one round trip) carries every pair that arrived meanwhile.
 *
 * The lane's connection is opened by the first hold (before that renewal's token call) and kept while holds
 * are out. A statement that fails fails every pair in it at once, without a split or a retry here: each
 * pair's own retry (PairCommit, on the shared pool) takes over, so a bad member never holds the others.
 * A connection that broke is dropped; pairs that arrive before the next hold reopens it fail at once into
 * the same retry, rather than wait for a reconnect.
 */
export class GroupCommitLane<Item extends { id: string }> {
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private out = 0;
  private readonly waiting: Array<() => void> = [];
  private idleTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly batcher: CommitBatcher<{ id: string; owner: string; item: Item }>;

  /** `write` runs the save of `items` (all renewed under `owner`'s lease) on `run` and answers the ids saved. */
  constructor(
    private readonly opts: CommitLaneOptions,
    write: (
      run: (q: pg.QueryConfig) => Promise<{ rows: Array<Record<string, unknown>> }>,
      owner: string,
      items: Item[],
    ) => Promise<Set<string>>,
  ) {
    this.batcher = new CommitBatcher(
      async (group) => {
        const client = this.client;
        if (!client) throw Object.assign(new Error('the commit lane has no connection'), { code: 'CWS_LANE_CLOSED' });
        try {
          const saved = new Set<string>();
          for (const [owner, items] of byOwner(group)) for (const id of await write((q) => client.query(q), owner, items)) saved.add(id);
          return saved;
        } catch (e) {
          if (!statementRefused(e)) this.drop(client);
          throw e;
        }
      },
      Number.MAX_SAFE_INTEGER,
      () => false,
    );
  }

  /** Takes a hold (waiting for one when `holds` are out) and makes sure the lane's connection is open. */
  async reserve(): Promise<LaneHold<Item>> {
    if (this.out >= this.opts.holds) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.out++;
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
    try {
      await this.open();
    } catch (e) {
      this.giveBack();
      throw e;
    }
    let released = false;
    return {
      save: (owner, item) => this.batcher.save({ id: item.id, owner, item }),
      release: () => {
        if (released) return;
        released = true;
        this.giveBack();
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private giveBack(): void {
    const next = this.waiting.shift();
    if (next) {
      next();
      return;
    }
    this.out--;
    if (this.out === 0 && this.client && !this.closed) {
      this.idleTimer = setTimeout(() => {
        this.idleTimer = null;
        if (this.out === 0 && this.client) this.drop(this.client);
      }, this.opts.idleMs);
      this.idleTimer.unref();
    }
  }

  private async open(): Promise<void> {
    if (this.closed) throw Object.assign(new Error('the commit lane is closed'), { code: 'CWS_LANE_CLOSED' });
    if (this.client) return;
    this.connecting ??= (async () => {
      const client = new pg.Client({
        connectionString: this.opts.connectionString,
        application_name: this.opts.applicationName,
        options: this.opts.options,
        connectionTimeoutMillis: this.opts.connectTimeoutMs,
      });
      // A connection the server dropped while idle (a restart) is discarded; the next hold opens another.
      client.on('error', () => this.drop(client));
      try {
        await client.connect();
      } catch (e) {
        await client.end().catch(() => undefined);
        throw e;
      }
      if (this.closed) {
        await client.end().catch(() => undefined);
        throw Object.assign(new Error('the commit lane is closed'), { code: 'CWS_LANE_CLOSED' });
      }
      this.client = client;
    })().finally(() => {
      this.connecting = null;
    });
    await this.connecting;
  }

  private drop(client: pg.Client): void {
    if (this.client === client) this.client = null;
    void client.end().catch(() => undefined);
  }
}

function byOwner<Item>(group: Array<{ owner: string; item: Item }>): Map<string, Item[]> {
  const out = new Map<string, Item[]>();
  for (const g of group) {
    const items = out.get(g.owner);
    if (items) items.push(g.item);
    else out.set(g.owner, [g.item]);
  }
  return out;
}
