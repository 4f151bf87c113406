import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { RecordedEvent } from "../../src/events/index.js";
import { lineOf, runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const tempDir = useTempDir();

const allEvents = async (db: string): Promise<RecordedEvent[]> => {
  const journal = LibsqlJournal.open(db);
  const events = await journal.readAll({ after: 0, limit: 10_000 });
  await journal.close();
  return [...events];
};

describe("child and parallel calls", () => {
  it("turn.all assigns seq in array order and a child run is admitted with inputId = the parent's callId", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const r = await runWorker({
      HF_DB: db,
      HF_WITNESS: witness,
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HF_AGENT: "parent",
      HF_ACTION: "submit",
    });
    expect(r.code, r.stderr).toBe(0);
    const parentRunId = lineOf(r, "submitted")?.runId as string;
    expect(lineOf(r, "result")?.result).toMatchObject({
      status: "completed",
      output: { child: { c: { label: "p-child-c" } } },
    });
    const events = await allEvents(db);
    const intents = events.filter(
      (e) => e.streamId === `run-${parentRunId}` && e.event.type === "call.intended",
    );
    expect(
      intents.map((e) =>
        e.event.type === "call.intended" ? [e.event.seq, e.event.kind, e.event.args] : null,
      ),
    ).toEqual([
      [0, "tool", { label: "p-x" }],
      [1, "tool", { label: "p-y" }],
      [2, "child", { prefix: "p-child" }],
    ]);
    const childAdmitted = events.find(
      (e) => e.event.type === "run.admitted" && e.event.runId !== parentRunId,
    )?.event;
    expect(childAdmitted).toMatchObject({
      inputId: `${parentRunId}/2`,
      chatId: `child:${parentRunId}/2`,
      agent: { name: "steps" },
    });
  });

  it("a parent killed while its child runs: recovery re-admits the same child (idempotent) and no effect repeats", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const base = {
      HF_DB: db,
      HF_WITNESS: witness,
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HF_AGENT: "parent",
    };
    // Killed after the child's first call committed its outcome.
    const first = await runWorker({
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "record",
    });
    expect(first.signal).toBe("SIGKILL");
    const second = await runWorker({ ...base, HF_ACTION: "recover" });
    expect(second.code, second.stderr).toBe(0);
    const results = lineOf(second, "recovered")?.results as Array<{ status: string }>;
    expect(results.map((x) => x.status)).toEqual(["completed", "completed"]);
    const events = await allEvents(db);
    expect(events.filter((e) => e.event.type === "run.admitted")).toHaveLength(2);
    expect(events.map((e) => e.event)).toContainEqual(
      expect.objectContaining({ type: "call.replay-authorized", reason: "idempotent-child" }),
    );
    expect(witnessLines(witness).filter((l) => l.startsWith("p-child"))).toEqual([
      "p-child-a",
      "p-child-b",
      "p-child-c",
    ]);
  });
});
