import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { benchStreams } from "../../bench/fixtures.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { readRun } from "../../src/adapters/surfaces/http/runStreams.js";
import { runStreamId } from "../../src/events/index.js";
import { contextOf, foldRun, statusOf } from "../../src/machines/index.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const schemas = usePgSchemas();

const tempDir = useTempDir();

describe("readRun (a run page's stream, read once per reader)", () => {
  it("after more events are committed, gives the whole stream and the fold from zero, on a reader that read it before", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    try {
      const { streamId, appends } = benchStreams(journal.fingerprintKey, "r", 20);
      const write = async (from: number, to: number) => {
        for (let version = from; version < to; version++)
          await journal.append({
            streamId,
            expectedVersion: version === 0 ? "no-stream" : version,
            events: appends[version]!,
          });
      };
      await write(0, 11);
      const before = await readRun(journal, "r");
      expect(before.events).toHaveLength(11);
      expect(statusOf(before.fold!)).toBe("running");
      const held = structuredClone(contextOf(before.fold!));

      await write(11, appends.length);
      const after = await readRun(journal, "r");
      const whole = await journal.readStream(runStreamId("r"));
      expect(after.events.map((e) => e.version)).toEqual(whole.map((e) => e.version));
      const fromZero = foldRun(whole.map((e) => e.event));
      expect(statusOf(after.fold!)).toBe("completed");
      expect(contextOf(after.fold!)).toEqual(contextOf(fromZero));
      // The kept fold is not changed by folding onto it: two requests reading at once each fold the
      // new events once, onto the same fold.
      expect(before.events).toHaveLength(11);
      expect(contextOf(before.fold!)).toEqual(held);
      // Nothing new: the same read.
      expect(await readRun(journal, "r")).toBe(after);
    } finally {
      await journal.close();
    }
  });
});

describe("readRun's bound", () => {
  it("keeps no run longer than the events kept in all, and drops the least recently read first", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    try {
      for (const runId of ["a", "b", "c", "long"]) {
        const { streamId, appends } = benchStreams(journal.fingerprintKey, runId, runId === "long" ? 20 : 2);
        for (let version = 0; version < appends.length; version++)
          await journal.append({
            streamId,
            expectedVersion: version === 0 ? "no-stream" : version,
            events: appends[version]!,
          });
      }
      const limits = { runs: 2, events: 20 };
      // A run of 42 events with 20 kept at most: read every time, never kept.
      const long = await readRun(journal, "long", limits);
      expect(long.events.length).toBeGreaterThan(limits.events);
      expect(await readRun(journal, "long", limits)).not.toBe(long);
      const a = await readRun(journal, "a", limits);
      expect(await readRun(journal, "a", limits)).toBe(a);
      const b = await readRun(journal, "b", limits);
      expect(await readRun(journal, "b", limits)).toBe(b);
      // A third run kept: "a", the least recently read, goes.
      await readRun(journal, "c", limits);
      expect(await readRun(journal, "b", limits)).toBe(b);
      const c = await readRun(journal, "a", limits);
      expect(c).not.toBe(a);
      expect(c.events.map((e) => e.hash)).toEqual(a.events.map((e) => e.hash));
    } finally {
      await journal.close();
    }
  });
});

describe("readRun after the journal under a reader changed (a backup restored in place)", () => {
  afterAll(() => schemas.dropAll());

  it("gives the restored stream, not the one read before, and folds the events written after it from the restored ones", async () => {
    await requirePg();
    const schema = schemas.fresh();
    const url = pgUrl(schema);
    const writer = await PostgresJournal.open(url);
    const reader = await PostgresJournal.open(url);
    let restored: PostgresJournal | undefined;
    try {
      const first = benchStreams(writer.fingerprintKey, "r", 20);
      for (let version = 0; version < 30; version++)
        await writer.append({
          streamId: first.streamId,
          expectedVersion: version === 0 ? "no-stream" : version,
          events: first.appends[version]!,
        });
      expect((await readRun(reader, "r")).events).toHaveLength(30);
      await writer.close();

      // The journal is restored from an older copy while the server runs: the schema holds a stream
      // of 12 events for the run (another journal's, so other hashes), and the run goes on from there.
      const admin = await adminClient();
      try {
        await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      } finally {
        await admin.end();
      }
      restored = await PostgresJournal.open(url);
      const second = benchStreams(restored.fingerprintKey, "r", 20);
      const write = async (from: number, to: number) => {
        for (let version = from; version < to; version++)
          await restored!.append({
            streamId: second.streamId,
            expectedVersion: version === 0 ? "no-stream" : version,
            events: second.appends[version]!,
          });
      };
      await write(0, 12);
      const shorter = await readRun(reader, "r");
      const whole12 = await reader.readStream(runStreamId("r"));
      expect(shorter.events.map((e) => e.hash)).toEqual(whole12.map((e) => e.hash));

      await write(12, second.appends.length);
      const after = await readRun(reader, "r");
      const whole = await reader.readStream(runStreamId("r"));
      expect(after.events.map((e) => e.hash)).toEqual(whole.map((e) => e.hash));
      expect(after.fold).not.toBeNull();
      expect(contextOf(after.fold!)).toEqual(contextOf(foldRun(whole.map((e) => e.event))));
    } finally {
      await restored?.close();
      await reader.close();
    }
  });
});
