import { appendFileSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { ActiveRunExists, defineAgent, openRuntime } from "../../src/index.js";
import { lineOf, runWorker, startWorker } from "../support/processes.js";
import { makeTableTools } from "../support/table-tools.js";
import { useTempDir } from "../support/tmp.js";
import { makeStepsAgent, witnessLines } from "../support/witness.js";

const tempDir = useTempDir();

/** The types of every event in the journal at `db`, in log order. */
const eventTypes = async (db: string): Promise<string[]> => {
  const journal = LibsqlJournal.open(db);
  try {
    return (await journal.readAll({ after: 0, limit: 10_000 })).map((e) => e.event.type);
  } finally {
    await journal.close();
  }
};

describe("resuming interrupted runs", () => {
  it("five interrupted runs resume with never more than two at once (observed)", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const worker = startWorker({ HF_DB: db, HF_WITNESS: witness, HF_ACTION: "submit-many", HF_COUNT: "5" });
    await worker.waitFor("gated", 5);
    await worker.kill();

    let running = 0;
    let peak = 0;
    const log = join(dir, "concurrency.txt");
    // The same agent, re-executed: its first call is served from the journal, then it works a while.
    const gated = defineAgent({
      name: "gated",
      version: "1",
      run: async (turn, input: { prefix: string }) => {
        running++;
        peak = Math.max(peak, running);
        appendFileSync(log, `start ${input.prefix} ${running}\n`);
        await turn.tool("record", { label: `${input.prefix}-gate` });
        await new Promise((r) => setTimeout(r, 150));
        running--;
        return input.prefix;
      },
    });
    const rt = await openRuntime({
      store: db,
      agents: [gated],
      tools: makeTableTools(witness).all,
      recovery: { concurrency: 2 },
    });
    const report = rt.recovery as typeof rt.recovery & { done: Promise<Array<{ status: string }>> };
    expect(report.resumed).toHaveLength(5);
    const results = await report.done;
    expect(results.map((r) => r.status)).toEqual(Array(5).fill("completed"));
    expect(peak).toBe(2);
    // Each first call ran once, before the kill; re-execution served it from the journal.
    expect(witnessLines(witness).filter((l) => l.endsWith("-gate"))).toHaveLength(5);
    await rt.close();
  });

  it("a kill right after run.interrupted, nothing in doubt: the interruption and run.resumed were one commit; the next start records its own interruption and repeats no effect", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const base = { HF_DB: db, HF_WITNESS: witness, HF_CHAT: "c", HF_INPUT: "i", HF_PREFIX: "p" };
    const first = await runWorker({
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "record",
    });
    expect(first.signal).toBe("SIGKILL");
    const second = await runWorker({ ...base, HF_ACTION: "recover", HOLDFAST_CRASH_AT: "after-interrupted" });
    expect(second.signal).toBe("SIGKILL");
    // Killed right after the commit holding run.interrupted: run.resumed is in it (decision 0029).
    expect((await eventTypes(db)).slice(-2)).toEqual(["run.interrupted", "run.resumed"]);
    const third = await runWorker({ ...base, HF_ACTION: "recover" });
    expect(third.code, third.stderr).toBe(0);
    const recovered = (lineOf(third, "recovered")?.results ?? []) as Array<{ status: string }>;
    expect(recovered.map((r) => r.status)).toEqual(["completed"]);

    const types = await eventTypes(db);
    // Each start found the run running with no owner: an interruption each, each resumed at once.
    const interruptions = types.flatMap((t, i) => (t === "run.interrupted" ? [i] : []));
    expect(interruptions).toHaveLength(2);
    for (const i of interruptions) expect(types[i + 1]).toBe("run.resumed");
    expect(types.filter((t) => t === "run.resumed")).toHaveLength(2);
    expect(types.filter((t) => t === "call.intended")).toHaveLength(3);
    expect(witnessLines(witness)).toEqual(["p-a", "p-b", "p-c"]);
  });

  it("a kill right after run.interrupted, a reconciler to ask: the interruption was on record alone; the next start records none again and the effect runs once", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const base = {
      HF_DB: db,
      HF_WITNESS: witness,
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HF_AGENT: "table",
    };
    const first = await runWorker({
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "reconciled",
    });
    expect(first.signal).toBe("SIGKILL");
    const second = await runWorker({ ...base, HF_ACTION: "recover", HOLDFAST_CRASH_AT: "after-interrupted" });
    expect(second.signal).toBe("SIGKILL");
    // The interruption is committed before the adapter is asked: nothing after it yet.
    expect((await eventTypes(db)).at(-1)).toBe("run.interrupted");
    const third = await runWorker({ ...base, HF_ACTION: "recover" });
    expect(third.code, third.stderr).toBe(0);
    const recovered = (lineOf(third, "recovered")?.results ?? []) as Array<{ status: string }>;
    expect(recovered.map((r) => r.status)).toEqual(["completed"]);

    const types = await eventTypes(db);
    // One interruption recorded although recovery started twice; one verdict, one resumption.
    expect(types.filter((t) => t === "run.interrupted")).toHaveLength(1);
    expect(types.filter((t) => t === "call.reconciled")).toHaveLength(1);
    expect(types.filter((t) => t === "run.resumed")).toHaveLength(1);
    expect(witnessLines(witness).filter((l) => l.startsWith("sent p-sent"))).toHaveLength(1);
  });

  it("a run with a corrupt checkpoint needs attention and blocks its chat; other runs recover and complete", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const crash = {
      HOLDFAST_CRASH_AT: "before-intent",
      HOLDFAST_CRASH_CALL: "record",
      HOLDFAST_CRASH_SKIP: "1",
    };
    // Two runs, each killed after its checkpoint (before its second call).
    for (const chat of ["bad", "good"]) {
      const r = await runWorker({
        HF_DB: db,
        HF_WITNESS: witness,
        HF_CHAT: chat,
        HF_INPUT: "i",
        HF_PREFIX: chat,
        HF_ACTION: "submit",
        HF_RECOVER: "0",
        ...crash,
      });
      expect(r.signal).toBe("SIGKILL");
    }
    // Someone edits the "bad" run's checkpoint behind holdfast's back.
    const raw = new Database(db);
    raw.exec("DROP TRIGGER events_are_immutable");
    raw.exec(
      `UPDATE events SET data = replace(data, '"after":"a"', '"after":"z"') WHERE type = 'checkpoint.saved' AND data LIKE '%"chatId":"bad"%'`,
    );
    raw.close();

    const rt = await openRuntime({
      store: db,
      agents: [makeStepsAgent()],
      tools: makeTableTools(witness).all,
    });
    const report = rt.recovery as typeof rt.recovery & {
      done: Promise<Array<{ status: string; runId: string }>>;
    };
    expect(report.needsAttention).toHaveLength(1);
    expect(report.needsAttention[0]?.reason).toMatch(/run-.*@\d+/);
    const results = await report.done;
    expect(results.map((r) => r.status)).toEqual(["completed"]);
    expect(witnessLines(witness).filter((l) => l.startsWith("good-"))).toEqual([
      "good-a",
      "good-b",
      "good-c",
    ]);
    expect(witnessLines(witness).filter((l) => l.startsWith("bad-"))).toEqual(["bad-a"]);

    const bad = report.needsAttention[0]!.runId;
    const row = (await rt.runs()).find((r) => r.runId === bad);
    expect(row).toMatchObject({ status: "held", needsAttention: true });
    await expect(
      rt.submit({ chatId: "bad", inputId: "next", agent: "steps", content: { prefix: "n" } }),
    ).rejects.toBeInstanceOf(ActiveRunExists);
    await rt.close();
  });
});
