import { type ClientRequest, type IncomingMessage, request } from "node:http";

/** One Server-Sent Events message as the server framed it. */
export interface SseMessage {
  readonly id: string | undefined;
  readonly event: string;
  readonly data: string;
}

export interface SseOptions {
  readonly token?: string;
  /** Sent as `Last-Event-ID`, as a browser's EventSource does when it reconnects. */
  readonly lastEventId?: string;
  /** Called for every message, in arrival order (keep it cheap: 100 clients × 10,000 events). */
  readonly onMessage?: (message: SseMessage) => void;
}

/**
 * A Server-Sent Events client over plain `node:http`, so a test controls the socket: `pause()`
 * stops reading (the kernel buffers fill and the server's writes stall), `abort()` drops the
 * connection the way a closed tab or a lost network does.
 */
export class SseConnection {
  /** Comment lines (`: heartbeat`), counted. */
  comments = 0;
  /** Messages counted; their contents go to `onMessage` only. */
  received = 0;
  lastEventId: string | undefined;
  /** The last `close` message, if the server sent one before ending the stream. */
  closeMessage: SseMessage | undefined;
  /** Settles when the response ends, the connection is aborted, or it fails. */
  readonly ended: Promise<void>;
  #ended = false;
  readonly #waiters = new Set<() => void>();
  #buffer = "";
  #response: IncomingMessage | undefined;

  private constructor(
    private readonly req: ClientRequest,
    private readonly onMessage: ((message: SseMessage) => void) | undefined,
    ended: Promise<void>,
  ) {
    this.ended = ended.finally(() => {
      this.#ended = true;
      this.#notify();
    });
  }

  /** Open `GET url` and resolve once the response head has arrived. */
  static open(url: string, options: SseOptions = {}): Promise<{ status: number; connection: SseConnection }> {
    return new Promise((resolveOpen, rejectOpen) => {
      const headers: Record<string, string> = { accept: "text/event-stream" };
      if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
      if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
      let settle: () => void = () => {};
      const ended = new Promise<void>((resolveEnded) => {
        settle = resolveEnded;
      });
      const req = request(url, { headers, agent: false });
      const connection = new SseConnection(req, options.onMessage, ended);
      req.on("response", (res) => {
        connection.#response = res;
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => connection.#take(chunk));
        res.on("end", settle);
        res.on("close", settle);
        res.on("error", settle);
        resolveOpen({ status: res.statusCode ?? 0, connection });
      });
      req.on("error", (error) => {
        settle();
        rejectOpen(error);
      });
      req.on("close", settle);
      req.end();
    });
  }

  get isEnded(): boolean {
    return this.#ended;
  }

  /** Stop reading from the socket (the data stays in the kernel's buffers). */
  pause(): void {
    this.#response?.pause();
  }

  resume(): void {
    this.#response?.resume();
  }

  /** Drop the connection. */
  abort(): void {
    this.req.destroy();
  }

  /** Resolves when `condition()` holds (checked after every chunk), or rejects when the stream ends first. */
  until(condition: () => boolean, what: string): Promise<void> {
    return new Promise((resolveWait, rejectWait) => {
      const check = () => {
        if (condition()) {
          this.#waiters.delete(check);
          resolveWait();
        } else if (this.#ended) {
          this.#waiters.delete(check);
          rejectWait(new Error(`the stream ended before ${what} (${this.received} messages received)`));
        }
      };
      this.#waiters.add(check);
      check();
    });
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }

  #take(chunk: string): void {
    this.#buffer += chunk;
    let end = this.#buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + 2);
      this.#frame(block);
      end = this.#buffer.indexOf("\n\n");
    }
    this.#notify();
  }

  /** One block of lines up to a blank line: a message, a `retry:` field, or comments. */
  #frame(block: string): void {
    let id: string | undefined;
    let event = "message";
    const data: string[] = [];
    let fields = 0;
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) {
        this.comments++;
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(line[colon + 1] === " " ? colon + 2 : colon + 1);
      if (field === "data") data.push(value);
      else if (field === "event") event = value;
      else if (field === "id") id = value;
      else continue;
      fields++;
    }
    if (fields === 0 || data.length === 0) return;
    const message: SseMessage = { id, event, data: data.join("\n") };
    this.received++;
    if (id !== undefined) this.lastEventId = id;
    if (event === "close") this.closeMessage = message;
    this.onMessage?.(message);
  }
}
