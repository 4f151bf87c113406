import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import type { RecordedEvent } from "../../src/events/index.js";
import {
  ApprovalDenied,
  defineAgent,
  defineTool,
  NotAwaitingApproval,
  NoteRequired,
  openRuntime,
  type Runtime,
  StaleDecision,
} from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { runScript, startScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const APPROVAL_WORKER = join(import.meta.dirname, "..", "support", "approval-worker.ts");

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** The outside witness of the effect: what the tool really did, in order. */
const effects: string[] = [];

const pay = defineTool({
  name: "pay",
  description: "Pays an invoice from the company account",
  args: Schema.Struct({ invoice: Schema.String, amount: Schema.Number }),
  // Only large payments need a person.
  approval: { when: (args) => args.amount > 100, editable: true },
  run: async ({ invoice, amount }) => {
    effects.push(`paid ${invoice} ${amount}`);
    return `paid ${invoice}`;
  },
});

const wire = defineTool({
  name: "wire",
  description: "Wires money abroad",
  args: Schema.Struct({ to: Schema.String }),
  approval: "required",
  run: async ({ to }) => {
    effects.push(`wired ${to}`);
    return `wired ${to}`;
  },
});

const payer = defineAgent({
  name: "payer",
  version: "1",
  run: async (turn, input: { amount: number }) => {
    try {
      const paid = await turn.tool(pay, { invoice: "INV-1", amount: input.amount });
      return { paid };
    } catch (error) {
      if (error instanceof ApprovalDenied) return { denied: { by: error.by, note: error.note } };
      throw error;
    }
  },
});

const wirer = defineAgent({
  name: "wirer",
  version: "1",
  run: async (turn) => {
    const first = await turn.tool(wire, { to: "acme" });
    return { first };
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
  openRuntime({ store, agents: [payer, wirer], tools: [pay, wire], tracing: false });

/** Wait (polling the journal) until `runId` ends; a woken run is executed by the wake loop. */
const ended = async (runtime: Runtime, runId: string) => {
  for (;;) {
    const row = await runtime.run(runId);
    if (row && ["completed", "failed", "stopped", "cancelled", "held", "paused"].includes(row.status))
      return runtime.wait(runId);
    await new Promise((r) => setTimeout(r, 50));
  }
};

const typesOf = (events: ReadonlyArray<RecordedEvent>) => events.map((e) => e.event.type);
const versionOf = async (runtime: Runtime, runId: string) => (await runtime.events(runId)).at(-1)!.version;

describe.each(engines)("approvals (%s)", (_name, storeOf) => {
  it("an approved call's effect starts only after the approval is durable, exactly once", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "payer",
        content: { amount: 500 },
      });
      const parked = await handle.result;
      expect(parked).toMatchObject({ status: "waiting", wait: "approval", callId: `${handle.runId}/0` });
      expect(effects).toEqual([]);
      expect((await runtime.run(handle.runId))?.waiting).toMatchObject({ wait: "approval" });
      const before = await runtime.events(handle.runId);
      // The intent awaiting approval and the wait are one commit; the intent says what the tool does.
      expect(typesOf(before).slice(-2)).toEqual(["call.intended", "run.waiting"]);
      const intent = before.at(-2)!.event;
      expect(intent).toMatchObject({
        attempt: 1,
        approval: { editable: true, description: "Pays an invoice from the company account" },
      });
      const outcome = await runtime.approve(handle.runId, 0, {
        by: "ada",
        note: "budgeted",
        basedOnVersion: before.at(-1)!.version,
      });
      expect(outcome).toMatchObject({ decision: "approved", callId: `${handle.runId}/0`, edited: false });
      expect(await ended(runtime, handle.runId)).toMatchObject({
        status: "completed",
        output: { paid: "paid INV-1" },
      });
      expect(effects).toEqual(["paid INV-1 500"]);
      const types = typesOf(await runtime.events(handle.runId));
      const at = types.indexOf("approval.recorded");
      expect(types.slice(at, at + 4)).toEqual([
        "approval.recorded",
        "run.woken",
        "call.intended",
        "call.completed",
      ]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a call the predicate does not pick runs without approval", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "payer",
        content: { amount: 5 },
      });
      expect(await handle.result).toMatchObject({ status: "completed", output: { paid: "paid INV-1" } });
      expect(effects).toEqual(["paid INV-1 5"]);
      expect(typesOf(await runtime.events(handle.runId))).not.toContain("run.waiting");
    } finally {
      await runtime.close();
    }
  });

  it("a denied call fails definitely: the agent sees ApprovalDenied with who and the note; the effect never runs", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "payer",
        content: { amount: 500 },
      });
      await handle.result;
      const basedOnVersion = await versionOf(runtime, handle.runId);
      await expect(runtime.deny(handle.runId, 0, { by: "bob", basedOnVersion })).rejects.toBeInstanceOf(
        NoteRequired,
      );
      await runtime.deny(handle.runId, `${handle.runId}/0`, {
        by: "bob",
        note: "not this month",
        basedOnVersion,
      });
      expect(await ended(runtime, handle.runId)).toMatchObject({
        status: "completed",
        output: { denied: { by: "bob", note: "not this month" } },
      });
      expect(effects).toEqual([]);
      const events = await runtime.events(handle.runId);
      const failed = events.find((e) => e.event.type === "call.failed")!.event;
      expect(failed).toMatchObject({ attempt: 1, definite: true, error: { name: "ApprovalDenied" } });
      expect(typesOf(events).filter((t) => t === "call.intended")).toHaveLength(1);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a stale approval, or one for a call that awaits none, is refused with nothing written", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "payer",
        content: { amount: 500 },
      });
      await handle.result;
      const before = await runtime.events(handle.runId);
      const current = before.at(-1)!.version;
      const stale = runtime.approve(handle.runId, 0, { by: "ada", basedOnVersion: current - 1 });
      await expect(stale).rejects.toBeInstanceOf(StaleDecision);
      await expect(stale).rejects.toThrow(`--based-on ${current}`);
      const wrongCall = runtime.approve(handle.runId, 3, { by: "ada", basedOnVersion: current });
      await expect(wrongCall).rejects.toBeInstanceOf(NotAwaitingApproval);
      await expect(wrongCall).rejects.toThrow(`${handle.runId}/0`);
      expect((await runtime.events(handle.runId)).length).toBe(before.length);
      expect(effects).toEqual([]);
      // After a decision, a second one is refused too.
      await runtime.approve(handle.runId, 0, { by: "ada", basedOnVersion: current });
      await expect(
        runtime.deny(handle.runId, 0, { by: "eve", note: "no", basedOnVersion: current + 1 }),
      ).rejects.toThrow();
      await ended(runtime, handle.runId);
      expect(effects).toEqual(["paid INV-1 500"]);
    } finally {
      await runtime.close();
    }
  });

  it("an editable tool runs with the approver's arguments; the edit is recorded next to the original; a fixed tool refuses edits", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "payer",
        content: { amount: 500 },
      });
      await handle.result;
      const basedOnVersion = await versionOf(runtime, handle.runId);
      await expect(
        runtime.approve(handle.runId, 0, {
          by: "ada",
          basedOnVersion,
          note: "half",
          args: { invoice: "INV-1" },
        }),
      ).rejects.toThrow(/amount/);
      await expect(
        runtime.approve(handle.runId, 0, {
          by: "ada",
          basedOnVersion,
          args: { invoice: "INV-1", amount: 250 },
        }),
      ).rejects.toBeInstanceOf(NoteRequired);
      const outcome = await runtime.approve(handle.runId, 0, {
        by: "ada",
        basedOnVersion,
        note: "half now",
        args: { invoice: "INV-1", amount: 250 },
      });
      expect(outcome.edited).toBe(true);
      await ended(runtime, handle.runId);
      expect(effects).toEqual(["paid INV-1 250"]);
      const intents = (await runtime.events(handle.runId)).flatMap((e) =>
        e.event.type === "call.intended" ? [e.event] : [],
      );
      expect(intents.map((i) => [i.attempt, i.args])).toEqual([
        [1, { invoice: "INV-1", amount: 500 }],
        [2, { invoice: "INV-1", amount: 250 }],
      ]);

      const fixed = await runtime.submit({ chatId: "c2", inputId: "i", agent: "wirer", content: null });
      await fixed.result;
      await expect(
        runtime.approve(fixed.runId, 0, {
          by: "ada",
          note: "elsewhere",
          basedOnVersion: await versionOf(runtime, fixed.runId),
          args: { to: "evil" },
        }),
      ).rejects.toThrow(/does not allow the approver to edit/);
    } finally {
      await runtime.close();
    }
  });

  it("edited arguments the tool's Schema rejects, approved where the tool is unknown, fail the call definitely after its intent; no effect runs", async () => {
    effects.length = 0;
    const store = await storeOf();
    const runtime = await open(store);
    const operator = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "payer",
        content: { amount: 500 },
      });
      await handle.result;
      await operator.approve(handle.runId, 0, {
        by: "ada",
        note: "typo",
        basedOnVersion: await versionOf(runtime, handle.runId),
        args: { invoice: "INV-1" },
      });
      // Not handled by the agent: a definite failure holds the run for a person, as any other.
      expect(await ended(runtime, handle.runId)).toMatchObject({
        status: "held",
        reasons: [
          { code: "decision-needed", detail: expect.stringContaining("edited arguments do not fit") },
        ],
      });
      expect(effects).toEqual([]);
      const events = await runtime.events(handle.runId);
      expect(typesOf(events).filter((t) => t === "call.intended")).toHaveLength(2);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await operator.close();
      await runtime.close();
    }
  });

  it("a run awaiting approval is cancelled at once; a paused one stays waiting and parks paused once approved", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const a = await runtime.submit({ chatId: "a", inputId: "i", agent: "wirer", content: null });
      await a.result;
      expect(await runtime.cancel(a.runId, { by: "ada", note: "never mind" })).toMatchObject({
        accepted: true,
      });
      expect(await ended(runtime, a.runId)).toMatchObject({ status: "cancelled" });
      const b = await runtime.submit({ chatId: "b", inputId: "i", agent: "wirer", content: null });
      await b.result;
      const paused = await runtime.pause(b.runId, { by: "ada", note: "wait" });
      expect(paused.message).toContain(`for approval of ${b.runId}/0`);
      expect((await runtime.run(b.runId))?.status).toBe("waiting");
      await runtime.approve(b.runId, 0, { by: "ada", basedOnVersion: await versionOf(runtime, b.runId) });
      expect(await ended(runtime, b.runId)).toMatchObject({ status: "paused" });
      expect(effects).toEqual([]);
      await runtime.resume(b.runId, { by: "ada", note: "go" });
      expect(await ended(runtime, b.runId)).toMatchObject({ status: "completed" });
      expect(effects).toEqual(["wired acme"]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});

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

/**
 * The waiting run's owner is killed; an approver commits the approval and is killed by SIGKILL
 * before it returns; a worker wakes the run and (with `wakeCrash`) is killed right after the wake-up
 * committed; then `workers` processes open the journal. The effect runs exactly once.
 */
const killedAroundApproval = async (store: string, workers: number, wakeCrash: boolean) => {
  const witness = join(tempDir(), "witness.txt");
  const first = startScript(APPROVAL_WORKER, { HF_DB: store, HF_WITNESS: witness, HF_MODE: "submit" });
  await first.waitFor("waiting");
  const runId = String(first.lines.find((l) => l.kind === "waiting")!.runId);
  await first.kill();
  const approver = await runScript(APPROVAL_WORKER, {
    HF_DB: store,
    HF_WITNESS: witness,
    HF_MODE: "approve",
    HF_RUN: runId,
    HOLDFAST_CRASH_AT: "after-approval",
  });
  expect(approver.signal).toBe("SIGKILL");
  expect(approver.lines.find((l) => l.kind === "approved")).toBeUndefined();
  if (wakeCrash) {
    const waker = await runScript(APPROVAL_WORKER, {
      HF_DB: store,
      HF_WITNESS: witness,
      HF_MODE: "serve",
      HOLDFAST_CRASH_AT: "after-approval-wake",
    });
    expect(waker.signal).toBe("SIGKILL");
    expect(witnessLines(witness)).toEqual([]);
  }
  const serving = Array.from({ length: workers }, () =>
    startScript(APPROVAL_WORKER, { HF_DB: store, HF_WITNESS: witness, HF_MODE: "serve" }),
  );
  try {
    await Promise.all(serving.map((w) => w.waitFor("open")));
    const events = await completedEvents(store, runId);
    expect(typesOf(events).filter((t) => t === "approval.recorded")).toHaveLength(1);
    expect(typesOf(events).filter((t) => t === "run.woken")).toHaveLength(1);
    expect(witnessLines(witness)).toEqual(["paid INV-1"]);
  } finally {
    await Promise.all(serving.map((w) => w.kill()));
  }
  const auditor = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
  try {
    expect((await auditor.audit()).findings).toEqual([]);
  } finally {
    await auditor.close();
  }
};

describe("a SIGKILL after an approval commits and before the effect", () => {
  it("libSQL: the approver dies after its commit, the waker after the wake-up; the next process runs the effect once", async () => {
    await killedAroundApproval(join(tempDir(), "journal.db"), 1, true);
  });

  it("PostgreSQL with two workers: the approver dies after its commit; the effect runs exactly once", async () => {
    await requirePg();
    await killedAroundApproval(pgUrl(schemas.fresh()), 2, false);
  });

  it("PostgreSQL: the waker dies right after the wake-up; the approval is not lost nor the effect run twice", async () => {
    await requirePg();
    await killedAroundApproval(pgUrl(schemas.fresh()), 2, true);
  });
});

describe("edited arguments after the approval", () => {
  it("a policy retry decided after a SIGKILL between the approved attempt's failure and its retry runs with the edited arguments too", async () => {
    const store = join(tempDir(), "journal.db");
    const witness = join(tempDir(), "witness.txt");
    const env = { HF_DB: store, HF_WITNESS: witness, HF_TOOL: "refund" };
    const first = startScript(APPROVAL_WORKER, { ...env, HF_MODE: "submit" });
    await first.waitFor("waiting");
    const runId = String(first.lines.find((l) => l.kind === "waiting")!.runId);
    await first.kill();
    const approver = await runScript(APPROVAL_WORKER, {
      ...env,
      HF_MODE: "approve",
      HF_RUN: runId,
      HF_ARGS: JSON.stringify({ amount: 50 }),
    });
    expect(approver.lines.find((l) => l.kind === "approved")).toBeDefined();
    // The approved attempt fails definitely; the process dies before its policy retry is recorded.
    const crashed = await runScript(APPROVAL_WORKER, {
      ...env,
      HF_MODE: "serve",
      HOLDFAST_CRASH_AT: "after-failed",
    });
    expect(crashed.signal).toBe("SIGKILL");
    const serving = startScript(APPROVAL_WORKER, { ...env, HF_MODE: "serve" });
    try {
      await serving.waitFor("open");
      const events = await completedEvents(store, runId);
      const intents = events.flatMap((e) => (e.event.type === "call.intended" ? [e.event] : []));
      expect(intents.map((i) => [i.attempt, i.args])).toEqual([
        [1, { amount: 500 }],
        [2, { amount: 50 }],
        [3, { amount: 50 }],
      ]);
      // The amount the approver replaced never reaches the bank.
      expect(witnessLines(witness)).toEqual(["refund 50 attempt 2", "refund 50 attempt 3"]);
    } finally {
      await serving.kill();
    }
  });

  it("a field holding a registered secret, left as shown («secret:NAME»), reaches the effect with the code's real value; a masked value the original does not hold fails the call, no effect", async () => {
    const seen: unknown[] = [];
    const transfer = defineTool({
      name: "transfer",
      description: "Moves money to an account",
      args: Schema.Struct({ account: Schema.String, amount: Schema.Number }),
      approval: { editable: true },
      run: async (args) => {
        seen.push(args);
        return "moved";
      },
    });
    const mover = defineAgent({
      name: "mover",
      version: "1",
      // The account comes from the code's configuration (an input would be stored masked).
      run: async (turn) => turn.tool(transfer, { account: "DE89370400440532013000", amount: 500 }),
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "journal.db"),
      agents: [mover],
      tools: [transfer],
      secrets: { ACCOUNT: "DE89370400440532013000", OTHER: "GB33BUKB20201555555555" },
      tracing: false,
    });
    try {
      const approveWith = async (chatId: string, args: unknown) => {
        const handle = await runtime.submit({
          chatId,
          inputId: "i",
          agent: "mover",
          content: null,
        });
        const parked = await handle.result;
        expect(parked, JSON.stringify(parked)).toMatchObject({ status: "waiting" });
        const intent = (await runtime.events(handle.runId)).find(
          (e) => e.event.type === "call.intended",
        )?.event;
        // What the approver is shown: the account masked.
        expect(intent).toMatchObject({ args: { account: "«secret:ACCOUNT»", amount: 500 } });
        await runtime.approve(handle.runId, 0, {
          by: "ada",
          note: "lower",
          basedOnVersion: await versionOf(runtime, handle.runId),
          args,
        });
        return ended(runtime, handle.runId);
      };
      const a = await approveWith("a", { account: "«secret:ACCOUNT»", amount: 50 });
      expect(a, JSON.stringify(a)).toMatchObject({
        status: "completed",
      });
      expect(seen).toEqual([{ account: "DE89370400440532013000", amount: 50 }]);
      expect(await approveWith("b", { account: "«secret:OTHER»", amount: 50 })).toMatchObject({
        status: "held",
        reasons: [
          {
            code: "decision-needed",
            detail: expect.stringContaining("arguments.account holds a masked value"),
          },
        ],
      });
      expect(seen).toHaveLength(1);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});
