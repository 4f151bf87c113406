import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { runWorker } from "../support/processes.js";
import { tableAgent } from "../support/table-tools.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** A promise and the function that resolves it. */
const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
};

describe("recovery while this worker's own runs finish", () => {
  it("a run that finishes while a recovery pass is under way is left alone by that pass, not resumed", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    // An earlier process died with a `reconciled` call in doubt: the first active run.
    const crashed = await runWorker({
      HF_DB: db,
      HF_WITNESS: join(dir, "witness.txt"),
      HF_ACTION: "submit",
      HF_AGENT: "table",
      HF_CHAT: "old",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "reconciled",
    });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");

    // Here, its reconciler cannot tell, and answers only when the test lets it.
    const inReconciler = gate();
    const answer = gate();
    const reconciled = defineTool({
      name: "reconciled",
      args: Schema.Struct({ label: Schema.String }),
      reconciler: {
        // The name the crashed process recorded in the intent (test/support/table-tools.ts).
        name: "witness-file",
        check: async () => {
          inReconciler.open();
          await answer.opened;
          return { outcome: "unknown", evidence: { reason: "cannot tell" } };
        },
      },
      run: async () => ({ sent: true }),
    });
    const finish = gate();
    const waiting = defineTool({
      name: "waiting",
      args: Schema.Struct({}),
      run: async () => {
        await finish.opened;
        return { done: true };
      },
    });
    const agent = defineAgent({
      name: "waits",
      version: "1",
      run: async (turn) => turn.tool(waiting, {}),
    });
    // It has the crashed run's agent: only a runtime that can execute a run recovers it.
    const runtime = await openRuntime({
      store: db,
      agents: [agent, tableAgent],
      tools: [reconciled, waiting],
      recovery: { onOpen: false },
    });
    try {
      const live = await runtime.submit({ chatId: "new", inputId: "i", agent: "waits", content: null });
      // The pass lists both active runs, then stops in the old run's reconciler...
      const pass = runtime.recover();
      await Promise.race([
        inReconciler.opened,
        pass.then(() => Promise.reject(new Error("the pass ended early"))),
      ]);
      // ...while this worker's live run completes and lets its claim go.
      finish.open();
      expect((await live.result).status).toBe("completed");
      const reader = LibsqlJournal.open(db);
      try {
        while (await reader.currentClaim(live.runId)) await new Promise((r) => setTimeout(r, 10));
      } finally {
        await reader.close();
      }
      answer.open();

      const report = await pass;
      expect(report.held.map((h) => h.runId)).toHaveLength(1);
      expect(report.interrupted).not.toContain(live.runId);
      expect(report.resumed).toEqual([]);
      const types = (await runtime.events(live.runId)).map((e) => e.event.type);
      expect(types.at(-1)).toBe("run.completed");
      const reader2 = LibsqlJournal.open(db);
      try {
        expect(await reader2.currentClaim(live.runId)).toBeNull();
      } finally {
        await reader2.close();
      }
    } finally {
      await runtime.close();
    }
  }, 60_000);
});

describe("recovery by another worker while runs are being submitted", () => {
  it("a run just submitted is never found active and unowned: another worker's recovery leaves it to its submitter", async () => {
    await requirePg();
    const store = pgUrl(schemas.fresh());
    const agent = defineAgent({
      name: "quick",
      version: "1",
      run: async (turn, input: { n: number }) =>
        turn.model("think", input, async () => ({ thought: input.n })),
    });
    const submitter = await openRuntime({ store, agents: [agent], recovery: { onOpen: false } });
    const other = await openRuntime({ store, agents: [agent], recovery: { onOpen: false } });
    try {
      let submitting = true;
      const recovering = (async () => {
        const found: string[] = [];
        while (submitting) {
          const report = await other.recover();
          found.push(...report.interrupted);
          await report.done;
        }
        return found;
      })();
      const results = [];
      for (let n = 0; n < 40; n++) {
        const handle = await submitter.submit({
          chatId: `chat-${n}`,
          inputId: "i",
          agent: "quick",
          content: { n },
        });
        results.push(
          await handle.result.catch((error: unknown) => ({ status: `rejected: ${String(error)}` })),
        );
      }
      submitting = false;
      expect(await recovering).toEqual([]);
      expect(results.map((r) => r.status)).toEqual(results.map(() => "completed"));
    } finally {
      await other.close();
      await submitter.close();
    }
  }, 60_000);
});

describe("taking over the runs of dead workers", () => {
  it("a slow reconciler on one interrupted run does not hold up the take-over of the others", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const crash = (chat: string, call: string) =>
      runWorker({
        HF_DB: db,
        HF_WITNESS: join(dir, "witness.txt"),
        HF_ACTION: "submit",
        HF_AGENT: "table",
        HF_CHAT: chat,
        HF_INPUT: "i",
        HF_PREFIX: chat,
        HOLDFAST_CRASH_AT: "after-intent",
        HOLDFAST_CRASH_CALL: call,
        // The second process must leave the first one's run alone.
        HF_RECOVER: "0",
      });
    // First in line: a run whose in-doubt call needs its reconciler; then one that is simply held.
    expect((await crash("first", "reconciled")).signal).toBe("SIGKILL");
    expect((await crash("second", "record")).signal).toBe("SIGKILL");

    const inReconciler = gate();
    const answer = gate();
    const reconciled = defineTool({
      name: "reconciled",
      args: Schema.Struct({ label: Schema.String }),
      reconciler: {
        name: "witness-file",
        check: async () => {
          inReconciler.open();
          await answer.opened;
          return { outcome: "unknown", evidence: { reason: "cannot tell" } };
        },
      },
      run: async () => ({ sent: true }),
    });
    const runtime = await openRuntime({
      store: db,
      agents: [tableAgent],
      tools: [reconciled],
      recovery: { onOpen: false },
    });
    const reader = LibsqlJournal.open(db);
    try {
      const pass = runtime.recover();
      await Promise.race([
        inReconciler.opened,
        pass.then(() => Promise.reject(new Error("the pass ended early"))),
      ]);
      const second = (await reader.admission("second", "i"))!.runId;
      // While the first run's reconciler is still thinking, the second run is already taken over.
      const deadline = Date.now() + 5_000;
      let types: string[] = [];
      while (!types.includes("run.held") && Date.now() < deadline) {
        types = (await reader.readStream(`run-${second}`)).map((e) => e.event.type);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(types).toEqual(expect.arrayContaining(["run.claimed", "run.interrupted", "run.held"]));
      answer.open();
      const report = await pass;
      expect(report.held.map((h) => h.runId).sort()).toEqual(
        [(await reader.admission("first", "i"))!.runId, second].sort(),
      );
      // The report keeps the order of the active runs.
      expect(report.interrupted[0]).toBe((await reader.admission("first", "i"))!.runId);
    } finally {
      answer.open();
      await reader.close();
      await runtime.close();
    }
  }, 60_000);
});
