import { afterAll, afterEach, describe, expect, it } from "vitest";
import { listenerName } from "../../src/adapters/stores/postgres/notify.js";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import type { AnyEvent, RecordedEvent } from "../../src/events/index.js";
import { subscribe } from "../../src/runtime/subscribe.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";

const schemas = usePgSchemas();
afterAll(schemas.dropAll);

const journals: PostgresJournal[] = [];
afterEach(async () => {
  for (const journal of journals.splice(0)) await journal.close();
});

const open = async (schema: string): Promise<PostgresJournal> => {
  await requirePg();
  const journal = await PostgresJournal.open(pgUrl(schema));
  journals.push(journal);
  return journal;
};

const event: AnyEvent = { type: "journal.opened", schemaVersion: 1, engine: "postgres" };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A subscriber that would only find other processes' events at its next poll, a minute away. */
const NO_POLLING = 60_000;

const until = async (what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(10);
  }
};

/** The backend pids of a schema's listening connections that have run their LISTEN. */
const listenerPids = async (schema: string): Promise<number[]> => {
  const admin = await adminClient();
  try {
    const { rows } = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle' AND query <> '' ORDER BY pid",
      [listenerName(schema)],
    );
    return rows.map((r) => r.pid);
  } finally {
    await admin.end();
  }
};

/** Open `journal`'s LISTEN connection and wait until it listens; counts the wake-ups from then on. */
const listening = async (journal: PostgresJournal, schema: string): Promise<() => number> => {
  let wakes = 0;
  journal.onCommitted(() => wakes++);
  await until("the listener is connected", async () => (await listenerPids(schema)).length === 1);
  // The wake-up that follows every (re)connect, for commits nobody was listening for.
  await sleep(50);
  const seen = wakes;
  return () => wakes - seen;
};

const readEverything = async (journal: PostgresJournal): Promise<RecordedEvent[]> => {
  const all: RecordedEvent[] = [];
  for (;;) {
    const page = await journal.readAll({ after: all.at(-1)?.position ?? 0, limit: 500 });
    if (page.length === 0) return all;
    all.push(...page);
  }
};

describe("PostgreSQL subscriptions woken by LISTEN/NOTIFY", () => {
  it("a subscriber is woken by another journal's commits well within a second, though it polls once a minute", async () => {
    const schema = schemas.fresh();
    const reader = await open(schema);
    const writer = await open(schema);
    await listening(reader, schema);
    const sub = subscribe(reader, { pollMs: NO_POLLING });
    for (let i = 0; i < 5; i++) {
      const next = sub.next();
      // Let the subscriber find nothing and go to sleep before the other journal commits.
      await sleep(100);
      const started = Date.now();
      const { recorded } = await writer.append({
        streamId: `s${i}`,
        expectedVersion: "no-stream",
        events: [event],
      });
      const got = await next;
      expect(Date.now() - started).toBeLessThan(1000);
      expect(got.done ? null : got.value.position).toBe(recorded[0]?.position);
    }
    await sub.return?.();
  });

  it("after its LISTEN connection is terminated, the journal reconnects and delivery continues with no gap and no duplicate", async () => {
    const schema = schemas.fresh();
    const reader = await open(schema);
    const writer = await open(schema);
    await listening(reader, schema);
    const received: RecordedEvent[] = [];
    const sub = subscribe(reader, { pollMs: NO_POLLING });
    const consume = (async () => {
      for await (const e of sub) received.push(e);
    })();
    const append = async (streamId: string, n: number) => {
      for (let i = 0; i < n; i++) await writer.append({ streamId, expectedVersion: "any", events: [event] });
    };

    await append("before", 3);
    await until("the first events arrived", () => received.length === 3, 1000);

    const [first] = await listenerPids(schema);
    expect(first).toBeDefined();
    const admin = await adminClient();
    try {
      await admin.query("SELECT pg_terminate_backend($1)", [first]);
    } finally {
      await admin.end();
    }
    // Committed while nobody listens: their notifications are lost; the reconnect wakes the reader.
    await append("while-down", 3);
    await until("a new listener connected", async () => {
      const pids = await listenerPids(schema);
      return pids.length === 1 && pids[0] !== first;
    });
    await until("the events committed while down arrived", () => received.length === 6, 3000);

    const started = Date.now();
    await append("after", 3);
    await until("the events after the reconnect arrived", () => received.length === 9, 1000);
    expect(Date.now() - started).toBeLessThan(1000);

    await sub.return?.();
    await consume;
    const all = await readEverything(reader);
    expect(received.map((e) => e.position)).toEqual(all.map((e) => e.position));
    expect(received.map((e) => e.streamId)).toEqual([
      ...Array(3).fill("before"),
      ...Array(3).fill("while-down"),
      ...Array(3).fill("after"),
    ]);
  });

  it("commits of a journal in another schema of the same database wake nobody here", async () => {
    const schema = schemas.fresh();
    const reader = await open(schema);
    const elsewhere = await open(schemas.fresh());
    const wakes = await listening(reader, schema);
    await elsewhere.append({ streamId: "x", expectedVersion: "no-stream", events: [event] });
    await sleep(300);
    expect(wakes()).toBe(0);
  });

  it("no LISTEN connection before the first listener; close() ends it", async () => {
    const schema = schemas.fresh();
    const journal = await open(schema);
    expect(await listenerPids(schema)).toEqual([]);
    await listening(journal, schema);
    expect(await listenerPids(schema)).toHaveLength(1);
    await journals.splice(journals.indexOf(journal), 1)[0]?.close();
    await until("the listener is gone", async () => (await listenerPids(schema)).length === 0, 2000);
  });
});
