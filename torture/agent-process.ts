/**
 * One holdfast process of a torture trial. Opens the journal (recovering whatever the previous
 * process left), submits the trial's input (idempotent: a second submit reuses the run), waits for
 * every run it owns to settle, prints one JSON line, exits 0. Crash points kill it on the way.
 *   TORTURE_DB, TORTURE_DIR, TORTURE_SERVER
 */
import { openRuntime } from "../src/index.js";
import { FAULTS, makeTortureDefinitions, type TortureFault } from "./definitions.js";

const env = process.env;
const fault = FAULTS.find((f) => f === env.TORTURE_FAULT) as TortureFault | undefined;
const { agents, tools, allowlist } = makeTortureDefinitions({
  dir: env.TORTURE_DIR!,
  server: env.TORTURE_SERVER!,
  ...(fault ? { fault } : {}),
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.TORTURE_DB!,
    agents,
    tools,
    allowlist,
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
  process.stdout.write(`${JSON.stringify({ recovered: recovered.length, result })}\n`);
};

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
