import { mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeShellTool } from "../../src/adapters/integrations/tools/shellTool.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { callContext } from "./calls.js";

const tempDir = useTempDir();

/** A work folder inside a fresh temp folder, so the receipts folder beside it is removed too. */
const workDir = (): string => {
  const work = join(tempDir(), "work");
  mkdirSync(work);
  return work;
};
const SECRET = "k3y-Registered-Secret-9f8e7d6c";

const rawBytes = (dir: string): Buffer => {
  const out: Buffer[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(readFileSync(p));
    }
  };
  walk(dir);
  return Buffer.concat(out);
};

/** Set environment variables for one test and restore them afterwards. */
const withEnv = async (vars: Record<string, string>, body: () => Promise<void>): Promise<void> => {
  const before = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    await body();
  } finally {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
};

describe("shell: the child's environment and the receipts (law 8)", () => {
  it("F5: the command never sees the journal's key or store, and the receipts hold no raw command", async () => {
    const dir = tempDir();
    const key = "a".repeat(64);
    await withEnv({ HOLDFAST_ENCRYPTION_KEY: key }, async () => {
      mkdirSync(join(dir, "work"));
      const shell = makeShellTool(join(dir, "work"));
      const agent = defineAgent({
        name: "sh",
        version: "1",
        run: async (turn) =>
          turn.tool(shell, { command: `echo token=${SECRET} >/dev/null; echo "[$HOLDFAST_ENCRYPTION_KEY]"` }),
      });
      const rt = await openRuntime({
        store: join(dir, "j.db"),
        agents: [agent],
        tools: [shell],
        secrets: { SECRET },
      });
      try {
        const run = await rt.submit({ chatId: "c", inputId: "i", agent: "sh", content: null });
        const result = await run.result;
        expect(result).toMatchObject({ status: "completed", output: { exitCode: 0, stdout: "[]\n" } });
      } finally {
        await rt.close();
      }
      const receipts = rawBytes(join(dir, "work.receipts"));
      expect(receipts.includes(Buffer.from(SECRET))).toBe(false);
      expect(receipts.includes(Buffer.from(key))).toBe(false);
    });
  });

  it("passes only the allowlisted variables, plus the ones named in `env.pass` and `env.set`; never a HOLDFAST_ variable", async () => {
    await withEnv(
      {
        HOLDFAST_STORE: "postgres://app:hunter2-secret@db/x",
        HOLDFAST_WORKER_ID: "w1",
        LC_TEST_LOCALE: "C",
        EXTRA_PASSED: "yes",
        NOT_PASSED: "no",
        DATABASE_URL: "postgres://app:hunter2-secret@db/x",
      },
      async () => {
        const shell = makeShellTool(workDir(), {
          env: { pass: ["EXTRA_PASSED", "DATABASE_URL"], set: { GREETING: "hello" } },
        });
        const { stdout } = await shell.run({ command: "env" }, callContext("r/0#1"));
        const names = stdout
          .trim()
          .split("\n")
          .map((line) => line.split("=")[0]);
        expect(names).toContain("PATH");
        expect(names).toContain("LC_TEST_LOCALE");
        expect(names).toContain("EXTRA_PASSED");
        expect(names).toContain("GREETING");
        expect(names).toContain("HOLDFAST_IDEMPOTENCY_KEY");
        expect(names).not.toContain("NOT_PASSED");
        expect(names).not.toContain("HOLDFAST_COMMAND");
        expect(names.filter((n) => n?.startsWith("HOLDFAST_"))).toEqual(["HOLDFAST_IDEMPOTENCY_KEY"]);
        // A passed variable that carries the journal's store URL is left out too.
        expect(stdout).not.toContain("hunter2-secret");
      },
    );
  });

  it("refuses an `env` option that names a HOLDFAST_ variable", () => {
    expect(() => makeShellTool(workDir(), { env: { pass: ["HOLDFAST_STORE"] } })).toThrow(/HOLDFAST_/);
    expect(() => makeShellTool(workDir(), { env: { set: { HOLDFAST_X: "1" } } })).toThrow(/HOLDFAST_/);
  });
});
