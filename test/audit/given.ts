import { join } from "node:path";
import { Schema } from "effect";
import type { DecisionKind } from "../../src/events/index.js";
import {
  DefiniteFailure,
  DocumentConflict,
  defineAgent,
  defineTool,
  OutcomeUnknown,
  openRuntime,
  type Runtime,
} from "../../src/index.js";

/**
 * Tools that fail on their first call per label and succeed afterwards: `flaky` with an
 * indefinite error (the run is held, in doubt), `picky` with a definite one (held, retry grant).
 */
const makeTools = () => {
  const seen = new Map<string, number>();
  const firstTime = (label: string) => {
    const n = (seen.get(label) ?? 0) + 1;
    seen.set(label, n);
    return n === 1;
  };
  const ok = defineTool({
    name: "ok",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }) => ({ label, done: true }),
  });
  const flaky = defineTool({
    name: "flaky",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }) => {
      if (firstTime(`flaky:${label}`)) throw new Error("connection reset after the request was sent");
      return { label, sent: true };
    },
  });
  const picky = defineTool({
    name: "picky",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }) => {
      if (firstTime(`picky:${label}`)) throw new DefiniteFailure("the server refused: 409 busy");
      return { label, accepted: true };
    },
  });
  return [ok, flaky, picky];
};

const agents = [
  defineAgent({
    name: "steps",
    version: "1",
    run: async (turn, input: { label: string }) => {
      const a = await turn.tool("ok", { label: `${input.label}-a` });
      await turn.checkpoint({ after: "a" });
      const b = await turn.tool("ok", { label: `${input.label}-b` });
      return { a, b };
    },
  }),
  defineAgent({
    name: "flaky",
    version: "1",
    run: async (turn, input: { label: string }) => {
      await turn.tool("ok", { label: `${input.label}-first` });
      let sent: unknown;
      try {
        sent = await turn.tool("flaky", { label: input.label });
      } catch (error) {
        if (!(error instanceof OutcomeUnknown)) throw error;
        sent = "unknown: we told the user";
      }
      await turn.checkpoint({ sent });
      return { sent };
    },
  }),
  defineAgent({
    name: "picky",
    version: "1",
    run: async (turn, input: { label: string }) => turn.tool("picky", { label: input.label }),
  }),
  defineAgent({
    name: "parent",
    version: "1",
    run: async (turn, input: { label: string }) => {
      const own = await turn.tool("ok", { label: `${input.label}-own` });
      const child = await turn.child("steps", { label: `${input.label}-child` });
      return { own, child };
    },
  }),
  defineAgent({
    name: "planner",
    version: "1",
    run: async (turn, input: { label: string }) => {
      const before = await turn.plan.read();
      const { revision } = await turn.plan.replace(before.revision, {
        title: input.label,
        items: [{ id: "1", text: "write it", done: false }],
      });
      try {
        // A stale revision: recorded as document.conflicted, never a silent overwrite.
        await turn.plan.replace(before.revision, { title: "stale", items: [] });
      } catch (error) {
        if (!(error instanceof DocumentConflict)) throw error;
      }
      return { revision };
    },
  }),
  defineAgent({
    // Two calls started together that both fail without proof: two calls in doubt at once.
    name: "pair",
    version: "1",
    run: async (turn, input: { label: string }) =>
      turn.all([
        () => turn.tool("flaky", { label: `${input.label}-x` }),
        () => turn.tool("flaky", { label: `${input.label}-y` }),
      ]),
  }),
  defineAgent({
    name: "failing",
    version: "1",
    run: async (turn) => {
      await turn.tool("ok", { label: "before-failing" });
      throw new Error("the agent gave up");
    },
  }),
];

export const openTestRuntime = (db: string): Promise<Runtime> =>
  openRuntime({ store: db, agents, tools: makeTools(), workerId: "audit-test-worker" });

export interface Given {
  readonly db: string;
  /** Run ids by what happened to them. */
  readonly runs: Readonly<Record<string, string>>;
}

const versionOf = async (runtime: Runtime, runId: string) => (await runtime.events(runId)).length;

/**
 * A journal from real runs, one per chat: completed, failed, each of the five decisions on a held
 * run, a retry grant, a child run, a plan replaced and conflicted, and one run left held (active).
 */
export const givenJournal = async (
  dir: string,
  options: { readonly leaveHeld?: boolean; readonly store?: string } = {},
): Promise<Given> => {
  const db = options.store ?? join(dir, "journal.db");
  const runtime = await openTestRuntime(db);
  const runs: Record<string, string> = {};
  const submit = async (name: string, agent: string, label = name) => {
    const handle = await runtime.submit({ chatId: `chat-${name}`, inputId: "m1", agent, content: { label } });
    runs[name] = handle.runId;
    return { runId: handle.runId, result: await handle.result };
  };
  try {
    await submit("completed", "steps");
    await submit("failed", "failing");
    await submit("plan", "planner");
    await submit("parent", "parent");
    const decisions: DecisionKind[] = [
      "resume",
      "stop",
      "new-attempt",
      "confirmed-completed",
      "confirmed-not-completed",
    ];
    for (const decision of decisions) {
      const { runId, result } = await submit(decision, "flaky");
      if (result.status !== "held") throw new Error(`expected a held run, got ${result.status}`);
      const outcome = await runtime.decide(runId, {
        decision,
        basedOnVersion: await versionOf(runtime, runId),
        decidedBy: "ada",
        note: "checked with the remote side",
        ...(decision === "confirmed-completed" ? { result: { label: decision, sent: "confirmed" } } : {}),
      });
      await outcome.result;
    }
    const retried = await submit("retried", "picky");
    if (retried.result.status !== "held")
      throw new Error(`expected a held run, got ${retried.result.status}`);
    const events = await runtime.events(retried.runId);
    const failed = events.find((e) => e.event.type === "call.failed")?.event;
    if (failed?.type !== "call.failed") throw new Error("the picky call did not fail");
    const granted = await runtime.grantRetry(retried.runId, failed.callId, {
      attempts: 1,
      grantedBy: "ada",
      note: "the server is free again",
    });
    await granted.result;
    if (options.leaveHeld !== false) await submit("held", "flaky");
  } finally {
    await runtime.close();
  }
  return { db, runs };
};
