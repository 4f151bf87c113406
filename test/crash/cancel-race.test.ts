import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openRuntime, type Runtime } from "../../src/index.js";
import { NOT_STARTED_CONTROL_EVIDENCE } from "../../src/runtime/attempt.js";
import { startOwner } from "../support/control-owner.js";
import { pausable, planner, step, stubborn, stuck } from "../support/control-worker.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** Whether the process stopped itself (SIGSTOP at a pause point): its state in /proc is `T`. */
const stopped = (pid: number): boolean => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).startsWith("T");
};

/** The owner's run in chat `c`, once admitted, and the owner stopped at its pause point. */
const stoppedOwnerRun = async (runtime: Runtime, owner: ReturnType<typeof startOwner>): Promise<string> => {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const run = (await runtime.runs()).find((r) => r.chatId === "c");
    if (run && stopped(owner.child.pid!)) return run.runId;
    if (Date.now() > deadline || owner.child.exitCode !== null)
      throw new Error("the owner never stopped at its pause point");
    await new Promise((r) => setTimeout(r, 50));
  }
};

const witnessed = (file: string): string[] =>
  existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean) : [];

describe.each(["libsql", "postgres"] as const)(
  "an owner SIGKILLed after an intent that raced a control request, on %s (decision 0091)",
  (engine) => {
    const store = async () => {
      if (engine === "postgres") await requirePg();
      return engine === "postgres" ? pgUrl(schemas.fresh()) : join(tempDir(), "j.db");
    };
    const operator = (at: string) =>
      openRuntime({
        store: at,
        agents: [stubborn, pausable, planner],
        tools: [stuck, step],
        workerId: "operator",
        recovery: { onOpen: false, leaseMs: 3_000 },
      });

    it("an intent appended after the cancel request commits with its not-started outcome: recovery ends the run cancelled, holds nothing, and the effect never runs", async () => {
      const at = await store();
      const witness = join(tempDir(), "witness.jsonl");
      // Stopped after its check for a control request, before its intent's append; killed right
      // after that append commits.
      const owner = startOwner({
        HF_DB: at,
        HF_WITNESS: witness,
        HF_KIND: "tool",
        HOLDFAST_PAUSE_AT: "before-intent",
        HOLDFAST_PAUSE_CALL: "stuck",
        HOLDFAST_CRASH_AT: "after-intent",
        HOLDFAST_CRASH_CALL: "stuck",
      });
      const runtime = await operator(at);
      try {
        const runId = await stoppedOwnerRun(runtime, owner);
        // The owner is alive (its lease runs): the request is recorded and left to it.
        expect(await runtime.cancel(runId, { by: "ops" })).toMatchObject({
          accepted: true,
          status: "cancel-requested",
        });
        owner.child.kill("SIGCONT");
        expect(await owner.exited).toBe("SIGKILL");

        const report = await runtime.recover();
        expect(report.held).toEqual([]);
        await report.done;
        expect((await runtime.wait(runId)).status).toBe("cancelled");
        // The intent came after the request, its not-started outcome next to it (one commit).
        const events = (await runtime.events(runId)).map((e) => e.event);
        const types = events.map((e) => e.type);
        const intended = types.indexOf("call.intended");
        expect(types.indexOf("run.cancel-requested")).toBeLessThan(intended);
        expect(events[intended + 1]).toMatchObject({
          type: "call.reconciled",
          callId: `${runId}/0`,
          outcome: "not-completed",
          evidence: NOT_STARTED_CONTROL_EVIDENCE,
        });
        expect(types).not.toContain("run.held");
        expect(witnessed(witness)).toEqual([]);
        expect((await runtime.audit()).findings).toEqual([]);
      } finally {
        owner.child.kill("SIGKILL");
        await runtime.close();
      }
    });

    it("an intent appended after the pause request commits with its not-started outcome: recovery parks the run paused, and on resume the call runs once, afresh", async () => {
      const at = await store();
      const witness = join(tempDir(), "witness.jsonl");
      const release = join(tempDir(), "release");
      const owner = startOwner({
        HF_DB: at,
        HF_WITNESS: witness,
        HF_RELEASE: release,
        HF_KIND: "pause",
        HOLDFAST_PAUSE_AT: "before-intent",
        HOLDFAST_PAUSE_CALL: "step",
        HOLDFAST_CRASH_AT: "after-intent",
        HOLDFAST_CRASH_CALL: "step",
      });
      const runtime = await operator(at);
      try {
        const runId = await stoppedOwnerRun(runtime, owner);
        expect(await runtime.pause(runId, { by: "ops" })).toMatchObject({
          accepted: true,
          status: "pause-requested",
        });
        owner.child.kill("SIGCONT");
        expect(await owner.exited).toBe("SIGKILL");

        const report = await runtime.recover();
        expect(report.held).toEqual([]);
        await report.done;
        expect((await runtime.run(runId))?.status).toBe("paused");
        expect(witnessed(witness)).toEqual([]);

        // Resumed here: the steps run in this process, with the owner's witness and release file.
        writeFileSync(release, "");
        process.env.HF_WITNESS = witness;
        process.env.HF_RELEASE = release;
        const resumed = await runtime.resume(runId, { by: "ops" });
        expect(resumed.accepted).toBe(true);
        expect((await resumed.result).status).toBe("completed");
        // The first attempt never ran; the step ran once, as the next attempt, then the second step.
        expect(witnessed(witness).map((l) => JSON.parse(l))).toEqual([
          { step: 1, attempt: 2 },
          { step: 2, attempt: 1 },
        ]);
        expect((await runtime.audit()).findings).toEqual([]);
      } finally {
        delete process.env.HF_WITNESS;
        delete process.env.HF_RELEASE;
        owner.child.kill("SIGKILL");
        await runtime.close();
      }
    });

    it("a document call whose commit meets the cancel request is not committed: its intent commits with its not-started outcome, the plan is unchanged, the run ends cancelled", async () => {
      const at = await store();
      // Stopped after the check and the document's read, before the commit of intent, outcome and change.
      const owner = startOwner({
        HF_DB: at,
        HF_WITNESS: join(tempDir(), "witness.jsonl"),
        HF_KIND: "plan",
        HOLDFAST_PAUSE_AT: "before-intent",
        HOLDFAST_PAUSE_CALL: "durable_plan",
      });
      const runtime = await operator(at);
      try {
        const runId = await stoppedOwnerRun(runtime, owner);
        expect(await runtime.cancel(runId, { by: "ops" })).toMatchObject({
          accepted: true,
          status: "cancel-requested",
        });
        owner.child.kill("SIGCONT");
        // The owner carries the cancel out: the run ends in its process.
        const deadline = Date.now() + 60_000;
        while ((await runtime.run(runId))?.status === "running" && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 50));
        expect((await runtime.run(runId))?.status).toBe("cancelled");
        const events = (await runtime.events(runId)).map((e) => e.event);
        const types = events.map((e) => e.type);
        const intended = types.indexOf("call.intended");
        expect(types.indexOf("run.cancel-requested")).toBeLessThan(intended);
        expect(events[intended + 1]).toMatchObject({
          type: "call.reconciled",
          outcome: "not-completed",
          evidence: NOT_STARTED_CONTROL_EVIDENCE,
        });
        expect(types).not.toContain("call.completed");
        expect((await runtime.documents.read("c")).revision).toBe(0);
        expect((await runtime.audit()).findings).toEqual([]);
      } finally {
        owner.child.kill("SIGKILL");
        await runtime.close();
      }
    });

    it("an intent committed before the cancel request stays in doubt: the owner SIGKILLed after its lease check (its effect about to start) leaves the run held cancelled-in-doubt", async () => {
      const at = await store();
      const witness = join(tempDir(), "witness.jsonl");
      const owner = startOwner({
        HF_DB: at,
        HF_WITNESS: witness,
        HF_KIND: "tool",
        HOLDFAST_PAUSE_AT: "after-lease-check",
        HOLDFAST_PAUSE_CALL: "stuck",
      });
      const runtime = await operator(at);
      try {
        const runId = await stoppedOwnerRun(runtime, owner);
        expect(await runtime.cancel(runId, { by: "ops" })).toMatchObject({
          accepted: true,
          status: "cancel-requested",
        });
        owner.child.kill("SIGKILL");
        expect(await owner.exited).toBe("SIGKILL");

        const report = await runtime.recover();
        await report.done;
        const result = await runtime.wait(runId);
        expect(result.status).toBe("held");
        if (result.status === "held")
          expect(result.reasons).toEqual([
            expect.objectContaining({ code: "cancelled-in-doubt", callId: `${runId}/0` }),
          ]);
        // The effect had not started, but nothing in the journal proves it: held, never "not started".
        expect(witnessed(witness)).toEqual([]);
        expect((await runtime.audit()).findings).toEqual([]);
      } finally {
        owner.child.kill("SIGKILL");
        await runtime.close();
      }
    });
  },
);
