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

/** A shared subscription: an async iterator, and the events it holds ready now. */
export interface SharedIterator extends AsyncIterableIterator<RecordedEvent> {
  /**
   * The events matched and ready now, in order, taken at once (none: an empty array): a consumer
   * that writes in batches takes what the ring gave it after one `next()` without a promise each.
   */
  takeReady(): RecordedEvent[];
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
  /** Bumped when the last subscriber leaves: a read begun before must not refill the ring. */
  #generation = 0;
  #reading: Promise<void> | null = null;
  /** Every subscriber's cursor. */
  readonly #cursors = new Set<{ cursor: number }>();
  #dirty = false;
  /** The next commit (or poll), shared by everyone waiting for one. */
  #commit: { readonly promise: Promise<void>; readonly resolve: () => void } | null = null;
  #unlisten: (() => void) | null = null;

  constructor(journal: JournalReader, options: SharedTailOptions = {}) {
    this.#journal = journal;
    this.#pollMs = Math.max(10, options.pollMs ?? 200);
    this.#pageSize = Math.max(1, options.pageSize ?? 256);
    this.#ringSize = Math.max(this.#pageSize, options.ringSize ?? 4096);
  }

  /** Subscribers open now. */
  get subscribers(): number {
    return this.#cursors.size;
  }

  /** Events the ring holds now (it is emptied when the last subscriber leaves). */
  get held(): number {
    return this.#ring.length;
  }

  /**
   * Every event after `after` that passes `filter`, then live ones as they are committed, as
   * {@link subscribe} yields them. Ends when `return()` is called.
   */
  subscribe(options: SharedSubscription = {}): SharedIterator {
    const matches = eventMatcher(this.#journal, options.filter ?? {});
    const me = { cursor: options.after ?? 0 };
    let buffer: RecordedEvent[] = [];
    let closed = false;
    let outage = 0;
    /** Ends the wait in progress, if any, when the subscription is closed. */
    let interrupt: (() => void) | null = null;
    /**
     * `work`, or less if the subscription is closed meanwhile. Not a race with one promise of the
     * subscription's whole life: each such race would leave a reaction on it until the end.
     */
    const until = (work: Promise<unknown>): Promise<void> =>
      new Promise<void>((resolve, reject) => {
        interrupt = resolve;
        // Closed before this wait began (during a read or a filter's look): no wait at all.
        if (closed) resolve();
        work.then(() => resolve(), reject);
      });

    this.#join(me);

    /** Match a page in order; the cursor moves past an event only once it is matched. */
    const take = async (page: ReadonlyArray<RecordedEvent>): Promise<void> => {
      for (const e of page) {
        if (e.position <= me.cursor) continue;
        const match = matches(e);
        const wanted = typeof match === "boolean" ? match : await match;
        me.cursor = e.position;
        if (wanted) buffer.push(e);
      }
    };

    /** Its own page, as a subscription of its own reads it; nothing there: wait for a commit. */
    const ownPage = async (): Promise<void> => {
      const page = await this.#journal.readAll({ after: me.cursor, limit: this.#pageSize });
      if (page.length > 0) return take(page);
      // Nothing after it at all, so nothing is between it and the floor either: a ring that holds
      // nothing may start here (a subscriber that had moved the tail ahead of every commit is then
      // served from its own reads instead, below).
      if (me.cursor < this.#floor && this.#ring.length === 0 && !this.#reading) {
        this.#floor = me.cursor;
        this.#head = me.cursor;
        return;
      }
      await until(this.#nextCommit());
    };

    const next = async (): Promise<IteratorResult<RecordedEvent>> => {
      for (;;) {
        if (closed) return { done: true, value: undefined };
        const ready = buffer.shift();
        if (ready) return { done: false, value: ready };
        try {
          if (me.cursor < this.#floor) {
            // Behind the ring (a reconnect from long ago, a subscriber that fell behind).
            await ownPage();
          } else if (me.cursor < this.#head) {
            await take(this.#ringAfter(me.cursor));
          } else if (me.cursor > this.#head && this.#othersInRing(me)) {
            // Ahead of the tail while others read the ring: the tail stays theirs, and this one
            // reads its own pages until the tail reaches it (a position past every commit, from
            // another journal or a restored copy, costs only its own reads).
            await ownPage();
          } else {
            await until(this.#advance(me.cursor));
          }
          outage = 0;
        } catch (error) {
          // The store is away: wait and go on from the cursor (what was matched is kept).
          if (!(error instanceof JournalUnavailable)) throw error;
          await until(sleep(Math.min(5_000, this.#pollMs * 2 ** Math.min(outage++, 8))));
        }
      }
    };

    const release = () => {
      if (closed) return;
      closed = true;
      buffer = [];
      interrupt?.();
      this.#leave(me);
    };

    return {
      next,
      takeReady: () => {
        const ready = buffer;
        buffer = [];
        return ready;
      },
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

  /** Whether another subscriber reads the ring, or waits at its head. */
  #othersInRing(me: { cursor: number }): boolean {
    for (const other of this.#cursors)
      if (other !== me && other.cursor >= this.#floor && other.cursor <= this.#head) return true;
    return false;
  }

  #join(me: { cursor: number }): void {
    this.#cursors.add(me);
    if (!this.#started) {
      this.#started = true;
      this.#floor = me.cursor;
      this.#head = me.cursor;
    }
    this.#unlisten ??= this.#journal.onCommitted(() => {
      this.#dirty = true;
      const commit = this.#commit;
      this.#commit = null;
      commit?.resolve();
    });
  }

  #leave(me: { cursor: number }): void {
    this.#cursors.delete(me);
    if (this.#cursors.size > 0) return;
    // Nobody left: nothing is kept for the next one (events, their rendered messages), and the
    // next subscriber starts the tail where it stands.
    this.#unlisten?.();
    this.#unlisten = null;
    this.#generation += 1;
    this.#ring = [];
    this.#started = false;
    const commit = this.#commit;
    this.#commit = null;
    commit?.resolve();
  }

  /** Resolves at the next commit this process hears of, or after `pollMs` (other processes' commits). */
  #nextCommit(): Promise<void> {
    if (!this.#commit) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      const timer = setTimeout(() => {
        if (this.#commit?.promise === promise) this.#commit = null;
        resolve();
      }, this.#pollMs);
      promise.then(() => clearTimeout(timer));
      this.#commit = { promise, resolve };
    }
    return this.#commit.promise;
  }

  /**
   * Read the tail on: resolves once the ring holds something after `cursor`, after one wait for a
   * commit that brought nothing, or when the last subscriber left. One read at a time, shared.
   */
  async #advance(cursor: number): Promise<void> {
    if (this.#reading) return this.#reading;
    if (cursor > this.#head) {
      // Ahead of the tail, and nobody else reads the ring: the tail moves to it (anyone behind the
      // new floor reads its own pages until it catches up).
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
    const generation = this.#generation;
    const page = await this.#journal.readAll({ after: this.#head, limit: this.#pageSize });
    if (generation !== this.#generation) return;
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
    if (this.#dirty || this.#cursors.size === 0) return;
    await this.#nextCommit();
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
