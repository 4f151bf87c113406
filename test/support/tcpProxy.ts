import net from "node:net";

/**
 * A TCP proxy in front of PostgreSQL for fault tests: the faults below holdfast (issue 35) made on
 * purpose, between a journal and a real server. It reads the wire protocol's framing (a type byte
 * and a length per message; the startup message has no type byte) so it can cut a connection at an
 * exact point: right after forwarding the message that commits an append, before the reply.
 *
 * A commit point is a simple-protocol `COMMIT`, or the `Sync` that ends an extended-protocol
 * statement sent while no transaction was open (autocommit: `append_owned`). The proxy knows
 * whether one was open from the server's last ReadyForQuery.
 */
export interface TcpProxy {
  /** The port the proxy listens on (127.0.0.1). */
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's. */
  readonly via: (url: string) => string;
  /**
   * Cut the next connection that reaches a commit point after a client message containing
   * `marker` (e.g. an event type, which travels in the append's parameters): `after` forwards the
   * commit and closes (the server commits; the client never hears it), `before` drops it and closes
   * (the server rolls back). Once; resolves when it happened. `then` applies a mode right after the cut.
   */
  readonly cutAtCommit: (
    marker: string,
    mode: "after" | "before",
    then?: "refuse" | "blackhole",
  ) => Promise<void>;
  /** Forget a cut asked for that has not happened (its promise never resolves). */
  readonly disarm: () => void;
  /** New connections are closed at once and live ones are closed: PostgreSQL looks gone. */
  readonly refuse: () => void;
  /** Nothing is forwarded either way, nothing is closed: a partition. New connections hang too. */
  readonly blackhole: () => void;
  /** Every chunk is forwarded `ms` late, both ways. */
  readonly delay: (ms: number) => void;
  /** Close every live connection now (new ones are served as usual). */
  readonly drop: () => void;
  /** Back to plain forwarding (connections held by a blackhole resume). */
  readonly heal: () => void;
  /** How many cuts happened. */
  readonly cuts: () => number;
  /**
   * How many client messages so far contained `marker` (e.g. the name of a prepared statement,
   * which travels in every Bind): counted from the call on that first asks for it.
   */
  readonly sent: (marker: string) => number;
  readonly close: () => Promise<void>;
}

type Mode = "forward" | "refuse" | "blackhole";

interface Cut {
  readonly marker: string;
  readonly mode: "after" | "before";
  readonly then: Mode | undefined;
  readonly done: () => void;
}

/** Start a proxy to `target` (default PostgreSQL at 127.0.0.1:5432). */
export const startTcpProxy = async (
  target: { readonly host: string; readonly port: number } = { host: "127.0.0.1", port: 5432 },
): Promise<TcpProxy> => {
  let mode: Mode = "forward";
  let delayMs = 0;
  let cut: Cut | null = null;
  let cuts = 0;
  const live = new Set<Link>();
  const counted = new Map<string, number>();

  interface Link {
    readonly client: net.Socket;
    readonly server: net.Socket;
    /** Chunks held while blackholed, per direction. */
    readonly held: Array<{ readonly to: net.Socket; readonly chunk: Buffer }>;
    dead: boolean;
  }

  const send = (link: Link, to: net.Socket, chunk: Buffer) => {
    if (link.dead) return;
    if (mode === "blackhole") {
      link.held.push({ to, chunk });
      return;
    }
    if (delayMs > 0) setTimeout(() => !link.dead && to.write(chunk), delayMs);
    else to.write(chunk);
  };

  const kill = (link: Link) => {
    link.dead = true;
    link.client.destroy();
    link.server.destroy();
    live.delete(link);
  };

  const server = net.createServer((client) => {
    if (mode === "refuse") {
      client.destroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    const link: Link = { client, server: upstream, held: [], dead: false };
    live.add(link);
    client.on("error", () => kill(link));
    upstream.on("error", () => kill(link));
    client.on("close", () => kill(link));
    upstream.on("close", () => kill(link));

    let armed = false;
    let inTransaction = false;
    let fromClient = Buffer.alloc(0);
    let startup = true;
    client.on("data", (data: Buffer) => {
      fromClient = Buffer.concat([fromClient, data]);
      for (;;) {
        const headerLength = startup ? 4 : 5;
        if (fromClient.length < headerLength) return;
        const length = startup ? fromClient.readInt32BE(0) : fromClient.readInt32BE(1) + 1;
        if (fromClient.length < length) return;
        const message = fromClient.subarray(0, length);
        fromClient = fromClient.subarray(length);
        const type = startup ? "" : String.fromCharCode(message[0]!);
        startup = false;
        const text = message.toString("latin1");
        if (cut && text.includes(cut.marker)) armed = true;
        for (const [marker, n] of counted) if (text.includes(marker)) counted.set(marker, n + 1);
        const commitPoint =
          (type === "Q" && /^\s*COMMIT\b/i.test(text.slice(5))) || (type === "S" && !inTransaction);
        if (cut && armed && commitPoint) {
          const { mode: how, then, done } = cut;
          cut = null;
          cuts += 1;
          link.dead = true;
          live.delete(link);
          client.destroy();
          if (how === "after") upstream.end(message);
          else upstream.destroy();
          if (then) apply(then);
          done();
          return;
        }
        send(link, upstream, Buffer.from(message));
      }
    });

    let fromServer = Buffer.alloc(0);
    upstream.on("data", (data: Buffer) => {
      fromServer = Buffer.concat([fromServer, data]);
      for (;;) {
        if (fromServer.length < 5) return;
        const length = fromServer.readInt32BE(1) + 1;
        if (fromServer.length < length) return;
        const message = fromServer.subarray(0, length);
        fromServer = fromServer.subarray(length);
        // ReadyForQuery: 'I' idle, 'T' in a transaction, 'E' in a failed one.
        if (message[0] === 0x5a) inTransaction = message[5] !== 0x49;
        send(link, client, Buffer.from(message));
      }
    });
  });

  const apply = (next: Mode) => {
    mode = next;
    if (next === "refuse") for (const link of [...live]) kill(link);
  };

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;

  return {
    port,
    via: (url) => {
      const parsed = new URL(url);
      parsed.hostname = "127.0.0.1";
      parsed.port = String(port);
      return parsed.toString();
    },
    cutAtCommit: (marker, how, then) =>
      new Promise<void>((resolve) => {
        cut = { marker, mode: how, then, done: resolve };
      }),
    disarm: () => {
      cut = null;
    },
    refuse: () => apply("refuse"),
    blackhole: () => apply("blackhole"),
    delay: (ms) => {
      delayMs = ms;
    },
    drop: () => {
      for (const link of [...live]) kill(link);
    },
    heal: () => {
      mode = "forward";
      delayMs = 0;
      for (const link of live)
        for (const { to, chunk } of link.held.splice(0)) if (!link.dead) to.write(chunk);
    },
    cuts: () => cuts,
    sent: (marker) => {
      if (!counted.has(marker)) counted.set(marker, 0);
      return counted.get(marker)!;
    },
    close: async () => {
      for (const link of [...live]) kill(link);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};
