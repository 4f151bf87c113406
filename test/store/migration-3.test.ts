import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  APPLICATION_ID,
  LATEST_SCHEMA_VERSION,
  MIGRATIONS,
} from "../../src/adapters/stores/libsql/migrations.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** A journal file at schema version 2 (migrations 1 and 2 alone) with an admitted run and its claim. */
const versionTwoJournal = (): string => {
  const path = join(tempDir(), "v2.db");
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.exec(MIGRATIONS[0]!.sql);
  db.exec(MIGRATIONS[1]!.sql);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.prepare("INSERT INTO meta (key, value) VALUES ('fingerprint_key', ?)").run("ab".repeat(32));
  db.prepare("INSERT INTO claims (run_id, worker_id, epoch, lease_until) VALUES ('r1', 'w1', 3, ?)").run(
    9_999_999_999_999,
  );
  db.prepare("INSERT INTO admissions (chat_id, input_id, digest, run_id) VALUES ('c', 'i', ?, 'r1')").run(
    "d".repeat(64),
  );
  db.prepare("INSERT INTO run_guard (run_id, chat_id, active) VALUES ('r1', 'c', 1)").run();
  db.pragma("user_version = 2");
  db.close();
  return path;
};

describe("migration 3: released claims keep their epoch, pruned runs keep their answer", () => {
  it("F24: a version 2 journal upgrades keeping its claims and admissions; a release after the upgrade keeps the run's epoch", async () => {
    const journal = LibsqlJournal.open(versionTwoJournal());
    try {
      const db = journal.unsafeDatabase();
      expect((db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(
        LATEST_SCHEMA_VERSION,
      );
      expect(await journal.currentClaim("r1")).toEqual({
        runId: "r1",
        workerId: "w1",
        epoch: 3,
        leaseUntil: 9_999_999_999_999,
      });
      expect(await journal.admission("c", "i")).toMatchObject({ runId: "r1" });
      await journal.releaseClaims("w1", ["r1"]);
      expect(await journal.currentClaim("r1")).toBeNull();
      expect(await journal.claim("r1", "w1", 60_000)).toMatchObject({
        workerId: "w1",
        epoch: 4,
        previous: null,
      });
      expect(await journal.prunedRun("r1")).toBeNull();
    } finally {
      await journal.close();
    }
  });

  it("renewals and releases find a worker's claims through an index that holds owned claims only", () => {
    const journal = LibsqlJournal.open(join(tempDir(), "new.db"));
    try {
      const db = journal.unsafeDatabase();
      const plan = (sql: string) =>
        (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>)
          .map((r) => r.detail)
          .join("; ");
      expect(plan("UPDATE claims SET lease_until = 1 WHERE worker_id = 'w1'")).toMatch(
        /INDEX claims_by_worker/,
      );
      expect(plan("UPDATE claims SET worker_id = NULL, lease_until = 0 WHERE worker_id = 'w1'")).toMatch(
        /INDEX claims_by_worker/,
      );
    } finally {
      void journal.close();
    }
  });
});
