import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import type { AnyEvent } from "../../src/events/index.js";
import { JournalUnavailable } from "../../src/index.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useSmallDisk } from "../support/smallDisk.js";

/*
 * PostgreSQL's own disk full: the journal's events table is moved to a tablespace on a small tmpfs,
 * the tmpfs is filled, and the server refuses the insert that needs a new page with an ERROR
 * `53100 could not extend file … No space left on device`. That is the store unavailable —
 * `JournalUnavailable`, nothing written — as a full disk under libSQL is (decision 0070), never the
 * raw driver error a caller would take for a bad request. Once space is back, appends go on.
 */

const schemas = usePgSchemas();
afterAll(schemas.dropAll);
const smallDisk = useSmallDisk();

const opened = (): AnyEvent => ({ type: "journal.opened", schemaVersion: 1, engine: "x".repeat(2_000) });

describe("PostgreSQL out of disk space", () => {
  it("an append refused with 53100 disk_full is JournalUnavailable (nothing written), and appends go on once space is back", async () => {
    await requirePg();
    const disk = smallDisk(4096);
    const location = join(disk.dir, "tablespace");
    mkdirSync(location);
    execFileSync("chown", ["-R", "postgres:postgres", disk.dir]);
    const schema = schemas.fresh();
    const tablespace = `${schema}_small`;
    const admin = await adminClient();
    const journal = await PostgresJournal.open(pgUrl(schema), { retry: { attempts: 1 } });
    try {
      await admin.query(`CREATE TABLESPACE ${tablespace} LOCATION '${location}'`);
      await admin.query(`ALTER TABLE ${schema}.events SET TABLESPACE ${tablespace}`);
      await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened()] });
      disk.fill();
      // The table's last page fills up first; the append that needs a new page is refused.
      let refusal: unknown;
      let version = 1;
      for (let i = 0; i < 200 && refusal === undefined; i++) {
        try {
          await journal.append({ streamId: "s", expectedVersion: version, events: [opened()] });
          version += 1;
        } catch (error) {
          refusal = error;
        }
      }
      expect(refusal, String(refusal)).toBeInstanceOf(JournalUnavailable);
      expect((refusal as JournalUnavailable).reason).toContain("its disk is full (53100");
      expect((refusal as JournalUnavailable).written).toBeUndefined();
      expect(await journal.readStream("s")).toHaveLength(version);
      // Space is back: the same append goes through.
      disk.free();
      await journal.append({ streamId: "s", expectedVersion: version, events: [opened()] });
      expect(await journal.readStream("s")).toHaveLength(version + 1);
    } finally {
      await journal.close();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.query(`DROP TABLESPACE IF EXISTS ${tablespace}`);
      await admin.end();
    }
  });
});
