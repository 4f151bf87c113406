import { createHash } from "node:crypto";
import pg from "pg";

/** PostgreSQL truncates identifiers to 63 bytes; two long schema names must not share a channel. */
const MAX_IDENTIFIER = 63;

/**
 * The channel a journal's append transactions notify: one per schema, since several journals
 * (schemas) can share a database. Schema names are plain lower-case identifiers, so the channel
 * needs no quoting.
 *
 * @example
 * commitChannel("holdfast") // "holdfast_holdfast"
 */
export const commitChannel = (schema: string): string => {
  const plain = `holdfast_${schema}`;
  if (plain.length <= MAX_IDENTIFIER) return plain;
  return `holdfast_${createHash("sha256").update(schema).digest("hex").slice(0, 40)}`;
};

/** The `application_name` of a journal's listening connection, so operators can tell it apart. */
export const listenerName = (schema: string): string => `holdfast listen ${schema}`.slice(0, MAX_IDENTIFIER);

export interface CommitListenerOptions {
  /** How to connect (the journal pool's settings). */
  readonly connection: pg.ClientConfig;
  readonly schema: string;
  /** Told when events committed by anyone may have become readable. Carries nothing. */
  readonly wake: () => void;
  /** Reconnect delay after the connection drops; doubles after each failed attempt. Default 100 ms. */
  readonly initialDelayMs?: number;
  /** The longest reconnect delay. Default 5000 ms. */
  readonly maxDelayMs?: number;
  /**
   * How long a notified commit is waited for to become readable (a transaction that started
   * earlier and is still running holds it back) before readers are woken anyway. Default 5000 ms.
   */
  readonly readableWithinMs?: number;
}

const SNAPSHOT =
  "SELECT pg_snapshot_xmin(s)::text AS xmin, pg_snapshot_xmax(s)::text AS xmax FROM pg_current_snapshot() AS s";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One LISTEN connection per journal, so readers wake when another process commits events instead
 * of at their next poll. A notification only wakes: readers read with the same position and
 * transaction-id rule as always, so a lost or early notification can delay an event (until the
 * next notification or poll) but never skip or repeat one.
 *
 * `readAll` returns only events of transactions older than every transaction still running. The
 * notifying transaction has committed when its notification arrives, but an older transaction may
 * still be running; readers are woken once a snapshot shows every transaction that was running
 * at the notification finished. After a (re)connect the same is done once, for the commits whose
 * notifications nobody was listening for.
 */
export class CommitListener {
  private readonly options: CommitListenerOptions;
  private readonly channel: string;
  private client: pg.Client | null = null;
  private started = false;
  private closed = false;
  private delay: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** A notification (or a reconnect) arrived that the settle loop has not taken into account. */
  private pending = false;
  private settling = false;

  constructor(options: CommitListenerOptions) {
    this.options = options;
    this.channel = commitChannel(options.schema);
    this.delay = options.initialDelayMs ?? 100;
  }

  /** Connect and LISTEN, once; idempotent. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.connect();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    this.timer = undefined;
    if (this.closed) return;
    const client = new pg.Client({
      ...this.options.connection,
      application_name: listenerName(this.options.schema),
      keepAlive: true,
    });
    let lost = false;
    const lose = () => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = null;
      client.end().catch(() => {});
      this.reconnectLater();
    };
    // A dropped connection (server restart, pg_terminate_backend, network) must not crash the process.
    client.on("error", lose);
    client.on("end", lose);
    client.on("notification", (message) => {
      if (message.channel === this.channel) this.notified();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
    } catch {
      lose();
      return;
    }
    if (this.closed || lost) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.delay = this.options.initialDelayMs ?? 100;
    // Commits made while nobody listened were announced to no one: readers look once.
    this.notified();
  }

  private reconnectLater(): void {
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => void this.connect(), this.delay);
    this.delay = Math.min(this.delay * 2, this.options.maxDelayMs ?? 5000);
  }

  private notified(): void {
    this.pending = true;
    if (!this.settling) void this.settle();
  }

  /** Wake readers once what was notified is readable; notifications meanwhile are folded in. */
  private async settle(): Promise<void> {
    this.settling = true;
    try {
      let target = 0n;
      let pause = 2;
      let deadline = Date.now() + (this.options.readableWithinMs ?? 5000);
      for (;;) {
        const client = this.client;
        // Without a connection there is nothing to ask; the reconnect wakes readers again.
        if (this.closed || !client) return;
        const fresh = this.pending;
        this.pending = false;
        const row = (await client.query<{ xmin: string; xmax: string }>(SNAPSHOT)).rows[0];
        // Every transaction id below the snapshot's xmax had started before it was taken.
        if (fresh && row) {
          const xmax = BigInt(row.xmax);
          if (xmax > target) target = xmax;
        }
        if (!row || BigInt(row.xmin) >= target || Date.now() >= deadline) {
          this.options.wake();
          if (!this.pending) return;
          deadline = Date.now() + (this.options.readableWithinMs ?? 5000);
          pause = 2;
          continue;
        }
        // Usually a short commit in flight; a long transaction is asked about less and less often.
        await sleep(pause);
        pause = Math.min(pause * 2, 50);
      }
    } catch {
      // The connection failed; its reconnect wakes readers again.
    } finally {
      this.settling = false;
    }
  }
}
