import { join } from "node:path";
import * as Schema from "effect/Schema";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { runCli } from "../cli/cliProcess.js";
import { gate, staleWorkerId } from "../support/ownership.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const engines = [
  { name: "libSQL", store: async () => join(tempDir(), "journal.db") },
  {
    name: "PostgreSQL",
    store: async () => {
      await requirePg();
      return pgUrl(schemas.fresh());
    },
  },
];

describe.each(engines)("law 5 — a late outcome after retention, on $name", (engine) => {
  it("P1: an outcome that arrives after its run was stopped and pruned is recorded as outcome.orphaned in the system stream; the worker is told the run was pruned, and the audit is clean and shows it", async () => {
    const store = await engine.store();
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => {
      if (warning.code === "HOLDFAST_LATE_OUTCOME") warnings.push(warning.message);
    };
    process.on("warning", onWarning);
    const started = gate();
    const answer = gate();
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({ label: Schema.String }),
      disposition: "hold",
      run: async ({ label }) => {
        started.open();
        await answer.opened;
        return { sent: label };
      },
    });
    const agent = defineAgent({
      name: "sender",
      version: "1",
      run: async (turn) => turn.tool(slow, { label: "late" }),
    });
    const stale = await openRuntime({
      store,
      agents: [agent],
      tools: [slow],
      workerId: staleWorkerId(),
      recovery: { onOpen: false, leaseMs: 3_000 },
    });
    const other = await openRuntime({
      store,
      agents: [agent],
      tools: [slow],
      recovery: { onOpen: false, leaseMs: 3_000 },
    });
    try {
      const handle = await stale.submit({ chatId: "c", inputId: "i", agent: "sender", content: null });
      await started.opened;
      // Taken over while the call is in flight: held for a person, who stops the run.
      const report = await other.recover();
      expect(report.held.map((h) => h.runId)).toEqual([handle.runId]);
      const version = (await other.events(handle.runId)).length;
      const stop = await other.decide(handle.runId, {
        basedOnVersion: version,
        decidedBy: "ada",
        decision: "stop",
      });
      expect(await stop.result).toMatchObject({ status: "stopped" });
      const maintenance = await openStore(store);
      try {
        const pruned = await maintenance.prune({ keepRuns: 0, keepDays: 0 });
        expect(pruned.pruned.map((r) => r.runId)).toEqual([handle.runId]);
      } finally {
        await maintenance.close();
      }

      // The paused call returns: the effect took place, and its outcome is kept.
      answer.open();
      const result = await handle.result;
      expect(result).toMatchObject({ status: "pruned", runId: handle.runId, finalStatus: "stopped" });
      expect(JSON.stringify(result)).not.toMatch(/decide again/);
      expect(await other.events(handle.runId)).toEqual([]);
      expect(warnings).toEqual([expect.stringMatching(/after its run was pruned.*outcome\.orphaned/)]);
      const reader = await openStore(store);
      const system = (await reader.readStream("system").finally(() => reader.close())).map((e) => e.event);
      expect(system.filter((e) => e.type !== "journal.opened" && e.type !== "retention.pruned")).toEqual([
        expect.objectContaining({
          type: "outcome.orphaned",
          runId: handle.runId,
          callId: `${handle.runId}/0`,
          attempt: 1,
          recorded: expect.objectContaining({ status: "stopped" }),
          attempted: expect.objectContaining({ type: "call.completed", result: { sent: "late" } }),
        }),
      ]);
      const audit = await other.audit();
      expect(audit.findings).toEqual([]);
      expect(audit.orphanedOutcomes).toEqual([
        expect.objectContaining({ runId: handle.runId, callId: `${handle.runId}/0`, attempt: 1 }),
      ]);
      // What a person sees: the audit's report and the event list name it.
      const audited = await runCli(["audit", "--db", store]);
      expect(audited.code, audited.stderr).toBe(0);
      expect(audited.stdout).toMatch(/1 outcome arrived after its run was pruned/);
      expect(audited.stdout).toMatch(new RegExp(`system@\\d+ +${handle.runId}/0 attempt 1`));
      const listed = await runCli(["events", "--db", store]);
      expect(listed.stdout).toMatch(/system@\d+ +outcome\.orphaned/);
    } finally {
      process.off("warning", onWarning);
      await stale.close();
      await other.close();
    }
  }, 60_000);
});
