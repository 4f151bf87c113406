import { afterAll, describe, expect, it } from "vitest";
import { openStoreReader } from "../../src/adapters/store.js";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import type { AnyEvent, RecordedEvent } from "../../src/events/index.js";
import { JournalTooNew, JournalUnavailable, openReader } from "../../src/index.js";
import { subscribe } from "../../src/runtime/subscribe.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";

const schemas = usePgSchemas();
afterAll(schemas.dropAll);

const opened: AnyEvent = { type: "journal.opened", schemaVersion: 1, engine: "postgres" };

const schemaExists = async (schema: string): Promise<boolean> => {
  const admin = await adminClient();
  try {
    return (
      (await admin.query("SELECT 1 FROM information_schema.schemata WHERE schema_name = $1", [schema])).rows
        .length > 0
    );
  } finally {
    await admin.end();
  }
};

/** A journal of `events` events, written and closed by a writer. */
const writtenJournal = async (events: number): Promise<string> => {
  await requirePg();
  const schema = schemas.fresh();
  const writer = await PostgresJournal.open(pgUrl(schema));
  for (let i = 0; i < events; i++)
    await writer.append({ streamId: "system", expectedVersion: "any", events: [opened] });
  await writer.close();
  return schema;
};

describe("a PostgreSQL reader", () => {
  it("creates and migrates nothing: a missing schema is refused and stays missing", async () => {
    await requirePg();
    const schema = schemas.fresh();
    await expect(openReader({ store: pgUrl(schema) })).rejects.toMatchObject({
      _tag: "JournalUnavailable",
      reason: `the schema ${schema} does not exist: there is no journal to read`,
    });
    expect(await schemaExists(schema)).toBe(false);
  });

  it("refuses an older or a newer schema version as it is", async () => {
    const schema = await writtenJournal(1);
    const admin = await adminClient(schema);
    try {
      await admin.query("INSERT INTO holdfast_migrations (id, name) VALUES (99, 'from the future')");
      await expect(openStoreReader(pgUrl(schema))).rejects.toBeInstanceOf(JournalTooNew);
      await admin.query("DELETE FROM holdfast_migrations");
      const error = await openStoreReader(pgUrl(schema)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(JournalUnavailable);
      expect(error).toMatchObject({ reason: expect.stringContaining("schema version 0") });
      expect((await admin.query("SELECT count(*)::int AS n FROM holdfast_migrations")).rows[0].n).toBe(0);
    } finally {
      await admin.end();
    }
  });

  it("reads and follows a live journal, and the server refuses its writes (read-only transactions)", async () => {
    const schema = await writtenJournal(2);
    const reader = await openStoreReader(pgUrl(schema));
    const writer = await PostgresJournal.open(pgUrl(schema));
    try {
      expect((await reader.readAll({ after: 0, limit: 10 })).length).toBe(2);
      await expect(
        (reader as PostgresJournal).append({ streamId: "system", expectedVersion: "any", events: [opened] }),
      ).rejects.toThrow(/read-only transaction/);
      const seen: RecordedEvent[] = [];
      const live = subscribe(reader, { after: 2, pollMs: 5000 });
      const next = live.next();
      await writer.append({ streamId: "system", expectedVersion: "any", events: [opened] });
      const first = await next;
      if (!first.done) seen.push(first.value);
      await live.return?.();
      expect(seen.map((e) => e.version)).toEqual([3]);
    } finally {
      await writer.close();
      await reader.close();
    }
  });
});
