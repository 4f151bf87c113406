import * as Schema from "effect/Schema";
import type { EventType, RecordedEvent } from "../events/index.js";
import type { RunRow } from "../projections/index.js";
import { JournalUnavailable } from "./errors.js";
import { decodeInput } from "./input.js";
import type { JournalReader } from "./Journal.js";

const Ids = Schema.optional(Schema.Array(Schema.String));

const SubscribeOptionsSchema = Schema.Struct({
  after: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  filter: Schema.optional(Schema.Struct({ streamIds: Ids, runIds: Ids, chatIds: Ids, types: Ids })),
  bufferSize: Schema.optional(Schema.Int.pipe(Schema.between(1, 100_000))),
  pollMs: Schema.optional(Schema.Number.pipe(Schema.finite(), Schema.positive())),
});

/** Which events a subscription yields: by stream, chat, run or type. */
export interface SubscriptionFilter {
  /** Only these streams (`run-…`, `chat-…`, `system`). */
  readonly streamIds?: ReadonlyArray<string>;
  /** Only events of these runs. */
  readonly runIds?: ReadonlyArray<string>;
  /** Only events of these chats: their chat stream and the events of their runs. */
  readonly chatIds?: ReadonlyArray<string>;
  readonly types?: ReadonlyArray<EventType>;
}

/** Where a subscription starts (`after`, a position) and what it yields. */
export interface SubscribeOptions {
  /** Start after this global position (0 = from the beginning). Save `event.position` to resume. */
  readonly after?: number;
  readonly filter?: SubscriptionFilter;
  /**
   * The most events read ahead of the consumer (default 256). A slow consumer never makes memory
   * grow beyond it: the next page is read only when the consumer has taken the previous one.
   */
  readonly bufferSize?: number;
  /**
   * How often to look for events written by other processes (default 200 ms): on libSQL the only
   * way to see them; on PostgreSQL they also wake the subscriber at once (LISTEN/NOTIFY) and
   * polling is the safety net for a notification lost while the listener reconnects.
   */
  readonly pollMs?: number;
}

const runOf = (e: RecordedEvent): string | null =>
  "runId" in e.event && typeof e.event.runId === "string" ? e.event.runId : null;

/**
 * Whether an event passes a filter, for one subscriber in position order: a chat filter learns each
 * run's chat from its `run.admitted` and reads the runs row once for a run admitted before the
 * subscriber started (a read that may fail with the store: the caller retries the same event).
 * The answer is a plain boolean unless that read is needed (a promise then), so a subscriber with
 * many events to match awaits nothing for most of them; the filter's lists are sets, built once.
 */
export const eventMatcher = (
  journal: JournalReader,
  filter: SubscriptionFilter,
): ((e: RecordedEvent) => boolean | Promise<boolean>) => {
  const setOf = <T>(list: ReadonlyArray<T> | undefined): ReadonlySet<T> | null =>
    list === undefined ? null : new Set(list);
  const types = setOf<string>(filter.types);
  const streamIds = setOf(filter.streamIds);
  const runIds = setOf(filter.runIds);
  const chatIds = setOf(filter.chatIds);
  const chatOfRun = new Map<string, string | null>();
  const chatMatches = (e: RecordedEvent, chatId: string | null): boolean => {
    if (e.event.type === "run.admitted") chatOfRun.set(e.event.runId, e.event.chatId);
    return chatId !== null && chatIds!.has(chatId);
  };
  return (e) => {
    if (types && !types.has(e.event.type)) return false;
    if (streamIds && !streamIds.has(e.streamId)) return false;
    const runId = runOf(e);
    if (runIds && (runId === null || !runIds.has(runId))) return false;
    if (!chatIds) return true;
    const chatId: string | null =
      "chatId" in e.event && typeof e.event.chatId === "string" ? e.event.chatId : null;
    if (chatId !== null || runId === null) return chatMatches(e, chatId);
    if (chatOfRun.has(runId)) return chatMatches(e, chatOfRun.get(runId) ?? null);
    return journal.projection<RunRow>("runs", runId).then((row) => {
      chatOfRun.set(runId, row?.chatId ?? null);
      return chatMatches(e, row?.chatId ?? null);
    });
  };
};

/**
 * Every event after a position, then live events as they are committed: one cursor over the global
 * order, so the switch from catch-up to live has no gap and no duplicate. Ends when `return()` is
 * called (a `for await` loop that breaks), which releases the listener and the timer.
 */
export const subscribe = (
  journal: JournalReader,
  options: SubscribeOptions = {},
): AsyncIterableIterator<RecordedEvent> => {
  const checked = decodeInput(SubscribeOptionsSchema, options, "subscribe options");
  const bufferSize = checked.bufferSize ?? 256;
  const pollMs = Math.max(10, checked.pollMs ?? 200);
  const filter = options.filter ?? {};
  let cursor = checked.after ?? 0;
  let buffer: RecordedEvent[] = [];
  let closed = false;
  let dirty = false;
  /** Reads in a row that found the store unavailable: the wait before the next one doubles. */
  let outage = 0;
  let wake: (() => void) | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const unlisten = journal.onCommitted(() => {
    dirty = true;
    wake?.();
  });
  const matches = eventMatcher(journal, filter);

  const release = () => {
    closed = true;
    unlisten();
    if (timer) clearTimeout(timer);
    wake?.();
    buffer = [];
  };

  const next = async (): Promise<IteratorResult<RecordedEvent>> => {
    for (;;) {
      if (closed) return { done: true, value: undefined };
      const ready = buffer.shift();
      if (ready) return { done: false, value: ready };
      dirty = false;
      let page: ReadonlyArray<RecordedEvent>;
      try {
        page = await journal.readAll({ after: cursor, limit: bufferSize });
        for (const e of page) {
          // The cursor moves past an event only once it is matched: a filter read that fails (a
          // journal down, a seal error) is retried on the next call, never skipped.
          const match = matches(e);
          const wanted = typeof match === "boolean" ? match : await match;
          cursor = e.position;
          if (wanted) buffer.push(e);
        }
        outage = 0;
      } catch (error) {
        // The store is away (a PostgreSQL restart, a cut connection), for the page or for a chat
        // filter's read: wait and read again from the cursor (events matched so far are kept), so
        // the subscriber sees every event once the store answers — no gap, no end.
        if (!(error instanceof JournalUnavailable)) throw error;
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, Math.min(5_000, pollMs * 2 ** Math.min(outage++, 8)));
        });
        if (timer) clearTimeout(timer);
        wake = null;
        continue;
      }
      if (buffer.length > 0 || page.length === bufferSize) continue;
      if (closed) return { done: true, value: undefined };
      if (!dirty) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, pollMs);
        });
        if (timer) clearTimeout(timer);
        wake = null;
      }
    }
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
};
