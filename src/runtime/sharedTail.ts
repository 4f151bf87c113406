import type { RecordedEvent } from "../events/index.js";
import { JournalUnavailable } from "./errors.js";
import type { JournalReader } from "./Journal.js";
import { eventMatcher, type SubscriptionFilter } from "./subscribe.js";

/** How a shared tail reads the journal. */
export interface SharedTailOptions {
  /** How often to look for other processes' commits while a subscriber waits (default 200 ms). */
  readonly pollMs?: number;
  /** Events read at once, by the tail and by a subscriber catching up (default 256). */
  readonly pageSize?: number;
  /** The newest events kept for subscribers to take (default 4096). */
  readonly ringSize?: number;
}

/** Where a shared subscription starts (`after`, a position) and what it yields. */
export interface SharedSubscription {
  readonly after?: number;
  readonly filter?: SubscriptionFilter;
}

/**
 * One reader of the journal's tail for many subscribers — every SSE client of a server (decision
 * 0079). Each subscriber of its own reads the journal again for every commit: with a hundred
 * clients, a hundred reads and decodes of the same page. Here one read serves them all: the tail
 * keeps the newest events in a ring (positions `floor` < p ≤ `head`, complete), a subscriber takes
 * what it has not seen from the ring and applies its own filter, and asks the tail for more only
 * when it has taken everything. A subscriber behind the ring (a reconnect from long ago, a client
 * that fell behind while the ring moved on) reads its own pages, as `subscribe` does, until it is in
 * the ring again; a subscriber ahead of the tail moves the tail forward to it. The order, no gap and
 * no duplicate are `subscribe`'s: one cursor per subscriber over the global order.
 */
export class SharedTail {
  readonly #journal: JournalReader;
  readonly #pollMs: number;
  readonly #pageSize: number;
  readonly #ringSize: number;
  /** The newest events read, ascending: every event with floor < position ≤ head. */
  #ring: RecordedEvent[] = [];
  #floor = 0;
  #head = 0;
  #started = false;
  #reading: Promise<void> | null = null;
  #subscribers = 0;
  #dirty = false;
  #wake: (() => void) | null = null;
  #unlisten: (() => void) | null = null;

  constructor(journal: JournalReader, options: SharedTailOptions = {}) {
    this.#journal = journal;
    this.#pollMs = Math.max(10, options.pollMs ?? 200);
    this.#pageSize = Math.max(1, options.pageSize ?? 256);
    this.#ringSize = Math.max(this.#pageSize, options.ringSize ?? 4096);
  }

  /** Subscribers open now. */
  get subscribers(): number {
    return this.#subscribers;
  }

  /**
   * Every event after `after` that passes `filter`, then live ones as they are committed, as
   * {@link subscribe} yields them. Ends when `return()` is called.
   */
  subscribe(options: SharedSubscription = {}): AsyncIterableIterator<RecordedEvent> {
    const matches = eventMatcher(this.#journal, options.filter ?? {});
    let cursor = options.after ?? 0;
    let buffer: RecordedEvent[] = [];
    let closed = false;
    let outage = 0;
    let stop: (() => void) | null = null;
    const stopped = new Promise<void>((resolve) => {
      stop = resolve;
    });
    this.#join(cursor);

    /** Match a page in order; the cursor moves past an event only once it is matched. */
    const take = async (page: ReadonlyArray<RecordedEvent>): Promise<void> => {
      for (const e of page) {
        if (e.position <= cursor) continue;
        const wanted = await matches(e);
        cursor = e.position;
        if (wanted) buffer.push(e);
      }
    };

    const next = async (): Promise<IteratorResult<RecordedEvent>> => {
      for (;;) {
        if (closed) return { done: true, value: undefined };
        const ready = buffer.shift();
        if (ready) return { done: false, value: ready };
        try {
          if (cursor < this.#floor) {
            // Behind the ring: its own page, as a subscription of its own reads it. Nothing there
            // (the ring moved ahead to a later subscriber's position than anything yet committed):
            // wait for commits as a subscription would.
            const page = await this.#journal.readAll({ after: cursor, limit: this.#pageSize });
            if (page.length === 0) await Promise.race([sleep(this.#pollMs), stopped]);
            else await take(page);
          } else if (cursor < this.#head) {
            await take(this.#ringAfter(cursor));
          } else {
            await Promise.race([this.#advance(cursor), stopped]);
          }
          outage = 0;
        } catch (error) {
          // The store is away: wait and go on from the cursor (what was matched is kept).
          if (!(error instanceof JournalUnavailable)) throw error;
          await Promise.race([sleep(Math.min(5_000, this.#pollMs * 2 ** Math.min(outage++, 8))), stopped]);
        }
      }
    };

    const release = () => {
      if (closed) return;
      closed = true;
      buffer = [];
      stop?.();
      this.#leave();
    };

    return {
      next,
      return: async () => {
        release();
        return { done: true, value: undefined };
      },
      throw: async (error?: unknown) => {
        release();
        throw error;
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** The ring's events after a position, one page of them. */
  #ringAfter(position: number): RecordedEvent[] {
    let low = 0;
    let high = this.#ring.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.#ring[mid]!.position <= position) low = mid + 1;
      else high = mid;
    }
    return this.#ring.slice(low, low + this.#pageSize);
  }

  #join(cursor: number): void {
    this.#subscribers += 1;
    if (!this.#started) {
      this.#started = true;
      this.#floor = cursor;
      this.#head = cursor;
    }
    this.#unlisten ??= this.#journal.onCommitted(() => {
      this.#dirty = true;
      this.#wake?.();
    });
  }

  #leave(): void {
    this.#subscribers -= 1;
    if (this.#subscribers > 0) return;
    this.#unlisten?.();
    this.#unlisten = null;
    this.#wake?.();
  }

  /**
   * Read the tail on: resolves once the ring holds something after `cursor`, after one wait for a
   * commit that brought nothing, or when the last subscriber left. One read at a time, shared.
   */
  async #advance(cursor: number): Promise<void> {
    if (this.#reading) return this.#reading;
    if (cursor > this.#head) {
      // A subscriber ahead of the tail (resuming from a later position): the tail moves to it, and
      // anyone behind the new floor reads its own pages until it catches up.
      this.#ring = [];
      this.#floor = cursor;
      this.#head = cursor;
    }
    this.#reading = this.#readPage().finally(() => {
      this.#reading = null;
    });
    return this.#reading;
  }

  async #readPage(): Promise<void> {
    this.#dirty = false;
    const page = await this.#journal.readAll({ after: this.#head, limit: this.#pageSize });
    if (page.length > 0) {
      this.#ring.push(...page);
      this.#head = page.at(-1)!.position;
      const excess = this.#ring.length - this.#ringSize;
      if (excess > 0) {
        this.#floor = this.#ring[excess - 1]!.position;
        this.#ring.splice(0, excess);
      }
      return;
    }
    if (this.#dirty || this.#subscribers === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.#pollMs);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#wake = null;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
