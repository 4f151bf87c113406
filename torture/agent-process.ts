/**
 * One holdfast process of a torture trial. Opens the journal (recovering whatever the previous
 * process left), submits the trial's input (idempotent: a second submit reuses the run), waits for
 * every run it owns to settle, prints one JSON line, exits 0. Crash points kill it on the way.
 *   TORTURE_DB, TORTURE_DIR, TORTURE_SERVER
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { makeHttpTool } from "../src/adapters/tools/httpTool.js";
import { makeShellTool, makeWriteFileTool } from "../src/adapters/tools/index.js";
import { defineAgent, defineTool, openRuntime } from "../src/index.js";

const env = process.env;
const dir = env.TORTURE_DIR!;
const server = env.TORTURE_SERVER!;
const witness = (name: string) => join(dir, "witness", name);

const send = defineTool({
  name: "send",
  args: Schema.Struct({ label: Schema.String }),
  // Not allowlisted, no reconciler: an in-doubt send is held for a person.
  run: async ({ label }, { idempotencyKey }) => {
    appendFileSync(witness("send.txt"), `${label} ${idempotencyKey}\n`);
    return { sent: label };
  },
});
const readSafe = defineTool({
  name: "read_safe",
  args: Schema.Struct({ label: Schema.String }),
  disposition: "replay",
  run: async ({ label }, { idempotencyKey }) => {
    appendFileSync(witness("read.txt"), `${label} ${idempotencyKey}\n`);
    return { read: label };
  },
});
const http = makeHttpTool({
  name: "http_post",
  timeoutMs: 5_000,
  lookup: async (key) => {
    const res = await fetch(`${server}/status/${encodeURIComponent(key)}`);
    if (res.status === 404) return { found: false };
    if (res.ok) return { found: true, result: await res.json() };
    return { found: "unknown", reason: `status ${res.status}` };
  },
});
const shell = makeShellTool(join(dir, "work"), { receiptsDir: join(dir, "receipts") });
const writeFile = makeWriteFileTool(join(dir, "work"));

const child = defineAgent({
  name: "torture-child",
  version: "1",
  run: async (turn, input: { label: string }) => {
    const r = await turn.tool(readSafe, { label: `${input.label}-child-read` });
    const s = await turn.tool(send, { label: `${input.label}-child-send` });
    return { r, s };
  },
});

const agent = defineAgent({
  name: "torture",
  version: "1",
  run: async (turn, input: { label: string }) => {
    const { label } = input;
    const plan = await turn.model("planner", { label }, async () => ({
      steps: ["read", "shell", "file", "http", "send", "child"],
    }));
    await turn.checkpoint({ plan, step: 0 });
    const read = await turn.tool(readSafe, { label: `${label}-read` });
    const sh = await turn.tool(shell, {
      command: `echo "${label}-shell $HOLDFAST_IDEMPOTENCY_KEY" >> ${JSON.stringify(witness("shell.txt"))}`,
    });
    await turn.checkpoint({ plan, step: 2 });
    const file = await turn.tool(writeFile, { path: `${label}.txt`, content: `content of ${label}\n` });
    const posted = await turn.tool(http, { url: `${server}/effects`, body: { label: `${label}-http` } });
    const [sent, again] = await turn.all([
      () => turn.tool(send, { label: `${label}-send-1` }),
      () => turn.tool(send, { label: `${label}-send-2` }),
    ]);
    const kid = await turn.child("torture-child", { label });
    return { read, sh: sh.exitCode, file: file.sha256, posted: posted.status, sent, again, kid };
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.TORTURE_DB!,
    agents: [agent, child],
    tools: [send, readSafe, http, shell, writeFile],
    allowlist: { read_safe: readSafe.pin },
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
