import type { SqlStep } from "../sql/program.js";

/** The statements whose rows the cache keeps: a stream's head and a projection row, read and written. */
export interface CachedStatements {
  readonly head: string;
  readonly insertEvent: string;
  readonly projection: string;
  readonly upsertProjection: string;
}

/** What a read answered: a row, or `undefined` (no such stream or row), as the driver would. */
type Entry = { readonly row: unknown };

/** Pending writes of one level (a batch, or one request inside it), by cache key. */
type Layer = Map<string, Entry>;

const headKey = (streamId: unknown) => `h\u0000${String(streamId)}`;
const rowKey = (name: unknown, key: unknown) => `p\u0000${String(name)}\u0000${String(key)}`;

/**
 * The write path's memory of what it read and wrote: each stream's head (version, hash) and each
 * projection row (stored value, position), so a batch does not read back what this connection
 * committed. It is only as good as the knowledge that nobody else wrote: the journal checks
 * `PRAGMA data_version` once it holds the write lock and clears the cache when another connection
 * committed since (another process, or a reader or writer in this one). Writes stay pending until
 * their savepoint is released and their transaction committed; a rollback drops them.
 */
export class WriteCache {
  private readonly committed = new Map<string, Entry>();
  private batch: Layer = new Map();
  private request: Layer = new Map();

  constructor(
    private readonly sql: CachedStatements,
    private readonly limit = 20_000,
  ) {}

  /** The answer to `step` when the cache knows it, else `null` (ask the database). */
  read(step: SqlStep): Entry | null {
    const key = this.keyOfRead(step);
    if (key === null) return null;
    return this.request.get(key) ?? this.batch.get(key) ?? this.committed.get(key) ?? null;
  }

  /** A read the database answered: what is committed (the transaction wrote nothing under that key). */
  observed(step: SqlStep, row: unknown): void {
    const key = this.keyOfRead(step);
    if (key === null || this.request.has(key) || this.batch.has(key)) return;
    this.remember(key, { row });
  }

  /** A write that succeeded inside the current request. */
  wrote(step: SqlStep): void {
    if (step.kind === "now") return;
    const p = step.params;
    if (step.sql === this.sql.insertEvent)
      this.request.set(headKey(p[0]), { row: { version: p[1], hash: p[8] } });
    else if (step.sql === this.sql.upsertProjection)
      this.request.set(rowKey(p[0], p[1]), { row: { value: p[2], position: p[3] } });
  }

  /** The request's savepoint was released (`kept`) or rolled back. */
  requestEnded(kept: boolean): void {
    if (kept) for (const [key, entry] of this.request) this.batch.set(key, entry);
    this.request = new Map();
  }

  /** The batch committed: its writes are what the file holds now. */
  batchCommitted(): void {
    for (const [key, entry] of this.batch) this.remember(key, entry);
    this.batch = new Map();
    this.request = new Map();
  }

  /** The batch was rolled back, or something else wrote: forget everything. */
  clear(): void {
    this.committed.clear();
    this.batch = new Map();
    this.request = new Map();
  }

  get size(): number {
    return this.committed.size;
  }

  private keyOfRead(step: SqlStep): string | null {
    if (step.kind !== "get") return null;
    if (step.sql === this.sql.head) return headKey(step.params[0]);
    if (step.sql === this.sql.projection) return rowKey(step.params[0], step.params[1]);
    return null;
  }

  /** Newest last; the oldest go first when the cache is full (finished runs are not read again). */
  private remember(key: string, entry: Entry): void {
    this.committed.delete(key);
    this.committed.set(key, entry);
    if (this.committed.size <= this.limit) return;
    for (const old of this.committed.keys()) {
      this.committed.delete(old);
      if (this.committed.size <= this.limit * 0.9) break;
    }
  }
}
