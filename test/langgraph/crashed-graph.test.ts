import { spawn } from "node:child_process";
import { join } from "node:path";
import { Command } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { openRuntime } from "../../src/index.js";
import { HoldfastSaver } from "../../src/langgraph.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { buildGraph, recordCallAgent } from "../support/langgraph-graph.js";
import { useTempDir } from "../support/tmp.js";
import { countOf, makeRecordTool } from "../support/witness.js";

const tempDir = useTempDir();
const WORKER = join(import.meta.dirname, "..", "support", "langgraph-worker.ts");

/** Run the graph in a child process until it ends, or kills itself at a crash point. */
const runGraphProcess = (env: Record<string, string>) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", WORKER], {
      cwd: join(import.meta.dirname, "..", ".."),
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stderr }));
  });

describe("a LangGraph graph on the journal, killed mid-tool", () => {
  it("resumes from the checkpointer, holds the in-doubt tool call instead of re-running it, and completes after a decision; the effect happened once and the journal audits clean", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const config = { configurable: { thread_id: "thread-1" } };

    // Given a graph process killed after the tool's effect, before its outcome was recorded.
    const crashed = await runGraphProcess({
      HF_DB: db,
      HF_WITNESS: witness,
      HF_THREAD: "thread-1",
      HOLDFAST_CRASH_AT: "after-effect-before-outcome",
      HOLDFAST_CRASH_CALL: "record",
    });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");
    expect(countOf(witness, "graph-a")).toBe(1);

    // When it restarts: recovery holds the tool call, and the graph resumes from its checkpoint.
    const runtime = await openRuntime({
      store: db,
      agents: [recordCallAgent],
      tools: [makeRecordTool(witness)],
    });
    const checkpointer = await HoldfastSaver.open({ store: db });
    try {
      expect(runtime.recovery.held).toHaveLength(1);
      const runId = runtime.recovery.held[0]!.runId;
      const graph = buildGraph(runtime, checkpointer);
      // LangGraph saves checkpoints in the background, so the kill finds one of two states, both
      // whole: the agent step's checkpoint with its pending writes (the tool call), or the next
      // checkpoint, with the tool call in its messages and the tools node next. Either way the
      // journal knows the tool call and holds no tool result.
      const saved = await graph.getState(config);
      const pending = saved.tasks.flatMap((t) => (t.result as { messages?: unknown[] })?.messages ?? []);
      expect(JSON.stringify([pending, saved.values])).toContain('"call-1"');
      expect(JSON.stringify(saved.values)).not.toContain("ToolMessage");

      await graph.invoke(null, config);
      const paused = await graph.getState(config);
      expect(paused.next).toEqual(["tools"]);
      expect(paused.tasks[0]?.interrupts[0]?.value).toEqual({ runId, status: "held" });
      expect(countOf(witness, "graph-a")).toBe(1);

      // Then a person confirms the effect happened, and the graph completes with that result.
      const version = (await runtime.events(runId)).length;
      const { result } = await runtime.decide(runId, {
        decision: "confirmed-completed",
        basedOnVersion: version,
        decidedBy: "ada",
        note: "graph-a is in the witness file",
        result: { label: "graph-a", recorded: true },
      });
      expect((await result).status).toBe("completed");
      const done = await graph.invoke(new Command({ resume: "decided" }), config);
      expect(String(done.messages.at(-1)?.content)).toBe('done: {"label":"graph-a","recorded":true}');
      expect((await graph.getState(config)).next).toEqual([]);
      expect(countOf(witness, "graph-a")).toBe(1);
    } finally {
      await checkpointer.close();
      await runtime.close();
    }
    const reader = LibsqlJournal.openReadOnly(db);
    try {
      expect((await auditJournal(reader)).findings).toEqual([]);
    } finally {
      await reader.close();
    }
  });
});
