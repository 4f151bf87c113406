import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/libsql/LibsqlJournal.js";
import { digestOf, runStreamId } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { foldRun } from "../../src/machines/index.js";
import { RunWriter, recordOutcome } from "../../src/runtime/dispatch.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const rawRows = (journal: LibsqlJournal) =>
  journal
    .unsafeDatabase()
    .prepare("SELECT position, stream_id, version, data, hash FROM events ORDER BY position")
    .all();

describe("law 5 — history is immutable", () => {
  it("a second, different outcome for a call raises conflict.recorded and never overwrites", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const echo = defineTool({
      name: "echo",
      args: Schema.Struct({ v: Schema.Number }),
      run: async ({ v }) => v,
    });
    const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(echo, { v: 7 }) });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [echo] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "a", content: null });
    expect(await run.result).toMatchObject({ status: "completed", output: 7 });
    await rt.close();

    const journal = LibsqlJournal.open(db);
    const before = rawRows(journal);
    const events = await journal.readStream(runStreamId(run.runId));
    const fold = foldRun(events.map((e) => e.event));
    const writer = new RunWriter(journal, run.runId, fold, fold.snapshot.context.machine);
    const callId = `${run.runId}/0`;

    const same = await recordOutcome(writer, {
      type: "call.completed",
      runId: run.runId,
      callId,
      attempt: 1,
      result: 7,
      resultDigest: digestOf(7),
    });
    expect(same).toBe("duplicate");
    expect(rawRows(journal)).toEqual(before);

    const other = await recordOutcome(writer, {
      type: "call.completed",
      runId: run.runId,
      callId,
      attempt: 1,
      result: 8,
      resultDigest: digestOf(8),
    });
    expect(other).toBe("conflict");
    const after = rawRows(journal);
    expect(after.slice(0, before.length)).toEqual(before);
    const added = await journal.readStream(runStreamId(run.runId));
    expect(added.at(-1)?.event).toMatchObject({ type: "conflict.recorded", callId, kind: "outcome" });
    // The first outcome still stands.
    expect(added.find((e) => e.event.type === "call.completed")?.event).toMatchObject({ result: 7 });
    await journal.close();
  });

  it("the database refuses to update or delete a stored event", async () => {
    const dir = tempDir();
    const journal = LibsqlJournal.open(join(dir, "journal.db"));
    await journal.append({
      streamId: "system",
      expectedVersion: "no-stream",
      events: [{ type: "journal.opened", schemaVersion: 1, engine: "libsql" }],
    });
    const db = journal.unsafeDatabase();
    expect(() => db.exec("UPDATE events SET data = '{}'")).toThrow(/immutable/);
    expect(() => db.exec("DELETE FROM events")).toThrow(/never deleted/);
    expect((db.prepare("SELECT count(*) AS n FROM events").get() as { n: number }).n).toBe(1);
    await journal.close();
  });
});
