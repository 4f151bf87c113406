import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { runStreamId } from "../../src/events/index.js";
import { defineAgent, defineTool, InputConflict, openRuntime } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** A payment agent whose every real effect lands in `effects`. */
const givenPayments = () => {
  const effects: string[] = [];
  const pay = defineTool({
    name: "pay",
    args: Schema.Struct({ amount: Schema.Number }),
    run: async ({ amount }) => {
      effects.push(`paid ${amount}`);
      return "ok";
    },
  });
  const agent = defineAgent({
    name: "payer",
    version: "1",
    run: async (turn, input: { amount: number }) => turn.tool(pay, input),
  });
  return { effects, pay, agent };
};

/** `holdfast prune --keep-runs 0 --keep-days 0`, from another connection. */
const pruneEverything = async (db: string) => {
  const maintenance = LibsqlJournal.open(db);
  try {
    return await maintenance.prune({ keepRuns: 0, keepDays: 0 });
  } finally {
    await maintenance.close();
  }
};

describe("retention keeps admissions (law 6)", () => {
  it("F6: the same (chatId, inputId, content) re-sent after its run was pruned is the same run, reused, and runs nothing again", async () => {
    const db = join(tempDir(), "journal.db");
    const { effects, pay, agent } = givenPayments();
    const rt = await openRuntime({ store: db, agents: [agent], tools: [pay] });
    try {
      const first = await rt.submit({
        chatId: "c",
        inputId: "msg-1",
        agent: "payer",
        content: { amount: 10 },
      });
      await first.result;
      const completed = (await rt.events(first.runId)).at(-1)?.event;
      expect(completed?.type).toBe("run.completed");
      const report = await pruneEverything(db);
      expect(report.pruned.map((r) => r.runId)).toEqual([first.runId]);

      // A queue redelivery, a client retry, a double click on an old message.
      const again = await rt.submit({
        chatId: "c",
        inputId: "msg-1",
        agent: "payer",
        content: { amount: 10 },
      });
      expect(again.reused).toBe(true);
      expect(again.runId).toBe(first.runId);
      // The result says what became of it: pruned, with how it ended and its output's digest.
      expect(await again.result).toMatchObject({
        status: "pruned",
        runId: first.runId,
        finalStatus: "completed",
        outputDigest: (completed as { outputDigest: string }).outputDigest,
      });
      expect(effects).toEqual(["paid 10"]);
      expect(await rt.events(first.runId)).toEqual([]);

      // Other content under the same ids is refused, as before the prune.
      await expect(
        rt.submit({ chatId: "c", inputId: "msg-1", agent: "payer", content: { amount: 11 } }),
      ).rejects.toBeInstanceOf(InputConflict);
      expect(effects).toEqual(["paid 10"]);

      // What a re-sender is told: the run's final status and output digest, and when it was pruned.
      const journal = LibsqlJournal.open(db);
      try {
        expect(await journal.prunedRun(first.runId)).toEqual({
          runId: first.runId,
          chatId: "c",
          status: "completed",
          outputDigest: completed?.type === "run.completed" ? completed.outputDigest : "?",
          prunedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        });
        expect(await journal.readStream(runStreamId(first.runId))).toEqual([]);
        expect((await auditJournal(journal)).findings).toEqual([]);
      } finally {
        await journal.close();
      }
    } finally {
      await rt.close();
    }
  });

  it("F6: retention on open (openRuntime({ retention })) does not reopen inputs either", async () => {
    const db = join(tempDir(), "journal.db");
    const { effects, pay, agent } = givenPayments();
    const before = await openRuntime({ store: db, agents: [agent], tools: [pay] });
    const first = await before.submit({
      chatId: "c",
      inputId: "msg-1",
      agent: "payer",
      content: { amount: 5 },
    });
    await first.result;
    await before.close();

    const after = await openRuntime({
      store: db,
      agents: [agent],
      tools: [pay],
      retention: { keepRuns: 0, keepDays: 0 },
    });
    try {
      expect(after.retention?.pruned.map((r) => r.runId)).toEqual([first.runId]);
      const again = await after.submit({
        chatId: "c",
        inputId: "msg-1",
        agent: "payer",
        content: { amount: 5 },
      });
      expect(again).toMatchObject({ runId: first.runId, reused: true });
      await again.result.catch(() => undefined);
      expect(effects).toEqual(["paid 5"]);
    } finally {
      await after.close();
    }
  });
});
