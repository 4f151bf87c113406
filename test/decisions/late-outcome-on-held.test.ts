import { join } from "node:path";
import * as Schema from "effect/Schema";
import { describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { runView } from "../../src/adapters/surfaces/http/views.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { runCli } from "../cli/cliProcess.js";
import { gate, staleWorkerId } from "../support/ownership.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** What the journal contradicts once the call's outcome is recorded. */
const NO_OUTCOME = /intent but no outcome|nothing proves|stays unknown|outcome not committed/;
const ARRIVED = "the call's outcome arrived after the hold: resume to continue with it";

describe("a late outcome on a held run", () => {
  it("P4: once the outcome of the call a run is held for lands, the hold reasons (runs projection), holdfast show, the decision hints and the panel say it arrived after the hold, not that the call has no outcome", async () => {
    const db = join(tempDir(), "journal.db");
    const started = gate();
    const answer = gate();
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({}),
      disposition: "hold",
      run: async () => {
        started.open();
        await answer.opened;
        return { sent: true };
      },
    });
    const agent = defineAgent({ name: "sender", version: "1", run: async (turn) => turn.tool(slow, {}) });
    const stale = await openRuntime({
      store: db,
      agents: [agent],
      tools: [slow],
      workerId: staleWorkerId(),
      recovery: { onOpen: false, leaseMs: 3_000 },
    });
    const other = await openRuntime({
      store: db,
      agents: [agent],
      tools: [slow],
      recovery: { onOpen: false, leaseMs: 3_000 },
    });
    try {
      const handle = await stale.submit({ chatId: "c", inputId: "i", agent: "sender", content: null });
      await started.opened;
      const report = await other.recover();
      expect(report.held.map((h) => h.runId)).toEqual([handle.runId]);
      expect(JSON.stringify((await other.run(handle.runId))?.heldReasons)).toMatch(NO_OUTCOME);

      // The paused owner's call returns: its outcome lands on the held run.
      answer.open();
      expect(await handle.result).toMatchObject({ status: "elsewhere" });
      const callId = `${handle.runId}/0`;
      const row = await other.run(handle.runId);
      expect(row).toMatchObject({ status: "held" });
      expect(row?.heldReasons).toEqual([
        expect.objectContaining({ callId, detail: expect.stringContaining(ARRIVED) }),
      ]);
      expect(JSON.stringify(row?.heldReasons)).not.toMatch(NO_OUTCOME);
      // The runs row's version is the stream's: a decision made on it is not stale.
      expect(row?.version).toBe((await other.events(handle.runId)).length);

      const shown = await runCli(["show", handle.runId, "--db", db]);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain(ARRIVED);
      expect(shown.stdout).not.toMatch(NO_OUTCOME);

      // The panel's run page: why it is held, per call, and what can be done.
      const reader = await openStore(db);
      try {
        const view = await runView(reader, handle.runId);
        expect(view.runActions.map((a) => a.decision)).toEqual(["stop", "resume"]);
        const page = JSON.stringify({
          actions: view.runActions,
          reasons: view.calls.map((c) => c.holdReasons),
        });
        expect(page).toContain(ARRIVED);
        expect(page).not.toMatch(NO_OUTCOME);
      } finally {
        await reader.close();
      }

      // And resuming does continue with it: the call is served, not run again.
      const resumed = await other.decide(handle.runId, {
        basedOnVersion: row!.version,
        decidedBy: "ada",
        decision: "resume",
      });
      expect(await resumed.result).toMatchObject({ status: "completed", output: { sent: true } });
      expect((await other.audit()).findings).toEqual([]);
    } finally {
      await stale.close();
      await other.close();
    }
  }, 60_000);
});
