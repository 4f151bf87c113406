/**
 * A real holdfast process running the AI SDK agent of `ai-agent.ts`, for the `holdfast/ai` crash
 * tests: opens the journal, submits one input and waits. Configured by environment:
 *   HF_DB, HF_WITNESS     journal file and witness file
 *   HF_MODE               "generate" (default) or "stream"
 *   HF_POLICY             "replay": the model's calls are replayed when in doubt (default hold)
 *   HF_CITY               the input (default "Paris")
 *   HF_FAIL_FIRST         "1": the provider answers the first model call with a 502 (the call is in doubt)
 *   HF_REOPEN, HF_RUN     "1": submit nothing; open with recovery on open and print run HF_RUN's result
 *   HF_APPROVAL           "1": `book` needs approval (`needsApproval: true`)
 *   HF_STAY               "1": stay up after printing the result (the test kills it with SIGKILL)
 *   HF_SERVE              "1": submit nothing; open with recovery and serve the API (print `{kind:
 *                         "serving", url, token}`), staying up: its runtime wakes and runs what is due
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL / HOLDFAST_CRASH_SKIP   crash points (SIGKILL)
 * Prints one JSON object per line on stdout.
 */
import { APICallError } from "ai";
import { openRuntime, serve } from "../../src/index.js";
import { makeAiAgent } from "./ai-agent.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const main = async () => {
  const { agent, tools } = makeAiAgent({
    witness: env.HF_WITNESS!,
    bookNeedsApproval: env.HF_APPROVAL === "1",
    mode: env.HF_MODE === "stream" ? "stream" : "generate",
    policy: env.HF_POLICY === "replay" ? { inDoubt: "replay" } : {},
    ...(env.HF_FAIL_FIRST === "1"
      ? {
          failStep: {
            step: 1,
            times: 1,
            error: () =>
              new APICallError({ message: "bad gateway", url: "u", requestBodyValues: {}, statusCode: 502 }),
          },
        }
      : {}),
  });
  const reopen = env.HF_REOPEN === "1" || env.HF_SERVE === "1";
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [agent],
    tools: [...tools.all],
    allowlist: {},
    recovery: { onOpen: reopen },
  });
  if (env.HF_SERVE === "1") {
    const server = await serve({ store: env.HF_DB!, port: 0, runtime, token: "t".repeat(32) });
    out({ kind: "serving", url: server.url, token: server.token.token });
    setInterval(() => undefined, 1_000);
    return;
  }
  if (reopen) {
    out({ kind: "result", result: await runtime.wait(env.HF_RUN!) });
    await runtime.close();
    return;
  }
  const handle = await runtime.submit({
    chatId: "chat",
    inputId: "message",
    agent: agent.name,
    content: { city: env.HF_CITY ?? "Paris" },
  });
  out({ kind: "submitted", runId: handle.runId });
  out({ kind: "result", result: await handle.result });
  if (env.HF_STAY === "1") {
    setInterval(() => undefined, 1_000);
    return;
  }
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
