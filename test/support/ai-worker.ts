/**
 * A real holdfast process running the AI SDK agent of `ai-agent.ts`, for the `holdfast/ai` crash
 * tests: opens the journal, submits one input and waits. Configured by environment:
 *   HF_DB, HF_WITNESS     journal file and witness file
 *   HF_MODE               "generate" (default) or "stream"
 *   HF_POLICY             "replay": the model's calls are replayed when in doubt (default hold)
 *   HF_CITY               the input (default "Paris")
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL / HOLDFAST_CRASH_SKIP   crash points (SIGKILL)
 * Prints one JSON object per line on stdout.
 */
import { openRuntime } from "../../src/index.js";
import { makeAiAgent } from "./ai-agent.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const main = async () => {
  const { agent, tools } = makeAiAgent({
    witness: env.HF_WITNESS!,
    mode: env.HF_MODE === "stream" ? "stream" : "generate",
    policy: env.HF_POLICY === "replay" ? { inDoubt: "replay" } : {},
  });
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [agent],
    tools: [...tools.all],
    allowlist: {},
    recovery: { onOpen: false },
  });
  const handle = await runtime.submit({
    chatId: "chat",
    inputId: "message",
    agent: agent.name,
    content: { city: env.HF_CITY ?? "Paris" },
  });
  out({ kind: "submitted", runId: handle.runId });
  out({ kind: "result", result: await handle.result });
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
