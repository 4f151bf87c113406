/**
 * A real holdfast process for the agent-versions tests (decisions 0062, 0063). Configured by environment:
 *   HF_DB        journal (libSQL file or PostgreSQL URL)
 *   HF_WITNESS   witness file: one line per effect that ran, labelled with the agent version that ran it
 *   HF_VERSIONS  the versions of agent `greeter` this process registers, in order (e.g. "1", "2", "1,2")
 *   HF_MODE      "submit": admit one run per entry of HF_RUNS (`<chat>:<version>:<hang|hold|sleep>`) with
 *                that agentVersion named, and print `{kind: "ready", runs}` once each hangs in its model
 *                call (`hang`: replayed by recovery; `hold`: held by it) or parked in its sleep (`sleep`,
 *                HF_SLEEP_MS); "serve": open the runtime
 *                (recovery on open, its wake loop, a recovery pass every HF_PASS_MS if set) and print
 *                `{kind: "open", workerId}`.
 * Either way the process stays up until the test kills it with SIGKILL.
 */
import { appendFileSync } from "node:fs";
import * as Schema from "effect/Schema";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

export const step = defineTool({
  name: "step",
  args: Schema.Struct({ label: Schema.String }),
  run: async ({ label }) => {
    appendFileSync(env.HF_WITNESS!, `${label}\n`);
    return label;
  },
});

/** Set in a submitting process: the `hang` runs' model call never answers there (the test SIGKILLs it). */
const hanging: Array<() => void> = [];

/** One version of `greeter`: its steps are labelled with its version, so the witness says which code ran. */
export const greeterVersion = (version: string) =>
  defineAgent({
    name: "greeter",
    version,
    run: async (turn, input: { readonly how: "hang" | "hold" | "sleep" | "plain"; readonly ms?: number }) => {
      await turn.tool(step, { label: `v${version}:${turn.chatId}:a` });
      if (input.how === "hang" || input.how === "hold")
        // In doubt when the process dies; `replay` lets recovery run it again with no decision,
        // `hold` (the default) holds the run for a person.
        await turn.model(
          "think",
          {},
          () =>
            env.HF_MODE === "submit"
              ? new Promise<string>(() => hanging.push(() => undefined))
              : Promise.resolve("thought"),
          { inDoubt: input.how === "hang" ? "replay" : "hold" },
        );
      if (input.how === "sleep") await turn.sleep(input.ms ?? 1_000);
      await turn.tool(step, { label: `v${version}:${turn.chatId}:b` });
      return { version };
    },
  });

const main = async () => {
  const versions = (env.HF_VERSIONS ?? "1").split(",");
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: versions.map(greeterVersion),
    tools: [step],
    tracing: false,
    recovery: {
      leaseMs: 3_000,
      ...(env.HF_PASS_MS ? { passEveryMs: Number(env.HF_PASS_MS) } : {}),
    },
  });
  if (env.HF_MODE === "submit") {
    const runs: Record<string, string> = {};
    for (const entry of (env.HF_RUNS ?? "").split(" ").filter(Boolean)) {
      const [chatId, version, how] = entry.split(":") as [string, string, "hang" | "hold" | "sleep"];
      const handle = await runtime.submit({
        chatId,
        inputId: "i",
        agent: "greeter",
        agentVersion: version,
        content: { how, ms: Number(env.HF_SLEEP_MS ?? 1_000) },
      });
      runs[chatId] = handle.runId;
      if (how === "sleep") await handle.result;
    }
    // Every `hang` run is in its model call now (its intent committed before the call started).
    const hangs = (env.HF_RUNS ?? "")
      .split(" ")
      .filter((e) => e.endsWith(":hang") || e.endsWith(":hold")).length;
    while (hanging.length < hangs) await new Promise((r) => setTimeout(r, 20));
    out({ kind: "ready", runs });
  } else out({ kind: "open", workerId: runtime.workerId });
  // Stay up as an application would (the runtime's own timers do not keep a process alive).
  setInterval(() => undefined, 1_000);
};

if (env.HF_DB) {
  main().catch((error) => {
    out({ kind: "crash", message: String(error?.stack ?? error) });
    process.exit(1);
  });
}
