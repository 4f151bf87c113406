import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ActiveRunExists, defineAgent, openRuntime } from "../../src/index.js";
import { rowsOf, tamper } from "../audit/tamper.js";
import { lineOf, runWorker } from "../support/processes.js";
import { makeTableTools } from "../support/table-tools.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** The worker processes' "slow" agent: a model call, then a recorded step. */
const slow = defineAgent({
  name: "slow",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    await turn.model("think", { ms: 100 }, async () => "thought");
    return turn.tool("record", { label: `${input.prefix}-slow` });
  },
});

/** Two runs whose processes were killed right after their model call's intent (really, with SIGKILL). */
const twoInterruptedRuns = async (dir: string) => {
  const db = join(dir, "journal.db");
  const runIds: string[] = [];
  for (const chat of ["c1", "c2"]) {
    const killed = await runWorker({
      HF_DB: db,
      HF_WITNESS: join(dir, "witness.txt"),
      HF_ACTION: "submit",
      HF_AGENT: "slow",
      HF_HOLD_MS: "100",
      HF_CHAT: chat,
      HF_INPUT: "i",
      HF_PREFIX: chat,
      HF_RECOVER: "0",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "think",
    });
    expect(killed.signal).toBe("SIGKILL");
    runIds.push(lineOf(killed, "submitted")?.runId as string);
  }
  return { db, runIds: runIds as [string, string], tools: makeTableTools(join(dir, "witness.txt")).all };
};

describe("law 11 — corruption is surfaced, not repaired", () => {
  it("an undecodable event stops that run (needs attention, naming stream, version and reason) and keeps it active; other runs go on", async () => {
    const { db, runIds, tools } = await twoInterruptedRuns(tempDir());
    const [bad, good] = runIds;
    tamper(db, (raw) => {
      const intent = rowsOf(raw, `run-${bad}`).find((r) => r.type === "call.intended")!;
      raw.prepare("UPDATE events SET data = ? WHERE position = ?").run("{not json", intent.position);
    });
    const rt = await openRuntime({ store: db, agents: [slow], tools });
    expect(rt.recovery.needsAttention).toEqual([
      { runId: bad, reason: expect.stringMatching(new RegExp(`run-${bad}@2`)) },
    ]);
    // The other run recovers (its call was in doubt: it is held, not repeated).
    expect(rt.recovery.held.map((h) => h.runId)).toEqual([good]);
    // The damaged run stays active, so no new input slips past it on its chat.
    const refused = await rt
      .submit({ chatId: "c1", inputId: "i2", agent: "slow", content: { prefix: "x" } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ActiveRunExists);
    const row = (await rt.runs()).find((r) => r.runId === bad);
    expect(row).toMatchObject({ needsAttention: true });
    await rt.close();
  });

  it("a broken hash chain is found on recovery and flagged the same way; nothing is rewritten", async () => {
    const { db, runIds, tools } = await twoInterruptedRuns(tempDir());
    const [bad] = runIds;
    const before = tamper(db, (raw) => {
      const intent = rowsOf(raw, `run-${bad}`).find((r) => r.type === "call.intended")!;
      raw
        .prepare("UPDATE events SET data = replace(data, '\"ms\":100', '\"ms\":9') WHERE position = ?")
        .run(intent.position);
      return rowsOf(raw, `run-${bad}`).map((r) => r.data);
    });
    const rt = await openRuntime({ store: db, agents: [slow], tools });
    expect(rt.recovery.needsAttention.map((n) => [n.runId, /chain|hash/.test(n.reason)])).toEqual([
      [bad, true],
    ]);
    const after = tamper(db, (raw) => rowsOf(raw, `run-${bad}`).map((r) => r.data));
    // The stored rows are as they were (a hold may be added after them, never a fix).
    expect(after.slice(0, before.length)).toEqual(before);
    await rt.close();
  });
});
