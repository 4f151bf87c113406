// `holdfast replay` of runs whose call met a cancel request on its way (decision 0091): the intent
// follows the request in the stream, closed not started in the same commit.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openRuntime, type Runtime, replayRuns } from "../../src/index.js";
import { NOT_STARTED_CONTROL_EVIDENCE } from "../../src/runtime/attempt.js";
import { startOwner } from "../support/control-owner.js";
import { planner, stubborn, stuck } from "../support/control-worker.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const stopped = (pid: number): boolean => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).startsWith("T");
};

const until = async (what: string, done: () => Promise<boolean>): Promise<void> => {
  const deadline = Date.now() + 60_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** The owner stopped at `before-intent` of `call`, cancelled there, let go: its run, once cancelled. */
const cancelledInTheWindow = async (kind: string, call: string): Promise<{ at: string; runId: string }> => {
  const at = join(tempDir(), "j.db");
  const owner = startOwner({
    HF_DB: at,
    HF_WITNESS: join(tempDir(), "witness.jsonl"),
    HF_KIND: kind,
    HOLDFAST_PAUSE_AT: "before-intent",
    HOLDFAST_PAUSE_CALL: call,
  });
  let runtime: Runtime | undefined;
  try {
    runtime = await openRuntime({
      store: at,
      agents: [stubborn, planner],
      tools: [stuck],
      workerId: "operator",
      recovery: { onOpen: false, leaseMs: 3_000 },
    });
    const rt = runtime;
    let runId = "";
    await until("the owner at its pause point", async () => {
      runId = (await rt.runs()).find((r) => r.chatId === "c")?.runId ?? "";
      return runId !== "" && stopped(owner.child.pid!);
    });
    await rt.cancel(runId, { by: "ops" });
    owner.child.kill("SIGCONT");
    await until("the run cancelled", async () => (await rt.run(runId))?.status === "cancelled");
    const events = (await rt.events(runId)).map((e) => e.event);
    const intended = events.findIndex((e) => e.type === "call.intended");
    expect(events.findIndex((e) => e.type === "run.cancel-requested")).toBeLessThan(intended);
    expect(events[intended + 1]).toMatchObject({
      type: "call.reconciled",
      evidence: NOT_STARTED_CONTROL_EVIDENCE,
    });
    return { at, runId };
  } finally {
    owner.child.kill("SIGKILL");
    await owner.exited;
    await runtime?.close();
  }
};

describe("replay of a run whose call met the cancel request on its way (decision 0091)", () => {
  it("a tool call closed not started in its intent's commit replays the same with the run's own code", async () => {
    const { at, runId } = await cancelledInTheWindow("tool", "stuck");
    const report = await replayRuns({ agents: [stubborn], tools: [stuck], store: at });
    expect(report.runs).toEqual([{ runId, agent: "stubborn@1", result: "same", calls: 1 }]);
  }, 90_000);

  it("a document call closed not started in its intent's commit replays the same with the run's own code", async () => {
    const { at, runId } = await cancelledInTheWindow("plan", "durable_plan");
    const report = await replayRuns({ agents: [planner], tools: [], store: at });
    expect(report.runs).toEqual([{ runId, agent: "planner@1", result: "same", calls: 1 }]);
  }, 90_000);
});
