import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { RecordedEvent } from "../../../events/index.js";
import type { JournalReader } from "../../../runtime/Journal.js";
import { SharedTail } from "../../../runtime/sharedTail.js";
import type { SubscriptionFilter } from "../../../runtime/subscribe.js";
import { eventLine } from "../cli/eventFormat.js";

export interface LiveOptions {
  /** A comment line this often keeps proxies and the client's timeout from closing an idle stream (default 15 s). */
  readonly heartbeatMs?: number;
  /**
   * A client that has not taken one event within this long is dropped, with a `close` event saying
   * so (default 30 s): the server never buffers for a client that does not read.
   */
  readonly slowClientMs?: number;
  /** How often the subscription looks for other processes' commits (default 200 ms). */
  readonly pollMs?: number;
}

/** What a live stream of events is about (the same filters as `subscribe`). */
export interface LiveQuery {
  readonly after: number;
  readonly filter: SubscriptionFilter;
}

/** Streams open now, to end them when the server closes; one shared tail of the journal feeds them all. */
export class LiveStreams {
  readonly #open = new Set<() => void>();
  readonly #tails = new WeakMap<JournalReader, SharedTail>();
  /** The one tail of `journal` every stream of this server reads from (decision 0079). */
  tailOf(journal: JournalReader, pollMs: number | undefined): SharedTail {
    let tail = this.#tails.get(journal);
    if (!tail) {
      tail = new SharedTail(journal, { pollMs: pollMs ?? 200, pageSize: 256 });
      this.#tails.set(journal, tail);
    }
    return tail;
  }
  add(stop: () => void): () => void {
    this.#open.add(stop);
    return () => this.#open.delete(stop);
  }
  get count(): number {
    return this.#open.size;
  }
  closeAll(): void {
    for (const stop of [...this.#open]) stop();
    this.#open.clear();
  }
}

const withTimeout = async (work: Promise<unknown>, ms: number): Promise<boolean> => {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([work.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
};

/** What an event is sent as: the SSE `event:` and `data:`. */
export interface SseMessage {
  readonly event: string;
  readonly data: string;
}
type Render = (recorded: RecordedEvent) => SseMessage;

/** The API's message: the event's type, and the event as `holdfast events --json` prints it. */
export const eventMessage: Render = (recorded) => ({
  event: recorded.event.type,
  data: JSON.stringify(eventLine(recorded)),
});

/** The panel's message: only that something changed, and where. */
export const changedMessage: Render = (recorded) => ({ event: "journal", data: String(recorded.position) });

const renders = new WeakMap<Render, WeakMap<RecordedEvent, SseMessage>>();
const renderedBy = (render: Render): WeakMap<RecordedEvent, SseMessage> => {
  let cache = renders.get(render);
  if (!cache) {
    cache = new WeakMap();
    renders.set(render, cache);
  }
  return cache;
};

/**
 * A Server-Sent Events stream of the journal: every event after `after` (a reconnecting client's
 * `Last-Event-ID` wins), then live ones as they commit; `id:` is the event's position, `event:` its
 * type, `data:` the event as `holdfast events --json` prints it (stored, masked values). The
 * subscription reads only as fast as the client takes events, so a slow client costs one page of
 * events, and one that takes nothing for `slowClientMs` is dropped with a `close` event naming why.
 * `render` turns an event into what is sent (the panel sends a short "changed" message instead).
 */
export const liveEvents = (
  c: Context,
  journal: JournalReader,
  query: LiveQuery,
  streams: LiveStreams,
  options: LiveOptions = {},
  render: Render = eventMessage,
) => {
  const cache = renderedBy(render);
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const slowClientMs = options.slowClientMs ?? 30_000;
  return streamSSE(c, async (stream) => {
    const events = streams
      .tailOf(journal, options.pollMs)
      .subscribe({ after: query.after, filter: query.filter });
    let stopped = false;
    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      void events.return?.();
      stream.abort();
    };
    const forget = streams.add(stop);
    stream.onAbort(() => {
      stopped = true;
      void events.return?.();
    });
    // Tell the client how soon to come back, before the first event (and whatever catch-up there is).
    await stream.write("retry: 1000\n\n");
    const heartbeat = setInterval(() => {
      void stream.write(": heartbeat\n\n");
    }, heartbeatMs);
    heartbeat.unref();
    try {
      for await (const recorded of events) {
        if (stopped) break;
        // Rendered once per event for every client of the same render (the events are the tail's).
        let message = cache.get(recorded);
        if (!message) {
          message = render(recorded);
          cache.set(recorded, message);
        }
        const sent = await withTimeout(
          stream.writeSSE({ id: String(recorded.position), event: message.event, data: message.data }),
          slowClientMs,
        );
        if (!sent) {
          // Queued behind the event the client has not taken, then the stream ends (`stream.close()`
          // once this callback returns): a client that reads again gets that event, this message
          // and the end, and resumes after that event. Aborting instead would discard both, and
          // the client would see a clean end with no reason. Nothing more is read for it; what
          // stays queued is that one event and this message.
          void stream.writeSSE({
            event: "close",
            data: JSON.stringify({
              reason: "slow-client",
              message: `the client took no event for ${slowClientMs} ms; reconnect with Last-Event-ID ${recorded.position} to resume`,
            }),
          });
          console.error(
            `holdfast serve: an event stream was dropped: its client took no event for ${slowClientMs} ms`,
          );
          stopped = true;
          break;
        }
      }
    } finally {
      clearInterval(heartbeat);
      forget();
      await events.return?.();
    }
  });
};
