import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Schema } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import { Keyring, openPayload, type RecordedEvent, sealPayload } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime, type Runtime } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { runScript, startScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const SIGNAL_WORKER = join(import.meta.dirname, "..", "support", "signal-worker.ts");

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const effects: string[] = [];
const note = defineTool({
  name: "note",
  args: Schema.Struct({ step: Schema.String }),
  run: async ({ step }) => {
    effects.push(step);
    return step;
  },
});

/** Two waits for one name: a signal sent twice under one id can satisfy only the first. */
const twice = defineAgent({
  name: "twice",
  version: "1",
  run: async (turn) => {
    const first = await turn.waitFor("go");
    await turn.tool(note, { step: "first" });
    const second = await turn.waitFor("go", { timeoutMs: 300 });
    return { first, second };
  },
});

/** Sleeps first, so a signal can be sent before its wait starts. */
const late = defineAgent({
  name: "late",
  version: "1",
  run: async (turn) => {
    await turn.sleep(300);
    return turn.waitFor("go");
  },
});

const patient = defineAgent({
  name: "patient",
  version: "1",
  run: async (turn, input: { timeoutMs: number }) => {
    const got = await turn.waitFor("go", { timeoutMs: input.timeoutMs });
    await turn.tool(note, { step: got.timedOut ? "gave up" : "got it" });
    return got;
  },
});

/** Two waits together: they wait one after another, and take both signals whatever their order. */
const both = defineAgent({
  name: "both",
  version: "1",
  run: async (turn) => {
    const [a, b] = await turn.all([() => turn.waitFor("a"), () => turn.waitFor("b")] as const);
    return { a, b };
  },
});

/** Two waits for one name in one execution, both signals buffered: each takes its own, oldest first. */
const pair = defineAgent({
  name: "pair",
  version: "1",
  run: async (turn) => {
    await turn.sleep(300);
    return turn.all([() => turn.waitFor("x"), () => turn.waitFor("x")] as const);
  },
});

let releaseSlow: () => void = () => undefined;
let slowStarted: () => void = () => undefined;
const slow = defineTool({
  name: "slow",
  args: Schema.Struct({}),
  run: () =>
    new Promise<string>((resolve) => {
      releaseSlow = () => resolve("slow done");
      slowStarted();
    }),
});

/** A call before the wait and one after it, started together: the wait parks only once the first settled. */
const busy = defineAgent({
  name: "busy",
  version: "1",
  run: async (turn) => {
    const [, got] = await turn.all([
      () => turn.tool(slow, {}),
      () => turn.waitFor("go"),
      () => turn.tool(note, { step: "after the wait" }),
    ] as const);
    return got;
  },
});

const engines: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["libSQL", async () => join(tempDir(), "journal.db")],
  [
    "PostgreSQL",
    async () => {
      await requirePg();
      return pgUrl(schemas.fresh());
    },
  ],
];

const open = (store: string): Promise<Runtime> =>
  openRuntime({
    store,
    agents: [twice, late, patient, both, busy, pair],
    tools: [note, slow],
    tracing: false,
  });

/** Wait (polling the journal) until `runId` ends; a woken run is executed by the wake loop. */
const ended = async (runtime: Runtime, runId: string) => {
  for (;;) {
    const row = await runtime.run(runId);
    if (row && ["completed", "failed", "stopped", "cancelled", "held"].includes(row.status))
      return runtime.wait(runId);
    await new Promise((r) => setTimeout(r, 50));
  }
};

const typesOf = (events: ReadonlyArray<RecordedEvent>) => events.map((e) => e.event.type);
const count = (events: ReadonlyArray<RecordedEvent>, type: string) =>
  events.filter((e) => e.event.type === type).length;

describe.each(engines)("signals (%s)", (_name, storeOf) => {
  it("a signal sent twice with one signalId is recorded and consumed once; the same id with another payload is refused", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "twice", content: null });
      expect(await handle.result).toMatchObject({
        status: "waiting",
        wait: "signal",
        name: "go",
        wakesAt: null,
      });
      expect((await runtime.run(handle.runId))?.waiting).toMatchObject({ wait: "signal", name: "go" });
      const sent = await runtime.signal(handle.runId, "go", { n: 1 }, { signalId: "s-1", by: "ada" });
      expect(sent).toMatchObject({ accepted: true, recorded: true, wakes: true });
      const again = await runtime.signal(handle.runId, "go", { n: 1 }, { signalId: "s-1", by: "ada" });
      expect(again).toMatchObject({ accepted: true, recorded: false, wakes: false });
      const other = await runtime.signal(handle.runId, "go", { n: 2 }, { signalId: "s-1", by: "ada" });
      expect(other).toMatchObject({ accepted: false, reason: "signal-id-conflict" });
      expect(other.message).toContain("s-1");
      const result = await ended(runtime, handle.runId);
      expect(result).toMatchObject({
        status: "completed",
        output: {
          first: { timedOut: false, signalId: "s-1", payload: { n: 1 } },
          second: { timedOut: true },
        },
      });
      const events = await runtime.events(handle.runId);
      expect(count(events, "signal.received")).toBe(1);
      expect(count(events, "signal.consumed")).toBe(1);
      expect(effects).toEqual(["first"]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a signal sent before the wait is buffered and delivered when the wait starts, without parking", async () => {
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "late", content: null });
      expect(await handle.result).toMatchObject({ status: "waiting", wait: "timer" });
      const sent = await runtime.signal(handle.runId, "go", "early bird", { signalId: "s-early" });
      expect(sent).toMatchObject({ accepted: true, recorded: true, wakes: false });
      const result = await ended(runtime, handle.runId);
      expect(result).toMatchObject({
        status: "completed",
        output: { timedOut: false, signalId: "s-early", payload: "early bird" },
      });
      const types = typesOf(await runtime.events(handle.runId));
      // The wait took it in the commit of its intent: no second park.
      expect(types.filter((t) => t === "run.waiting")).toHaveLength(1);
      const at = types.indexOf("signal.consumed");
      expect(types.slice(at - 1, at + 2)).toEqual(["call.intended", "signal.consumed", "call.completed"]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a wait with a timeout and no signal completes with the timeout value after its due time", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const startedAt = Date.now();
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "patient",
        content: { timeoutMs: 400 },
      });
      const parked = await handle.result;
      expect(parked).toMatchObject({ status: "waiting", wait: "signal", name: "go" });
      expect(await ended(runtime, handle.runId)).toMatchObject({
        status: "completed",
        output: { timedOut: true },
      });
      const events = await runtime.events(handle.runId);
      const woken = events.flatMap((e) => (e.event.type === "run.woken" ? [e.event] : []));
      expect(woken).toHaveLength(1);
      expect(Date.parse(woken[0]!.dueAt!)).toBeGreaterThanOrEqual(startedAt + 400);
      expect(Date.parse(woken[0]!.firedAt)).toBeGreaterThanOrEqual(Date.parse(woken[0]!.dueAt!));
      expect(count(events, "signal.consumed")).toBe(0);
      expect(effects).toEqual(["gave up"]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("waits in turn.all wait one after another and take every signal, whatever order they are sent in", async () => {
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "both", content: null });
      expect(await handle.result).toMatchObject({ status: "waiting", name: "a" });
      expect(await runtime.signal(handle.runId, "b", "second", { signalId: "s-b" })).toMatchObject({
        accepted: true,
        wakes: false,
      });
      expect(await runtime.signal(handle.runId, "a", "first", { signalId: "s-a" })).toMatchObject({
        accepted: true,
        wakes: true,
      });
      expect(await ended(runtime, handle.runId)).toMatchObject({
        status: "completed",
        output: { a: { payload: "first", signalId: "s-a" }, b: { payload: "second", signalId: "s-b" } },
      });
      expect(count(await runtime.events(handle.runId), "signal.consumed")).toBe(2);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("two waits for one name in one execution take two buffered signals, oldest first, each once", async () => {
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "pair", content: null });
      expect(await handle.result).toMatchObject({ status: "waiting", wait: "timer" });
      await runtime.signal(handle.runId, "x", 1, { signalId: "x-1" });
      await runtime.signal(handle.runId, "x", 2, { signalId: "x-2" });
      expect(await ended(runtime, handle.runId)).toMatchObject({
        status: "completed",
        output: [
          { signalId: "x-1", payload: 1 },
          { signalId: "x-2", payload: 2 },
        ],
      });
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a signal recorded while a wait lets the calls before it settle: the run parks due at once and takes it", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const started = new Promise<void>((resolve) => {
        slowStarted = resolve;
      });
      const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "busy", content: null });
      await started;
      const sent = await runtime.signal(handle.runId, "go", "meanwhile", { signalId: "s-mid" });
      expect(sent).toMatchObject({ accepted: true, recorded: true, wakes: false });
      releaseSlow();
      expect(await ended(runtime, handle.runId)).toMatchObject({
        status: "completed",
        output: { timedOut: false, signalId: "s-mid", payload: "meanwhile" },
      });
      // The call after the wait was refused while it parked, and made once by the woken execution.
      expect(effects).toEqual(["after the wait"]);
      const events = await runtime.events(handle.runId);
      const waiting = events.flatMap((e) => (e.event.type === "run.waiting" ? [e.event] : []));
      expect(waiting).toHaveLength(1);
      expect(waiting[0]!.dueAt).toBeDefined();
      expect(count(events, "signal.consumed")).toBe(1);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a signal to a completed run is refused, with the reason and ids, and writes nothing", async () => {
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "patient",
        content: { timeoutMs: 0 },
      });
      expect(await handle.result).toMatchObject({ status: "completed", output: { timedOut: true } });
      const before = await runtime.events(handle.runId);
      const sent = await runtime.signal(handle.runId, "go", { n: 1 }, { signalId: "s-late" });
      expect(sent).toMatchObject({ accepted: false, reason: "run-ended" });
      expect(sent.message).toContain(handle.runId);
      expect(sent.message).toContain("s-late");
      const after = await runtime.events(handle.runId);
      expect(after.length).toBe(before.length);
    } finally {
      await runtime.close();
    }
  });
});

/** The run's events once it completed, read by a runtime without agents (it wakes nothing). */
const completedEvents = async (store: string, runId: string): Promise<ReadonlyArray<RecordedEvent>> => {
  const reader = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const row = await reader.run(runId);
      if (row?.status === "completed") return await reader.events(runId);
      if (Date.now() > deadline) throw new Error(`run ${runId} is still ${row?.status}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await reader.close();
  }
};

const auditClean = async (store: string) => {
  const auditor = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
  try {
    expect((await auditor.audit()).findings).toEqual([]);
  } finally {
    await auditor.close();
  }
};

/**
 * The waiting run's owner is killed; a sender commits the signal and is killed by SIGKILL before it
 * returns; then `workers` processes open the journal. The run is woken once and completes.
 */
const killedBetweenSignalAndWake = async (store: string, workers: number) => {
  const witness = join(tempDir(), "witness.txt");
  const first = startScript(SIGNAL_WORKER, { HF_DB: store, HF_WITNESS: witness, HF_MODE: "submit" });
  await first.waitFor("waiting");
  const runId = String(first.lines.find((l) => l.kind === "waiting")!.runId);
  await first.kill();
  const sender = await runScript(SIGNAL_WORKER, {
    HF_DB: store,
    HF_WITNESS: witness,
    HF_MODE: "signal",
    HF_RUN: runId,
    HOLDFAST_CRASH_AT: "after-signal",
  });
  expect(sender.signal).toBe("SIGKILL");
  expect(sender.lines.find((l) => l.kind === "signalled")).toBeUndefined();
  const serving = Array.from({ length: workers }, () =>
    startScript(SIGNAL_WORKER, { HF_DB: store, HF_WITNESS: witness, HF_MODE: "serve" }),
  );
  try {
    await Promise.all(serving.map((w) => w.waitFor("open")));
    const events = await completedEvents(store, runId);
    const woken = events.flatMap((e) => (e.event.type === "run.woken" ? [e.event] : []));
    expect(woken).toHaveLength(1);
    const ids = serving.map((w) => String(w.lines.find((l) => l.kind === "open")!.workerId));
    expect(ids).toContain(woken[0]!.by);
    expect(count(events, "signal.received")).toBe(1);
    expect(count(events, "signal.consumed")).toBe(1);
    expect(typesOf(events).at(-1)).toBe("run.completed");
    expect(witnessLines(witness)).toEqual(["before", "after 7"]);
  } finally {
    await Promise.all(serving.map((w) => w.kill()));
  }
  await auditClean(store);
};

describe("a SIGKILL between a signal's commit and the wake-up", () => {
  it("libSQL: the sender dies right after the commit; the next process wakes the run once and it completes", async () => {
    await killedBetweenSignalAndWake(join(tempDir(), "journal.db"), 1);
  });

  it("PostgreSQL with two workers: the sender dies right after the commit; exactly one worker wakes the run", async () => {
    await requirePg();
    await killedBetweenSignalAndWake(pgUrl(schemas.fresh()), 2);
  });
});

describe("a signal's payload", () => {
  it("is masked before it is written (the raw journal files hold no registered secret) and sealed with a key", async () => {
    const SECRET = "sk-signal-7f3a9c1e5b";
    const store = join(tempDir(), "journal.db");
    const runtime = await openRuntime({
      store,
      agents: [patient],
      tools: [note],
      tracing: false,
      secrets: { HOOK_TOKEN: SECRET },
    });
    let stored: RecordedEvent | undefined;
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "patient",
        content: { timeoutMs: 60_000 },
      });
      await handle.result;
      await runtime.signal(handle.runId, "go", { note: `use ${SECRET}` }, { signalId: "s-secret" });
      const result = await ended(runtime, handle.runId);
      // The agent sees the stored, masked value.
      expect(JSON.stringify(result)).not.toContain(SECRET);
      expect(JSON.stringify(result)).toContain("«secret:HOOK_TOKEN»");
      stored = (await runtime.events(handle.runId)).find((e) => e.event.type === "signal.received");
    } finally {
      await runtime.close();
    }
    const dir = dirname(store);
    for (const file of readdirSync(dir))
      expect(readFileSync(join(dir, file)).includes(SECRET), file).toBe(false);
    // `payload` is among the sealed fields: with a key it is stored encrypted, and opens again.
    const ring = new Keyring(randomBytes(32));
    const at = { streamId: stored!.streamId, version: stored!.version };
    const sealed = sealPayload(ring, stored!.event, at) as Record<string, unknown>;
    expect(sealed.$sealed).toContain("payload");
    expect(JSON.stringify(sealed.payload)).not.toContain("secret");
    expect(openPayload(ring, sealed, at)).toEqual(stored!.event);
  });
});
