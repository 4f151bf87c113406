import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { MIGRATIONS } from "../../src/adapters/stores/postgres/migrations.js";
import {
  PostgresJournal,
  type PostgresJournalOptions,
} from "../../src/adapters/stores/postgres/PostgresJournal.js";
import type { AnyEvent } from "../../src/events/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { JournalTooNew, JournalUnavailable } from "../../src/runtime/errors.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { freshKey, keyEnv } from "../support/keys.js";
import { adminClient, pgUrl, requirePg, TEST_PG_URL, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";
import { admitted, claimAndAdmit, done, intended } from "./contract.js";

const schemas = usePgSchemas();
afterAll(schemas.dropAll);
const tempDir = useTempDir();

const journals: Journal[] = [];
afterEach(async () => {
  for (const journal of journals.splice(0)) await journal.close();
});

const open = async (schema: string, options: PostgresJournalOptions = {}): Promise<PostgresJournal> => {
  await requirePg();
  const journal = await PostgresJournal.open(pgUrl(schema), options);
  journals.push(journal);
  return journal;
};

const event: AnyEvent = { type: "journal.opened", schemaVersion: 1, engine: "postgres" };

/** A promise and the function that settles it. */
const gate = () => {
  let open!: () => void;
  const closed = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { closed, open };
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Settles within `ms`? */
const settlesWithin = (promise: Promise<unknown>, ms: number): Promise<boolean> =>
  Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    sleep(ms).then(() => false),
  ]);

/** The test URL with a user, a password and a port nothing listens on. */
const unreachable = (): string => {
  const url = new URL(TEST_PG_URL);
  url.username = "holdfast";
  url.password = "s3cret-pw";
  url.hostname = "127.0.0.1";
  url.port = "1";
  return url.toString();
};

/**
 * A journal schema made by the first `version` migrations alone, as an older holdfast left it, with
 * its fingerprint key; returns the admin connection (the caller ends it) to add rows to it.
 */
const schemaAtVersion = async (schema: string, version: number) => {
  const client = await adminClient();
  try {
    await client.query(`CREATE SCHEMA ${schema}`);
    await client.query(
      `CREATE TABLE ${schema}.holdfast_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    for (const migration of MIGRATIONS.slice(0, version)) {
      await client.query(migration.sql(schema));
      await client.query(`INSERT INTO ${schema}.holdfast_migrations (id, name) VALUES ($1, $2)`, [
        migration.id,
        migration.name,
      ]);
    }
    await client.query(`INSERT INTO ${schema}.meta (key, value) VALUES ('fingerprint_key', $1)`, [
      "ab".repeat(32),
    ]);
    return client;
  } catch (error) {
    await client.end();
    throw error;
  }
};

describe("PostgreSQL journal: connecting", () => {
  it("an unreachable PostgreSQL fails with JournalUnavailable naming the masked URL, after retries with back-off", async () => {
    const started = Date.now();
    const attempt = PostgresJournal.open(unreachable(), { retry: { attempts: 3, initialDelayMs: 40 } });
    const error = await attempt.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(JournalUnavailable);
    const message = (error as JournalUnavailable).message;
    expect(message).toMatch(/^journal postgres:\/\/holdfast:\*\*\*\*@127\.0\.0\.1:1\//);
    expect(message).toContain("after 3 attempts");
    expect(message).toMatch(/ECONNREFUSED/);
    expect(message).toMatch(/Start PostgreSQL/);
    expect(message).not.toContain("s3cret-pw");
    expect(Date.now() - started).toBeGreaterThanOrEqual(40 + 80);
  });

  it("a database that does not exist is refused at once, without retrying", async () => {
    await requirePg();
    const url = new URL(TEST_PG_URL);
    url.pathname = "/holdfast_no_such_database";
    const started = Date.now();
    await expect(
      PostgresJournal.open(url.toString(), { retry: { attempts: 5, initialDelayMs: 2000 } }),
    ).rejects.toThrow(/refused the connection: .*holdfast_no_such_database/);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("openStore opens PostgreSQL for postgres:// and postgresql:// URLs (also from HOLDFAST_STORE) and libSQL for paths", async () => {
    await requirePg();
    const schema = schemas.fresh();
    const withPassword = new URL(pgUrl(schema));
    withPassword.password = "not-checked-by-trust-auth";
    const pgJournal = await openStore(withPassword.toString());
    journals.push(pgJournal);
    expect(pgJournal.engine).toBe("postgres");
    expect(pgJournal.location).toContain(":****@");
    expect(pgJournal.location).not.toContain("not-checked-by-trust-auth");

    const alias = await openStore(pgUrl(schema).replace(/^postgres:/, "postgresql:"));
    journals.push(alias);
    expect(alias.engine).toBe("postgres");
    expect(Buffer.from(alias.fingerprintKey)).toEqual(Buffer.from(pgJournal.fingerprintKey));

    const saved = process.env.HOLDFAST_STORE;
    process.env.HOLDFAST_STORE = pgUrl(schema);
    try {
      const fromEnv = await openStore();
      journals.push(fromEnv);
      expect(fromEnv.engine).toBe("postgres");
    } finally {
      if (saved === undefined) delete process.env.HOLDFAST_STORE;
      else process.env.HOLDFAST_STORE = saved;
    }

    const file = await openStore(`${tempDir()}/journal.db`);
    journals.push(file);
    expect(file.engine).toBe("libsql");
  });
});

describe("PostgreSQL journal: schema and migrations", () => {
  it("every table lives in the journal's schema, made by numbered migrations recorded in holdfast_migrations", async () => {
    const schema = schemas.fresh();
    await open(schema);
    const client = await adminClient();
    try {
      const tables = await client.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
        [schema],
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual([
        "admissions",
        "alerts",
        "blobs",
        "claims",
        "events",
        "holdfast_migrations",
        "meta",
        "projections",
        "pruned_runs",
        "queue_pending",
        "run_guard",
        "run_search",
        "runtimes",
        "schedules_due",
        "waits_due",
      ]);
      const migrations = await client.query(`SELECT id, name FROM ${schema}.holdfast_migrations ORDER BY id`);
      expect(migrations.rows).toEqual([
        { id: 1, name: "journal" },
        { id: 2, name: "released claims keep their epoch, pruned runs keep their answer" },
        { id: 3, name: "projection keys in byte order" },
        { id: 4, name: "calls folded on read" },
        { id: 5, name: "a run owner's append in one statement" },
        { id: 6, name: "chats with queued inputs" },
        { id: 7, name: "waiting runs by due time" },
        { id: 8, name: "the runtime registry" },
        { id: 9, name: "schedules by next tick" },
        { id: 10, name: "alerts and their delivery attempts" },
        { id: 11, name: "the run index" },
      ]);
      const functions = await client.query<{ routine_name: string }>(
        "SELECT routine_name FROM information_schema.routines WHERE routine_schema = $1 ORDER BY routine_name",
        [schema],
      );
      expect(functions.rows.map((r) => r.routine_name)).toEqual(["append_owned", "refuse_event_change"]);
    } finally {
      await client.end();
    }
  });

  it("workers opening a new schema together migrate it once and share one fingerprint key", async () => {
    const schema = schemas.fresh();
    const opened = await Promise.all([open(schema), open(schema), open(schema)]);
    const keys = new Set(opened.map((j) => Buffer.from(j.fingerprintKey).toString("hex")));
    expect(keys.size).toBe(1);
  });

  it("a schema that holds other tables is refused and left unchanged", async () => {
    const schema = schemas.fresh();
    const client = await adminClient();
    try {
      await client.query(`CREATE SCHEMA ${schema}`);
      await client.query(`CREATE TABLE ${schema}.orders (id int)`);
      await expect(open(schema)).rejects.toThrow(/holds tables but is not a holdfast journal/);
      const tables = await client.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
        [schema],
      );
      expect(tables.rows).toEqual([{ table_name: "orders" }]);
    } finally {
      await client.end();
    }
  });

  it("a journal migrated by a newer holdfast is refused with JournalTooNew", async () => {
    const schema = schemas.fresh();
    await (await open(schema)).close();
    const client = await adminClient();
    try {
      await client.query(`INSERT INTO ${schema}.holdfast_migrations (id, name) VALUES (99, 'future')`);
    } finally {
      await client.end();
    }
    await expect(open(schema)).rejects.toBeInstanceOf(JournalTooNew);
  });

  it("F24: a schema at version 1 upgrades keeping its claims; a release after the upgrade keeps the run's epoch", async () => {
    const schema = schemas.fresh();
    const client = await schemaAtVersion(schema, 1);
    try {
      await client.query(
        `INSERT INTO ${schema}.claims (run_id, worker_id, epoch, lease_until) VALUES ('r1', 'w1', 3, 9999999999999)`,
      );
      await client.query(`INSERT INTO ${schema}.run_guard (run_id, chat_id, active) VALUES ('r1', 'c', 1)`);
    } finally {
      await client.end();
    }
    const journal = await open(schema);
    expect(await journal.currentClaim("r1")).toEqual({
      runId: "r1",
      workerId: "w1",
      epoch: 3,
      leaseUntil: 9999999999999,
    });
    await journal.releaseClaims("w1");
    expect(await journal.currentClaim("r1")).toBeNull();
    expect(await journal.claim("r1", "w2", 60_000)).toMatchObject({
      workerId: "w2",
      epoch: 4,
      previous: null,
    });
    expect(await journal.prunedRun("r1")).toBeNull();
  });

  it("a schema at version 3 upgrades: its stored calls rows are gone, every other projection row stays", async () => {
    const schema = schemas.fresh();
    const client = await schemaAtVersion(schema, 3);
    try {
      const row = `INSERT INTO ${schema}.projections (name, key, value, position) VALUES ($1, $2, $3, $4)`;
      await client.query(row, ["runs", "r1", JSON.stringify({ runId: "r1", status: "running" }), 2]);
      await client.query(row, ["calls", "r1/0", JSON.stringify({ callId: "r1/0", status: "completed" }), 2]);
    } finally {
      await client.end();
    }
    const journal = await open(schema);
    expect(await journal.projectionRows("calls")).toEqual([]);
    expect(await journal.projection("runs", "r1")).toEqual({ runId: "r1", status: "running" });
  });

  it("a schema name that is not a plain identifier is refused before anything is created", async () => {
    await expect(PostgresJournal.open(TEST_PG_URL, { schema: 'x"; DROP TABLE y; --' })).rejects.toThrow(
      /not a plain lower-case identifier/,
    );
  });
});

/** A journal on `schema` that counts its commits and keeps each batch rerun's cause. */
const openWatched = async (schema: string) => {
  const watched = { commits: 0, reruns: [] as unknown[] };
  const journal = await open(schema, {
    onBeforeCommit: () => void watched.commits++,
    onBatchRerun: (cause) => void watched.reruns.push(cause),
  });
  return {
    journal,
    commits: () => watched.commits,
    reruns: watched.reruns,
    reset: () => (watched.commits = 0),
  };
};

describe("PostgreSQL journal: a run owner's append in one statement", () => {
  /** The statements the journal's connections send while `work` runs. */
  const statementsDuring = async (work: () => Promise<unknown>): Promise<number> => {
    const query = pg.Client.prototype.query;
    let sent = 0;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      sent += 1;
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    try {
      await work();
    } finally {
      pg.Client.prototype.query = query;
    }
    return sent;
  };

  const ownerCalls = async (journal: Journal) => {
    const fence = await claimAndAdmit(journal, "r1");
    const perAppend: number[] = [];
    for (let seq = 0; seq < 3; seq++)
      for (const event of [intended("r1", seq), done("r1", seq)]) {
        const expectedVersion = 1 + perAppend.length;
        perAppend.push(
          await statementsDuring(() =>
            journal.append({ streamId: "run-r1", expectedVersion, events: [event], fence }),
          ),
        );
      }
    return perAppend;
  };

  it("after the first, each of a run owner's appends is one statement; the log and the rows are what the transaction path writes", async () => {
    const journal = await open(schemas.fresh());
    // The admission (unique keys) takes the transaction; from then on the owner knows the head and
    // the runs row.
    expect(await ownerCalls(journal)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(await journal.projection("runs", "r1")).toMatchObject({ calls: 3, version: 6 });
    expect((await auditJournal(journal)).findings).toEqual([]);
    expect((await journal.rebuildProjections()).filter((r) => r.changed)).toEqual([]);
  });

  it("owners' appends queued together go in one statement; one that moved sends the batch the transaction path, where it alone is refused", async () => {
    const schema = schemas.fresh();
    const journal = await open(schema);
    const other = await open(schema);
    const runs = Array.from({ length: 8 }, (_, i) => `r${i}`);
    const fences = new Map<string, { runId: string; workerId: string; epoch: number }>();
    for (const runId of runs) {
      const claim = await journal.claim(runId, "w1", 60_000);
      fences.set(runId, { runId, workerId: "w1", epoch: claim!.epoch });
    }
    const all = (version: number, event: (runId: string) => AnyEvent, on: Journal = journal) =>
      Promise.allSettled(
        runs.map((runId) =>
          on.append({
            streamId: `run-${runId}`,
            expectedVersion: version === 0 ? "no-stream" : version,
            events: [event(runId)],
            fence: fences.get(runId)!,
          }),
        ),
      );
    await all(0, (runId) => admitted(runId, `c-${runId}`, "i"));
    // The admissions go through the batch's transaction, which tells the owner the heads and rows.
    expect(await statementsDuring(() => all(1, (runId) => intended(runId, 0)))).toBe(1);
    expect(await statementsDuring(() => all(2, (runId) => done(runId, 0)))).toBe(1);
    expect(await statementsDuring(() => all(3, (runId) => intended(runId, 1)))).toBe(1);
    // Another connection of the same owner appends to r3: the batch cannot go in one statement.
    await other.append({
      streamId: "run-r3",
      expectedVersion: 4,
      events: [done("r3", 1)],
      fence: fences.get("r3")!,
    });
    const settled = await all(4, (runId) => done(runId, 1));
    expect(settled.map((s) => s.status)).toEqual(runs.map((r) => (r === "r3" ? "rejected" : "fulfilled")));
    expect((settled[3] as PromiseRejectedResult).reason).toMatchObject({
      _tag: "WrongExpectedVersion",
      actual: 5,
    });
    for (const runId of runs) {
      expect((await journal.readStream(`run-${runId}`)).map((e) => e.version)).toEqual([1, 2, 3, 4, 5]);
      expect(await journal.projection("runs", runId)).toMatchObject({ calls: 2, version: 4 });
    }
    expect((await auditJournal(journal)).findings).toEqual([]);
    expect((await journal.rebuildProjections()).filter((r) => r.changed)).toEqual([]);
  });

  it("an event that cannot be prepared is refused for its caller alone; the owners queued with it commit", async () => {
    const journal = await open(schemas.fresh());
    const one = await claimAndAdmit(journal, "r1");
    const two = await claimAndAdmit(journal, "r2", "c2");
    const bad = { type: "call.completed", runId: "r2" } as unknown as AnyEvent;
    const [good, refused] = await Promise.allSettled([
      journal.append({ streamId: "run-r1", expectedVersion: 1, events: [intended("r1", 0)], fence: one }),
      journal.append({ streamId: "run-r2", expectedVersion: 1, events: [bad], fence: two }),
    ]);
    expect(good.status).toBe("fulfilled");
    expect(refused.status).toBe("rejected");
    expect(await journal.streamHead("run-r2")).toMatchObject({ version: 1 });
    await journal.append({ streamId: "run-r2", expectedVersion: 1, events: [intended("r2", 0)], fence: two });
    expect(
      await statementsDuring(() =>
        journal.append({ streamId: "run-r1", expectedVersion: 2, events: [done("r1", 0)], fence: one }),
      ),
    ).toBe(1);
  });

  it("a session ended while its statement waits (FATAL) is a lost connection: the journal reads the append back, finds it not written, and sends it again (decision 0068)", async () => {
    const schema = schemas.fresh();
    const found: Array<boolean | "partly" | "unknown"> = [];
    const journal = await open(schema, { onLostCommit: (committed) => found.push(committed) });
    const fence = await claimAndAdmit(journal, "r1");
    const admin = await adminClient();
    // Polled outside the lock holder's transaction: inside one, pg_stat_activity is a snapshot
    // taken at its first read and never shows the append starting to wait.
    const watcher = await adminClient();
    try {
      await admin.query("BEGIN");
      await admin.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`holdfast.append.${schema}`]);
      await watcher.query("SELECT count(*) FROM pg_stat_activity");
      // Settled into a value at once: it rejects as soon as the session ends, maybe before the
      // asserts below are reached.
      const waiting = journal
        .append({ streamId: "run-r1", expectedVersion: 1, events: [intended("r1", 0)], fence })
        .then(
          () => null,
          (error: unknown) => error,
        );
      let pid: number | undefined;
      for (let i = 0; i < 100 && pid === undefined; i++) {
        const found = await watcher.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE query LIKE $1 AND wait_event_type = 'Lock'",
          [`%${schema}.append_owned%`],
        );
        pid = found.rows[0]?.pid;
        if (pid === undefined) await sleep(20);
      }
      expect(pid).toBeDefined();
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
      // The read-back waits for the append lock: whatever held it has finished once it has it.
      await admin.query("ROLLBACK");
      expect(await waiting).toBeNull();
    } finally {
      await admin.query("ROLLBACK").catch(() => {});
      await admin.end();
      await watcher.end();
    }
    expect(found).toEqual([false]);
    expect(await journal.streamHead("run-r1")).toMatchObject({ version: 2 });
  });

  it("with a commit hook (tests) or payload keys (a sealed row's value depends on its position), every append takes the transaction", async () => {
    const hooked = await open(schemas.fresh(), { onBeforeCommit: () => {} });
    expect(await ownerCalls(hooked)).toEqual([5, 4, 5, 4, 5, 4]);
    const sealed = await open(schemas.fresh(), { env: keyEnv(freshKey()) });
    expect((await ownerCalls(sealed)).every((n) => n >= 4)).toBe(true);
  });
});

describe("PostgreSQL journal: global order and concurrency", () => {
  it("a batch whose request fails on its first statement (the server refuses a NUL in a stream id) commits the others", async () => {
    const schema = schemas.fresh();
    const { journal, commits, reruns } = await openWatched(schema);
    const [first, bad, last] = await Promise.allSettled([
      journal.append({ streamId: "s-1", expectedVersion: "no-stream", events: [event] }),
      journal.append({ streamId: "s-\u0000-2", expectedVersion: "no-stream", events: [event] }),
      journal.append({ streamId: "s-3", expectedVersion: "no-stream", events: [event] }),
    ]);
    expect(first.status).toBe("fulfilled");
    expect(last.status).toBe("fulfilled");
    expect(bad).toMatchObject({ status: "rejected", reason: { code: "22021" } });
    expect(commits()).toBe(1);
    // The batch decided in memory failed on its read, and ran again request by request.
    expect(reruns).toEqual([expect.objectContaining({ code: "22021" })]);
    // Committed for real: another connection reads both.
    const reader = await open(schema);
    expect((await reader.readAll({ after: 0, limit: 10 })).map((e) => e.streamId)).toEqual(["s-1", "s-3"]);
  });

  it("a batch of fenced and unfenced appends is decided in memory: it commits once and never runs again request by request", async () => {
    const schema = schemas.fresh();
    const { journal, commits, reruns, reset } = await openWatched(schema);
    const fences = [];
    for (let i = 0; i < 8; i++) {
      const claim = await journal.claim(`r${i}`, "w1", 60_000);
      fences.push({ runId: `r${i}`, workerId: "w1", epoch: claim!.epoch });
    }
    reset();
    const results = await Promise.allSettled([
      ...fences.map((fence, i) =>
        journal.append({ streamId: `run-r${i}`, expectedVersion: "no-stream", events: [event], fence }),
      ),
      journal.append({ streamId: "plain", expectedVersion: "any", events: [event, event] }),
      journal.append({ streamId: "run-r0", expectedVersion: 7, events: [event], fence: fences[0]! }),
    ]);
    expect(results.slice(0, 9).every((r) => r.status === "fulfilled")).toBe(true);
    expect(results[9]).toMatchObject({
      status: "rejected",
      reason: { _tag: "WrongExpectedVersion", actual: 1 },
    });
    expect(commits()).toBe(1);
    expect(reruns).toEqual([]);
  });

  it("readAll never returns an event beyond a commit still in flight, so paging by position skips nothing", async () => {
    const schema = schemas.fresh();
    const held = gate();
    const entered = gate();
    let first = true;
    const a = await open(schema, {
      onBeforeCommit: async () => {
        if (!first) return;
        first = false;
        entered.open();
        await held.closed;
      },
    });
    const b = await open(schema);
    const reader = await open(schema);

    const fromA = a.append({ streamId: "a", expectedVersion: "no-stream", events: [event] });
    await entered.closed;
    const fromB = b.append({ streamId: "b", expectedVersion: "no-stream", events: [event] });
    try {
      // B waits for A's commit: positions are handed out in commit order.
      expect(await settlesWithin(fromB, 150)).toBe(false);
      expect(await reader.readAll({ after: 0, limit: 10 })).toEqual([]);
    } finally {
      held.open();
    }
    const [ra, rb] = await Promise.all([fromA, fromB]);
    expect(ra.recorded[0]!.position).toBeLessThan(rb.recorded[0]!.position);
    const all = await reader.readAll({ after: 0, limit: 10 });
    expect(all.map((e) => e.streamId)).toEqual(["a", "b"]);
  });

  it("a take-over waits for the previous owner's append in flight, so the new owner sees it and fences the next", async () => {
    const schema = schemas.fresh();
    const held = gate();
    const entered = gate();
    let holding = false;
    const oldOwner = await open(schema, {
      onBeforeCommit: async () => {
        if (!holding) return;
        entered.open();
        await held.closed;
      },
    });
    const newOwner = await open(schema);
    await oldOwner.claim("r1", "w1", 60_000);
    const fence = { runId: "r1", workerId: "w1", epoch: 1 };
    holding = true;
    const inFlight = oldOwner.append({ streamId: "run-r1", expectedVersion: "any", events: [event], fence });
    await entered.closed;
    const takeOver = newOwner.claim("r1", "w2", 60_000, { takeOverFrom: "w1" });
    try {
      expect(await settlesWithin(takeOver, 150)).toBe(false);
    } finally {
      holding = false;
      held.open();
    }
    await inFlight;
    expect(await takeOver).toMatchObject({ workerId: "w2", epoch: 2 });
    expect(await newOwner.readStream("run-r1")).toHaveLength(1);
    await expect(
      oldOwner.append({ streamId: "run-r1", expectedVersion: 1, events: [event], fence }),
    ).rejects.toMatchObject({ _tag: "FencedOut", currentEpoch: 2 });
  });

  it("a writer stalled inside its commit loses the transaction after the idle timeout and cannot block other workers", async () => {
    const schema = schemas.fresh();
    let stall = true;
    const stalled = await open(schema, {
      idleInTransactionMs: 150,
      onBeforeCommit: async () => {
        if (stall) await sleep(600);
      },
    });
    const other = await open(schema);
    const started = Date.now();
    const lost = stalled.append({ streamId: "stalled", expectedVersion: "no-stream", events: [event] });
    await sleep(50);
    await other.append({ streamId: "other", expectedVersion: "no-stream", events: [event] });
    expect(Date.now() - started).toBeLessThan(550);
    await expect(lost).rejects.toBeInstanceOf(JournalUnavailable);
    await expect(lost).rejects.toThrow(/nothing of this batch was written/);
    expect(await other.streamHead("stalled")).toBeNull();
    stall = false;
    const again = await stalled.append({
      streamId: "stalled",
      expectedVersion: "no-stream",
      events: [event],
    });
    expect(again.nextVersion).toBe(1);
  });
});
