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

/**
 * Faults the harness can put into a trial, besides killing it:
 *  - `agent-throws`: the agent throws while a call it started is still in flight;
 *  - `sibling-fails`: a call in `turn.all` fails without proof while its sibling is still running;
 *  - `reconciler-throws`: the HTTP status lookup throws during recovery.
 */
export const FAULTS = ["agent-throws", "sibling-fails", "reconciler-throws"] as const;
export type TortureFault = (typeof FAULTS)[number];

export interface TortureSetting {
  /** The trial's folder: `witness/`, `work/`, `receipts/` live in it. */
  readonly dir: string;
  /** The witness server's base URL. */
  readonly server: string;
  readonly fault?: TortureFault;
}

/** The tools the safe list names: only `read_safe` (its in-doubt calls are replayed). */
export const ALLOWLISTED = new Set(["read_safe"]);

/**
 * A registered secret the shell command prints: its result is stored masked, its receipts hold it
 * raw until the outcome is recorded. The byte scan after each trial looks for it everywhere.
 */
export const TORTURE_SECRET = "torture-token-3Hq8zV";

/** The error texts the torture's tools and agent throw: with encryption on, sealed wherever stored. */
export const TORTURE_ERROR_TEXTS = {
  flaky: "connection reset after the request was sent",
  reconciler: "the status service is down",
  agent: "the agent failed with a call in flight",
} as const;

export const makeTortureDefinitions = ({ dir, server, fault }: TortureSetting) => {
  const witness = (name: string) => join(dir, "witness", name);

  const send = defineTool({
    name: "send",
    args: Schema.Struct({ label: Schema.String, holdMs: Schema.optional(Schema.Number) }),
    // Not allowlisted, no reconciler: an in-doubt send is held for a person. With `holdMs` it takes
    // effect at once and answers later: a call still in flight when something else goes wrong.
    run: async ({ label, holdMs }, { idempotencyKey }) => {
      appendFileSync(witness("send.txt"), `${label} ${idempotencyKey}\n`);
      if (holdMs) await new Promise((resolve) => setTimeout(resolve, holdMs));
      return { sent: label };
    },
  });
  const flaky = defineTool({
    name: "flaky",
    args: Schema.Struct({ label: Schema.String }),
    // Fails without proof that nothing happened: in doubt, and held.
    run: async () => {
      throw new Error(TORTURE_ERROR_TEXTS.flaky);
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
      if (fault === "reconciler-throws") throw new Error(TORTURE_ERROR_TEXTS.reconciler);
      const res = await fetch(`${server}/lookup/${encodeURIComponent(key)}`, { method: "POST" });
      if (!res.ok) return { found: "unknown", reason: `status ${res.status}` };
      const answer = (await res.json()) as { found?: unknown; result?: unknown; reserved?: unknown };
      if (answer.found === true) return { found: true, result: answer.result };
      if (answer.found === false && answer.reserved === true) return { found: false, reserved: true };
      return { found: "unknown", reason: `unexpected answer ${JSON.stringify(answer)}` };
    },
  });
  const shell = makeShellTool(join(dir, "work"), {
    receiptsDir: join(dir, "receipts"),
    env: { set: { TORTURE_TOKEN: TORTURE_SECRET } },
  });
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
        command: `echo "${label}-shell $HOLDFAST_IDEMPOTENCY_KEY" >> ${JSON.stringify(witness("shell.txt"))}; printf 'token:%s' "$TORTURE_TOKEN"`,
      });
      await turn.checkpoint({ plan, step: 2 });
      const file = await turn.tool(writeFile, { path: `${label}.txt`, content: `content of ${label}\n` });
      const posted = await turn.tool(http, { url: `${server}/effects`, body: { label: `${label}-http` } });
      if (fault === "sibling-fails") {
        await turn.all([
          () => turn.tool(send, { label: `${label}-inflight`, holdMs: 300 }),
          () => turn.tool(flaky, { label }),
        ]);
      }
      if (fault === "agent-throws") {
        void turn.tool(send, { label: `${label}-inflight`, holdMs: 300 });
        throw new Error(TORTURE_ERROR_TEXTS.agent);
      }
      const [sent, again] = await turn.all([
        () => turn.tool(send, { label: `${label}-send-1` }),
        () => turn.tool(send, { label: `${label}-send-2` }),
      ]);
      const kid = await turn.child("torture-child", { label });
      // A call a person confirmed completed without giving its result returns null (decide's
      // `confirmed-completed`): the agent takes that as "done, result unknown", never as a crash.
      const known = <T, K extends keyof T>(result: T | null | undefined, field: K): T[K] | null =>
        result == null ? null : result[field];
      return {
        read,
        sh: known(sh, "exitCode"),
        file: known(file, "digest"),
        posted: known(posted, "status"),
        sent,
        again,
        kid,
      };
    },
  });

  return {
    agents: [agent, child],
    tools: [send, readSafe, http, shell, writeFile, flaky],
    /** The safe list the harness runs with. */
    allowlist: { read_safe: readSafe.pin },
  };
};
