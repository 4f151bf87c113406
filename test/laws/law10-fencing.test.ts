import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { startWorker } from "../support/processes.js";
import { makeTableTools } from "../support/table-tools.js";
import { useTempDir } from "../support/tmp.js";
import { countOf, makeStepsAgent } from "../support/witness.js";

const tempDir = useTempDir();

describe("law 10 — loss of a lease never authorizes a replacement effect", () => {
  it("a worker stopped with SIGSTOP past its lease, then continued, starts no effect; the new owner records run.claimed and holds the in-doubt call; the late outcome is recorded, not dropped (law 5)", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const worker = startWorker({
      HF_DB: db,
      HF_WITNESS: witness,
      HF_ACTION: "submit",
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HF_HOLD_MS: "6000",
      HF_LEASE_MS: "3000",
    });
    await worker.waitFor("submitted");
    const runId = worker.lines.find((l) => l.kind === "submitted")?.runId as string;
    // Stop it while its model call is under way: the intent is committed, the outcome is not.
    const reader = LibsqlJournal.open(db);
    const deadline = Date.now() + 20_000;
    while (!(await reader.readStream(`run-${runId}`)).some((e) => e.event.type === "call.intended")) {
      if (Date.now() > deadline) throw new Error("the worker never started its call");
      await new Promise((r) => setTimeout(r, 20));
    }
    await reader.close();
    worker.child.kill("SIGSTOP");
    await new Promise((r) => setTimeout(r, 3500));

    // Another worker: the stopped one's lease has run out, so it takes the run over.
    const slow = defineAgent({ name: "slow", version: "1", run: async () => "never re-executed here" });
    const other = await openRuntime({
      store: db,
      agents: [makeStepsAgent(), slow],
      tools: makeTableTools(witness).all,
    });
    expect(
      other.recovery.held.map((h) => h.runId),
      JSON.stringify(other.recovery),
    ).toEqual([runId]);
    const events = (await other.events(runId)).map((e) => e.event);
    expect(events).toContainEqual(
      expect.objectContaining({ type: "run.claimed", epoch: 2, workerId: other.workerId }),
    );
    const countBefore = events.length;

    worker.child.kill("SIGCONT");
    let stderr = "";
    worker.child.stderr?.on("data", (d) => {
      stderr += d;
    });
    await worker.waitFor("result").catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(worker.lines)} ${stderr}`);
    });
    const result = worker.lines.find((l) => l.kind === "result")?.result as { status: string; state: string };
    expect(result.status).toBe("elsewhere");
    expect(result.state).toMatch(/lost the run to another owner/);
    await worker.kill();

    const journal = LibsqlJournal.open(db);
    const after = await journal.readStream(`run-${runId}`);
    await journal.close();
    // Its model call did finish: the outcome is recorded on the held run (the machine takes it
    // there), without the old owner's fence, and the hold now says so (P4) — nothing else is
    // written by the old owner.
    expect(after.slice(countBefore).map((e) => e.event)).toEqual([
      expect.objectContaining({ type: "call.completed", callId: `${runId}/0`, result: "thought" }),
      expect.objectContaining({
        type: "run.held",
        reasons: [expect.objectContaining({ callId: `${runId}/0`, code: "decision-needed" })],
      }),
    ]);
    // The effect after the paused call never ran.
    expect(countOf(witness, "p-slow")).toBe(0);
    await other.close();
  }, 60_000);
});
