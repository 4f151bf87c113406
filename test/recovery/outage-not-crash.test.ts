import { appendFileSync } from "node:fs";
import { Schema } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { summarizeEvent } from "../../src/adapters/surfaces/cli/eventFormat.js";
import { runPage } from "../../src/adapters/surfaces/http/pages.js";
import { runView } from "../../src/adapters/surfaces/http/views.js";
import { type AnyEvent, type RecordedEvent, RunInterrupted } from "../../src/events/index.js";
import { defineAgent, defineTool } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { Engine } from "../../src/runtime/engine.js";
import { interruptionsSinceProgress } from "../../src/runtime/recover.js";
import { type PrivatePg, startPrivatePg } from "../support/privatePg.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

/*
 * Issue 35 / decision 0086: a journal outage is not a crash. A worker whose own execution stopped
 * because the journal could not be written, and which re-opens the run itself, records the
 * interruption with `cause: "journal-unavailable"`, and the crash-loop cap does not count it.
 */

let at = 0;
const recorded = (event: AnyEvent): RecordedEvent => {
  at++;
  return {
    streamId: "run-r",
    version: at,
    position: at,
    eventId: `e${at}`,
    recordedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, at)).toISOString(),
    prevHash: "",
    hash: "",
    schemaVersion: 1,
    event,
  };
};
const interrupted = (by: string, cause?: "journal-unavailable"): RecordedEvent =>
  recorded({
    type: "run.interrupted",
    runId: "r",
    detectedBy: by,
    inDoubt: [],
    ...(cause ? { cause } : {}),
  });

describe("interruptionsSinceProgress and the interruption's cause", () => {
  it("counts interruptions without a cause (an owner that died or went away) and skips those recorded for a journal outage, since the last progress", () => {
    const events = [
      interrupted("w1"),
      recorded({
        type: "call.completed",
        runId: "r",
        callId: "r:1",
        attempt: 1,
        result: null,
        resultDigest: "d",
      }),
      interrupted("w1", "journal-unavailable"),
      interrupted("w2"),
      interrupted("w1", "journal-unavailable"),
      interrupted("w1", "journal-unavailable"),
      interrupted("w3"),
    ];
    const found = interruptionsSinceProgress(events);
    expect(found.map((i) => i.by)).toEqual(["w2", "w3"]);
    expect(found.map((i) => i.at)).toEqual([events[3]!.recordedAt, events[6]!.recordedAt]);
    // Only journal outages since the last progress: nothing counts toward the cap.
    expect(interruptionsSinceProgress(events.slice(0, 3))).toEqual([]);
  });

  it("a run.interrupted written before the cause existed decodes; a cause it does not know is refused", () => {
    const decode = Schema.decodeUnknownSync(RunInterrupted);
    const old = { type: "run.interrupted", runId: "r", detectedBy: "w1", inDoubt: ["r:1"] };
    expect(decode(old)).toEqual(old);
    expect(decode({ ...old, cause: "journal-unavailable" }).cause).toBe("journal-unavailable");
    expect(() => decode({ ...old, cause: "disk-on-fire" })).toThrow();
  });
});

/*
 * The journal (a private PostgreSQL server: the shared one serves other files and must stay up)
 * goes away while a call is running, more times than the crash-loop cap, with no outcome in
 * between: each time the execution stops for the journal, the same live worker re-opens the run,
 * the in-doubt call (replay, allow-listed) runs again, and the run is never held crash-loop.
 */
let server: PrivatePg;
beforeAll(async () => {
  server = await startPrivatePg();
}, 120_000);
afterAll(async () => {
  await server?.stop();
});
const tempDir = useTempDir();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const until = async (what: string, test: () => boolean | Promise<boolean>, ms = 30_000) => {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await test()) return;
    } catch {
      // The journal may still be coming back.
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
};

const OUTAGES = 4;

describe("a journal outage is not a crash (decision 0086)", () => {
  it(`the journal goes away ${OUTAGES} times (more than the cap) under a running call while its worker lives: every interruption is recorded for the journal, the run is never held crash-loop, and it completes`, async () => {
    const witness = `${tempDir()}/witness`;
    // Each invocation of `slow` waits until the test lets it return.
    const gates: Array<() => void> = [];
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({ label: Schema.String }),
      disposition: "replay",
      run: async ({ label }) => {
        appendFileSync(witness, `${label}\n`);
        await new Promise<void>((resolve) => gates.push(resolve));
        return { label };
      },
    });
    const agent = defineAgent({
      name: "outage",
      version: "1",
      run: async (turn) => {
        await turn.tool("slow", { label: "first" });
        await turn.tool("slow", { label: "second" });
        return "done";
      },
    });
    const journal = await PostgresJournal.open(server.url("outages"), { retry: { attempts: 10 } });
    const engine = new Engine({
      journal,
      agents: [agent],
      tools: [slow],
      allowlist: { slow: slow.pin },
      secrets: {},
      workerId: "w-outage",
      leaseMs: 3_000,
      recoveryConcurrency: 4,
      newRunId: () => "run-outage",
      isWorkerDead: () => false,
    });
    try {
      const handle = await engine.submit({ chatId: "c", inputId: "i", agent: "outage", content: null });
      const runId = handle.runId;
      handle.result.catch(() => undefined);
      for (let outage = 0; outage < OUTAGES; outage++) {
        await until(`invocation ${outage + 1} of the call`, () => gates.length === outage + 1);
        await server.kill();
        // The tool returns while the journal is away: its outcome cannot be written, the
        // execution stops for the journal and the call is left in doubt.
        gates[outage]!();
        await until(`the execution to stop (outage ${outage + 1})`, () => !engine.isLive(runId), 60_000);
        await server.start();
        // The worker's recovery passes (as `holdfast worker` runs them) re-open the run.
        let held: unknown[] = [];
        await until(
          `the run re-opened after outage ${outage + 1}`,
          async () => {
            if (engine.isLive(runId)) return true;
            const report = await engine.recover();
            held = [...report.held];
            return engine.isLive(runId) || held.length > 0;
          },
          60_000,
        );
        expect(held, `held after outage ${outage + 1}`).toEqual([]);
      }
      // The journal stays up now: the call returns, the next one runs, the run completes.
      await until("the last replay of the call", () => gates.length === OUTAGES + 1);
      gates[OUTAGES]!();
      await until("the second call", () => gates.length === OUTAGES + 2);
      gates[OUTAGES + 1]!();
      const result = await engine.wait(runId);
      expect(result.status).toBe("completed");

      const events = await journal.readStream(`run-${runId}`);
      const types = events.map((e) => e.event.type);
      expect(types).not.toContain("run.held");
      const interruptions = events.flatMap((e) => (e.event.type === "run.interrupted" ? [e.event] : []));
      expect(interruptions).toHaveLength(OUTAGES);
      for (const event of interruptions) {
        expect(event.detectedBy).toBe("w-outage");
        expect(event.cause).toBe("journal-unavailable");
      }
      // The in-doubt call was replayed once per outage (allow-listed), the second call ran once.
      expect(witnessLines(witness)).toEqual([...Array(OUTAGES + 1).fill("first"), "second"]);
      expect((await auditJournal(journal)).findings).toEqual([]);
      // The CLI's summary and the panel's timeline say journal outage, not a process that died.
      expect(summarizeEvent(interruptions[0]!)).toBe(
        "stopped for a journal outage, re-opened by w-outage; in doubt: #0",
      );
      const session = { id: "s", csrf: "c", name: "ada", expiresAt: Date.now() + 60_000 };
      const page = String(await runPage(await runView(journal, runId), session));
      expect(page.match(/timeline-mark gap" aria-hidden="false">journal unavailable/g)).toHaveLength(OUTAGES);
      expect(page).not.toContain("process died");
    } finally {
      for (const open of gates) open();
      await engine.close().catch(() => undefined);
    }
  }, 300_000);

  it("an interruption another worker finds stays counted, and so does the stopped worker's own once another worker's claim came in between", async () => {
    const gates: Array<() => void> = [];
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({ label: Schema.String }),
      disposition: "replay",
      run: async ({ label }) => {
        await new Promise<void>((resolve) => gates.push(resolve));
        return { label };
      },
    });
    const agent = defineAgent({
      name: "outage",
      version: "1",
      run: async (turn) => {
        await turn.tool("slow", { label: "only" });
        return "done";
      },
    });
    const journalA = await PostgresJournal.open(server.url("handover"), { retry: { attempts: 10 } });
    const journalB = await PostgresJournal.open(server.url("handover"), { retry: { attempts: 10 } });
    const engineOf = (journal: PostgresJournal, workerId: string) =>
      new Engine({
        journal,
        agents: [agent],
        tools: [slow],
        allowlist: { slow: slow.pin },
        secrets: {},
        workerId,
        leaseMs: 3_000,
        recoveryConcurrency: 4,
        newRunId: () => "run-handover",
        // Each takes the other's run over at once, as when its owner is known dead.
        isWorkerDead: (id) => id !== workerId,
      });
    const a = engineOf(journalA, "w-a");
    const b = engineOf(journalB, "w-b");
    const outage = async (owner: Engine, runId: string, invocation: number) => {
      await until(`invocation ${invocation}`, () => gates.length === invocation);
      await server.kill();
      gates[invocation - 1]!();
      await until("the execution to stop", () => !owner.isLive(runId), 60_000);
      await server.start();
    };
    const reopen = (by: Engine, runId: string) =>
      until(
        "the run re-opened",
        async () => {
          if (!by.isLive(runId)) await by.recover();
          return by.isLive(runId);
        },
        60_000,
      );
    try {
      const handle = await a.submit({ chatId: "c", inputId: "i", agent: "outage", content: null });
      const runId = handle.runId;
      handle.result.catch(() => undefined);
      // w-a stops for the journal; w-b re-opens the run: it cannot know why w-a went away.
      await outage(a, runId, 1);
      await reopen(b, runId);
      // w-b stops for the journal; w-a re-opens the run: w-a's own stop is not why, w-b was in between.
      await outage(b, runId, 2);
      await reopen(a, runId);
      await until("the replayed call", () => gates.length === 3);
      gates[2]!();
      expect((await a.wait(runId)).status).toBe("completed");
      const interruptions = (await journalA.readStream(`run-${runId}`)).flatMap((e) =>
        e.event.type === "run.interrupted" ? [e.event] : [],
      );
      expect(interruptions.map((e) => [e.detectedBy, e.cause ?? null])).toEqual([
        ["w-b", null],
        ["w-a", null],
      ]);
    } finally {
      for (const open of gates) open();
      await a.close().catch(() => undefined);
      await b.close().catch(() => undefined);
    }
  }, 300_000);
});
