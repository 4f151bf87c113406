import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openRuntime } from "../../src/index.js";
import { lineOf, runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { countOf, makeRecordTool, makeStepsAgent } from "../support/witness.js";

const tempDir = useTempDir();

describe("law 2 — reuse", () => {
  it("a call with a recorded outcome is never executed again after a SIGKILL: re-execution returns the recorded result", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.txt");
    const base = {
      HF_DB: join(dir, "journal.db"),
      HF_WITNESS: witness,
      HF_CHAT: "chat-1",
      HF_INPUT: "in-1",
      HF_PREFIX: "p",
    };

    // The process dies right after the outcome of the first "record" call is committed.
    const first = await runWorker({
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "record",
    });
    expect(first.signal).toBe("SIGKILL");
    expect(countOf(witness, "p-a")).toBe(1);
    expect(countOf(witness, "p-b")).toBe(0);

    // A new process sees the owner is dead, recovers the run, and re-executes the agent from the top.
    const second = await runWorker({ ...base, HF_ACTION: "recover" });
    expect(second.code).toBe(0);
    const report = lineOf(second, "recovery")?.report as { resumed: string[] };
    expect(report.resumed).toHaveLength(1);
    const results = lineOf(second, "recovered")?.results as Array<{ status: string; output: { a: unknown } }>;
    expect(results.map((r) => r.status)).toEqual(["completed"]);
    // The first call's result came from the journal, the effect ran once.
    expect(results[0]?.output.a).toEqual({ label: "p-a", recorded: true });
    expect(countOf(witness, "p-a")).toBe(1);
    expect(countOf(witness, "p-b")).toBe(1);
    expect(countOf(witness, "p-c")).toBe(1);
  });

  it("asking again for a finished input serves the recorded output and runs nothing", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.txt");
    const rt = await openRuntime({
      store: join(dir, "journal.db"),
      agents: [makeStepsAgent()],
      tools: [makeRecordTool(witness)],
    });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "steps", content: { prefix: "q" } });
    const first = await run.result;
    expect(first.status).toBe("completed");
    const again = await rt.submit({ chatId: "c", inputId: "i", agent: "steps", content: { prefix: "q" } });
    expect(again.reused).toBe(true);
    expect(await again.result).toEqual(first);
    expect(countOf(witness, "q-a") + countOf(witness, "q-b") + countOf(witness, "q-c")).toBe(3);
    await rt.close();
  });
});
