import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { type EventRow, toStored } from "../../src/adapters/stores/sql/rows.js";
import {
  canonicalJson,
  chainHash,
  decodeRow,
  digestOf,
  encodePayload,
  type RecordedEvent,
  runStreamId,
} from "../../src/events/index.js";
import {
  ActiveRunExists,
  defineAgent,
  defineTool,
  ForkPastInDoubt,
  openRuntime,
  type RunHandle,
  type Runtime,
} from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { alignCaches, tamper } from "../audit/tamper.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** A tool that appends a line per invocation to a witness file: its effect, seen from outside. */
const stepTool = (witness: string) =>
  defineTool({
    name: "step",
    args: Schema.Struct({ n: Schema.Number }),
    run: async ({ n }: { n: number }) => {
      appendFileSync(witness, `${n}\n`);
      return { n, value: n * 10 };
    },
  });

/** Five calls in order; each sees what the one before returned. */
const fiveSteps = (seen: unknown[][]) =>
  defineAgent({
    name: "steps",
    version: "1",
    run: async (turn) => {
      const results: unknown[] = [];
      for (let n = 1; n <= 5; n++) results.push(await turn.tool("step", { n }));
      seen.push(results);
      return { results };
    },
  });

const witnessLines = (witness: string): string[] => readFileSync(witness, "utf8").split("\n").filter(Boolean);

/** The original run's rows exactly as stored: every column, for a byte comparison. */
const rowsOf = (db: string, runId: string): unknown[] => {
  const conn = new Database(db, { readonly: true });
  try {
    return conn.prepare("SELECT * FROM events WHERE stream_id = ? ORDER BY version").all(runStreamId(runId));
  } finally {
    conn.close();
  }
};

describe("forks", () => {
  const setup = async (): Promise<{ runtime: Runtime; db: string; witness: string; seen: unknown[][] }> => {
    const dir = tempDir();
    const db = join(dir, "j.db");
    const witness = join(dir, "witness.txt");
    const seen: unknown[][] = [];
    const runtime = await openRuntime({ store: db, agents: [fiveSteps(seen)], tools: [stepTool(witness)] });
    return { runtime, db, witness, seen };
  };

  it("a fork at call 2 of a 5-call run reuses calls 0–1 without invoking the tool, runs 2–4 live, and leaves the original's rows byte-identical", async () => {
    const { runtime, db, witness } = await setup();
    try {
      const original = await runtime.submit({ chatId: "c", inputId: "m1", agent: "steps", content: {} });
      expect(await original.result).toMatchObject({ status: "completed" });
      expect(witnessLines(witness)).toEqual(["1", "2", "3", "4", "5"]);
      const before = rowsOf(db, original.runId);

      const fork = (await runtime.fork(original.runId, {
        atCall: 2,
        by: "ada",
        note: "try again from 3",
      })) as RunHandle;
      expect(await fork.result).toMatchObject({ status: "completed" });
      // Calls 0 and 1 were served from the original: the tool ran only for 3, 4 and 5.
      expect(witnessLines(witness)).toEqual(["1", "2", "3", "4", "5", "3", "4", "5"]);
      expect(rowsOf(db, original.runId)).toEqual(before);

      const events = (await runtime.events(fork.runId)).map((e) => e.event);
      const forked = events.find((e) => e.type === "run.forked");
      expect(forked).toMatchObject({
        from: { runId: original.runId, agent: { name: "steps", version: "1" } },
        atCall: 2,
        by: "ada",
        reused: [0, 1],
        edited: [],
      });
      const completions = events.filter((e) => e.type === "call.completed");
      expect(completions.slice(0, 2).map((e) => e.reused?.runId)).toEqual([original.runId, original.runId]);
      expect(completions.slice(2).every((e) => e.reused === undefined)).toBe(true);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("an edited outcome is what the agent sees, and is recorded as an edit with who and why", async () => {
    const { runtime, witness, seen } = await setup();
    try {
      const original = await runtime.submit({ chatId: "c", inputId: "m1", agent: "steps", content: {} });
      await original.result;
      const fork = (await runtime.fork(original.runId, {
        atCall: 2,
        outcomes: { 1: { n: 2, value: 999 } },
        by: "ada",
        note: "the quote was wrong",
      })) as RunHandle;
      expect(await fork.result).toMatchObject({ status: "completed" });
      expect(seen[1]?.[1]).toEqual({ n: 2, value: 999 });
      expect(witnessLines(witness)).toEqual(["1", "2", "3", "4", "5", "3", "4", "5"]);
      const events = (await runtime.events(fork.runId)).map((e) => e.event);
      const edited = events.find((e) => e.type === "call.completed" && e.callId === `${fork.runId}/1`);
      expect(edited).toMatchObject({
        result: { n: 2, value: 999 },
        edited: { by: "ada", note: "the quote was wrong" },
      });
      expect(events.find((e) => e.type === "run.forked")).toMatchObject({ reused: [0], edited: [1] });
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("refuses to fork past a call in doubt in the original unless its outcome is given", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.txt");
    let lost = true;
    const flaky = defineTool({
      name: "step",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }: { n: number }) => {
        appendFileSync(witness, `${n}\n`);
        // The connection dropped after sending: nobody knows whether call 2 happened (law 4).
        if (n === 2 && lost) throw new Error("connection reset after send");
        return { n, value: n * 10 };
      },
    });
    const runtime = await openRuntime({ store: join(dir, "j.db"), agents: [fiveSteps([])], tools: [flaky] });
    try {
      const original = await runtime.submit({ chatId: "c", inputId: "m1", agent: "steps", content: {} });
      expect(await original.result).toMatchObject({ status: "held" });
      const refused = runtime.fork(original.runId, { atCall: 2, chatId: "c2", by: "ada", note: "again" });
      await expect(refused).rejects.toBeInstanceOf(ForkPastInDoubt);
      await expect(refused).rejects.toMatchObject({ seq: 1, callId: `${original.runId}/1` });
      await expect(refused).rejects.toThrow(/--outcome 1=/);
      expect(await runtime.runs()).toHaveLength(1);

      lost = false;
      const fork = (await runtime.fork(original.runId, {
        atCall: 2,
        chatId: "c2",
        outcomes: { 1: { n: 2, value: 20 } },
        by: "ada",
        note: "checked the ledger: call 2 went through",
      })) as RunHandle;
      expect(await fork.result).toMatchObject({ status: "completed" });
      // Only steps 3–5 ran in the fork: step 1 was reused, step 2's outcome given.
      expect(witnessLines(witness)).toEqual(["1", "2", "3", "4", "5"]);
      const forked = (await runtime.events(fork.runId))
        .map((e) => e.event)
        .find((e) => e.type === "run.forked");
      expect(forked).toMatchObject({ reused: [0], edited: [1] });
    } finally {
      await runtime.close();
    }
  });

  it("a fork into a busy chat follows whenBusy: refused by default, queued and admitted once the chat is free", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.txt");
    const flaky = defineTool({
      name: "step",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }: { n: number }) => {
        appendFileSync(witness, `${n}\n`);
        if (n === 2 && !existsSync(join(dir, "fixed"))) throw new Error("connection reset after send");
        return { n, value: n * 10 };
      },
    });
    const runtime = await openRuntime({ store: join(dir, "j.db"), agents: [fiveSteps([])], tools: [flaky] });
    try {
      const original = await runtime.submit({ chatId: "c", inputId: "m1", agent: "steps", content: {} });
      expect(await original.result).toMatchObject({ status: "held" });
      writeFileSync(join(dir, "fixed"), "");
      const options = { atCall: 1, by: "ada", note: "start over from step 2" };
      await expect(runtime.fork(original.runId, options)).rejects.toBeInstanceOf(ActiveRunExists);
      const queued = await runtime.fork(original.runId, { ...options, whenBusy: "queue" });
      expect(queued).toMatchObject({ queued: true, position: 1 });
      const version = (await runtime.events(original.runId)).length;
      await runtime.decide(original.runId, {
        decision: "stop",
        basedOnVersion: version,
        decidedBy: "ada",
        note: "forked",
      });
      expect(await queued.result).toMatchObject({ status: "completed" });
      expect(witnessLines(witness)).toEqual(["1", "2", "2", "3", "4", "5"]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("the audit is clean on a journal with forks and reports a reused outcome that differs from its source", async () => {
    const { runtime, db } = await setup();
    let forkId: string;
    try {
      const original = await runtime.submit({ chatId: "c", inputId: "m1", agent: "steps", content: {} });
      await original.result;
      const fork = (await runtime.fork(original.runId, {
        atCall: 3,
        by: "ada",
        note: "retry the tail",
      })) as RunHandle;
      await fork.result;
      forkId = fork.runId;
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
    // A careful tamperer changes the reused result of call 1 and re-chains the fork's stream.
    rechainWith(db, runStreamId(forkId), (event) =>
      event.type === "call.completed" && event.callId === `${forkId}/1`
        ? { ...event, result: { n: 2, value: 7 }, resultDigest: digestOf({ n: 2, value: 7 }) }
        : event,
    );
    alignCaches(db);
    const journal = LibsqlJournal.openReadOnly(db);
    try {
      const report = await auditJournal(journal);
      const forks = report.findings.filter((f) => f.kind === "fork-mismatch");
      expect(forks).toHaveLength(1);
      expect(forks[0]).toMatchObject({ streamId: runStreamId(forkId) });
      expect(forks[0]?.detail).toMatch(new RegExp(`${forkId}/1 is reused from .*/1.*altered`));
    } finally {
      await journal.close();
    }
  });
});

/** Rewrite a stream's events and recompute its hash chain, as holdfast computes it. */
const rechainWith = (
  path: string,
  streamId: string,
  change: (event: RecordedEvent["event"]) => RecordedEvent["event"],
): void =>
  tamper(path, (db) => {
    const rows = db
      .prepare(
        "SELECT position, stream_id, version, event_id, recorded_at, prev_hash, hash, schema_version, data FROM events WHERE stream_id = ? ORDER BY version",
      )
      .all(streamId) as EventRow[];
    let prevHash = rows[0]!.prev_hash;
    for (const row of rows) {
      const recorded = decodeRow(toStored(row));
      const data = encodePayload(change(recorded.event));
      const hash = chainHash({
        streamId,
        version: recorded.version,
        eventId: recorded.eventId,
        recordedAt: recorded.recordedAt,
        prevHash,
        schemaVersion: recorded.schemaVersion,
        data,
      });
      db.prepare("UPDATE events SET data = ?, prev_hash = ?, hash = ? WHERE position = ?").run(
        canonicalJson(data),
        prevHash,
        hash,
        recorded.position,
      );
      prevHash = hash;
    }
  });
