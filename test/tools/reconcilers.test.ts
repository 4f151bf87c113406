import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type HttpLookup, makeHttpTool } from "../../src/adapters/integrations/tools/httpTool.js";
import { makeShellTool, makeWriteFileTool } from "../../src/adapters/integrations/tools/index.js";
import { keyedHash } from "../../src/events/index.js";
import type { CallContext } from "../../src/index.js";
import { startWitnessServer } from "../../torture/witness-server.js";
import { useTempDir } from "../support/tmp.js";
import { TEST_KEY } from "./calls.js";

const tempDir = useTempDir();

/** A work folder inside a fresh temp folder, so the receipts folder beside it is removed too. */
const workDir = (): string => {
  const work = join(tempDir(), "work");
  mkdirSync(work);
  return work;
};

const ctx = (key: string): CallContext => ({
  runId: "r",
  chatId: "c",
  callId: "r/0",
  attempt: 1,
  idempotencyKey: key,
  signal: new AbortController().signal,
  checkLease: () => {},
  keyedHash: () => keyedHash(TEST_KEY),
});
const check = (tool: { reconciler: unknown }, probe: unknown) =>
  (
    tool.reconciler as { check: (p: unknown, c: unknown) => Promise<{ outcome: string; result?: unknown }> }
  ).check(probe, {
    runId: "r",
    callId: "r/0",
    attempt: 1,
    idempotencyKey: "k",
    args: {},
    keyedHash: () => keyedHash(TEST_KEY),
  });
const probeOf = (tool: { reconciler: unknown }, args: unknown, context: CallContext) =>
  (tool.reconciler as { probe: (a: unknown, c: CallContext) => unknown }).probe(args, context);

describe("built-in reconcilers", () => {
  it("shell: an exit receipt proves completion with the output; no start receipt proves it never started; start without exit is unknown", async () => {
    const work = workDir();
    const shell = makeShellTool(work);
    expect(shell.disposition).toBe("reconcile");
    const done = ctx("r/0#1");
    await shell.run({ command: "echo hello" }, done);
    expect(await check(shell, probeOf(shell, {}, done))).toMatchObject({
      outcome: "completed",
      result: { exitCode: 0, stdout: "hello\n" },
    });
    expect((await check(shell, probeOf(shell, {}, ctx("r/9#1")))).outcome).toBe("not-completed");
    // As if holdfast died while the command ran: the start receipt stands alone.
    const probe = probeOf(shell, {}, done) as { receipt: string };
    rmSync(join(probe.receipt, "exit"));
    expect((await check(shell, probe)).outcome).toBe("unknown");
  });

  it("shell: output over 2 GiB is read only up to maxOutputBytes, by the call and by the reconciler", async () => {
    const work = workDir();
    const shell = makeShellTool(work, { maxOutputBytes: 4 });
    const context = ctx("r/2#1");
    // A sparse file: 3 GiB long, nothing written to disk.
    const result = await shell.run({ command: "truncate -s 3G /dev/stdout" }, context);
    const stdout = `\0\0\0\0\n… [${3 * 1024 ** 3 - 4} more bytes not kept]`;
    expect(result).toMatchObject({ exitCode: 0, stdout });
    expect(await check(shell, probeOf(shell, {}, context))).toMatchObject({
      outcome: "completed",
      result: { exitCode: 0, stdout },
    });
  });

  it("shell: the exit receipt is written by the wrapper even when nobody waits for the command", async () => {
    const work = workDir();
    const shell = makeShellTool(work, { timeoutMs: 60_000 });
    const context = ctx("r/1#1");
    await shell.run({ command: "exit 3" }, context);
    expect(await check(shell, probeOf(shell, {}, context))).toMatchObject({
      outcome: "completed",
      result: { exitCode: 3 },
    });
  });

  it("file write: the target's digest says completed; an attempt that never wrote is not completed; a target changed since is unknown", async () => {
    const work = workDir();
    const write = makeWriteFileTool(work);
    expect(write.disposition).toBe("reconcile");
    const args = { path: "a/notes.md", content: "intended\n" };
    const done = ctx("r/0#1");
    const probe = probeOf(write, args, done);
    await write.run(args, done);
    expect(await check(write, probe)).toMatchObject({
      outcome: "completed",
      result: { path: "a/notes.md", bytes: 9 },
    });
    const other = { path: "a/other.md", content: "other\n" };
    expect((await check(write, probeOf(write, other, ctx("r/1#1")))).outcome).toBe("not-completed");
    writeFileSync(join(work, "a/notes.md"), "someone else\n");
    expect((await check(write, probe)).outcome).toBe("unknown");
  });

  it("file write: a target too large to digest proves nothing about an attempt that wrote; an attempt voided before it wrote is still not completed", async () => {
    const work = workDir();
    const write = makeWriteFileTool(work);
    const wrote = ctx("r/0#1");
    const probe = probeOf(write, { path: "big.bin", content: "small" }, wrote);
    await write.run({ path: "big.bin", content: "small" }, wrote);
    writeFileSync(join(work, "big.bin"), Buffer.alloc(16 * 1024 * 1024 + 1));
    expect(await check(write, probe)).toMatchObject({
      outcome: "unknown",
      evidence: { now: { state: "too-large" } },
    });
    const never = probeOf(write, { path: "big.bin", content: "small" }, ctx("r/1#1"));
    expect((await check(write, never)).outcome).toBe("not-completed");
  });

  it("http: the idempotency key is sent, and the lookup decides completed, or not completed once it reserved the key", async () => {
    const server = await startWitnessServer();
    try {
      const http = makeHttpTool({
        lookup: async (key) => {
          const res = await fetch(`${server.url}/lookup/${encodeURIComponent(key)}`, { method: "POST" });
          return (await res.json()) as HttpLookup;
        },
      });
      const sent = ctx("r/0#1");
      await http.run({ url: `${server.url}/effects`, method: "POST", headers: {}, body: { a: 1 } }, sent);
      expect(server.counts.get("r/0#1")).toBe(1);
      const args = { url: `${server.url}/effects`, method: "POST" as const, headers: {} };
      expect((await check(http, probeOf(http, args, sent))).outcome).toBe("completed");
      expect((await check(http, probeOf(http, args, ctx("r/0#2")))).outcome).toBe("not-completed");
      // A refused connection never left: a definite failure.
      const closed = createServer();
      await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
      const { port } = closed.address() as AddressInfo;
      await new Promise((r) => closed.close(r));
      await expect(
        http.run({ url: `http://127.0.0.1:${port}/effects`, method: "POST", headers: {} }, ctx("r/2#1")),
      ).rejects.toMatchObject({ name: "DefiniteFailure", message: expect.stringContaining("ECONNREFUSED") });
      // A port fetch refuses to use (6000, X11) never leaves either, and the message says why.
      const refused = http.run(
        { url: "http://127.0.0.1:6000/effects", method: "POST", headers: {} },
        ctx("r/3#1"),
      );
      await expect(refused).rejects.toMatchObject({
        name: "DefiniteFailure",
        message: expect.stringContaining("bad port"),
      });
      await expect(refused).rejects.not.toMatchObject({ message: expect.stringContaining("undefined") });
    } finally {
      await server.close();
    }
  });
});
