import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { RecordedEvent } from "../../events/index.js";
import type { JournalReader } from "../../runtime/Journal.js";
import { type SubscriptionFilter, subscribe } from "../../runtime/subscribe.js";
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

/** Streams open now, to end them when the server closes. */
export class LiveStreams {
  readonly #open = new Set<() => void>();
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
  render: (recorded: RecordedEvent) => { event: string; data: string } = (recorded) => ({
    event: recorded.event.type,
    data: JSON.stringify(eventLine(recorded)),
  }),
) => {
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const slowClientMs = options.slowClientMs ?? 30_000;
  return streamSSE(c, async (stream) => {
    const events = subscribe(journal, {
      after: query.after,
      filter: query.filter,
      bufferSize: 256,
      pollMs: options.pollMs ?? 200,
    });
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
        const message = render(recorded);
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
