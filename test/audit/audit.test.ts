import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { type AnyEvent, digestOf, runStreamId, sha256Hex } from "../../src/events/index.js";
import { type AuditOptions, type AuditReport, auditJournal, headDigest } from "../../src/runtime/audit.js";
import { useTempDir } from "../support/tmp.js";
import { type Given, givenJournal } from "./given.js";
import { alignCaches, copyJournal, forgeChained, rowsOf, tamper } from "./tamper.js";

const tempDir = useTempDir();

/** One journal from real runs, made once; every test audits or tampers with its own copy. */
let template: Given;
let templateDir: string;
beforeAll(async () => {
  templateDir = mkdtempSync(join(tmpdir(), "holdfast-audit-template-"));
  template = await givenJournal(templateDir);
});
afterAll(() => rmSync(templateDir, { recursive: true, force: true }));

const copy = () => copyJournal(template.db, tempDir());

/** The audit reads: it opens the journal read-only, as `holdfast audit` does. */
const audit = async (db: string, options: AuditOptions = {}): Promise<AuditReport> => {
  const journal = LibsqlJournal.openReadOnly(db);
  try {
    return await auditJournal(journal, options);
  } finally {
    await journal.close();
  }
};

const run = (name: string) => template.runs[name]!;
const stream = (name: string) => runStreamId(run(name));

describe("the audit of a clean journal", () => {
  it("a journal from real runs (completed, failed, held, each decision, a retry grant, a child run, a plan) audits clean", async () => {
    const report = await audit(copy());
    expect(report.findings).toEqual([]);
    expect(report).toMatchObject({ clean: true, runs: 12, streams: 13, movedDuringAudit: false });
    expect(report.projections.map((p) => p.name)).toEqual([
      "runs",
      "chats",
      "documents",
      "conflicts",
      "graph-checkpoints",
      "graph-threads",
      "graph-channels",
      "schedules",
    ]);
  });

  it("reading the log in small pages gives the same report as reading it in large ones", async () => {
    const db = copy();
    expect(await audit(db, { pageSize: 3 })).toEqual(await audit(db, { pageSize: 1000 }));
  });

  it("progress is reported every N events while the log is read", async () => {
    const seen: number[] = [];
    const report = await audit(copy(), { pageSize: 10, progressEvery: 25, onProgress: (n) => seen.push(n) });
    expect(seen).toEqual([30, 50, 80]);
    expect(report.events).toBe(95);
  });

  it("the head digest is sha256 over the sorted stream heads, one `streamId:version:hash` line each", async () => {
    const db = copy();
    const journal = LibsqlJournal.open(db);
    const heads = journal
      .unsafeDatabase()
      .prepare(
        "SELECT stream_id AS streamId, version, hash FROM events e WHERE version = (SELECT max(version) FROM events x WHERE x.stream_id = e.stream_id)",
      )
      .all() as Array<{ streamId: string; version: number; hash: string }>;
    await journal.close();
    const report = await audit(db);
    expect(report.headDigest).toBe(headDigest(heads));
    expect(
      headDigest([
        { streamId: "b", version: 2, hash: "y" },
        { streamId: "a", version: 1, hash: "x" },
      ]),
    ).toBe(sha256Hex("a:1:x\nb:2:y\n"));
  });
});

describe("tampering with the stored log: each change is its own finding, naming stream and version", () => {
  it("a flipped byte in a stored payload is a hash-mismatch at that event", async () => {
    const db = copy();
    const target = tamper(db, (sql) => {
      const row = rowsOf(sql, stream("completed")).find((r) => r.type === "call.completed")!;
      const flipped = row.data.replace("completed-a", "completed-A");
      expect(flipped).not.toBe(row.data);
      sql.prepare("UPDATE events SET data = ? WHERE position = ?").run(flipped, row.position);
      return row;
    });
    const report = await audit(db);
    expect(report.findings).toEqual([
      expect.objectContaining({
        kind: "hash-mismatch",
        streamId: stream("completed"),
        version: target.version,
      }),
    ]);
    expect(report.clean).toBe(false);
  });

  it("a row that no longer decodes is a finding, not a crash", async () => {
    const db = copy();
    tamper(db, (sql) =>
      sql
        .prepare('UPDATE events SET data = \'{"type":"run.completed"\' WHERE stream_id = ? AND version = 2')
        .run(stream("completed")),
    );
    const report = await audit(db);
    expect(report.findings).toContainEqual(
      expect.objectContaining({ kind: "undecodable", streamId: stream("completed"), version: 2 }),
    );
    expect(report.findings).toContainEqual(
      expect.objectContaining({ kind: "hash-mismatch", streamId: stream("completed"), version: 2 }),
    );
  });

  it("a deleted event in the middle of a stream is a version gap at the event after it", async () => {
    const db = copy();
    const deleted = tamper(db, (sql) => {
      const row = rowsOf(sql, stream("completed")).find((r) => r.type === "checkpoint.saved")!;
      sql.prepare("DELETE FROM events WHERE position = ?").run(row.position);
      return row;
    });
    const report = await audit(db);
    expect(report.findings).toContainEqual(
      expect.objectContaining({
        kind: "version-gap",
        streamId: stream("completed"),
        version: deleted.version + 1,
      }),
    );
    // What else is reported follows from the same deletion: the chat's cached checkpoint.
    expect(report.findings.every((f) => f.streamId === stream("completed"))).toBe(true);
  });

  it("a deleted tail is caught by the anchored head digest, whether anchored as D or as D@P", async () => {
    const db = copy();
    const journal = LibsqlJournal.open(db);
    const opened: AnyEvent = { type: "journal.opened", schemaVersion: 1, engine: "libsql" };
    await journal.append({ streamId: "system", expectedVersion: "any", events: [opened, opened] });
    await journal.close();
    const anchor = await audit(db);
    tamper(db, (sql) => sql.prepare("DELETE FROM events WHERE stream_id = 'system' AND version = 2").run());

    // No cache remembers the system stream's length: the journal's own head anchor does.
    expect((await audit(db)).findings).toEqual([
      expect.objectContaining({ kind: "lost-commits", streamId: "system", version: 2 }),
    ]);
    const plain = await audit(db, { expectHead: { digest: anchor.headDigest, position: null } });
    expect(plain.findings.map((f) => f.kind)).toEqual(["head-mismatch", "lost-commits"]);
    expect(plain.expectedHead).toMatchObject({ matches: false });
    const at = await audit(db, { expectHead: { digest: anchor.headDigest, position: anchor.lastPosition } });
    expect(at.findings.map((f) => f.kind)).toEqual(["head-mismatch", "lost-commits"]);
  });

  it("an anchor taken as D@P still verifies after more events are appended", async () => {
    const db = copy();
    const anchor = await audit(db);
    const journal = LibsqlJournal.open(db);
    await journal.append({
      streamId: "system",
      expectedVersion: "any",
      events: [{ type: "journal.opened", schemaVersion: 1, engine: "libsql" }],
    });
    await journal.close();
    const later = await audit(db, {
      expectHead: { digest: anchor.headDigest, position: anchor.lastPosition },
    });
    expect(later.findings).toEqual([]);
    expect(later.headDigest).not.toBe(anchor.headDigest);
    const plain = await audit(db, { expectHead: { digest: anchor.headDigest, position: null } });
    expect(plain.findings.map((f) => f.kind)).toEqual(["head-mismatch"]);
  });

  it("two events swapped in the log are version gaps at both", async () => {
    const db = copy();
    const [a, b] = tamper(db, (sql) => {
      const rows = rowsOf(sql, stream("completed"));
      const first = rows.find((r) => r.type === "call.completed")!;
      const second = rows.find((r) => r.version === first.version + 1)!;
      const move = sql.prepare("UPDATE events SET position = ? WHERE position = ?");
      move.run(-1, first.position);
      move.run(first.position, second.position);
      move.run(second.position, -1);
      return [first, second];
    });
    const report = await audit(db);
    const gaps = report.findings.filter((f) => f.kind === "version-gap");
    expect(gaps).toEqual([
      expect.objectContaining({ streamId: stream("completed"), version: b!.version }),
      expect.objectContaining({ streamId: stream("completed"), version: a!.version }),
    ]);
    expect(report.findings.every((f) => f.streamId === stream("completed"))).toBe(true);
  });

  it("an outcome without intent, inserted with SQL as a correctly chained row, is caught by the law check alone", async () => {
    const db = copy();
    const runId = run("completed");
    const forged = tamper(db, (sql) =>
      forgeChained(sql, stream("completed"), {
        type: "call.completed",
        runId,
        callId: `${runId}/99`,
        attempt: 1,
        result: { paid: true },
        resultDigest: digestOf({ paid: true }),
      }),
    );
    const report = await audit(db);
    expect(report.findings).toEqual([
      expect.objectContaining({
        kind: "outcome-without-intent",
        streamId: stream("completed"),
        version: forged.version,
      }),
    ]);
  });

  it("a projection row edited with SQL is a projection-different finding naming the row and its last event", async () => {
    const db = copy();
    const last = tamper(db, (sql) => {
      sql
        .prepare(
          "UPDATE projections SET value = json_set(value, '$.status', 'completed') WHERE name = 'runs' AND key = ?",
        )
        .run(run("held"));
      return rowsOf(sql, stream("held")).at(-1)!;
    });
    const report = await audit(db);
    expect(report.findings).toEqual([
      expect.objectContaining({
        kind: "projection-different",
        projection: "runs",
        key: run("held"),
        streamId: stream("held"),
        version: last.version,
      }),
    ]);
    expect(report.findings[0]?.detail).toMatch(/status/);
  });

  it("a deleted projection row is missing, and a row no event produces is extra", async () => {
    const db = copy();
    tamper(db, (sql) => {
      sql.prepare("DELETE FROM projections WHERE name = 'chats' AND key = 'chat-completed'").run();
      sql
        .prepare("INSERT INTO projections (name, key, value, position) VALUES ('runs', 'ghost', '{}', 1)")
        .run();
    });
    const report = await audit(db);
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: "projection-extra", projection: "runs", key: "ghost", streamId: null }),
      expect.objectContaining({ kind: "projection-missing", projection: "chats", key: "chat-completed" }),
    ]);
  });
});

describe("the laws across events, checked even when the chain and the caches agree", () => {
  /**
   * Forge one chained event on a run, then make the caches agree with the forgery. `holdfast
   * rebuild` refuses to (the machines reject these events), so the tamperer folds them by hand.
   */
  const forged = async (name: string, event: (runId: string) => AnyEvent) => {
    const db = copy();
    const { version } = tamper(db, (sql) => forgeChained(sql, stream(name), event(run(name))));
    alignCaches(db);
    return { db, version, report: await audit(db) };
  };

  it("a new attempt with nothing authorizing it is replay-without-authorization", async () => {
    const { version, report } = await forged("completed", (runId) => ({
      type: "call.intended",
      runId,
      callId: `${runId}/0`,
      seq: 0,
      attempt: 2,
      kind: "tool",
      name: "ok",
      args: { label: "completed-a" },
      fingerprint: "f".repeat(64),
      disposition: "hold",
      pin: null,
      reconciler: null,
      idempotencyKey: `${runId}/0#2`,
    }));
    expect(report.findings).toEqual([
      expect.objectContaining({
        kind: "replay-without-authorization",
        streamId: stream("completed"),
        version,
      }),
    ]);
  });

  it("a second outcome for the same call attempt is duplicate-outcome", async () => {
    const { version, report } = await forged("completed", (runId) => ({
      type: "call.failed",
      runId,
      callId: `${runId}/0`,
      attempt: 1,
      definite: true,
      error: { name: "Error", message: "refused after all" },
    }));
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: "duplicate-outcome", streamId: stream("completed"), version }),
    ]);
  });

  it("a decision on a run that was not held is decision-not-held", async () => {
    const { version, report } = await forged("completed", (runId) => ({
      type: "decision.recorded",
      runId,
      basedOnVersion: 7,
      decidedBy: "mallory",
      calls: [],
      run: "continue",
      note: "",
    }));
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: "decision-not-held", streamId: stream("completed"), version }),
    ]);
  });

  it("an event the run machine does not accept in the run's state is transition-rejected", async () => {
    const { version, report } = await forged("completed", (runId) => ({
      type: "run.resumed",
      runId,
      by: "mallory",
    }));
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: "transition-rejected", streamId: stream("completed"), version }),
    ]);
  });

  it("an event in another run's stream is wrong-stream", async () => {
    const { version, report } = await forged("completed", () => ({
      type: "run.stopped",
      runId: run("failed"),
      reason: "moved here",
    }));
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: "wrong-stream", streamId: stream("completed"), version }),
    ]);
  });
});

describe("the database's own records, checked against the events", () => {
  it("a run whose admission row is gone is admission-mismatch at its run.admitted", async () => {
    const db = copy();
    tamper(db, (sql) => sql.prepare("DELETE FROM admissions WHERE run_id = ?").run(run("completed")));
    expect((await audit(db)).findings).toEqual([
      expect.objectContaining({ kind: "admission-mismatch", streamId: stream("completed"), version: 1 }),
    ]);
  });

  it("a finished run the active-run guard still marks active is guard-mismatch, and so is a held run marked finished", async () => {
    const db = copy();
    tamper(db, (sql) => {
      sql.prepare("UPDATE run_guard SET active = 1 WHERE run_id = ?").run(run("completed"));
      sql.prepare("UPDATE run_guard SET active = 0 WHERE run_id = ?").run(run("held"));
    });
    const report = await audit(db);
    expect(report.findings.map((f) => [f.kind, f.streamId]).sort()).toEqual(
      [
        ["guard-mismatch", stream("completed")],
        ["guard-mismatch", stream("held")],
      ].sort(),
    );
  });

  it("a stream that retention recorded as removed but is still there is pruned-stream-present", async () => {
    const db = copy();
    const head = tamper(db, (sql) => {
      const last = rowsOf(sql, stream("failed")).at(-1)!;
      forgeChained(sql, "system", {
        type: "retention.pruned",
        streams: [
          { streamId: stream("failed"), version: last.version, hash: last.hash, position: last.position },
        ],
      });
      return last;
    });
    expect((await audit(db)).findings).toEqual([
      expect.objectContaining({
        kind: "pruned-stream-present",
        streamId: stream("failed"),
        version: head.version,
      }),
    ]);
  });

  it("a removed run stream that begins again from genesis is still pruned-stream-present: a run id is never used again", async () => {
    const db = copy();
    tamper(db, (sql) => {
      const rows = rowsOf(sql, stream("completed"));
      const last = rows.at(-1)!;
      forgeChained(sql, "system", {
        type: "retention.pruned",
        streams: [
          { streamId: stream("completed"), version: last.version, hash: last.hash, position: last.position },
        ],
      });
      sql.prepare("DELETE FROM events WHERE stream_id = ?").run(stream("completed"));
      forgeChained(sql, stream("completed"), JSON.parse(rows[0]!.data) as AnyEvent);
    });
    expect((await audit(db)).findings).toContainEqual(
      expect.objectContaining({ kind: "pruned-stream-present", streamId: stream("completed"), version: 1 }),
    );
  });
});
