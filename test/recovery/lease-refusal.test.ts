import { join } from "node:path";
import * as Schema from "effect/Schema";
import { afterAll, describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { gate, staleWorkerId } from "../support/ownership.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
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

const LEASE_MS = 3_000;

/** Block this thread, timers and heartbeat included, as a long GC pause or a swap storm would. */
const pauseThread = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(engines)("an effect refused at the lease check, on $name", (engine) => {
  it("P3: a tool whose own lease check refuses while the run is still this worker's records the attempt as not started; the next recovery resumes the run and the call runs afresh, with nobody asked", async () => {
    const store = await engine.store();
    const effects: string[] = [];
    let pauseFirst = true;
    const checked = defineTool({
      name: "checked",
      args: Schema.Struct({ label: Schema.String }),
      disposition: "hold",
      run: async ({ label }, context) => {
        // Paused past the lease's margin, short of the lease: nobody took the run over.
        if (pauseFirst) {
          pauseFirst = false;
          pauseThread(LEASE_MS - 400);
        }
        context.checkLease();
        effects.push(context.idempotencyKey);
        return { sent: label };
      },
    });
    const agent = defineAgent({
      name: "checker",
      version: "1",
      run: async (turn) => turn.tool(checked, { label: "x" }),
    });
    const rt = await openRuntime({
      store,
      agents: [agent],
      tools: [checked],
      recovery: { onOpen: false, leaseMs: LEASE_MS },
    });
    try {
      const handle = await rt.submit({ chatId: "c", inputId: "i", agent: "checker", content: null });
      const first = await handle.result;
      expect(first).toMatchObject({ status: "elsewhere" });
      expect(first.status === "elsewhere" && first.state).toMatch(
        /refused call .* before its effect; recorded as not started/,
      );
      expect(effects).toEqual([]);
      const callId = `${handle.runId}/0`;
      expect((await rt.events(handle.runId)).map((e) => e.event).at(-1)).toEqual({
        type: "call.reconciled",
        runId: handle.runId,
        callId,
        attempt: 1,
        outcome: "not-completed",
        evidence: "lease check refused before the effect",
      });

      const report = await rt.recover();
      expect(report.held).toEqual([]);
      expect(report.resumed).toEqual([handle.runId]);
      const [result] = await report.done;
      expect(result).toMatchObject({ status: "completed", output: { sent: "x" } });
      expect(effects).toEqual([`${callId}#2`]);
      expect((await rt.audit()).findings).toEqual([]);
    } finally {
      await rt.close();
    }
  }, 60_000);
});

describe("an effect refused at the lease check after a take-over", () => {
  it("a tool's lease check refused after another worker took the run over writes nothing: the call stays in doubt for the new owner (law 10)", async () => {
    const db = join(tempDir(), "journal.db");
    const effects: string[] = [];
    const before = gate();
    const check = gate();
    const checked = defineTool({
      name: "checked",
      args: Schema.Struct({}),
      disposition: "hold",
      run: async (_args, context) => {
        before.open();
        await check.opened;
        context.checkLease();
        effects.push(context.idempotencyKey);
        return { sent: true };
      },
    });
    const agent = defineAgent({ name: "checker", version: "1", run: async (turn) => turn.tool(checked, {}) });
    const stale = await openRuntime({
      store: db,
      agents: [agent],
      tools: [checked],
      workerId: staleWorkerId(),
      recovery: { onOpen: false, leaseMs: LEASE_MS },
    });
    const other = await openRuntime({
      store: db,
      agents: [agent],
      tools: [checked],
      recovery: { onOpen: false, leaseMs: LEASE_MS },
    });
    try {
      const handle = await stale.submit({ chatId: "c", inputId: "i", agent: "checker", content: null });
      await before.opened;
      const report = await other.recover();
      expect(report.held.map((h) => h.runId)).toEqual([handle.runId]);
      const held = (await other.events(handle.runId)).length;
      // The stale owner's heartbeat learns the run is no longer its own (a quarter lease apart).
      await sleep(LEASE_MS / 2);
      check.open();
      expect(await handle.result).toMatchObject({
        status: "elsewhere",
        state: "this worker lost the run to another owner",
      });
      expect(effects).toEqual([]);
      expect(await other.events(handle.runId)).toHaveLength(held);
      expect((await other.run(handle.runId))?.heldReasons).toEqual([
        expect.objectContaining({ code: "in-doubt", callId: `${handle.runId}/0` }),
      ]);
    } finally {
      await stale.close();
      await other.close();
    }
  }, 60_000);
});

describe("an effect refused at the lease check while renewals wait, on PostgreSQL", () => {
  it("P3: renewals that waited behind a lock on the claim leave too little margin; the lease check renews at once and, the run still this worker's, starts the effect instead of giving the run up", async () => {
    await requirePg();
    const schema = schemas.fresh();
    const store = pgUrl(schema);
    const effects: string[] = [];
    const inFirst = gate();
    const leaveFirst = gate();
    const first = defineTool({
      name: "first",
      args: Schema.Struct({}),
      run: async () => {
        inFirst.open();
        await leaveFirst.opened;
        return { first: true };
      },
    });
    const second = defineTool({
      name: "second",
      args: Schema.Struct({}),
      disposition: "hold",
      run: async (_args, context) => {
        effects.push(context.idempotencyKey);
        return { second: true };
      },
    });
    const agent = defineAgent({
      name: "pair",
      version: "1",
      run: async (turn) => {
        await turn.tool(first, {});
        return turn.tool(second, {});
      },
    });
    const rt = await openRuntime({
      store,
      agents: [agent],
      tools: [first, second],
      recovery: { onOpen: false, leaseMs: LEASE_MS },
    });
    const admin = await adminClient(schema);
    try {
      const handle = await rt.submit({ chatId: "c", inputId: "i", agent: "pair", content: null });
      await inFirst.opened;
      // Another transaction holds the run's claim row (a long maintenance write would): every
      // renewal waits behind it, and so does the next append, which needs the claim too.
      await admin.query("BEGIN");
      await admin.query("SELECT * FROM claims WHERE run_id = $1 FOR UPDATE", [handle.runId]);
      leaveFirst.open();
      await sleep(LEASE_MS);
      await admin.query("COMMIT");

      const result = await handle.result;
      expect(result).toMatchObject({ status: "completed", output: { second: true } });
      expect(effects).toEqual([`${handle.runId}/1#1`]);
      expect((await rt.audit()).findings).toEqual([]);
    } finally {
      await admin.query("ROLLBACK").catch(() => undefined);
      await admin.end();
      await rt.close();
    }
  }, 60_000);
});
