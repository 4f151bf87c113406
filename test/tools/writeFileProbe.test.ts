import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeWriteFileTool } from "../../src/adapters/integrations/tools/writeFileTool.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { probeOf, reconcileContext } from "./calls.js";

const tempDir = useTempDir();
const ROOT = join(import.meta.dirname, "..", "..");

describe("write_file: the probe checks the path before it touches the disk", () => {
  it("F15: a path outside the work folder is never read by the probe, and the call fails definitely with nothing written", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "outside.txt"), "private");
    mkdirSync(join(dir, "work"));
    const wf = makeWriteFileTool(join(dir, "work"));
    const agent = defineAgent({
      name: "w",
      version: "1",
      run: async (turn) => turn.tool(wf, { path: "../outside.txt", content: "x" }),
    });
    const rt = await openRuntime({ store: join(dir, "j.db"), agents: [agent], tools: [wf] });
    try {
      const run = await rt.submit({ chatId: "c", inputId: "i", agent: "w", content: null });
      await run.result;
      const events = (await rt.events(run.runId)).map((e) => e.event);
      const intent = events.find((e) => e.type === "call.intended");
      const stored = JSON.stringify(intent);
      expect(stored).not.toContain(join(dir, "outside.txt"));
      // sha256("private"): the outside file's digest must not be in the intent.
      expect(stored).not.toContain("715dc8493c36579a5b116995100f635e3572fdf8703e708ef1a08d943b36774e");
      expect(stored).not.toMatch(/"previous":"[0-9a-f]{64}"/);
      expect(events.find((e) => e.type === "call.failed")).toMatchObject({ definite: true });
    } finally {
      await rt.close();
    }
    expect(execFileSync("cat", [join(dir, "outside.txt")], { encoding: "utf8" })).toBe("private");
  });

  it("F15: a FIFO in the work folder does not hang the probe, and is not read", () => {
    const work = tempDir();
    execFileSync("mkfifo", [join(work, "pipe")]);
    // In another process, so a probe that blocks on the FIFO fails this test instead of freezing it.
    const script = [
      'import { makeWriteFileTool } from "./src/adapters/integrations/tools/writeFileTool.ts";',
      `const tool = makeWriteFileTool(${JSON.stringify(work)});`,
      'const probe = tool.reconciler.probe({ path: "pipe", content: "x" }, { idempotencyKey: "r/0#1" });',
      "process.stdout.write(JSON.stringify(probe));",
    ].join("\n");
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(JSON.parse(out)).not.toHaveProperty("previous.sha256");
    expect(out).toContain("fifo");
  });

  it("a file above the size cap is not read: the probe says it is too large to digest", () => {
    const work = tempDir();
    writeFileSync(join(work, "big.bin"), Buffer.alloc(16 * 1024 * 1024 + 1));
    const probe = probeOf(makeWriteFileTool(work), { path: "big.bin", content: "x" }, "r/0#1");
    expect(probe).toMatchObject({ previous: { state: "too-large", bytes: 16 * 1024 * 1024 + 1 } });
  });
});

describe("write_file: content digests are keyed", () => {
  it("F15: a short secret written to a file cannot be brute-forced from the digests in the journal", async () => {
    const digestsIn = async (dir: string) => {
      const wf = makeWriteFileTool(join(dir, "work"));
      const agent = defineAgent({
        name: "w",
        version: "1",
        run: async (turn) => turn.tool(wf, { path: "pin.txt", content: "PIN=4711" }),
      });
      const rt = await openRuntime({
        store: join(dir, "j.db"),
        agents: [agent],
        tools: [wf],
        secrets: { PIN: "4711" },
      });
      try {
        const run = await rt.submit({ chatId: "c", inputId: "i", agent: "w", content: null });
        expect(await run.result).toMatchObject({ status: "completed" });
        const events = (await rt.events(run.runId)).map((e) => e.event);
        const stored = JSON.stringify(events);
        const intent = events.find((e) => e.type === "call.intended") as { probe: { intended: string } };
        const completed = events.find((e) => e.type === "call.completed") as { result: { digest: string } };
        return { stored, intended: intent.probe.intended, result: completed.result.digest };
      } finally {
        await rt.close();
      }
    };
    const first = await digestsIn(tempDir());
    expect(first.stored).toContain("«secret:PIN»");
    // The attack: try every four-digit PIN against the stored digests.
    for (let pin = 0; pin < 10_000; pin++) {
      const guess = createHash("sha256")
        .update(`PIN=${String(pin).padStart(4, "0")}`)
        .digest("hex");
      if (first.stored.includes(guess)) throw new Error(`the PIN is recoverable: PIN=${pin}`);
    }
    expect(first.result).toBe(first.intended);
    // Keyed by the journal's own key: another journal digests the same content differently.
    const second = await digestsIn(tempDir());
    expect(second.intended).not.toBe(first.intended);
  });

  it("an intent recorded before digests were keyed (plain SHA-256) is still checked with its own digest", async () => {
    const work = tempDir();
    writeFileSync(join(work, "a.txt"), "hello");
    const tool = makeWriteFileTool(work);
    const probe = {
      target: join(work, "a.txt"),
      intended: createHash("sha256").update("hello").digest("hex"),
      previous: { state: "absent" },
      receipt: join(`${work}.receipts`, "r_0_1"),
    };
    const verdict = await tool.reconciler!.check(probe, reconcileContext("r/0#1"));
    expect(verdict).toMatchObject({ outcome: "completed", result: { path: "a.txt", bytes: 5 } });
  });
});
