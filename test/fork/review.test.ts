import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { canonicalJson, chainHash } from "../../src/events/index.js";
import {
  ApprovalDenied,
  DefiniteFailure,
  defineAgent,
  defineTool,
  openRuntime,
  type RunHandle,
  type Runtime,
} from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { alignCaches, copyJournal, tamper } from "../audit/tamper.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const fast = { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 };
const ENDED = ["completed", "failed", "held", "stopped", "cancelled"];

const settled = async (runtime: Runtime, runId: string, statuses = ENDED): Promise<string> => {
  for (let i = 0; i < 300; i++) {
    const row = await runtime.run(runId);
    if (row && statuses.includes(row.status)) return row.status;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`run ${runId} did not settle`);
};

/** A tool that fails its first `failures` invocations definitely, with a policy of two attempts. */
const flakyTool = (invocations: { n: number }, failures: number) =>
  defineTool({
    name: "flaky",
    args: Schema.Struct({}),
    retry: { attempts: 2, backoff: fast },
    run: async () => {
      invocations.n++;
      if (invocations.n <= failures)
        throw new DefiniteFailure(`refused (call ${invocations.n})`, { statusCode: 503 });
      return "ok";
    },
  });

describe("forks: reused outcomes are never decided again (issue 36)", () => {
  it("a reused failure whose retries the source exhausted is thrown as recorded, not retried live", async () => {
    const invocations = { n: 0 };
    const flaky = flakyTool(invocations, 2);
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => {
        try {
          return { got: await turn.tool(flaky, {}) };
        } catch (e) {
          return { threw: (e as { _tag?: string })._tag };
        }
      },
    });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent], tools: [flaky] });
    try {
      const src = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
      expect(await src.result).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
      expect(invocations.n).toBe(2);
      const fork = (await runtime.fork(src.runId, { atCall: 1, by: "ada", note: "n" })) as RunHandle;
      expect(await fork.result).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
      // The tool ran no third time: the call before atCall was served from the source.
      expect(invocations.n).toBe(2);
      const types = (await runtime.events(fork.runId)).map((e) => e.event.type);
      expect(types).not.toContain("retry.scheduled");
      expect(types.filter((t) => t === "call.intended")).toHaveLength(1);
    } finally {
      await runtime.close();
    }
  });

  it("a retry grant on a reused failure of a held fork is refused; the source's own call may still be granted", async () => {
    const invocations = { n: 0 };
    const flaky = flakyTool(invocations, 2);
    // The agent does not catch: the failure holds the run, which suggests a retry grant.
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => ({ got: await turn.tool(flaky, {}) }),
    });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent], tools: [flaky] });
    try {
      const src = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
      await settled(runtime, src.runId);
      expect(invocations.n).toBe(2);
      const fork = (await runtime.fork(src.runId, {
        atCall: 1,
        by: "ada",
        note: "n",
        chatId: "d",
      })) as RunHandle;
      const status = await settled(runtime, fork.runId);
      expect(invocations.n).toBe(2);
      expect([status, (await runtime.run(src.runId))?.status]).toEqual(["held", "held"]);
      await expect(
        runtime.grantRetry(fork.runId, `${fork.runId}/0`, {
          attempts: 1,
          grantedBy: "carol",
          note: "as suggested",
        }),
      ).rejects.toMatchObject({ _tag: "RetryNotAllowed", message: expect.stringContaining("forked") });
      expect(invocations.n).toBe(2);
      // The source's own failure is its to retry: the grant runs the tool there.
      const granted = await runtime.grantRetry(src.runId, `${src.runId}/0`, {
        attempts: 1,
        grantedBy: "carol",
        note: "n",
      });
      expect(await granted.result).toMatchObject({ status: "completed", output: { got: "ok" } });
      expect(invocations.n).toBe(3);
    } finally {
      await runtime.close();
    }
  });

  it("a reused denied approval stays a denial: the agent sees ApprovalDenied and no grant runs the tool", async () => {
    const effects: string[] = [];
    const wire = defineTool({
      name: "wire",
      args: Schema.Struct({ to: Schema.String }),
      approval: "required",
      run: async ({ to }) => {
        effects.push(to);
        return `wired ${to}`;
      },
    });
    const agent = defineAgent({
      name: "w",
      version: "1",
      run: async (turn) => {
        try {
          return { first: await turn.tool(wire, { to: "acme" }) };
        } catch (e) {
          if (e instanceof ApprovalDenied) return { denied: e.note, by: e.by };
          throw e;
        }
      },
    });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent], tools: [wire] });
    try {
      const src = await runtime.submit({ chatId: "c", inputId: "i", agent: "w", content: {} });
      await settled(runtime, src.runId, ["waiting"]);
      const v = (await runtime.events(src.runId)).at(-1)!.version;
      await runtime.deny(src.runId, 0, { basedOnVersion: v, by: "bob", note: "not this vendor" });
      await settled(runtime, src.runId);
      expect(await runtime.wait(src.runId)).toMatchObject({
        output: { denied: "not this vendor", by: "bob" },
      });
      const fork = (await runtime.fork(src.runId, { atCall: 1, by: "ada", note: "n" })) as RunHandle;
      expect(await fork.result).toMatchObject({
        status: "completed",
        output: { denied: "not this vendor", by: "bob" },
      });
      const intent = (await runtime.events(fork.runId)).find((e) => e.event.type === "call.intended")!.event;
      expect(intent).toMatchObject({ approval: { decision: "denied" } });
      expect(effects).toEqual([]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a fork reuses a sleep, a child, a plan read and a signal wait without running them", async () => {
    const effects: string[] = [];
    const tool = defineTool({
      name: "t",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }) => {
        effects.push(`t${n}`);
        return n;
      },
    });
    const kid = defineAgent({
      name: "kid",
      version: "1",
      run: async (turn) => {
        await turn.tool(tool, { n: 100 });
        return "kid";
      },
    });
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => {
        const r0 = await turn.tool(tool, { n: 1 });
        await turn.sleep(60);
        const c = await turn.child("kid", {});
        const p = await turn.plan.read();
        const w = await turn.waitFor("go", { timeoutMs: 50 });
        const r5 = await turn.tool(tool, { n: 2 });
        return { r0, c, p, w, r5 };
      },
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "j.db"),
      agents: [agent, kid],
      tools: [tool],
    });
    try {
      const s = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
      expect(await settled(runtime, s.runId)).toBe("completed");
      const source = await runtime.wait(s.runId);
      const before = effects.length;
      const f = (await runtime.fork(s.runId, { atCall: 5, by: "ada", note: "n" })) as RunHandle;
      expect(await settled(runtime, f.runId)).toBe("completed");
      expect(await runtime.wait(f.runId)).toMatchObject({
        status: "completed",
        output: (source as { output: unknown }).output,
      });
      expect(effects.slice(before)).toEqual(["t2"]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});

describe("forks and retention (issue 36)", () => {
  it("a fork whose source retention removed is no finding, whatever the page size", async () => {
    const tool = defineTool({
      name: "t",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }) => n,
    });
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => [await turn.tool(tool, { n: 1 }), await turn.tool(tool, { n: 2 })],
    });
    const db = join(tempDir(), "j.db");
    const runtime = await openRuntime({ store: db, agents: [agent], tools: [tool] });
    let source: string;
    try {
      const s = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
      await s.result;
      source = s.runId;
      const f = (await runtime.fork(s.runId, { atCall: 1, by: "ada", note: "n", chatId: "d" })) as RunHandle;
      await f.result;
    } finally {
      await runtime.close();
    }
    const journal = LibsqlJournal.open(db);
    try {
      const report = await journal.prune({ keepRuns: 1, keepDays: 0 });
      expect(report.pruned.map((r) => r.runId)).toEqual([source]);
      for (const pageSize of [1000, 3, 1]) {
        const audit = await auditJournal(journal, { pageSize });
        expect({ pageSize, findings: audit.findings }).toEqual({ pageSize, findings: [] });
      }
    } finally {
      await journal.close();
    }
  });
});

describe("a queued fork and a journal error (issue 36)", () => {
  it("stays queued when its source cannot be read: a journal error is no refusal of the fork", async () => {
    const dir = tempDir();
    const db = join(dir, "j.db");
    const tool = defineTool({
      name: "t",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }) => n,
    });
    const source = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => [await turn.tool(tool, { n: 1 })],
    });
    const blocker = defineAgent({ name: "b", version: "1", run: async (turn) => turn.waitFor("go") });
    const runtime = await openRuntime({ store: db, agents: [source, blocker], tools: [tool] });
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => {
      if (w.code === "HOLDFAST_QUEUE_ADMIT") warnings.push(w.message);
    };
    process.on("warning", onWarning);
    try {
      const s = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
      await s.result;
      const b = await runtime.submit({ chatId: "d", inputId: "i", agent: "b", content: {} });
      await settled(runtime, b.runId, ["waiting"]);
      const queued = await runtime.fork(s.runId, {
        atCall: 1,
        by: "ada",
        note: "n",
        chatId: "d",
        whenBusy: "queue",
      });
      expect(queued).toMatchObject({ queued: true });
      // The source's outcome row cannot be decoded now: the journal fails to read it, the fork is not wrong.
      tamper(db, (conn) =>
        conn
          .prepare("UPDATE events SET data = '{not json' WHERE stream_id = ? AND type = 'call.completed'")
          .run(`run-${s.runId}`),
      );
      await runtime.signal(b.runId, "go", null, { signalId: "s1" });
      await settled(runtime, b.runId);
      for (let i = 0; i < 200 && warnings.length === 0; i++) {
        if ((await runtime.queue("d")).items.length === 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect((await runtime.queue("d")).items.map((item) => item.inputId)).toEqual([
        (queued as { inputId: string }).inputId,
      ]);
      expect(warnings).toHaveLength(1);
    } finally {
      process.off("warning", onWarning);
      await runtime.close();
    }
  });
});

describe("fork refusals say what was wrong (issue 36)", () => {
  it("a run that made no calls is said so, not as seqs 0–-1", async () => {
    const agent = defineAgent({ name: "a", version: "1", run: async () => "done" });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent] });
    try {
      const s = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
      await s.result;
      const refusal = await runtime.fork(s.runId, { atCall: 1, by: "ada", note: "n" }).catch((e: Error) => e);
      expect(refusal).toMatchObject({ _tag: "InvalidInput" });
      expect((refusal as Error).message).toContain(`run ${s.runId} made no calls`);
      expect((refusal as Error).message).not.toContain("0–-1");
    } finally {
      await runtime.close();
    }
  });
});

describe("the audit of a queued fork's first commit (issue 36)", () => {
  it("accepts only the fork's copies between run.admitted and the queue's input.admitted", async () => {
    const dir = tempDir();
    const db = join(dir, "j.db");
    const tool = defineTool({
      name: "t",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }) => n,
    });
    const source = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => [await turn.tool(tool, { n: 1 }), await turn.tool(tool, { n: 2 })],
    });
    const blocker = defineAgent({ name: "b", version: "1", run: async (turn) => turn.waitFor("go") });
    const runtime = await openRuntime({ store: db, agents: [source, blocker], tools: [tool] });
    let forkId: string;
    try {
      const s = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
      await s.result;
      const b = await runtime.submit({ chatId: "d", inputId: "i", agent: "b", content: {} });
      await settled(runtime, b.runId, ["waiting"]);
      const queued = await runtime.fork(s.runId, {
        atCall: 2,
        by: "ada",
        note: "n",
        chatId: "d",
        whenBusy: "queue",
      });
      await runtime.signal(b.runId, "go", null, { signalId: "s1" });
      const admitted = await (queued as { admitted: Promise<string | null> }).admitted;
      forkId = admitted!;
      await settled(runtime, forkId);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
    // A tamperer turns the fork's second copied outcome into a live one (no `reused`), re-chaining
    // the stream: it is no copy, so the queue's input.admitted no longer follows its run's admission.
    tamper(db, (conn) => {
      const streamId = `run-${forkId}`;
      const rows = conn
        .prepare(
          "SELECT position, version, event_id, recorded_at, schema_version, data, prev_hash FROM events WHERE stream_id = ? ORDER BY version",
        )
        .all(streamId) as Array<{
        position: number;
        version: number;
        event_id: string;
        recorded_at: string;
        schema_version: number;
        data: string;
        prev_hash: string;
      }>;
      let prevHash = rows[0]!.prev_hash;
      let changed = false;
      for (const row of rows) {
        const data = JSON.parse(row.data) as { type: string; callId?: string; reused?: unknown };
        if (!changed && data.type === "call.completed" && data.callId === `${forkId}/1`) {
          delete data.reused;
          changed = true;
        }
        const hash = chainHash({
          streamId,
          version: row.version,
          eventId: row.event_id,
          recordedAt: row.recorded_at,
          prevHash,
          schemaVersion: row.schema_version,
          data,
        });
        conn
          .prepare("UPDATE events SET data = ?, prev_hash = ?, hash = ? WHERE position = ?")
          .run(canonicalJson(data), prevHash, hash, row.position);
        prevHash = hash;
      }
      expect(changed).toBe(true);
    });
    alignCaches(db);
    const journal = LibsqlJournal.openReadOnly(db);
    try {
      const audit = await auditJournal(journal, { pageSize: 1000 });
      expect(audit.findings.filter((f) => f.kind === "queue-mismatch")).toHaveLength(1);
    } finally {
      await journal.close();
    }
  });
});

/** Rewrite a stream's events (as stored payloads) and recompute its hash chain, as a careful tamperer would. */
const rechain = (db: string, streamId: string, change: (data: Record<string, unknown>) => void): void =>
  tamper(db, (conn) => {
    const rows = conn
      .prepare(
        "SELECT position, version, event_id, recorded_at, schema_version, data, prev_hash FROM events WHERE stream_id = ? ORDER BY version",
      )
      .all(streamId) as Array<{
      position: number;
      version: number;
      event_id: string;
      recorded_at: string;
      schema_version: number;
      data: string;
      prev_hash: string;
    }>;
    let prevHash = rows[0]!.prev_hash;
    for (const row of rows) {
      const data = JSON.parse(row.data) as Record<string, unknown>;
      change(data);
      const hash = chainHash({
        streamId,
        version: row.version,
        eventId: row.event_id,
        recordedAt: row.recorded_at,
        prevHash,
        schemaVersion: row.schema_version,
        data,
      });
      conn
        .prepare("UPDATE events SET data = ?, prev_hash = ?, hash = ? WHERE position = ?")
        .run(canonicalJson(data), prevHash, hash, row.position);
      prevHash = hash;
    }
  });

describe("the audit's fork check (issue 36)", () => {
  it("checks the copied call against the source's, the pointer's run against run.forked, and a pointer for each reused seq", async () => {
    const dir = tempDir();
    const db = join(dir, "j.db");
    const tool = defineTool({
      name: "t",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }) => n,
    });
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => [
        await turn.tool(tool, { n: 1 }),
        await turn.tool(tool, { n: 2 }),
        await turn.tool(tool, { n: 3 }),
      ],
    });
    const runtime = await openRuntime({ store: db, agents: [agent], tools: [tool] });
    let forkId: string;
    let other: string;
    try {
      const s = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
      await s.result;
      const o = await runtime.submit({ chatId: "e", inputId: "i", agent: "a", content: {} });
      await o.result;
      other = o.runId;
      const f = (await runtime.fork(s.runId, { atCall: 3, by: "ada", note: "n", chatId: "d" })) as RunHandle;
      await f.result;
      forkId = f.runId;
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
    const audit = async (path: string) => {
      alignCaches(path);
      const journal = LibsqlJournal.openReadOnly(path);
      try {
        return (await auditJournal(journal)).findings
          .filter((f) => f.kind === "fork-mismatch")
          .map((f) => f.detail);
      } finally {
        await journal.close();
      }
    };
    const variant = (name: string) => {
      mkdirSync(join(dir, name));
      return copyJournal(db, join(dir, name));
    };
    // 1. The copied intent of call 0 names another tool than the source's call 0.
    const renamed = variant("renamed");
    rechain(renamed, `run-${forkId}`, (d) => {
      if (d.type === "call.intended" && d.callId === `${forkId}/0`) d.name = "other";
    });
    expect(await audit(renamed)).toEqual([
      expect.stringMatching(/seq 0 tool "other".*source's is seq 0 tool "t"/),
    ]);
    // 2. Call 1's pointer names another run (call 1 of `other` records the same result, 2).
    const elsewhere = variant("elsewhere");
    const otherRows = tamper(elsewhere, (c) =>
      c
        .prepare(
          "SELECT version, event_id, hash, data FROM events WHERE stream_id = ? AND type = 'call.completed'",
        )
        .all(`run-${other}`),
    ) as Array<{ version: number; event_id: string; hash: string; data: string }>;
    const target = otherRows.find((r) => (JSON.parse(r.data) as { callId: string }).callId === `${other}/1`)!;
    rechain(elsewhere, `run-${forkId}`, (d) => {
      if (d.type === "call.completed" && d.callId === `${forkId}/1`)
        d.reused = {
          runId: other,
          callId: `${other}/1`,
          version: target.version,
          eventId: target.event_id,
          hash: target.hash,
        };
    });
    expect(await audit(elsewhere)).toEqual([
      expect.stringMatching(new RegExp(`reused from run ${other}, but the fork's run.forked names`)),
    ]);
    // 3. Call 2's pointer is gone: run.forked still lists seq 2 as reused.
    const unpointed = variant("unpointed");
    rechain(unpointed, `run-${forkId}`, (d) => {
      if (d.type === "call.completed" && d.callId === `${forkId}/2`) delete d.reused;
    });
    expect(await audit(unpointed)).toEqual([
      expect.stringMatching(/lists seq\(s\) 2 as reused, but no outcome/),
    ]);
  });
});
