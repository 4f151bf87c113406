import type { Context } from "hono";
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

/**
 * One SSE frame (`event:`, `data:` lines, `id:`), as bytes: each line of `data` its own `data:`
 * line, as the format asks.
 */
const frame = (message: SseMessage, id?: number): Buffer => {
  const data = message.data
    .split(/\r\n|\r|\n/)
    .map((line) => `data: ${line}`)
    .join("\n");
  return Buffer.from(`event: ${message.event}\n${data}\n${id === undefined ? "" : `id: ${id}\n`}\n`);
};

const RETRY = Buffer.from("retry: 1000\n\n");
const HEARTBEAT = Buffer.from(": heartbeat\n\n");

/**
 * The frames of one render, made once for every client (the shared tail hands every client the
 * same event objects): each event's, and each run of events sent as one chunk — the clients at the
 * tail's head with the same filter get the same events from one read, so one chunk serves them all.
 */
class Framer {
  readonly #frames = new WeakMap<RecordedEvent, Buffer>();
  /** The last chunk made that starts with an event, with its events. */
  readonly #chunks = new WeakMap<
    RecordedEvent,
    { readonly events: RecordedEvent[]; readonly bytes: Buffer }
  >();

  constructor(private readonly render: Render) {}

  frameOf(recorded: RecordedEvent): Buffer {
    let bytes = this.#frames.get(recorded);
    if (!bytes) {
      bytes = frame(this.render(recorded), recorded.position);
      this.#frames.set(recorded, bytes);
    }
    return bytes;
  }

  /** The frames of `events`, in order, as one chunk. */
  chunkOf(events: RecordedEvent[]): Buffer {
    const first = events[0]!;
    if (events.length === 1) return this.frameOf(first);
    const made = this.#chunks.get(first);
    if (made && sameEvents(made.events, events)) return made.bytes;
    const bytes = Buffer.concat(events.map((e) => this.frameOf(e)));
    this.#chunks.set(first, { events, bytes });
    return bytes;
  }
}

const sameEvents = (a: ReadonlyArray<RecordedEvent>, b: ReadonlyArray<RecordedEvent>): boolean => {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

const framers = new WeakMap<Render, Framer>();
const framerOf = (render: Render): Framer => {
  let framer = framers.get(render);
  if (!framer) {
    framer = new Framer(render);
    framers.set(render, framer);
  }
  return framer;
};

/**
 * A Server-Sent Events stream of the journal: every event after `after` (a reconnecting client's
 * `Last-Event-ID` wins), then live ones as they commit; `id:` is the event's position, `event:` its
 * type, `data:` the event as `holdfast events --json` prints it (stored, masked values). The
 * subscription reads only as fast as the client takes events, so a slow client costs one page of
 * events, and one that takes nothing for `slowClientMs` is dropped with a `close` event naming why.
 * `render` turns an event into what is sent (the panel sends a short "changed" message instead).
 *
 * The cost per client is kept to the least (decision 0089): an event's frame is rendered and
 * encoded once for every client (cached by event, for the shared tail hands every client the same
 * objects); a client is given the events it has ready in one chunk, so the events of one read of
 * the tail reach its socket in one write; no timer runs per event, only while a client has not
 * taken its previous chunk.
 */
export const liveEvents = (
  c: Context,
  journal: JournalReader,
  query: LiveQuery,
  streams: LiveStreams,
  options: LiveOptions = {},
  render: Render = eventMessage,
) => {
  c.header("Content-Type", "text/event-stream");
  c.header("Cache-Control", "no-cache");
  // A HEAD request gets the headers only: hono answers it with the GET route's headers and drops
  // the body without cancelling it, so a stream opened for it would never learn it has no reader.
  if (c.req.method === "HEAD") return c.body(null);
  const framer = framerOf(render);
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const slowClientMs = options.slowClientMs ?? 30_000;
  const events = streams
    .tailOf(journal, options.pollMs)
    .subscribe({ after: query.after, filter: query.filter });
  let stopped = false;
  let closed = false;
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  /** Whether the response asked for more since the last chunk (it has taken that chunk). */
  let pulled = false;
  let onPull: (() => void) | null = null;
  const send = (chunk: Uint8Array): void => {
    if (closed) return;
    pulled = false;
    controller.enqueue(chunk);
  };
  const end = (): void => {
    if (closed) return;
    closed = true;
    try {
      controller.close();
    } catch {
      // Cancelled by the response already.
    }
  };
  const stop = (): void => {
    stopped = true;
    onPull?.();
    void events.return?.();
  };
  /** Resolves true once the response asks for more, false if it did not within `ms`. */
  const pullWithin = (ms: number): Promise<boolean> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => {
        onPull = null;
        resolve(false);
      }, ms);
      onPull = () => {
        onPull = null;
        clearTimeout(timer);
        resolve(true);
      };
    });
  const body = new ReadableStream<Uint8Array>(
    {
      start: (c) => {
        controller = c;
      },
      pull: () => {
        pulled = true;
        onPull?.();
      },
      cancel: () => {
        // The client went away.
        closed = true;
        stop();
      },
    },
    // Nothing is queued ahead of what the response takes: `pull` says it took the last chunk.
    { highWaterMark: 0 },
  );
  const forget = streams.add(() => {
    stop();
    end();
  });
  // Tell the client how soon to come back, before the first event (and whatever catch-up there is).
  send(RETRY);
  const heartbeat = setInterval(() => {
    // A client that has not taken the last chunk needs no comment to keep its connection open.
    if (pulled && !closed) send(HEARTBEAT);
  }, heartbeatMs);
  heartbeat.unref();
  const pump = async (): Promise<void> => {
    /** The last position sent: where a dropped client resumes. */
    let sent = query.after;
    try {
      for (;;) {
        const first = await events.next();
        if (first.done || stopped) break;
        // Whatever else the same read of the tail gave this client goes in the same chunk.
        const batch = events.takeReady();
        batch.unshift(first.value);
        const last = batch.at(-1)!;
        const chunk = framer.chunkOf(batch);
        if (!pulled && !(await pullWithin(slowClientMs))) {
          // Queued behind the chunk the client has not taken, then the stream ends: a client that
          // reads again gets that chunk, this message and the end, and resumes after its last event.
          // Nothing more is read for it.
          send(
            frame({
              event: "close",
              data: JSON.stringify({
                reason: "slow-client",
                message: `the client took no event for ${slowClientMs} ms; reconnect with Last-Event-ID ${sent} to resume`,
              }),
            }),
          );
          console.error(
            `holdfast serve: an event stream was dropped: its client took no event for ${slowClientMs} ms`,
          );
          break;
        }
        if (stopped) break;
        send(chunk);
        sent = last.position;
      }
    } catch (error) {
      console.error(error);
    } finally {
      clearInterval(heartbeat);
      forget();
      await events.return?.();
      end();
    }
  };
  void pump();
  c.header("Transfer-Encoding", "chunked");
  c.header("Connection", "keep-alive");
  return c.body(body);
};
