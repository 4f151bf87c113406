import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { LiveOptions } from "../../src/adapters/surfaces/http/events.js";
import type { RecordedEvent } from "../../src/events/index.js";
import { writeManyRuns } from "../audit/manyRuns.js";
import { useTempDir } from "../support/tmp.js";
import { collector, digestOf, digestOfMessages, positionOf, Received } from "./sse/checks.js";
import type { SseConnection } from "./sse/client.js";
import {
  type Listening,
  liveStreams,
  openEvents,
  readEverything,
  startServer,
  startServerProcess,
  TOKEN,
  waitUntil,
} from "./sse/server.js";
import { journalWithRuns, writeLiveRuns } from "./sse/writers.js";

const tempDir = useTempDir();
const servers: Listening[] = [];
const connections: SseConnection[] = [];
afterEach(async () => {
  for (const connection of connections.splice(0)) connection.abort();
  for (const server of servers.splice(0)) await server.close();
});

/**
 * A journal of `finished` runs of `calls` calls, `finished × (2 × calls + 2) + 2` events, and a
 * server over it (in a child process if asked).
 */
const given = async (
  runs: { readonly finished: number; readonly calls: number },
  live: LiveOptions,
  inProcess: "same" | "child" = "same",
) => {
  const store = join(tempDir(), "journal.db");
  await journalWithRuns(store, runs.finished, runs.calls);
  const server =
    inProcess === "same" ? await startServer(store, live) : await startServerProcess(store, live);
  servers.push(server);
  return { store, server };
};

const connect = async (...args: Parameters<typeof openEvents>): Promise<SseConnection> => {
  const { status, connection } = await openEvents(...args);
  connections.push(connection);
  expect(status).toBe(200);
  return connection;
};

const everythingIn = async (store: string): Promise<RecordedEvent[]> => {
  const journal = LibsqlJournal.open(store);
  try {
    return await readEverything(journal);
  } finally {
    await journal.close();
  }
};

describe("GET /api/events (Server-Sent Events)", () => {
  it("100 clients connected while 10,000 events are written each receive every event exactly once, in position order", {
    timeout: 180_000,
  }, async () => {
    // 5,002 events before anyone connects…
    const { store, server } = await given({ finished: 100, calls: 24 }, {}, "child");
    const clients = await Promise.all(
      Array.from({ length: 100 }, async () => {
        const received = new Received();
        return { received, connection: await connect(server, "", { onMessage: received.take }) };
      }),
    );
    await waitUntil(async () => (await liveStreams(server)) === 100, "100 live streams");
    // …and 4,998 written by a runtime while they are connected: 51 runs of 48 calls, 98 events each.
    await writeLiveRuns(store, { runs: 51, calls: 48, prefix: "live" });

    const everything = await everythingIn(store);
    expect(everything.length).toBe(10_000);
    const head = everything.at(-1)!.position;
    await Promise.all(
      clients.map(({ received, connection }) =>
        connection.until(() => received.last >= head, `event ${head} arrived`),
      ),
    );
    const expected = digestOf(everything);
    for (const { received } of clients) {
      expect(received.disorder).toEqual([]);
      expect(received.count).toBe(everything.length);
      expect(received.digest()).toBe(expected);
    }
  });

  it("a client that reconnects with Last-Event-ID after its connection dropped gets the rest exactly once", async () => {
    const { store, server } = await given({ finished: 60, calls: 24 }, { pollMs: 20 });
    const first = collector();
    const dropped = await connect(server, "?after=0", { onMessage: first.take });
    await dropped.until(() => dropped.received >= 1_000, "1,000 events");
    dropped.abort();
    await dropped.ended;
    await waitUntil(async () => (await liveStreams(server)) === 0, "the dropped stream to be released");
    // Written while it is away: only the reconnection can bring these.
    await writeLiveRuns(store, { runs: 4, calls: 10, prefix: "away" });

    const everything = await everythingIn(store);
    const head = everything.at(-1)!.position;
    const lastSeen = dropped.lastEventId!;
    const second = collector();
    // The same URL, as EventSource reconnects: the header wins over `after`.
    const resumed = await connect(server, "?after=0", { lastEventId: lastSeen, onMessage: second.take });
    await resumed.until(() => Number(resumed.lastEventId ?? 0) >= head, "the head");

    expect(positionOf(second.messages[0]!)).toBe(Number(lastSeen) + 1);
    const both = [...first.messages, ...second.messages];
    expect(both.map(positionOf)).toEqual(everything.map((e) => e.position));
    expect(digestOfMessages(both)).toBe(digestOf(everything));
  });

  describe("filters", () => {
    const cases: ReadonlyArray<[string, (e: RecordedEvent) => boolean]> = [
      ["?run=many-3,many-open", (e) => "runId" in e.event && ["many-3", "many-open"].includes(e.event.runId)],
      [
        "?type=run.admitted,run.completed",
        (e) => e.event.type === "run.admitted" || e.event.type === "run.completed",
      ],
      ["?after=500", (e) => e.position > 500],
      ["?chat=chat-7", (e) => "runId" in e.event && ["many-7", "many-57"].includes(e.event.runId)],
    ];
    for (const [query, wanted] of cases) {
      it(`${query} streams only the events it names, in position order`, async () => {
        const { store, server } = await given({ finished: 100, calls: 4 }, { pollMs: 20 });
        const expected = (await everythingIn(store)).filter(wanted);
        expect(expected.length).toBeGreaterThan(0);
        const got = collector();
        const connection = await connect(server, query, { onMessage: got.take });
        await connection.until(() => got.messages.length >= expected.length, `${expected.length} events`);
        expect(got.messages.map(positionOf)).toEqual(expected.map((e) => e.position));
        expect(digestOfMessages(got.messages)).toBe(digestOf(expected));
      });
    }
  });

  it("clients with different filters at the head, two of each, and one resuming with Last-Event-ID, each get exactly their events while runs commit (decision 0089: frames and chunks shared)", async () => {
    // pollMs 200: each run below commits in one append, so a read of the tail starts at a
    // run.admitted, and every client at the head takes a chunk starting with that same event —
    // with the same events after it (shared) or other ones (its filter: a chunk of its own).
    const { store, server } = await given({ finished: 20, calls: 4 }, { pollMs: 200 });
    const head = (await everythingIn(store)).at(-1)!.position;
    const runOf = (e: RecordedEvent) => ("runId" in e.event ? e.event.runId : null);
    const views: ReadonlyArray<{ query: string; wanted: (e: RecordedEvent) => boolean }> = [
      { query: `?after=${head}`, wanted: () => true },
      {
        query: `?after=${head}&type=run.admitted,run.completed`,
        wanted: (e) => e.event.type === "run.admitted" || e.event.type === "run.completed",
      },
      { query: `?after=${head}&run=late-2`, wanted: (e) => runOf(e) === "late-2" },
      {
        query: `?after=${head}&chat=late-chat-1`,
        wanted: (e) => ["late-1", "late-4"].includes(runOf(e) ?? ""),
      },
    ];
    const clients = [];
    for (const view of [...views, ...views]) {
      const got = collector();
      clients.push({
        ...view,
        after: head,
        got,
        connection: await connect(server, view.query, { onMessage: got.take }),
      });
    }
    // Connected last, so the ring starts at the head and it reads pages of its own to catch up.
    const resumed = collector();
    const resumedFrom = head - 30;
    clients.push({
      query: `Last-Event-ID ${resumedFrom}`,
      after: resumedFrom,
      wanted: () => true,
      got: resumed,
      connection: await connect(server, "", { lastEventId: String(resumedFrom), onMessage: resumed.take }),
    });
    await waitUntil(async () => (await liveStreams(server)) === clients.length, "every stream");
    const journal = LibsqlJournal.open(store);
    try {
      await writeManyRuns(journal, { finished: 6, calls: 5, chats: 3, prefix: "late" });
    } finally {
      await journal.close();
    }

    const everything = await everythingIn(store);
    for (const { query, after, wanted, got, connection } of clients) {
      const expected = everything.filter((e) => e.position > after && wanted(e));
      expect(expected.length, query).toBeGreaterThan(0);
      const last = expected.at(-1)!.position;
      await connection.until(() => Number(connection.lastEventId ?? 0) >= last, `event ${last} for ${query}`);
      expect(got.messages.map(positionOf), query).toEqual(expected.map((e) => e.position));
      expect(digestOfMessages(got.messages), query).toBe(digestOf(expected));
    }
  });

  it("an idle stream carries heartbeat comments and no events", async () => {
    const { store, server } = await given({ finished: 5, calls: 4 }, { pollMs: 20, heartbeatMs: 50 });
    const head = (await everythingIn(store)).at(-1)!.position;
    const connection = await connect(server, `?after=${head}`);
    await connection.until(() => connection.comments >= 3, "three heartbeats");
    expect(connection.received).toBe(0);
  });

  it("a client that stops reading is dropped after slowClientMs, and the server keeps none of the events it did not take", async () => {
    // 20,002 events, about 11 MB of stream: far more than the socket buffers hold (about 4 MB here).
    const { store, server } = await given({ finished: 400, calls: 24 }, { pollMs: 20, slowClientMs: 300 });
    const taken = new Received();
    const connection = await connect(server, "", {
      onMessage: (message) => {
        if (message.event !== "close") taken.take(message);
      },
    });
    await connection.until(() => connection.received >= 1, "a first event");
    connection.pause();
    await waitUntil(async () => (await liveStreams(server)) === 0, "the slow stream to be dropped");

    // Reading again, it gets what the socket buffers held, the close message and the end: not the
    // rest of the log, which the server never read for it.
    connection.resume();
    await connection.ended;
    const everything = await everythingIn(store);
    const lastEventId = Number(connection.lastEventId);
    expect(taken.disorder).toEqual([]);
    expect(taken.count).toBe(lastEventId); // positions 1…lastEventId: none lost before the drop
    expect(lastEventId).toBeLessThan(everything.length / 2);
    const close = connection.closeMessage?.data ?? "(no close message)";
    expect(close).toContain('"reason":"slow-client"');
    expect(close).toContain(`Last-Event-ID ${lastEventId} `);

    // That Last-Event-ID takes it on from the next event.
    const next = collector();
    const resumed = await connect(server, "", { lastEventId: String(lastEventId), onMessage: next.take });
    await resumed.until(() => next.messages.length >= 1, "an event");
    expect(positionOf(next.messages[0]!)).toBe(lastEventId + 1);
  });

  it("R9: a Last-Event-ID that is not a safe integer is a 422 naming the header, before any stream, and nothing is logged", async () => {
    const { server } = await given({ finished: 1, calls: 4 }, {});
    const logged = vi.spyOn(console, "error");
    try {
      for (const id of ["99999999999999999999999", String(2 ** 53), "-1", "0x10", "1e3"]) {
        const response = await fetch(`${server.url}/api/events`, {
          headers: { authorization: `Bearer ${TOKEN}`, "last-event-id": id },
        });
        expect(response.status, id).toBe(422);
        expect(response.headers.get("content-type"), id).toMatch(/^application\/json/);
        expect(((await response.json()) as { error: unknown }).error, id).toMatchObject({
          code: "invalid-input",
          field: "Last-Event-ID",
        });
      }
      expect(await liveStreams(server)).toBe(0);
      expect(logged).not.toHaveBeenCalled();
    } finally {
      logged.mockRestore();
    }
    // The largest safe position is still one to resume from: the stream opens (connect checks the 200).
    await connect(server, "", { lastEventId: String(Number.MAX_SAFE_INTEGER) });
  });

  it("HEAD /api/events answers the stream's headers and opens no stream", async () => {
    const { server } = await given({ finished: 1, calls: 4 }, { pollMs: 20 });
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${server.url}/api/events`, {
        method: "HEAD",
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("text/event-stream");
    }
    // hono drops a HEAD reply's body unread and uncancelled: a stream opened for it stays open.
    expect(await liveStreams(server)).toBe(0);
  });

  it("without the token, /api/events answers 401 and opens no stream", async () => {
    const { server } = await given({ finished: 1, calls: 4 }, {});
    const without = await fetch(`${server.url}/api/events`);
    expect(without.status).toBe(401);
    expect(without.headers.get("www-authenticate")).toContain("Bearer");
    const wrong = await fetch(`${server.url}/api/events`, {
      headers: { authorization: `Bearer ${TOKEN.replace(/.$/, "x")}` },
    });
    expect(wrong.status).toBe(401);
    expect(await liveStreams(server)).toBe(0);
  });
});
