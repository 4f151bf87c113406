import { appendFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { errorReply } from "../../src/adapters/surfaces/http/errors.js";
import { defineAgent, defineTool, JournalUnavailable, openRuntime } from "../../src/index.js";
import { cli } from "../readers/files.js";
import { runScript } from "../support/processes.js";
import { useSmallDisk } from "../support/smallDisk.js";
import { useTempDir } from "../support/tmp.js";
import { countOf, witnessLines } from "../support/witness.js";

const FULL_OPEN_MODULE = join(import.meta.dirname, "..", "support", "full-open-module.ts");
const smallDisk = useSmallDisk();
const tempDir = useTempDir();

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
};

const expectDiskFull = (error: unknown) => {
  expect(error).toBeInstanceOf(JournalUnavailable);
  expect((error as JournalUnavailable).reason).toContain("the disk is full (SQLITE_FULL");
  expect((error as JournalUnavailable).hint).toContain("When the disk is full");
};

const failureOf = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a failure, the promise resolved");
};

describe("a full disk under a libSQL journal", () => {
  it("fails appends as JournalUnavailable (SQLITE_FULL), starts no effect without its intent, keeps the unwritten outcome in doubt, refuses submissions, and recovers everything once space is back", async () => {
    const disk = smallDisk(2048);
    const witness = join(tempDir(), "witness.txt");
    const db = join(disk.dir, "journal.db");
    const atGate = deferred();
    const gate = deferred();
    const record = defineTool({
      name: "record",
      args: Schema.Struct({ label: Schema.String, runaway: Schema.optional(Schema.Boolean) }),
      run: async ({ label, runaway }) => {
        appendFileSync(witness, `${label}\n`);
        // A runaway tool: it fills the disk, then answers with an outcome that needs room in the WAL.
        if (runaway) disk.fill();
        return { label, log: runaway ? "x".repeat(64 * 1024) : "" };
      },
    });
    const steps = defineAgent({
      name: "steps",
      version: "1",
      run: async (turn, input: { prefix: string; runaway?: boolean; gated?: boolean }) => {
        await turn.tool(record, { label: `${input.prefix}-1` });
        if (input.gated) {
          atGate.resolve();
          await gate.promise;
        }
        await turn.tool(record, { label: `${input.prefix}-2`, runaway: input.runaway ?? false });
        await turn.tool(record, { label: `${input.prefix}-3` });
        return input.prefix;
      },
    });
    const rt = await openRuntime({ store: db, agents: [steps], tools: [record] });
    // A reader's snapshot keeps the WAL from starting over, so every commit from here needs new room.
    const reader = new Database(db);
    reader.exec("BEGIN");
    reader.prepare("SELECT count(*) FROM events").get();
    try {
      const waiting = await rt.submit({
        chatId: "b",
        inputId: "1",
        agent: "steps",
        content: { prefix: "b", gated: true },
      });
      await atGate.promise;
      const runaway = await rt.submit({
        chatId: "a",
        inputId: "1",
        agent: "steps",
        content: { prefix: "a", runaway: true },
      });
      // The runaway call happened and filled the disk; its outcome cannot be written.
      expectDiskFull(await failureOf(runaway.result));
      expect(witnessLines(witness)).toEqual(["b-1", "a-1", "a-2"]);

      // The waiting run goes on: its next intent cannot be written, so its effect never starts.
      gate.resolve();
      expectDiskFull(await failureOf(waiting.result));
      expect(countOf(witness, "b-2")).toBe(0);

      // The runtime is alive and refuses new work, saying why; over HTTP, as 503.
      const refusal = await failureOf(
        rt.submit({ chatId: "c", inputId: "1", agent: "steps", content: { prefix: "c" } }),
      );
      expectDiskFull(refusal);
      expect(errorReply(refusal)).toMatchObject({
        status: 503,
        body: { error: { code: "journal-unavailable", message: expect.stringContaining("SQLITE_FULL") } },
      });
      expect(witnessLines(witness)).toEqual(["b-1", "a-1", "a-2"]);

      // Space is back: recovery finds both runs.
      reader.exec("ROLLBACK");
      disk.free();
      const pass = await rt.recover();
      expect(pass.held.map((h) => [h.runId, h.reasons.map((r) => [r.code, r.callId])])).toEqual([
        [runaway.runId, [["in-doubt", `${runaway.runId}/1`]]],
      ]);
      expect(pass.resumed).toEqual([waiting.runId]);
      expect(await rt.wait(waiting.runId)).toMatchObject({ status: "completed", output: "b" });
      expect(await rt.wait(runaway.runId)).toMatchObject({ status: "held" });
      const fresh = await rt.submit({ chatId: "c", inputId: "1", agent: "steps", content: { prefix: "c" } });
      expect(await fresh.result).toMatchObject({ status: "completed" });
    } finally {
      // A failed expectation must not leave the gated run waiting: close would wait for it.
      gate.resolve();
      if (reader.inTransaction) reader.exec("ROLLBACK");
      reader.close();
      await rt.close();
    }
    // Each effect once; the one in doubt was not repeated.
    expect(witnessLines(witness).sort()).toEqual(["a-1", "a-2", "b-1", "b-2", "b-3", "c-1", "c-2", "c-3"]);
    const audit = await cli(["audit", "--db", db]);
    expect(audit.stderr).toBe("");
    expect(audit.code).toBe(0);
  });
});

describe("a storage failure is not the agent's failure", () => {
  it("an agent that rethrows the journal's refusal, once space is back, does not end its run as failed: recovery resumes it", async () => {
    const disk = smallDisk(2048);
    const witness = join(tempDir(), "witness.txt");
    const db = join(disk.dir, "journal.db");
    const started = deferred();
    const go = deferred();
    const refused = deferred();
    const spaceBack = deferred();
    let executions = 0;
    const record = defineTool({
      name: "record",
      args: Schema.Struct({ label: Schema.String }),
      run: async ({ label }) => {
        appendFileSync(witness, `${label}\n`);
        return label;
      },
    });
    const agent = defineAgent({
      name: "rethrows",
      version: "1",
      run: async (turn) => {
        executions += 1;
        if (executions === 1) {
          started.resolve();
          await go.promise;
        }
        try {
          await turn.tool(record, { label: "one" });
        } catch (error) {
          refused.resolve();
          await spaceBack.promise;
          throw error;
        }
        return "done";
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [record] });
    const reader = new Database(db);
    reader.exec("BEGIN");
    reader.prepare("SELECT count(*) FROM events").get();
    try {
      const handle = await rt.submit({ chatId: "c", inputId: "1", agent: "rethrows", content: null });
      await started.promise;
      disk.fill();
      go.resolve();
      await refused.promise;
      reader.exec("ROLLBACK");
      disk.free();
      spaceBack.resolve();
      expectDiskFull(await failureOf(handle.result));
      expect(witnessLines(witness)).toEqual([]);
      // Nothing was recorded for the refusal: the run is still active, not failed.
      expect(await rt.wait(handle.runId)).toMatchObject({ status: "elsewhere" });
      const pass = await rt.recover();
      expect(pass.resumed).toEqual([handle.runId]);
      expect(await rt.wait(handle.runId)).toMatchObject({ status: "completed", output: "done" });
      expect(witnessLines(witness)).toEqual(["one"]);
    } finally {
      if (reader.inTransaction) reader.exec("ROLLBACK");
      reader.close();
      await rt.close();
    }
  });
});

describe("opening a libSQL journal on a full disk", () => {
  const echo = defineAgent({
    name: "echo",
    version: "1",
    run: async (_turn, input: string) => input,
  });

  it("a new journal, and the empty file a process left before its first write, fail as JournalUnavailable (SQLITE_FULL), not SQLite's raw error; once space is back the journal opens and works", async () => {
    const disk = smallDisk(1024);
    const db = join(disk.dir, "journal.db");
    disk.fill();
    // A new journal: holdfast makes the file, and SQLite cannot write its first page (turning WAL on).
    expectDiskFull(await failureOf(openRuntime({ store: db, agents: [echo] })));
    // The empty file stays, as after a process killed between making the file and its first write
    // (seen in the libSQL fault torture): the next open meets it on the still-full disk.
    expect(statSync(db).size).toBe(0);
    expectDiskFull(await failureOf(openRuntime({ store: db, agents: [echo] })));
    disk.free();
    const rt = await openRuntime({ store: db, agents: [echo] });
    try {
      const handle = await rt.submit({ chatId: "c", inputId: "1", agent: "echo", content: "back" });
      expect(await handle.result).toMatchObject({ status: "completed", output: "back" });
    } finally {
      await rt.close();
    }
  });

  it("a killed agent's journal whose -shm is gone cannot rebuild it on the full disk: JournalUnavailable naming the storage (SQLITE_IOERR_SHMSIZE) with the full-disk hint; once space is back its runs are there", async () => {
    const disk = smallDisk(2048);
    const db = join(disk.dir, "journal.db");
    const killed = await runScript(FULL_OPEN_MODULE, { HF_DB: db, HF_RUNS: "2" });
    expect(killed.signal).toBe("SIGKILL");
    const runIds = killed.lines.map((l) => l.runId as string);
    expect(runIds).toHaveLength(2);
    expect(statSync(`${db}-wal`).size).toBeGreaterThan(0);
    // The -shm is only an index of the WAL, rebuilt by the next open; without it that needs room.
    rmSync(`${db}-shm`);
    disk.fill();
    const refusal = await failureOf(openRuntime({ store: db, agents: [echo] }));
    expect(refusal).toBeInstanceOf(JournalUnavailable);
    expect((refusal as JournalUnavailable).reason).toContain("the storage failed (SQLITE_IOERR_SHMSIZE");
    expect((refusal as JournalUnavailable).hint).toContain("When the disk is full");
    disk.free();
    const rt = await openRuntime({ store: db, agents: [echo] });
    try {
      for (const runId of runIds) expect(await rt.wait(runId)).toMatchObject({ status: "completed" });
    } finally {
      await rt.close();
    }
  });
});
