import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeHttpTool } from "../../src/adapters/integrations/tools/httpTool.js";
import { makeShellTool, makeWriteFileTool } from "../../src/adapters/integrations/tools/index.js";
import type { ReconcileVerdict } from "../../src/runtime/define.js";
import { startWitnessServer } from "../../torture/witness-server.js";
import { useTempDir } from "../support/tmp.js";
import { callContext, checkOf, probeOf } from "./calls.js";

const tempDir = useTempDir();

/** A work folder inside a fresh temp folder, so the receipts folder beside it is removed too. */
const workDir = (): string => {
  const work = join(tempDir(), "work");
  mkdirSync(work);
  return work;
};
const ROOT = join(import.meta.dirname, "..", "..");

/**
 * The new owner's recovery, in another process, run while this process (the old owner) is stopped
 * synchronously: nothing of this process moves until it answers.
 */
const reconcileElsewhere = (request: {
  tool: "shell" | "write_file";
  work: string;
  probe: unknown;
  key: string;
}): ReconcileVerdict =>
  JSON.parse(
    execFileSync(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "reconcile-process.ts"), JSON.stringify(request)],
      { cwd: ROOT, encoding: "utf8", timeout: 60_000 },
    ),
  ) as ReconcileVerdict;

const lines = (path: string): string[] =>
  existsSync(path) ? readFileSync(path, "utf8").trim().split("\n").filter(Boolean) : [];

describe("F2: a 'not started' proof fences the old owner outside the journal (law 10)", () => {
  it("F2: shell: once the reconciler answered not-completed, the old owner waking up can no longer run the command", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    mkdirSync(work);
    const witness = join(dir, "witness.txt");
    const shell = makeShellTool(work);
    const key = "run1/0#1";
    const args = { command: `echo "charged $HOLDFAST_IDEMPOTENCY_KEY" >> ${JSON.stringify(witness)}` };
    const probe = probeOf(shell, args, key);
    // The old owner passed its lease check and stopped; the new owner reconciles the attempt.
    const verdict = await checkOf(shell, probe, key);
    expect(verdict.outcome).toBe("not-completed");
    // The old owner wakes up and goes on with the attempt it had started.
    const late = await shell.run(args, callContext(key)).catch((error: unknown) => error);
    expect(late).toMatchObject({ name: "DefiniteFailure", message: expect.stringContaining("voided") });
    expect(lines(witness)).toEqual([]);
    // The new owner's attempt runs, once.
    await shell.run(args, callContext("run1/0#2"));
    expect(lines(witness)).toEqual(["charged run1/0#2"]);
  });

  it("F2: shell: the tombstone is durable and a reconciler asked twice answers the same", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    mkdirSync(work);
    const shell = makeShellTool(work);
    const key = "run2/3#1";
    const probe = probeOf(shell, { command: "true" }, key);
    const first = await checkOf(shell, probe, key);
    const second = await checkOf(shell, probe, key);
    expect(first.outcome).toBe("not-completed");
    expect(second.outcome).toBe("not-completed");
    const start = join(`${work}.receipts`, "run2_3_1", "start");
    expect(JSON.parse(readFileSync(start, "utf8"))).toMatchObject({ state: "voided", key });
    // A third owner, with a fresh tool object (as after a restart), reads the same tombstone.
    expect((await checkOf(makeShellTool(work), probe, key)).outcome).toBe("not-completed");
  });

  it("F2: shell: an owner stopped after its start receipt is durable leaves the attempt in doubt: the reconciler elsewhere answers unknown, never not-completed", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    mkdirSync(work);
    const witness = join(dir, "witness.txt");
    const shell = makeShellTool(work);
    const key = "run3/0#1";
    const args = { command: `echo "charged $HOLDFAST_IDEMPOTENCY_KEY" >> ${JSON.stringify(witness)}` };
    const probe = probeOf(shell, args, key);
    let verdict: ReconcileVerdict | undefined;
    await shell.run(
      args,
      callContext(key, () => {
        verdict = reconcileElsewhere({ tool: "shell", work, probe, key });
      }),
    );
    expect(verdict?.outcome).toBe("unknown");
    expect(lines(witness)).toEqual(["charged run3/0#1"]);
  });

  it("F2: write_file: once the reconciler answered not-completed, the old owner can no longer write the target", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    mkdirSync(work);
    const write = makeWriteFileTool(work);
    const key = "run4/0#1";
    const args = { path: "out/notes.md", content: "attempt one\n" };
    const probe = probeOf(write, args, key);
    const verdict = await checkOf(write, probe, key);
    expect(verdict.outcome).toBe("not-completed");
    const late = await write.run(args, callContext(key)).catch((error: unknown) => error);
    expect(late).toMatchObject({ name: "DefiniteFailure", message: expect.stringContaining("voided") });
    expect(existsSync(join(work, "out", "notes.md"))).toBe(false);
    expect((await checkOf(write, probe, key)).outcome).toBe("not-completed");
  });

  it("F2: write_file: an owner stopped between staging its content and writing the target is fenced by the reconciler elsewhere, and never writes", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    mkdirSync(work);
    const write = makeWriteFileTool(work);
    const key = "run5/1#1";
    const args = { path: "notes.md", content: "attempt one\n" };
    const probe = probeOf(write, args, key);
    let verdict: ReconcileVerdict | undefined;
    const late = await write
      .run(
        args,
        callContext(key, () => {
          verdict = reconcileElsewhere({ tool: "write_file", work, probe, key });
        }),
      )
      .catch((error: unknown) => error);
    expect(verdict?.outcome).toBe("not-completed");
    expect(late).toMatchObject({ name: "DefiniteFailure", message: expect.stringContaining("voided") });
    expect(existsSync(join(work, "notes.md"))).toBe(false);
    // Asked again (a second recovery pass), the answer stands.
    expect((await checkOf(write, probe, key)).outcome).toBe("not-completed");
    // The next attempt writes.
    await write.run(args, callContext("run5/1#2"));
    expect(readFileSync(join(work, "notes.md"), "utf8")).toBe("attempt one\n");
  });

  it("write_file: a target that already holds the intended content is completed, and stays so when asked twice", async () => {
    const work = workDir();
    const write = makeWriteFileTool(work);
    const key = "run6/0#1";
    const args = { path: "a.txt", content: "same\n" };
    const probe = probeOf(write, args, key);
    await write.run(args, callContext(key));
    expect((await checkOf(write, probe, key)).outcome).toBe("completed");
    expect((await checkOf(write, probe, key)).outcome).toBe("completed");
  });

  it("F2: http: 'not found' proves nothing unless the lookup reserved the key; a reserved key's late request is refused and not counted", async () => {
    const server = await startWitnessServer();
    try {
      const unreserved = makeHttpTool({ lookup: async () => ({ found: false }) });
      const args = { url: `${server.url}/effects`, method: "POST" as const, headers: {} };
      const key = "run7/0#1";
      expect((await checkOf(unreserved, probeOf(unreserved, args, key), key)).outcome).toBe("unknown");

      const reserving = makeHttpTool({
        lookup: async (k) => {
          const res = await fetch(`${server.url}/lookup/${encodeURIComponent(k)}`, { method: "POST" });
          return (await res.json()) as { found: false; reserved: true };
        },
      });
      const verdict = await checkOf(reserving, probeOf(reserving, args, key), key);
      expect(verdict).toMatchObject({ outcome: "not-completed" });
      // The old owner wakes up and sends the request: the remote side refuses the reserved key.
      const late = await reserving
        .run({ ...args, body: { amount: 5 } }, callContext(key))
        .catch((error: unknown) => error);
      expect(late).toMatchObject({ name: "DefiniteFailure" });
      expect(server.counts.get(key)).toBeUndefined();
      // Asked again, the answer stands.
      expect((await checkOf(reserving, probeOf(reserving, args, key), key)).outcome).toBe("not-completed");
    } finally {
      await server.close();
    }
  });
});
