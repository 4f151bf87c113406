/**
 * A real holdfast process for crash tests. Configured by environment:
 *   HF_DB, HF_WITNESS     journal file and witness file
 *   HF_ACTION             "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HF_CHAT, HF_INPUT     ids for submit; HF_PREFIX the witness label prefix
 *   HF_VARIANT            "original" | "changed" (the agent's code version)
 *   HF_START_AT           epoch ms to wait for before submitting (two processes racing)
 *   HF_HOLD_MS            when set, the agent's first call is a model call that sleeps this long
 *   HF_AGENT              the agent to submit: "steps" (default), "table", "gated", "late" (HF_HOLD_MS after its effect)
 *   HF_TOOLS_EDITED       "1": read_safe's source differs from the pinned one
 *   HF_RECONCILER         "honest" | "throws" | "unknown"
 *   HF_ALLOWLIST          "none": empty safe list (default: read_safe pinned at its original source)
 *   HF_COUNT              with HF_ACTION "submit-many": how many gated runs to start
 *   HF_RECOVER            "0": do not recover on open
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL   crash points (SIGKILL)
 * Prints one JSON object per line on stdout.
 */
import { defineAgent, openRuntime } from "../../src/index.js";
import { lateAgent, makeLateTool, makeTableTools, tableAgent } from "./table-tools.js";
import { makeStepsAgent } from "./witness.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const holdMs = Number(env.HF_HOLD_MS ?? 0);
const slow = defineAgent({
  name: "slow",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    await turn.model(
      "think",
      { ms: holdMs },
      () => new Promise((r) => setTimeout(() => r("thought"), holdMs)),
    );
    return turn.tool("record", { label: `${input.prefix}-slow` });
  },
});

/** Does one call, then waits forever: killed between calls, it leaves a run with nothing in doubt. */
const gated = defineAgent({
  name: "gated",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    await turn.tool("record", { label: `${input.prefix}-gate` });
    out({ kind: "gated", prefix: input.prefix });
    // A timer keeps the process alive while it waits (the runtime's own timers are unref'd): it
    // owns the run until it is killed.
    return new Promise(() => setInterval(() => undefined, 60_000));
  },
});

/** Writes the plan, then records a step. */
const planning = defineAgent({
  name: "planning",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    const before = await turn.plan.read();
    const { revision } = await turn.plan.replace(before.revision, {
      title: `plan ${input.prefix}`,
      items: [{ id: "a", text: "record a", done: false }],
    });
    await turn.tool("record", { label: `${input.prefix}-a` });
    return { revision };
  },
});

/** Parallel calls, then a child run. */
const parent = defineAgent({
  name: "parent",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    const [x, y] = await turn.all([
      () => turn.tool("read_safe", { label: `${input.prefix}-x` }),
      () => turn.tool("read_safe", { label: `${input.prefix}-y` }),
    ]);
    const child = await turn.child("steps", { prefix: `${input.prefix}-child` });
    return { x, y, child };
  },
});

const main = async () => {
  const tools = makeTableTools(env.HF_WITNESS!, {
    edited: env.HF_TOOLS_EDITED === "1",
    reconciler: (env.HF_RECONCILER as "honest" | "throws" | "unknown" | undefined) ?? "honest",
  });
  const pinned = makeTableTools(env.HF_WITNESS!).readSafe.pin;
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [
      makeStepsAgent(env.HF_VARIANT === "changed" ? "changed" : "original"),
      slow,
      tableAgent,
      gated,
      parent,
      planning,
      lateAgent,
    ],
    tools: [...tools.all, makeLateTool(env.HF_WITNESS!, holdMs)],
    allowlist: env.HF_ALLOWLIST === "none" ? {} : { read_safe: pinned },
    recovery: { leaseMs: Number(env.HF_LEASE_MS ?? 3000), onOpen: env.HF_RECOVER !== "0" },
  });
  out({ kind: "preflight", findings: runtime.preflight });
  const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
  out({ kind: "recovery", report });
  if (done) out({ kind: "recovered", results: await done });
  if (env.HF_ACTION === "submit-many") {
    for (let i = 0; i < Number(env.HF_COUNT ?? 1); i++) {
      const handle = await runtime.submit({
        chatId: `chat-${i}`,
        inputId: "m",
        agent: "gated",
        content: { prefix: `g${i}` },
      });
      out({ kind: "submitted", runId: handle.runId });
    }
    return new Promise(() => undefined);
  }
  if (env.HF_ACTION === "submit") {
    if (env.HF_START_AT) {
      const wait = Number(env.HF_START_AT) - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    try {
      const handle = await runtime.submit({
        chatId: env.HF_CHAT!,
        inputId: env.HF_INPUT!,
        agent: env.HF_AGENT ?? (holdMs > 0 ? "slow" : "steps"),
        content: { prefix: env.HF_PREFIX ?? "x" },
      });
      out({ kind: "submitted", runId: handle.runId, reused: handle.reused });
      out({ kind: "result", result: await handle.result });
    } catch (error) {
      const e = error as { _tag?: string; message?: string; runId?: string };
      out({ kind: "error", tag: e._tag ?? "Error", message: e.message, runId: e.runId ?? null });
    }
  }
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
