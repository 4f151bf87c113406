import type pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import type { AnyEvent, RecordedEvent } from "../../src/events/index.js";
import { subscribe } from "../../src/runtime/subscribe.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";

const schemas = usePgSchemas();
afterAll(schemas.dropAll);

const journals: PostgresJournal[] = [];
const clients: pg.Client[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) {
    await client.query("ROLLBACK").catch(() => {});
    await client.end();
  }
  for (const journal of journals.splice(0)) await journal.close();
});

const open = async (schema: string): Promise<PostgresJournal> => {
  await requirePg();
  const journal = await PostgresJournal.open(pgUrl(schema));
  journals.push(journal);
  return journal;
};

/** Some unrelated application's work on the same server: a transaction that has written (holds an xid), left open. */
const unrelatedOpenTransaction = async (): Promise<void> => {
  const other = await adminClient();
  clients.push(other);
  await other.query("BEGIN");
  await other.query("SELECT pg_current_xact_id()");
};

const event: AnyEvent = { type: "journal.opened", schemaVersion: 1, engine: "postgres" };

/** A subscriber that would only find other processes' events at its next poll, a minute away. */
const NO_POLLING = 60_000;

/** The iterator's next value, or "nothing" if none came within `ms` (a generous bound, not a speed check). */
const nextWithin = async (
  iterator: Pick<AsyncIterator<RecordedEvent>, "next">,
  ms: number,
): Promise<RecordedEvent | "nothing"> => {
  let timer: NodeJS.Timeout | undefined;
  const nothing = new Promise<"nothing">((resolve) => {
    timer = setTimeout(() => resolve("nothing"), ms);
  });
  const got = await Promise.race([iterator.next(), nothing]);
  clearTimeout(timer);
  if (got === "nothing") return got;
  return got.done ? "nothing" : got.value;
};

describe("PostgreSQL: what other transactions on the server do not hold back", () => {
  it("F9: with an unrelated transaction holding an xid open, readAll returns the new event, to the writer and to another journal", async () => {
    const schema = schemas.fresh();
    const writer = await open(schema);
    const reader = await open(schema);
    await unrelatedOpenTransaction();
    await writer.append({ streamId: "s", expectedVersion: "no-stream", events: [event] });
    expect((await writer.readAll({ after: 0, limit: 10 })).map((e) => e.streamId)).toEqual(["s"]);
    expect((await reader.readAll({ after: 0, limit: 10 })).map((e) => e.streamId)).toEqual(["s"]);
    expect((await reader.readAllRows({ after: 0, limit: 10 })).map((r) => r.streamId)).toEqual(["s"]);
  });

  it("F9: with an unrelated transaction holding an xid open, a subscriber polling once a minute is woken by the commit and sees the new event", async () => {
    const schema = schemas.fresh();
    const writer = await open(schema);
    const reader = await open(schema);
    const sub = subscribe(reader, { pollMs: NO_POLLING });
    const first = sub.next();
    await unrelatedOpenTransaction();
    await writer.append({ streamId: "live", expectedVersion: "no-stream", events: [event] });
    // The wake-up used to wait for the unrelated transaction, giving up after 5 s.
    const got = await nextWithin({ next: () => first }, 4000);
    expect(got === "nothing" ? got : got.streamId).toBe("live");
    await sub.return?.();
  });

  it("appends racing from three journals reach a subscriber once each, in position order, with none skipped", async () => {
    const schema = schemas.fresh();
    const writers = [await open(schema), await open(schema), await open(schema)];
    const reader = await open(schema);
    const sub = subscribe(reader, { pollMs: 20 });
    const perWriter = 40;
    const appends = writers.flatMap((writer, w) =>
      Array.from({ length: perWriter }, (_, i) =>
        writer.append({ streamId: `w${w}-${i}`, expectedVersion: "no-stream", events: [event] }),
      ),
    );
    const seen: RecordedEvent[] = [];
    while (seen.length < writers.length * perWriter) {
      const got = await nextWithin(sub, 10_000);
      if (got === "nothing") break;
      seen.push(got);
    }
    await Promise.all(appends);
    await sub.return?.();
    const all = await reader.readAll({ after: 0, limit: 1000 });
    expect(all).toHaveLength(writers.length * perWriter);
    expect(seen.map((e) => e.position)).toEqual(all.map((e) => e.position));
  });
});
