import { appendFileSync } from "node:fs";
import { Schema } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import type { RecordedEvent } from "../../src/events/index.js";
import { defineAgent, defineTool } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { Engine } from "../../src/runtime/engine.js";
import type { RunResult } from "../../src/runtime/execute.js";
import { subscribe } from "../../src/runtime/subscribe.js";
import { type PrivatePg, startPrivatePg } from "../support/privatePg.js";
import { useTempDir } from "../support/tmp.js";
import { countOf, witnessLines } from "../support/witness.js";

/*
 * Issue 35, item 2: PostgreSQL restarts under a running worker — a fast restart (sessions ended
 * cleanly) and a SIGKILL of the postmaster (crash recovery). On a private server: the shared one at
 * 127.0.0.1:5432 serves other test files at the same time and must never go down.
 */

let server: PrivatePg;
beforeAll(async () => {
  server = await startPrivatePg();
}, 120_000);
afterAll(async () => {
  await server?.stop();
});
const tempDir = useTempDir();

const STEPS = 4;

const makeTools = (witness: string) => [
  defineTool({
    name: "record",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }) => {
      appendFileSync(witness, `${label}\n`);
      // Long enough that a restart falls between some intent and its outcome.
      await new Promise((r) => setTimeout(r, 150));
      return { label };
    },
  }),
];

const steps = defineAgent({
  name: "steps",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    for (let i = 0; i < STEPS; i++) await turn.tool("record", { label: `${input.prefix}-${i}` });
    return "done";
  },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("PostgreSQL restarts under a running worker", () => {
  it("a fast restart and a SIGKILL of the postmaster: the worker reconnects and goes on; no effect twice, no run failed, subscribers see every event once, the audit is clean", async () => {
    const witness = `${tempDir()}/witness`;
    const journal = await PostgresJournal.open(server.url("restarts"), { retry: { attempts: 10 } });
    const engine = new Engine({
      journal,
      agents: [steps],
      tools: makeTools(witness),
      secrets: {},
      workerId: "w-restart",
      leaseMs: 3_000,
      recoveryConcurrency: 4,
      newRunId: (() => {
        let n = 0;
        return () => `run-${++n}`;
      })(),
      isWorkerDead: () => false,
    });
    // A subscriber from the start, through both restarts.
    const seen: RecordedEvent[] = [];
    const subscription = subscribe(journal, { pollMs: 50 });
    const reading = (async () => {
      for await (const event of subscription) seen.push(event);
    })();
    const results: Array<Promise<RunResult>> = [];
    const submit = async (n: number) => {
      const handle = await engine.submit({
        chatId: `c${n}`,
        inputId: "i",
        agent: "steps",
        content: { prefix: `r${n}` },
      });
      results.push(
        handle.result.catch((error: unknown) => ({ status: "threw", error }) as unknown as RunResult),
      );
      return handle.runId;
    };
    const runIds: string[] = [];
    for (let n = 1; n <= 4; n++) runIds.push(await submit(n));
    await sleep(250);
    await server.restartFast();
    for (let n = 5; n <= 8; n++) runIds.push(await submit(n));
    await sleep(250);
    await server.killAndStart();
    // The worker's recovery passes (as `holdfast worker` runs them) pick up what the outages left.
    const settled = new Set(["completed", "held"]);
    let rows: Array<{ status: string }> = [];
    for (let pass = 0; pass < 150; pass++) {
      try {
        const report = await engine.recover();
        await report.done.catch(() => undefined);
        rows = await Promise.all(
          runIds.map(async (runId) => (await engine.run(runId)) ?? { status: "missing" }),
        );
        if (rows.every((r) => settled.has(r.status))) break;
      } catch {
        // PostgreSQL still coming back: the next pass tries again.
      }
      await sleep(200);
    }
    // No run failed for an outage; an execution that ended in one left the run to recovery, or threw
    // JournalUnavailable (its end could not be appended), never anything else.
    const ended = await Promise.all(results);
    expect(ended.filter((r) => r.status === "failed")).toEqual([]);
    for (const r of ended as Array<{ status: string; error?: { _tag?: string } }>)
      if (r.status === "threw") expect(r.error?._tag, String(r.error)).toBe("JournalUnavailable");

    expect(rows.map((r) => r.status).filter((s) => !settled.has(s))).toEqual([]);
    // No effect twice; a completed run did each of its steps exactly once.
    const lines = witnessLines(witness);
    expect(lines.length).toBe(new Set(lines).size);
    for (const [i, runId] of runIds.entries()) {
      if (rows[i]!.status !== "completed") continue;
      for (let s = 0; s < STEPS; s++) expect(countOf(witness, `r${i + 1}-${s}`), runId).toBe(1);
    }
    // A held run is held only for a call in doubt (an intent whose outcome the outage took).
    for (const [i, runId] of runIds.entries()) {
      if (rows[i]!.status !== "held") continue;
      const events = await journal.readStream(`run-${runId}`);
      const held = events.filter((e) => e.event.type === "run.held").at(-1)!.event as unknown as {
        reasons: Array<{ code: string }>;
      };
      expect(
        held.reasons.map((r) => r.code).every((c) => c === "in-doubt" || c === "indefinite-failure"),
      ).toBe(true);
    }
    // The subscriber saw every event, once, in order.
    const all = await journal.readAll({ after: 0, limit: 100_000 });
    for (let i = 0; i < 100 && seen.length < all.length; i++) await sleep(50);
    expect(seen.map((e) => e.position)).toEqual(all.map((e) => e.position));
    await subscription.return?.();
    await reading;
    expect((await auditJournal(journal)).findings).toEqual([]);
    await engine.close();
  }, 120_000);
});
