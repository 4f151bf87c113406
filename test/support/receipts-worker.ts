/**
 * A holdfast process whose agent runs the built-in shell and write_file tools with a registered
 * secret in the command's environment, for the receipt and byte-scan tests. Configured by environment:
 *   HF_DB, HF_WORK        journal file and work folder (receipts beside it: `<HF_WORK>.receipts`)
 *   HF_SECRET             the secret: registered as TOKEN, given to the commands as $TOKEN
 *   HF_ACTION             "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HF_TIMEOUT_MS         the shell tool's timeout (default 60 s)
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL, HOLDFAST_ENCRYPTION_KEY   as for any holdfast process
 * Prints one JSON object per line on stdout.
 */
import { makeShellTool, makeWriteFileTool } from "../../src/adapters/integrations/tools/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const shell = makeShellTool(env.HF_WORK!, {
  env: { set: { TOKEN: env.HF_SECRET! } },
  timeoutMs: Number(env.HF_TIMEOUT_MS ?? 60_000),
});
const writeFile = makeWriteFileTool(env.HF_WORK!);

/**
 * Prints the secret on stdout and stderr, fails a command with it, writes a note without it, and
 * has a write refused (its error text names `escape-Marker-5e1d`).
 */
const agent = defineAgent({
  name: "receipts",
  version: "1",
  run: async (turn, input: { slow?: boolean }) => {
    const printed = await turn.tool(shell, {
      command: input.slow ? 'printf "out:%s" "$TOKEN"; sleep 30' : 'printf "out:%s" "$TOKEN"',
    });
    const failed = await turn.tool(shell, { command: 'printf "err:%s" "$TOKEN" >&2; exit 3' });
    const note = await turn.tool(writeFile, { path: "note.md", content: "# a note\n" });
    // Refused (it leaves the work folder): a tool error whose text names the path.
    const refused = await turn.tool(writeFile, { path: "../escape-Marker-5e1d.txt", content: "x" }).then(
      () => "written",
      (error: { _tag?: string }) => error._tag ?? "?",
    );
    const after = await turn.tool(shell, { command: "true" });
    return {
      printed: printed.stdout,
      failed: failed.exitCode,
      note: note.bytes,
      refused,
      after: after.exitCode,
    };
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [agent],
    tools: [shell, writeFile],
    secrets: { TOKEN: env.HF_SECRET! },
    recovery: { leaseMs: 3000 },
  });
  const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
  out({ kind: "recovery", report });
  if (done) out({ kind: "recovered", results: await done });
  if (env.HF_ACTION === "submit") {
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "receipts",
      content: { slow: env.HF_SLOW === "1" },
    });
    out({ kind: "submitted", runId: handle.runId });
    out({ kind: "result", result: await handle.result });
  }
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
