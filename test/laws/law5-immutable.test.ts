import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { openRuntime } from "../../src/index.js";
import { startWorker } from "../support/processes.js";
import { lateAgent, makeLateTool } from "../support/table-tools.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const tempDir = useTempDir();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("law 5 — history is immutable", () => {
  it("F16: a second, different outcome that reaches the runtime is recorded as conflict.recorded and never overwrites the first", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    // A worker whose call takes effect at once, then answers only after 8 s.
    const worker = startWorker({
      HF_DB: db,
      HF_WITNESS: witness,
      HF_ACTION: "submit",
      HF_AGENT: "late",
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HF_HOLD_MS: "8000",
      HF_LEASE_MS: "3000",
    });
    await worker.waitFor("submitted");
    const runId = worker.lines.find((l) => l.kind === "submitted")?.runId as string;
    const deadline = Date.now() + 20_000;
    while (witnessLines(witness).length === 0) {
      if (Date.now() > deadline) throw new Error("the worker's call never took effect");
      await sleep(20);
    }
    // Paused past its lease: another runtime takes the run over and reconciles the call.
    worker.child.kill("SIGSTOP");
    await sleep(3_500);
    const other = await openRuntime({ store: db, agents: [lateAgent], tools: [makeLateTool(witness, 0)] });
    expect(other.recovery.reconciled).toEqual([`${runId}/0`]);
    const [result] = await (other.recovery as typeof other.recovery & { done: Promise<unknown[]> }).done;
    expect(result).toMatchObject({ status: "completed", output: { via: "reconciled" } });
    const before = (await other.events(runId)).length;

    // The old owner wakes; its call answers with another outcome. It is recorded, not dropped.
    worker.child.kill("SIGCONT");
    await worker.waitFor("result");
    expect(worker.lines.find((l) => l.kind === "result")?.result).toMatchObject({ status: "elsewhere" });
    await worker.kill();
    const journal = LibsqlJournal.open(db);
    const events = (await journal.readStream(`run-${runId}`)).map((e) => e.event);
    await journal.close();
    expect(events.slice(before)).toEqual([
      expect.objectContaining({
        type: "conflict.recorded",
        callId: `${runId}/0`,
        kind: "outcome",
        recorded: expect.objectContaining({ status: "completed" }),
        attempted: expect.objectContaining({ type: "call.completed", result: { via: "live" } }),
      }),
    ]);
    // The first outcome stands: the run completed with the reconciled result, once.
    expect(events.filter((e) => e.type === "call.reconciled" || e.type === "call.completed")).toEqual([
      expect.objectContaining({
        type: "call.reconciled",
        outcome: "completed",
        result: { via: "reconciled" },
      }),
    ]);
    expect(witnessLines(witness)).toHaveLength(1);
    expect((await other.audit()).findings).toEqual([]);
    await other.close();
  }, 60_000);

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
