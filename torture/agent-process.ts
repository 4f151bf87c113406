/**
 * One holdfast process of a torture trial. Opens the journal (recovering whatever the previous
 * process left), submits the trial's input (idempotent: a second submit reuses the run), waits for
 * every run it owns to settle, prints one JSON line, exits 0. Crash points kill it on the way.
 *   TORTURE_DB, TORTURE_DIR, TORTURE_SERVER
 *   TORTURE_AGENT "ai": the AI SDK agent (torture/ai-definitions.ts), with TORTURE_AI_MODE
 *   ("generate" | "stream"), TORTURE_AI_POLICY ("hold" | "replay") and TORTURE_AI_ERRORS ("1": some
 *   streamed answers break off with an in-band error)
 *   TORTURE_AGENT "mcp": the MCP agent (torture/mcp-definitions.ts)
 *   TORTURE_FAULTS: the ordinary day's fault kinds the classic agent plays, comma-separated ("backoff")
 */
import { openRuntime, type RuntimeOptions } from "../src/index.js";
import {
  FAULTS,
  faultKindsFrom,
  makeTortureDefinitions,
  TORTURE_SECRET,
  type TortureFault,
} from "./definitions.js";

const env = process.env;
const fault = FAULTS.find((f) => f === env.TORTURE_FAULT) as TortureFault | undefined;
// The AI SDK and MCP agents' modules load their SDKs: only for their trials.
type Definitions = Required<Pick<RuntimeOptions, "agents" | "tools" | "allowlist">> & {
  readonly close?: () => Promise<void>;
};
const definitions = async (): Promise<Definitions> => {
  if (env.TORTURE_AGENT === "ai")
    return (await import("./ai-definitions.js")).makeAiTortureDefinitions({
      dir: env.TORTURE_DIR!,
      mode: env.TORTURE_AI_MODE === "stream" ? "stream" : "generate",
      inDoubt: env.TORTURE_AI_POLICY === "replay" ? "replay" : "hold",
      inBandErrors: env.TORTURE_AI_ERRORS === "1",
    });
  if (env.TORTURE_AGENT === "mcp")
    return (await import("./mcp-definitions.js")).makeMcpTortureDefinitions({ dir: env.TORTURE_DIR! });
  return makeTortureDefinitions({
    dir: env.TORTURE_DIR!,
    server: env.TORTURE_SERVER!,
    ...(fault ? { fault } : {}),
    kinds: faultKindsFrom(env.TORTURE_FAULTS),
  });
};

const main = async () => {
  const { agents, tools, allowlist, close } = await definitions();
  const runtime = await openRuntime({
    store: env.TORTURE_DB!,
    agents,
    tools,
    allowlist,
    secrets: { TORTURE_TOKEN: TORTURE_SECRET },
    recovery: { leaseMs: 3_000 },
  });
  const recovered = await (runtime.recovery as typeof runtime.recovery & { done: Promise<unknown[]> }).done;
  let result: unknown = null;
  try {
    const handle = await runtime.submit({
      chatId: "torture",
      inputId: "trial",
      agent: "torture",
      content: { label: env.TORTURE_LABEL ?? "t" },
    });
    result = await handle.result;
  } catch (error) {
    result = { error: (error as { _tag?: string })._tag ?? String(error) };
  }
  await runtime.close();
  await close?.();
  process.stdout.write(`${JSON.stringify({ recovered: recovered.length, result })}\n`);
};

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
