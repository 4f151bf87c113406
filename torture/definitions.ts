/**
 * The torture agent and its tools, shared by the single-worker harness (agent-process.ts) and the
 * multi-worker one (worker-module.ts, loaded by `holdfast worker --module`). Every effect leaves a
 * trace an outside witness counts: lines in witness files (send, shell) and requests to the
 * witness server (http_post), each tagged with the call's idempotency key.
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { makeHttpTool } from "../src/adapters/tools/httpTool.js";
import { makeShellTool, makeWriteFileTool } from "../src/adapters/tools/index.js";
import { defineAgent, defineTool } from "../src/index.js";

export interface TortureSetting {
  /** The trial's folder: `witness/`, `work/`, `receipts/` live in it. */
  readonly dir: string;
  /** The witness server's base URL. */
  readonly server: string;
}

/** The tools the safe list names: only `read_safe` (its in-doubt calls are replayed). */
export const ALLOWLISTED = new Set(["read_safe"]);

export const makeTortureDefinitions = ({ dir, server }: TortureSetting) => {
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
    // Looks the key up and, when it did not act, reserves it: a late request with it is refused.
    lookup: async (key) => {
      const res = await fetch(`${server}/lookup/${encodeURIComponent(key)}`, { method: "POST" });
      if (!res.ok) return { found: "unknown", reason: `status ${res.status}` };
      const answer = (await res.json()) as { found?: unknown; result?: unknown; reserved?: unknown };
      if (answer.found === true) return { found: true, result: answer.result };
      if (answer.found === false && answer.reserved === true) return { found: false, reserved: true };
      return { found: "unknown", reason: `unexpected answer ${JSON.stringify(answer)}` };
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
      // The plan document: its changes commit with their call, so it must never be found in doubt.
      const current = await turn.plan.read();
      await turn.plan.replace(current.revision, {
        title: `plan ${label}`,
        items: plan.steps.map((text, i) => ({ id: `s${i}`, text, done: false })),
      });
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

  return {
    agents: [agent, child],
    tools: [send, readSafe, http, shell, writeFile],
    /** The safe list the harness runs with. */
    allowlist: { read_safe: readSafe.pin },
  };
};
