import { existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { LATEST_SCHEMA_VERSION } from "../../src/adapters/stores/libsql/migrations.js";
import { type RecordedEvent, runStreamId } from "../../src/events/index.js";
import {
  JournalTooNew,
  JournalUnavailable,
  openReader,
  openRuntime,
  type Reader,
  type RunRow,
} from "../../src/index.js";
import { runWorker } from "../support/processes.js";
import { makeTableTools } from "../support/table-tools.js";
import { useTempDir } from "../support/tmp.js";
import { makeStepsAgent } from "../support/witness.js";
import { cli, copyJournalFiles, filesIn, journalBytes } from "./files.js";

const tempDir = useTempDir();

/**
 * A journal as a killed worker leaves it: its run running with a call intended and no outcome,
 * the claim still naming the dead worker, and the last commits only in the WAL (nobody
 * checkpointed).
 */
const killedWorkerJournal = async (): Promise<{ db: string; witness: string; runId: string }> => {
  const dir = tempDir();
  const db = join(dir, "journal.db");
  const witness = join(dir, "witness.txt");
  const killed = await runWorker({
    HF_DB: db,
    HF_WITNESS: witness,
    HF_ACTION: "submit",
    HF_CHAT: "c",
    HF_INPUT: "i",
    HF_PREFIX: "p",
    HOLDFAST_CRASH_AT: "after-intent",
    HOLDFAST_CRASH_CALL: "record",
  });
  expect(killed.signal).toBe("SIGKILL");
  expect(statSync(`${db}-wal`).size).toBeGreaterThan(0);
  // Looked up without holdfast, so the fixture does not depend on the code under test.
  const raw = new Database(`file:${db}?mode=ro`);
  const guard = raw.prepare("SELECT run_id FROM run_guard").all() as Array<{ run_id: string }>;
  raw.close();
  expect(guard).toHaveLength(1);
  return { db, witness, runId: guard[0]!.run_id };
};

/** Read everything through a subscriber until it has caught up with `count` events. */
const subscribeAll = async (reader: Reader, count: number): Promise<RecordedEvent[]> => {
  const seen: RecordedEvent[] = [];
  if (count === 0) return seen;
  for await (const event of reader.subscribe({ after: 0, pollMs: 10 })) {
    seen.push(event);
    if (seen.length >= count) break;
  }
  return seen;
};

describe("readers are not workers", () => {
  it("Readers are not workers: an audit, show, events and a subscriber on a copy of a journal leave its bytes unchanged", async () => {
    const { db, runId } = await killedWorkerJournal();
    const evidence = copyJournalFiles(db, tempDir());
    const before = journalBytes(evidence);
    expect(Object.keys(before).sort()).toEqual(["-anchor", "-wal", "db"]);

    const audit = await cli(["audit", "--db", evidence, "--json"]);
    expect(audit.code, audit.stderr).toBe(0);
    expect(JSON.parse(audit.stdout)).toMatchObject({ clean: true, anchor: { holds: true } });
    const show = await cli(["show", runId, "--db", evidence]);
    expect(show.code, show.stderr).toBe(0);
    // Its owner was killed: the reader says so, and only reports (the bytes stay unchanged).
    expect(show.stdout).toContain(`run ${runId}  stalled — recovers when a runtime with agent`);
    const events = await cli(["events", "--db", evidence, "--json"]);
    expect(events.code, events.stderr).toBe(0);
    const listed = events.stdout.trim().split("\n").length;
    expect((await cli(["runs", "--db", evidence])).code).toBe(0);

    const reader = await openReader({ store: evidence });
    try {
      expect((await subscribeAll(reader, listed)).map((e) => e.position)).toHaveLength(listed);
      expect((await reader.audit()).clean).toBe(true);
      expect((await reader.events(runId)).map((e) => e.event.type)).not.toContain("run.interrupted");
      expect(await reader.documents.read("c")).toEqual({ value: null, revision: 0 });
    } finally {
      await reader.close();
    }
    expect(journalBytes(evidence)).toEqual(before);
  });

  it("a reader never runs recovery: a run left running by a killed process stays running, its claim and bytes untouched", async () => {
    const { db, witness, runId } = await killedWorkerJournal();
    const raw = new Database(`file:${db}?mode=ro`);
    const claimBefore = raw.prepare("SELECT worker_id, epoch, lease_until FROM claims").all();
    raw.close();
    const before = journalBytes(db);

    const reader = await openReader({ store: db });
    try {
      const run = (await reader.run(runId)) as RunRow;
      expect(run.status).toBe("running");
      // Killed right after the intent of the call named "record": the reader shows it in doubt.
      const calls = await reader.calls(runId);
      expect(calls.at(-1)).toMatchObject({ name: "record", status: "in-doubt", outcomeCommitted: false });
      expect(calls.map((c) => c.seq)).toEqual(calls.map((_, i) => i));
      expect(await reader.calls("no-such-run")).toEqual([]);
      await reader.audit();
      await subscribeAll(reader, (await reader.events(runId)).length);
      expect((await reader.events(runId)).map((e) => e.event.type)).not.toContain("run.interrupted");
    } finally {
      await reader.close();
    }
    expect(journalBytes(db)).toEqual(before);
    const after = new Database(`file:${db}?mode=ro`);
    expect(after.prepare("SELECT worker_id, epoch, lease_until FROM claims").all()).toEqual(claimBefore);
    after.close();

    // The same journal is recovered by a runtime that has the agent: the run was there to take.
    const runtime = await openRuntime({
      store: db,
      agents: [makeStepsAgent()],
      tools: makeTableTools(witness).all,
      recovery: { leaseMs: 3_000 },
    });
    try {
      expect(runtime.recovery.interrupted).toContain(runId);
      expect((await runtime.events(runId)).map((e) => e.event.type)).toContain("run.interrupted");
    } finally {
      await runtime.close();
    }
  });

  it("a reading command on an empty file or a missing path creates nothing and says so", async () => {
    const commands = [["runs"], ["show", "r1"], ["events"], ["audit"]];
    const missingDir = tempDir();
    const missing = join(missingDir, "journal.db");
    for (const args of commands) {
      const result = await cli([...args, "--db", missing]);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr).toContain(`there is no journal at ${missing}`);
    }
    expect(filesIn(missingDir)).toEqual([]);

    const emptyDir = tempDir();
    const empty = join(emptyDir, "journal.db");
    writeFileSync(empty, "");
    for (const args of commands) {
      const result = await cli([...args, "--db", empty]);
      expect(result.code, args.join(" ")).toBe(3);
      expect(result.stderr).toContain("the file is empty (0 bytes) and holds no journal");
    }
    expect(filesIn(emptyDir)).toEqual(["journal.db"]);
    expect(statSync(empty).size).toBe(0);
  });
});

describe("the read-only open refuses what is not this holdfast's journal, and changes nothing", () => {
  const refused = (path: string) => {
    try {
      LibsqlJournal.openReadOnly(path);
    } catch (error) {
      return error;
    }
    throw new Error(`${path} opened read-only`);
  };

  it("a missing file or folder, an empty file, a text file, another database: JournalUnavailable, nothing created", async () => {
    const dir = tempDir();
    expect(refused(join(dir, "missing.db"))).toMatchObject({
      _tag: "JournalUnavailable",
      reason: expect.stringContaining("there is no journal"),
    });
    expect(refused(join(dir, "no", "journal.db"))).toMatchObject({
      reason: expect.stringContaining("does not exist"),
    });
    writeFileSync(join(dir, "empty.db"), "");
    expect(refused(join(dir, "empty.db"))).toMatchObject({ reason: expect.stringContaining("empty") });
    writeFileSync(join(dir, "notes.txt"), "not a database\n".repeat(300));
    expect(refused(join(dir, "notes.txt"))).toMatchObject({ reason: "the file is not a database" });
    const other = new Database(join(dir, "other.db"));
    other.exec("CREATE TABLE t (x)");
    other.close();
    const otherBytes = journalBytes(join(dir, "other.db"));
    expect(refused(join(dir, "other.db"))).toMatchObject({
      reason: "the file is a database but not a holdfast journal",
    });
    expect(journalBytes(join(dir, "other.db"))).toEqual(otherBytes);
    expect(filesIn(dir).filter((f) => !f.endsWith("-shm"))).toEqual(["empty.db", "notes.txt", "other.db"]);
    expect(existsSync(join(dir, "missing.db"))).toBe(false);
  });

  it("an older or a newer schema version is refused as it is: a reader never migrates", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const journal = LibsqlJournal.open(db);
    await journal.append({
      streamId: "system",
      expectedVersion: "any",
      events: [{ type: "journal.opened", schemaVersion: 1, engine: "libsql" }],
    });
    await journal.close();
    for (const [version, expected] of [
      [1, JournalUnavailable],
      [99, JournalTooNew],
    ] as const) {
      const raw = new Database(db);
      raw.pragma(`user_version = ${version}`);
      raw.pragma("wal_checkpoint(TRUNCATE)");
      raw.close();
      const before = journalBytes(db);
      const error = refused(db);
      expect(error).toBeInstanceOf(expected);
      if (version === 1)
        expect(error).toMatchObject({
          reason: expect.stringContaining(
            `schema version 1, and this holdfast reads version ${LATEST_SCHEMA_VERSION}`,
          ),
        });
      expect(journalBytes(db)).toEqual(before);
    }
  });

  it("a read-only journal cannot write, even when asked behind the type's back", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    await (await openRuntime({ store: db })).close();
    const before = journalBytes(db);
    const reader = LibsqlJournal.openReadOnly(db) as LibsqlJournal;
    try {
      await expect(
        reader.append({
          streamId: "system",
          expectedVersion: "any",
          events: [{ type: "journal.opened", schemaVersion: 1, engine: "libsql" }],
        }),
      ).rejects.toThrow(/readonly|read-only/i);
      expect(await reader.readStream(runStreamId("none"))).toEqual([]);
    } finally {
      await reader.close();
    }
    expect(journalBytes(db)).toEqual(before);
  });
});
