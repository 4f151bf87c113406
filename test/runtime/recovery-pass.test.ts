import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { type AnyEvent, digestOf, fingerprintOf } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { CURRENT_RUN_MACHINE } from "../../src/machines/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/**
 * A tool whose reconciler takes a while and cannot tell; it counts how many are asked at once.
 * `whileFirst` runs inside the first check, and no check answers before it has finished.
 */
const slowlyUnsure = (whileFirst?: () => Promise<void>) => {
  let first: Promise<void> | undefined;
  const asked = { now: 0, peak: 0, total: 0 };
  const tool = defineTool({
    name: "t",
    args: Schema.Struct({ n: Schema.Number }),
    reconciler: {
      name: "proof",
      check: async () => {
        asked.now += 1;
        asked.total += 1;
        asked.peak = Math.max(asked.peak, asked.now);
        if (asked.total === 1) first = whileFirst?.();
        await first;
        await sleep(20);
        asked.now -= 1;
        return { outcome: "unknown" as const, evidence: { asked: true } };
      },
    },
    run: async () => "done",
  });
  return { tool, asked };
};

/**
 * `runs` runs killed right after an intent to call `tool`, which has a reconciler; each made
 * `finished` calls of it before (two events each).
 */
const interruptedRuns = async (
  db: string,
  runs: number,
  tool: ReturnType<typeof slowlyUnsure>["tool"],
  finished = 0,
) => {
  const journal = LibsqlJournal.open(db);
  const intent = (runId: string, seq: number): AnyEvent => ({
    type: "call.intended",
    runId,
    callId: `${runId}/${seq}`,
    seq,
    attempt: 1,
    kind: "tool",
    name: tool.name,
    args: { n: seq },
    fingerprint: fingerprintOf(journal.fingerprintKey, { kind: "tool", name: tool.name, args: { n: seq } }),
    disposition: "reconcile",
    pin: tool.pin,
    reconciler: "proof",
    idempotencyKey: `${runId}/${seq}#1`,
  });
  for (let r = 0; r < runs; r++) {
    const runId = `r${r}`;
    const calls = Array.from({ length: finished }, (_, seq): AnyEvent[] => [
      intent(runId, seq),
      {
        type: "call.completed",
        runId,
        callId: `${runId}/${seq}`,
        attempt: 1,
        result: "done",
        resultDigest: digestOf("done"),
      },
    ]).flat();
    await journal.append({
      streamId: `run-${runId}`,
      expectedVersion: "no-stream",
      events: [
        {
          type: "run.admitted",
          runId,
          chatId: `c${r}`,
          inputId: "i",
          inputDigest: "0".repeat(64),
          agent: { name: "a", version: "1" },
          machine: CURRENT_RUN_MACHINE,
          input: null,
        },
        ...calls,
        intent(runId, finished),
      ],
    });
  }
  await journal.close();
};

describe("a recovery pass", () => {
  it("classifies many runs at once but asks at most eight reconcilers at a time, and holds each run they cannot explain", async () => {
    const db = join(tempDir(), "j.db");
    let rt: Awaited<ReturnType<typeof openRuntime>> | undefined;
    let interruptedMeanwhile = 0;
    // Before any reconciler answers, the runs whose interruption is on record: the pass records a
    // run's interruption before it asks an adapter (decision 0029), so these are the runs in flight.
    const { tool, asked } = slowlyUnsure(async () => {
      await sleep(50);
      interruptedMeanwhile = (await rt!.runs()).filter((run) => run.status === "interrupted").length;
    });
    await interruptedRuns(db, 40, tool);
    const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(tool, { n: 0 }) });
    rt = await openRuntime({ store: db, agents: [agent], tools: [tool], recovery: { onOpen: false } });
    try {
      const report = await rt.recover();
      expect(report.interrupted).toHaveLength(40);
      expect(report.held).toHaveLength(40);
      expect(new Set(report.held.map((h) => h.reasons[0]?.code))).toEqual(new Set(["reconcile-unknown"]));
      // More runs in flight than the eight the pass once classified at once.
      expect(interruptedMeanwhile).toBe(32);
      expect(asked.total).toBe(40);
      // Other systems are asked no harder than before the pass classified more runs at once…
      expect(asked.peak).toBeLessThanOrEqual(8);
      // …and still in parallel: 40 slow answers one at a time would be a pass of 40 × 20 ms.
      expect(asked.peak).toBe(8);
      for (let r = 0; r < 40; r++) expect((await rt.run(`r${r}`))?.status).toBe("held");
    } finally {
      await rt.close();
    }
  });

  it("classifies long runs fewer at a time: the events it holds stay within its budget", async () => {
    const db = join(tempDir(), "j.db");
    const { tool, asked } = slowlyUnsure();
    // 12 runs of 3,000 events: five of them (15,000 events) fit in the pass's 16,384, six do not.
    await interruptedRuns(db, 12, tool, 1499);
    const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(tool, { n: 0 }) });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [tool] });
    try {
      expect(rt.recovery.held).toHaveLength(12);
      expect(asked.total).toBe(12);
      expect(asked.peak).toBe(5);
    } finally {
      await rt.close();
    }
  });
});
