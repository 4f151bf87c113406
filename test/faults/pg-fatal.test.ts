import { afterAll, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import type { AnyEvent } from "../../src/events/index.js";
import { JournalUnavailable } from "../../src/index.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";

/*
 * A session the server ends while an append is inside its transaction, before COMMIT: PostgreSQL
 * answers the waiting statement with a FATAL (57P01, as during a restart or a failover). That is a
 * lost connection, the journal unavailable for a moment — never the raw driver error the caller
 * cannot tell from a refused statement (decision 0069). Nothing of the append was written.
 */

const schemas = usePgSchemas();
afterAll(schemas.dropAll);

const opened = (): AnyEvent => ({ type: "journal.opened", schemaVersion: 1, engine: "test" });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a PostgreSQL session terminated inside an append", () => {
  it("the transaction path: a FATAL before COMMIT is JournalUnavailable (nothing written, not 'unknown'), and the next append goes through", async () => {
    await requirePg();
    const schema = schemas.fresh();
    // The transaction path (the one an append takes when it cannot ride one statement: several
    // streams at once, a sealed journal; a commit hook forces it here).
    const journal = await PostgresJournal.open(pgUrl(schema), {
      retry: { attempts: 1 },
      onBeforeCommit: async () => undefined,
    });
    const locker = await adminClient(schema);
    const admin = await adminClient();
    try {
      await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened()] });
      // Hold the append lock, so the next append waits in its first statement, inside BEGIN.
      await locker.query("SELECT pg_advisory_lock(hashtext($1))", [`holdfast.append.${schema}`]);
      const failed = journal.append({ streamId: "s", expectedVersion: 1, events: [opened()] }).then(
        () => null,
        (error: unknown) => error,
      );
      let waiting: number | undefined;
      for (let i = 0; i < 200 && waiting === undefined; i++) {
        const { rows } = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
          [`%holdfast.append.${schema}%`],
        );
        waiting = rows[0]?.pid;
        if (waiting === undefined) await sleep(25);
      }
      expect(waiting, "the append never waited on the locked table").toBeDefined();
      await admin.query("SELECT pg_terminate_backend($1)", [waiting]);
      const error = await failed;
      await locker.query("SELECT pg_advisory_unlock_all()");
      expect(error, String(error)).toBeInstanceOf(JournalUnavailable);
      expect((error as JournalUnavailable).written).toBeUndefined();
      expect((error as JournalUnavailable).reason).toContain("nothing of this batch was written");
      expect((await journal.readStream("s")).map((e) => e.version)).toEqual([1]);
      // The pool gave the broken session up: the journal goes on.
      await journal.append({ streamId: "s", expectedVersion: 1, events: [opened()] });
      expect(await journal.readStream("s")).toHaveLength(2);
    } finally {
      await locker.end().catch(() => undefined);
      await admin.end();
      await journal.close();
    }
  });
});
