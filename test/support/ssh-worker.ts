/**
 * A holdfast process whose agent runs one command over the SSH tool, for the SSH crash tests.
 * Configured by environment:
 *   HF_DB                 the journal file
 *   HF_SSH                JSON: { host, port, user, keyPath, hostKey, receiptsDir }
 *   HF_WITNESS            a file on the "remote" host the command appends one line to per execution
 *   HF_GATE               when set, the command waits until this file exists before it ends
 *   HF_ACTION             "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL   as for any holdfast process
 * Prints one JSON object per line on stdout.
 */
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { makeSshTool } from "../../src/adapters/integrations/tools/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

const target = JSON.parse(env.HF_SSH!) as {
  host: string;
  port: number;
  user: string;
  keyPath: string;
  hostKey: string;
  receiptsDir: string;
};
const privateKey = readFileSync(target.keyPath, "utf8");
const ssh = makeSshTool({
  host: target.host,
  port: target.port,
  user: target.user,
  privateKey,
  hostKey: target.hostKey,
  receiptsDir: target.receiptsDir,
});

const command = [
  `echo ran >>${quote(env.HF_WITNESS!)}`,
  ...(env.HF_GATE
    ? [`while [ ! -e ${quote(env.HF_GATE)} ] && [ -d ${quote(dirname(env.HF_GATE))} ]; do sleep 0.05; done`]
    : []),
  'echo "done $HOLDFAST_IDEMPOTENCY_KEY"',
  "exit 4",
].join("; ");

const agent = defineAgent({
  name: "remote",
  version: "1",
  run: async (turn) => {
    const done = await turn.tool(ssh, { command });
    return { exitCode: done.exitCode, stdout: done.stdout };
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [agent],
    tools: [ssh],
    secrets: { SSH_KEY: privateKey },
    recovery: { leaseMs: 20_000 },
  });
  const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
  out({ kind: "recovery", report });
  if (done) out({ kind: "recovered", results: await done });
  if (env.HF_ACTION === "submit") {
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "remote", content: {} });
    out({ kind: "submitted", runId: handle.runId });
    out({ kind: "result", result: await handle.result });
  }
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
