/**
 * Records the golden logs: `npx tsx test/golden/record.ts [name…]`.
 *
 * Only scenarios named on the command line are recorded (a new scenario, or a new machine version).
 * Each scenario runs real runs (in this process, or in real worker processes killed with SIGKILL)
 * on a fresh temp journal, audits it (it must be clean), and writes beside each other:
 *   test/fixtures/logs/<name>.jsonl          one stored event envelope per line, position order
 *   test/fixtures/logs/<name>.expected.json  each run's status and machine context as folded now,
 *                                            and every projection row as the runtime stored it
 * The replay test (test/golden/replay.test.ts) refolds each log through the machine version its runs
 * recorded and rebuilds the projections; a behaviour change to a machine version fails it.
 * Only re-record when adding a scenario or a machine version, never to make a failing replay pass.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import * as Schema from "effect/Schema";
import { backupJournal } from "../../src/adapters/stores/libsql/backup.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { digestOf, runStreamId, type StoredRow } from "../../src/events/index.js";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { HoldfastSaver } from "../../src/langgraph.js";
import { contextOf, foldRun, statusOf } from "../../src/machines/index.js";
import { callsOfRun, inlineProjections } from "../../src/projections/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { RunWriter, recordOutcome } from "../../src/runtime/dispatch.js";
import { Engine } from "../../src/runtime/engine.js";
import { correctTick, tickSchedules, upsertSchedule } from "../../src/runtime/schedules.js";
import { openTestRuntime } from "../audit/given.js";
import { runWorker } from "../support/processes.js";

export const LOGS = join(import.meta.dirname, "..", "fixtures", "logs");

type Scenario = (dir: string) => Promise<string>;

const decideEachWay: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const runtime = await openTestRuntime(db);
  const decisions = [
    "resume",
    "stop",
    "new-attempt",
    "confirmed-completed",
    "confirmed-not-completed",
  ] as const;
  for (const decision of decisions) {
    const handle = await runtime.submit({
      chatId: `chat-${decision}`,
      inputId: "m1",
      agent: "flaky",
      content: { label: decision },
    });
    const held = await handle.result;
    if (held.status !== "held") throw new Error(`expected held, got ${held.status}`);
    const outcome = await runtime.decide(handle.runId, {
      decision,
      basedOnVersion: (await runtime.events(handle.runId)).length,
      decidedBy: "ada",
      note: "checked with the remote side",
      ...(decision === "confirmed-completed" ? { result: { label: decision, sent: "confirmed" } } : {}),
    });
    await outcome.result;
  }
  await runtime.close();
  return db;
};

const inProcess =
  (agent: string, options: { readonly runs?: number } = {}): Scenario =>
  async (dir) => {
    const db = join(dir, "journal.db");
    const runtime = await openTestRuntime(db);
    for (let i = 1; i <= (options.runs ?? 1); i++) {
      const handle = await runtime.submit({
        chatId: `chat-${i}`,
        inputId: "m1",
        agent,
        content: { label: `${agent}-${i}` },
      });
      await handle.result;
    }
    await runtime.close();
    return db;
  };

const retried: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const runtime = await openTestRuntime(db);
  const handle = await runtime.submit({
    chatId: "chat-1",
    inputId: "m1",
    agent: "picky",
    content: { label: "retry" },
  });
  await handle.result;
  const failed = (await runtime.events(handle.runId)).find((e) => e.event.type === "call.failed")?.event;
  if (failed?.type !== "call.failed") throw new Error("the picky call did not fail");
  const granted = await runtime.grantRetry(handle.runId, failed.callId, {
    attempts: 2,
    grantedBy: "ada",
    note: "the server is free again",
  });
  await granted.result;
  await runtime.close();
  return db;
};

/** A tool whose retry policy retries its first definite failure after a recorded (zero) backoff. */
const policyRetried: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  let calls = 0;
  const busy = defineTool({
    name: "busy",
    args: Schema.Struct({ label: Schema.String }),
    retry: { attempts: 3, backoff: { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 } },
    run: async ({ label }) => {
      if (++calls === 1) throw new DefiniteFailure("the server is busy", { statusCode: 503 });
      return { label, sent: "after a retry" };
    },
  });
  const runtime = await openRuntime({
    store: db,
    agents: [
      defineAgent({
        name: "persistent",
        version: "1",
        run: async (turn, input: { label: string }) => turn.tool(busy, { label: input.label }),
      }),
    ],
    tools: [busy],
    workerId: "audit-test-worker",
  });
  const handle = await runtime.submit({
    chatId: "chat-1",
    inputId: "m1",
    agent: "persistent",
    content: { label: "retry" },
  });
  const result = await handle.result;
  if (result.status !== "completed") throw new Error(`expected completed, got ${result.status}`);
  await runtime.close();
  return db;
};

/** A chat's queue: two inputs queued behind a running run, one withdrawn, one admitted when it ended. */
const queued: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const runtime = await openRuntime({
    store: db,
    agents: [
      defineAgent({
        name: "replier",
        version: "1",
        run: async (_turn, input: { label: string }) => {
          if (input.label === "first") await gate;
          return { replied: input.label };
        },
      }),
    ],
    tools: [],
    workerId: "audit-test-worker",
  });
  const submit = (inputId: string, label: string) =>
    runtime.submit({ chatId: "chat-1", inputId, agent: "replier", content: { label }, whenBusy: "queue" });
  const first = await submit("m1", "first");
  const second = await submit("m2", "second");
  await submit("m3", "third");
  await runtime.withdraw("chat-1", "m3", { by: "ada" });
  release();
  await first.result;
  const result = await second.result;
  if (result.status !== "completed") throw new Error(`expected completed, got ${result.status}`);
  await runtime.close();
  return db;
};

/** A fork (decision 0083): a 3-call run forked at call 2, call 0 reused, call 1's outcome edited. */
const forked: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const runtime = await openRuntime({
    store: db,
    agents: [
      defineAgent({
        name: "counter",
        version: "1",
        run: async (turn) => {
          const seen: unknown[] = [];
          for (let n = 0; n < 3; n++) seen.push(await turn.tool("count", { n }));
          return { seen };
        },
      }),
    ],
    tools: [
      defineTool({ name: "count", args: Schema.Struct({ n: Schema.Number }), run: async ({ n }) => n * 2 }),
    ],
    workerId: "audit-test-worker",
  });
  const original = await runtime.submit({ chatId: "chat-1", inputId: "m1", agent: "counter", content: {} });
  await original.result;
  const fork = await runtime.fork(original.runId, {
    atCall: 2,
    outcomes: { 1: 20 },
    by: "ada",
    note: "what if call 1 had returned 20",
  });
  const result = await fork.result;
  if (result.status !== "completed") throw new Error(`expected completed, got ${result.status}`);
  await runtime.close();
  return db;
};

/** Cancel and pause (decisions 0043, 0044): a run cancelled mid-call, one paused and resumed, one paused and cancelled. */
const controlled: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  let started: () => void = () => undefined;
  let release: () => void = () => undefined;
  const waiting = defineTool({
    name: "waiting",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }, { signal }) =>
      new Promise((resolve, reject) => {
        release = () => resolve({ label });
        signal.addEventListener("abort", () => reject(new DefiniteFailure("aborted before sending")));
        started();
      }),
  });
  const after = defineTool({
    name: "after",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }) => ({ label, done: true }),
  });
  const runtime = await openRuntime({
    store: db,
    agents: [
      defineAgent({
        name: "two-steps",
        version: "1",
        run: async (turn, input: { label: string }) => {
          await turn.tool(waiting, { label: input.label });
          return turn.tool(after, { label: input.label });
        },
      }),
    ],
    tools: [waiting, after],
    workerId: "audit-test-worker",
  });
  const start = async (chatId: string) => {
    const going = new Promise<void>((resolve) => {
      started = resolve;
    });
    const handle = await runtime.submit({
      chatId,
      inputId: "m1",
      agent: "two-steps",
      content: { label: chatId },
    });
    await going;
    return handle;
  };
  const expectStatus = async (handle: { result: Promise<{ status: string }> }, status: string) => {
    const result = await handle.result;
    if (result.status !== status) throw new Error(`expected ${status}, got ${result.status}`);
  };
  const cancelled = await start("chat-cancel");
  await runtime.cancel(cancelled.runId, { by: "ada", note: "changed my mind" });
  await expectStatus(cancelled, "cancelled");
  const paused = await start("chat-pause");
  await runtime.pause(paused.runId, { by: "ada", note: "budget" });
  release();
  await expectStatus(paused, "paused");
  await expectStatus(await runtime.resume(paused.runId, { by: "ada" }), "completed");
  const parked = await start("chat-park");
  await runtime.pause(parked.runId, { by: "ada", note: "" });
  release();
  await expectStatus(parked, "paused");
  await runtime.cancel(parked.runId, { by: "ada", note: "not needed" });
  await runtime.close();
  return db;
};

/** Durable sleep (decision 0050): a run woken when due, one cancelled while waiting, one paused while waiting. */
const slept: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const step = defineTool({
    name: "step",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }) => ({ label, done: true }),
  });
  const runtime = await openRuntime({
    store: db,
    agents: [
      defineAgent({
        name: "napper",
        version: "1",
        run: async (turn, input: { ms: number }) => {
          await turn.tool(step, { label: "before" });
          await turn.sleep(input.ms);
          return turn.tool(step, { label: "after" });
        },
      }),
    ],
    tools: [step],
    workerId: "audit-test-worker",
  });
  const statusOfRun = async (runId: string) => (await runtime.run(runId))?.status;
  const until = async (runId: string, status: string) => {
    while ((await statusOfRun(runId)) !== status) await new Promise((r) => setTimeout(r, 20));
  };
  const woken = await runtime.submit({
    chatId: "chat-woken",
    inputId: "m1",
    agent: "napper",
    content: { ms: 100 },
  });
  await until(woken.runId, "completed");
  const cancelled = await runtime.submit({
    chatId: "chat-cancel",
    inputId: "m1",
    agent: "napper",
    content: { ms: 3_600_000 },
  });
  await cancelled.result;
  await runtime.cancel(cancelled.runId, { by: "ada", note: "not needed" });
  const paused = await runtime.submit({
    chatId: "chat-pause",
    inputId: "m1",
    agent: "napper",
    content: { ms: 100 },
  });
  await paused.result;
  await runtime.pause(paused.runId, { by: "ada", note: "" });
  await until(paused.runId, "paused");
  await (await runtime.resume(paused.runId, { by: "ada" })).result;
  await runtime.close();
  return db;
};

const worker = async (env: Record<string, string>, expect: "killed" | "exited") => {
  const result = await runWorker(env);
  const ok = expect === "killed" ? result.signal === "SIGKILL" : result.code === 0;
  if (!ok)
    throw new Error(
      `worker ${JSON.stringify(env)}: code ${result.code}, signal ${result.signal}\n${result.stderr}`,
    );
};

/** Real processes killed at crash points, then recovered: replay, reconciliation either way. */
const interruptedResumed: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const base = { HF_DB: db, HF_WITNESS: join(dir, "witness.txt"), HF_AGENT: "table" };
  const crashes = [
    ["read_safe", "after-intent"],
    ["reconciled", "after-intent"],
    ["reconciled", "after-effect-before-outcome"],
  ] as const;
  for (const [i, [call, point]] of crashes.entries()) {
    const ids = { HF_CHAT: `chat-${i + 1}`, HF_INPUT: "m1", HF_PREFIX: `p${i + 1}` };
    await worker(
      { ...base, ...ids, HF_ACTION: "submit", HOLDFAST_CRASH_AT: point, HOLDFAST_CRASH_CALL: call },
      "killed",
    );
    await worker({ ...base, ...ids, HF_ACTION: "recover" }, "exited");
  }
  return db;
};

/** A determinism conflict across real restarts (law 7), and a second, different outcome (law 5). */
const conflicts: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const base = {
    HF_DB: db,
    HF_WITNESS: join(dir, "witness.txt"),
    HF_CHAT: "chat-1",
    HF_INPUT: "m1",
    HF_PREFIX: "p",
  };
  const crash = { HOLDFAST_CRASH_AT: "after-outcome", HOLDFAST_CRASH_CALL: "record" };
  await worker({ ...base, HF_ACTION: "submit", ...crash }, "killed");
  await worker({ ...base, HF_ACTION: "recover", ...crash }, "killed");
  await worker({ ...base, HF_ACTION: "recover", HF_VARIANT: "changed" }, "exited");

  const runtime = await openTestRuntime(db);
  const handle = await runtime.submit({
    chatId: "chat-2",
    inputId: "m1",
    agent: "steps",
    content: { label: "twice" },
  });
  await handle.result;
  await runtime.close();
  const journal = LibsqlJournal.open(db);
  const events = await journal.readStream(runStreamId(handle.runId));
  const fold = foldRun(events.map((e) => e.event));
  const writer = new RunWriter(journal, handle.runId, fold, contextOf(fold).machine);
  const other = { label: "twice-a", done: "differently" };
  const verdict = await recordOutcome(writer, {
    type: "call.completed",
    runId: handle.runId,
    callId: `${handle.runId}/0`,
    attempt: 1,
    result: other,
    resultDigest: digestOf(other),
  });
  await journal.close();
  if (verdict !== "conflict") throw new Error(`expected a conflict, got ${verdict}`);
  return db;
};

/** Runs pruned by retention (retention.pruned) and a verified backup (backup.written). */
const maintained: Scenario = async (dir) => {
  const db = await inProcess("steps", { runs: 3 })(dir);
  const journal = LibsqlJournal.open(db);
  const report = await journal.prune({ keepRuns: 1, keepDays: 0 });
  if (report.pruned.length !== 2) throw new Error(`expected 2 runs pruned, got ${report.pruned.length}`);
  await backupJournal(journal, join(dir, "backup.db"));
  await journal.close();
  return db;
};

/** An outcome that arrives after its run was pruned (outcome.orphaned in the system stream). */
const orphaned: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const runtime = await openTestRuntime(db);
  const handle = await runtime.submit({
    chatId: "chat-1",
    inputId: "m1",
    agent: "steps",
    content: { label: "gone" },
  });
  await handle.result;
  await runtime.close();
  const journal = LibsqlJournal.open(db);
  const events = await journal.readStream(runStreamId(handle.runId));
  const fold = foldRun(events.map((e) => e.event));
  const report = await journal.prune({ keepRuns: 0, keepDays: 0 });
  if (report.pruned.length !== 1) throw new Error(`expected 1 run pruned, got ${report.pruned.length}`);
  // A writer that still holds the run as it was, as a paused worker would.
  const writer = new RunWriter(journal, handle.runId, fold, contextOf(fold).machine);
  const late = { label: "gone-late", done: "after the prune" };
  const verdict = await recordOutcome(writer, {
    type: "call.completed",
    runId: handle.runId,
    callId: `${handle.runId}/0`,
    attempt: 1,
    result: late,
    resultDigest: digestOf(late),
  });
  await journal.close();
  if (verdict !== "after-prune") throw new Error(`expected after-prune, got ${verdict}`);
  return db;
};

/**
 * Machine run@2: decisions per call (one call confirmed while the other stays held: run.held; then
 * the other decided: run.resumed), a stop with two calls in doubt (run.stopped), a second outcome
 * recorded as a conflict.
 */
const perCallDecisions: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const runtime = await openTestRuntime(db);
  const held = async (label: string) => {
    const handle = await runtime.submit({
      chatId: `chat-${label}`,
      inputId: "m1",
      agent: "pair",
      content: { label },
    });
    const result = await handle.result;
    if (result.status !== "held") throw new Error(`expected held, got ${result.status}`);
    const events = await runtime.events(handle.runId);
    return { runId: handle.runId, version: events.length };
  };
  const decided = await held("decided");
  const first = await runtime.decide(decided.runId, {
    basedOnVersion: decided.version,
    decidedBy: "ada",
    calls: {
      [`${decided.runId}/0`]: {
        decision: "confirmed-completed",
        note: "the first is in the remote log",
        result: { label: "decided-x", sent: "confirmed" },
      },
    },
  });
  if ((await first.result).status !== "held") throw new Error("expected the run still held");
  const second = await runtime.decide(decided.runId, {
    basedOnVersion: first.version,
    decidedBy: "ada",
    calls: { [`${decided.runId}/1`]: { decision: "new-attempt", note: "the second never arrived" } },
  });
  if ((await second.result).status !== "completed") throw new Error("expected the run completed");
  const stopped = await held("stopped");
  await (
    await runtime.decide(stopped.runId, {
      basedOnVersion: stopped.version,
      decidedBy: "ada",
      decision: "stop",
    })
  ).result;
  await runtime.close();
  // A second, different outcome for the decided run's retried call: a conflict, the first stands.
  const journal = LibsqlJournal.open(db);
  const events = await journal.readStream(runStreamId(decided.runId));
  const fold = foldRun(events.map((e) => e.event));
  const writer = new RunWriter(journal, decided.runId, fold, contextOf(fold).machine);
  const other = { label: "decided-y", sent: "differently" };
  const verdict = await recordOutcome(writer, {
    type: "call.completed",
    runId: decided.runId,
    callId: `${decided.runId}/1`,
    attempt: 2,
    result: other,
    resultDigest: digestOf(other),
  });
  await journal.close();
  if (verdict !== "conflict") throw new Error(`expected a conflict, got ${verdict}`);
  return db;
};

/**
 * A LangGraph thread through HoldfastSaver (graph.checkpointed, graph.writes-recorded), and a second
 * thread deleted (retention.pruned naming a langgraph-… stream).
 */
const langgraph: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const saver = await HoldfastSaver.open({ store: db });
  for (const threadId of ["kept", "deleted"]) {
    const first = await saver.put(
      { configurable: { thread_id: threadId, checkpoint_ns: "" } },
      { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: ["hello"] } },
      { source: "input", step: -1, parents: {} },
      { messages: 1 },
    );
    await saver.putWrites(first, [["messages", "hi there"]], "task-1", "~__pregel_pull, agent");
    await saver.put(
      first,
      { ...emptyCheckpoint(), id: uuid6(-1), channel_versions: { messages: 1 } },
      { source: "loop", step: 0, parents: {} },
      {},
    );
  }
  await saver.deleteThread("deleted");
  await saver.close();
  return db;
};

/**
 * Signals (decision 0054): a run woken by a signal (sent twice under one id), one whose signal came
 * before its wait, and one whose wait timed out.
 */
const signalled: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const runtime = await openRuntime({
    store: db,
    agents: [
      defineAgent({
        name: "listener",
        version: "1",
        run: async (turn, input: { sleepMs: number; timeoutMs?: number }) => {
          if (input.sleepMs > 0) await turn.sleep(input.sleepMs);
          return turn.waitFor("go", input.timeoutMs === undefined ? {} : { timeoutMs: input.timeoutMs });
        },
      }),
    ],
    workerId: "audit-test-worker",
  });
  const until = async (runId: string, status: string) => {
    while ((await runtime.run(runId))?.status !== status) await new Promise((r) => setTimeout(r, 20));
  };
  const woken = await runtime.submit({
    chatId: "chat-woken",
    inputId: "m1",
    agent: "listener",
    content: { sleepMs: 0 },
  });
  await woken.result;
  await runtime.signal(woken.runId, "go", { ok: true }, { signalId: "sig-1", by: "ada" });
  await runtime.signal(woken.runId, "go", { ok: true }, { signalId: "sig-1", by: "ada" });
  await until(woken.runId, "completed");
  const early = await runtime.submit({
    chatId: "chat-early",
    inputId: "m1",
    agent: "listener",
    content: { sleepMs: 100 },
  });
  await early.result;
  await runtime.signal(early.runId, "go", "before the wait", { signalId: "sig-2", by: "ada" });
  await until(early.runId, "completed");
  const timedOut = await runtime.submit({
    chatId: "chat-timeout",
    inputId: "m1",
    agent: "listener",
    content: { sleepMs: 0, timeoutMs: 100 },
  });
  await until(timedOut.runId, "completed");
  await runtime.close();
  return db;
};

/** A schedule (decision 0060): made, two ticks admitted, paused, resumed, changed, deleted. */
const scheduled: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const runtime = await openRuntime({
    store: db,
    agents: [
      defineAgent({
        name: "ticker",
        version: "1",
        run: async (turn, input: { label: string }) => ({ ticked: input.label, inputId: turn.inputId }),
      }),
    ],
    tools: [],
    workerId: "audit-test-worker",
  });
  await runtime.schedules.upsert({
    id: "every-second",
    everyMs: 1_000,
    agent: "ticker",
    input: { label: "tick" },
  });
  for (let i = 0; i < 100; i++) {
    if (((await runtime.schedules.get("every-second"))?.ticks.admitted ?? 0) >= 2) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await runtime.schedules.pause("every-second", { by: "ada" });
  await runtime.schedules.resume("every-second", { by: "ada" });
  await runtime.schedules.upsert({
    id: "every-second",
    everyMs: 1_000,
    agent: "ticker",
    input: { label: "changed" },
    overlap: "queue",
    catchUp: "none",
    by: "ada",
  });
  await runtime.schedules.delete("every-second", { by: "ada" });
  await runtime.close();
  return db;
};

/**
 * The race of two workers at one schedule version, corrected (decision 0060): tick 1's run keeps the
 * chat busy, so tick 2 is recorded `skipped`; the losing worker's run of tick 2 (admitted once the
 * chat was free, its own record refused on the version) stands, and it corrects the record.
 */
const scheduleCorrected: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  let release: () => void = () => undefined;
  const busy = new Promise<void>((resolve) => {
    release = resolve;
  });
  const hold = defineTool({
    name: "hold",
    args: Schema.Struct({ inputId: Schema.String }),
    run: async ({ inputId }) => {
      if (inputId.endsWith("12:00:10.000Z")) await busy;
      return inputId;
    },
  });
  const engine = new Engine({
    journal: LibsqlJournal.open(db),
    agents: [
      defineAgent({
        name: "ticker",
        version: "1",
        run: async (turn) => turn.tool(hold, { inputId: turn.inputId }),
      }),
    ],
    tools: [hold],
    secrets: {},
    workerId: "audit-test-worker",
    leaseMs: 5_000,
    recoveryConcurrency: 1,
    newRunId: (() => {
      let n = 0;
      return () => `raced-${++n}`;
    })(),
    isWorkerDead: () => false,
  });
  const T0 = Date.UTC(2026, 0, 5, 12, 0, 0);
  await upsertSchedule(engine, { id: "raced", everyMs: 10_000, agent: "ticker", input: {} }, () => T0);
  await tickSchedules(engine, T0 + 10_050);
  await tickSchedules(engine, T0 + 20_050);
  release();
  while ((await engine.journal.activeRun("schedule-raced")) !== null)
    await new Promise((r) => setTimeout(r, 20));
  const tick2 = new Date(T0 + 20_000).toISOString();
  const late = await engine.submit({
    chatId: "schedule-raced",
    inputId: `raced@${tick2}`,
    agent: "ticker",
    content: {},
  });
  await late.result;
  if (!(await correctTick(engine, "raced", tick2)))
    throw new Error("schedule-corrected: no correction written");
  await engine.close();
  return db;
};

const approved: Scenario = async (dir) => {
  const db = join(dir, "journal.db");
  const pay = defineTool({
    name: "pay",
    description: "Pays an invoice",
    args: Schema.Struct({ invoice: Schema.String, amount: Schema.Number }),
    approval: { editable: true },
    run: async ({ invoice, amount }) => ({ invoice, amount, paid: true }),
  });
  const runtime = await openRuntime({
    store: db,
    agents: [
      defineAgent({
        name: "payer",
        version: "1",
        run: async (turn, input: { amount: number }) => {
          try {
            return await turn.tool(pay, { invoice: "INV-1", amount: input.amount });
          } catch (error) {
            return { denied: String((error as Error).message) };
          }
        },
      }),
    ],
    tools: [pay],
    workerId: "audit-test-worker",
  });
  const until = async (runId: string, status: string) => {
    while ((await runtime.run(runId))?.status !== status) await new Promise((r) => setTimeout(r, 20));
  };
  const version = async (runId: string) => (await runtime.events(runId)).at(-1)!.version;
  const yes = await runtime.submit({
    chatId: "chat-approved",
    inputId: "m1",
    agent: "payer",
    content: { amount: 500 },
  });
  await yes.result;
  await runtime.approve(yes.runId, 0, {
    by: "ada",
    note: "budgeted",
    basedOnVersion: await version(yes.runId),
  });
  await until(yes.runId, "completed");
  const edited = await runtime.submit({
    chatId: "chat-edited",
    inputId: "m1",
    agent: "payer",
    content: { amount: 900 },
  });
  await edited.result;
  await runtime.approve(edited.runId, 0, {
    by: "ada",
    note: "half now",
    basedOnVersion: await version(edited.runId),
    args: { invoice: "INV-1", amount: 450 },
  });
  await until(edited.runId, "completed");
  const no = await runtime.submit({
    chatId: "chat-denied",
    inputId: "m1",
    agent: "payer",
    content: { amount: 700 },
  });
  await no.result;
  await runtime.deny(no.runId, 0, {
    by: "bob",
    note: "not this month",
    basedOnVersion: await version(no.runId),
  });
  await until(no.runId, "completed");
  await runtime.close();
  return db;
};

/**
 * The scenarios, by golden log name. The logs of machine run@1 (schema 1) were recorded before
 * run@2 existed: recording them again now would record run@2 instead, so they are never re-recorded.
 */
export const SCENARIOS: Readonly<Record<string, Scenario>> = {
  completed: inProcess("steps", { runs: 2 }),
  failed: inProcess("failing"),
  "held-decided": decideEachWay,
  retried,
  "policy-retried": policyRetried,
  "interrupted-resumed": interruptedResumed,
  child: inProcess("parent"),
  conflicts,
  documents: inProcess("planner", { runs: 2 }),
  retention: maintained,
  "per-call-decisions": perCallDecisions,
  langgraph,
  orphaned,
  queued,
  controlled,
  slept,
  signalled,
  scheduled,
  approved,
  "schedule-corrected": scheduleCorrected,
  forked,
};

const allRows = async (journal: LibsqlJournal): Promise<StoredRow[]> => {
  const rows: StoredRow[] = [];
  for (;;) {
    const page = await journal.readAllRows({ after: rows.at(-1)?.position ?? 0, limit: 1000 });
    rows.push(...page);
    if (page.length < 1000) return rows;
  }
};

const record = async (name: string, scenario: Scenario): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), `holdfast-golden-${name}-`));
  try {
    const db = await scenario(dir);
    const journal = LibsqlJournal.open(db);
    try {
      const audit = await auditJournal(journal);
      if (!audit.clean)
        throw new Error(
          `${name}: the recorded journal does not audit clean: ${JSON.stringify(audit.findings)}`,
        );
      const rows = await allRows(journal);
      const lines = rows.map((row) =>
        JSON.stringify({
          streamId: row.streamId,
          version: row.version,
          position: row.position,
          eventId: row.eventId,
          recordedAt: row.recordedAt,
          prevHash: row.prevHash,
          hash: row.hash,
          schemaVersion: row.schemaVersion,
          event: JSON.parse(row.data),
        }),
      );
      const runs: Record<string, unknown> = {};
      for (const streamId of [...new Set(rows.map((r) => r.streamId))].filter((s) => s.startsWith("run-"))) {
        const fold = foldRun((await journal.readStream(streamId)).map((e) => e.event));
        runs[streamId] = { status: statusOf(fold), context: contextOf(fold) };
      }
      const projections: Record<string, Record<string, { value: unknown; position: number }>> = {};
      for (const projection of inlineProjections) {
        const stored: Record<string, { value: unknown; position: number }> = {};
        for (let after: string | null = null; ; ) {
          const page = await journal.projectionPage(projection.name, { after, limit: 1000 });
          for (const row of page) stored[row.key] = { value: JSON.parse(row.value), position: row.position };
          if (page.length < 1000) break;
          after = page.at(-1)!.key;
        }
        projections[projection.name] = stored;
      }
      // Calls are folded from each run's stream when read (decision 0031); recorded the same way.
      const calls: Record<string, { value: unknown; position: number }> = {};
      for (const streamId of Object.keys(runs))
        for (const call of callsOfRun(await journal.readStream(streamId)))
          calls[call.callId] = { value: call, position: call.position };
      projections.calls = calls;
      const expected = { events: rows.length, headDigest: audit.headDigest, runs, projections };
      writeFileSync(join(LOGS, `${name}.jsonl`), `${lines.join("\n")}\n`);
      writeFileSync(join(LOGS, `${name}.expected.json`), `${JSON.stringify(expected, null, 2)}\n`);
      console.log(`${name}: ${rows.length} events, ${Object.keys(runs).length} runs`);
    } finally {
      await journal.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

const main = async () => {
  mkdirSync(LOGS, { recursive: true });
  const names = process.argv.slice(2);
  if (names.length === 0)
    throw new Error(`name the scenarios to record; known: ${Object.keys(SCENARIOS).join(", ")}`);
  for (const name of names) {
    const scenario = SCENARIOS[name];
    if (!scenario) throw new Error(`no scenario "${name}"; known: ${Object.keys(SCENARIOS).join(", ")}`);
    await record(name, scenario);
  }
};

await main();
