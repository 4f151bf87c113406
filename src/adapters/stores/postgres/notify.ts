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
}

/**
 * One LISTEN connection per journal, so readers wake when another process commits events instead
 * of at their next poll. A notification only wakes: readers read by position as always, so a lost
 * or early notification can delay an event (until the next notification or poll) but never skip or
 * repeat one.
 *
 * PostgreSQL delivers a notification only once the notifying transaction is visible as committed,
 * and `readAll` has no visibility horizon (every events insert holds the append lock, so positions
 * are in commit order), so readers are woken at once: a transaction elsewhere on the server,
 * however long, delays nothing (F9). After a (re)connect readers are woken once, for the commits
 * whose notifications nobody was listening for.
 */
export class CommitListener {
  private readonly options: CommitListenerOptions;
  private readonly channel: string;
  private client: pg.Client | null = null;
  private started = false;
  private closed = false;
  private delay: number;
  private timer: ReturnType<typeof setTimeout> | undefined;

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
    if (!this.closed) this.options.wake();
  }
}
