import { join } from "node:path";
import { Schema } from "effect";
import Database from "libsql";
import type pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { EventDecryptError, isSealed, keyIdOf } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { JournalUnavailable } from "../../src/runtime/errors.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { expectTwoLineError, runCli } from "../cli/cliProcess.js";
import { freshKey, keyEnv, NO_KEYS } from "../support/keys.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { countOf } from "../support/witness.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
const admins: pg.Client[] = [];
afterAll(async () => {
  for (const client of admins.splice(0)) await client.end();
  await schemas.dropAll();
});

/** Known values, each of which must never appear in the stored bytes when a key is set. */
const CANARY = {
  input: "canary-input-5d1c",
  args: "canary-args-7f3a",
  result: "canary-result-91bc",
  checkpoint: "canary-checkpoint-2e44",
  plan: "canary-plan-c0de",
  output: "canary-output-66aa",
} as const;

const lookup = defineTool({
  name: "lookup",
  args: Schema.Struct({ query: Schema.String }),
  run: async ({ query }) => ({ answer: `${CANARY.result} for ${query}` }),
});

const agent = defineAgent({
  name: "secretive",
  version: "1",
  run: async (turn, input: { ask: string }) => {
    const found = await turn.tool(lookup, { query: `${CANARY.args} ${input.ask}` });
    await turn.checkpoint({ note: CANARY.checkpoint });
    await turn.plan.replace(0, { title: CANARY.plan, items: [{ id: "a", text: CANARY.plan, done: true }] });
    return { found, done: CANARY.output };
  },
});

/** Set the process's environment for the duration of `fn` (the runtime reads keys from it only). */
const withEnv = async <T>(
  env: Readonly<Record<string, string | undefined>>,
  fn: () => Promise<T>,
): Promise<T> => {
  const saved = { HOLDFAST_ENCRYPTION_KEY: process.env.HOLDFAST_ENCRYPTION_KEY };
  const savedOld = process.env.HOLDFAST_ENCRYPTION_OLD_KEYS;
  delete process.env.HOLDFAST_ENCRYPTION_KEY;
  delete process.env.HOLDFAST_ENCRYPTION_OLD_KEYS;
  Object.assign(process.env, env);
  try {
    return await fn();
  } finally {
    delete process.env.HOLDFAST_ENCRYPTION_KEY;
    delete process.env.HOLDFAST_ENCRYPTION_OLD_KEYS;
    if (saved.HOLDFAST_ENCRYPTION_KEY !== undefined)
      process.env.HOLDFAST_ENCRYPTION_KEY = saved.HOLDFAST_ENCRYPTION_KEY;
    if (savedOld !== undefined) process.env.HOLDFAST_ENCRYPTION_OLD_KEYS = savedOld;
  }
};

/** One run of the agent through the public runtime; returns what the caller got back. */
const runOnce = async (store: string, env: Readonly<Record<string, string | undefined>>) =>
  withEnv(env, async () => {
    const rt = await openRuntime({ store, agents: [agent], tools: [lookup] });
    try {
      const handle = await rt.submit({
        chatId: "c",
        inputId: "i",
        agent: "secretive",
        content: { ask: CANARY.input },
      });
      return await handle.result;
    } finally {
      await rt.close();
    }
  });

interface Engine {
  readonly name: string;
  /** A fresh, empty store. */
  readonly store: () => Promise<string>;
  /** Every stored byte of the events and projections tables, read through SQL. */
  readonly scan: (store: string) => Promise<string>;
  readonly open: (store: string, env: Readonly<Record<string, string | undefined>>) => Promise<Journal>;
  /** Stored event rows, in position order, as SQL sees them. */
  readonly rows: (
    store: string,
  ) => Promise<Array<{ stream_id: string; version: number; position: number; data: string }>>;
}

const libsql: Engine = {
  name: "libSQL",
  store: async () => join(tempDir(), "journal.db"),
  scan: async (store) => {
    const db = new Database(store);
    try {
      const events = db.prepare("SELECT * FROM events").all() as object[];
      const projections = db.prepare("SELECT * FROM projections").all() as object[];
      return JSON.stringify([events, projections]);
    } finally {
      db.close();
    }
  },
  open: async (store, env) => LibsqlJournal.open(store, { env }),
  rows: async (store) => {
    const db = new Database(store);
    try {
      return (
        db.prepare("SELECT stream_id, version, position, data FROM events ORDER BY position").all() as Array<{
          stream_id: string;
          version: number;
          position: number;
          data: string;
        }>
      ).map((r) => ({ ...r, version: Number(r.version), position: Number(r.position) }));
    } finally {
      db.close();
    }
  },
};

const admin = async (store: string): Promise<pg.Client> => {
  const schema = new URL(store).searchParams.get("schema")!;
  const client = await adminClient(schema);
  admins.push(client);
  return client;
};

const postgres: Engine = {
  name: "PostgreSQL",
  store: async () => {
    await requirePg();
    return pgUrl(schemas.fresh());
  },
  scan: async (store) => {
    const client = await admin(store);
    const events = await client.query("SELECT * FROM events");
    const projections = await client.query("SELECT * FROM projections");
    return JSON.stringify([events.rows, projections.rows]);
  },
  open: (store, env) => PostgresJournal.open(store, { env }),
  rows: async (store) => {
    const client = await admin(store);
    const result = await client.query<{ stream_id: string; version: string; position: string; data: string }>(
      "SELECT stream_id, version, position, data FROM events ORDER BY position",
    );
    return result.rows.map((r) => ({ ...r, version: Number(r.version), position: Number(r.position) }));
  },
};

const journals: Journal[] = [];
afterEach(async () => {
  for (const j of journals.splice(0)) await j.close();
});
const track = async (journal: Promise<Journal>) => {
  const j = await journal;
  journals.push(j);
  return j;
};

describe.each([libsql, postgres])("payload encryption on $name", (engine) => {
  it("with a key, a byte scan of the events and projections tables finds none of the known values; without one, the same scan finds every one", async () => {
    const sealed = await engine.store();
    const key = freshKey();
    const result = await runOnce(sealed, keyEnv(key));
    expect(result.status).toBe("completed");
    // The caller gets the real values back: encryption is invisible to the agent and its caller.
    expect(JSON.stringify(result)).toContain(CANARY.result);
    expect(JSON.stringify(result)).toContain(CANARY.output);
    const bytes = await engine.scan(sealed);
    for (const value of Object.values(CANARY)) expect(bytes, value).not.toContain(value);
    expect(bytes).toContain(keyIdOf(Buffer.from(key, "hex")));

    // The control: the scan can fail — the same run without a key stores every value readable.
    const plain = await engine.store();
    await runOnce(plain, NO_KEYS);
    const plainBytes = await engine.scan(plain);
    for (const value of Object.values(CANARY)) expect(plainBytes, value).toContain(value);

    // With the key, everything reads back: events, projections, documents, and a clean full audit.
    const journal = await track(engine.open(sealed, keyEnv(key)));
    const events = await journal.readAll({ after: 0, limit: 100 });
    expect(JSON.stringify(events)).toContain(CANARY.args);
    expect(JSON.stringify(await journal.projectionRows("chats"))).toContain(CANARY.checkpoint);
    const report = await auditJournal(journal);
    expect(report.findings).toEqual([]);
    expect(report).toMatchObject({ clean: true, sealedUnchecked: 0 });
  });

  it("a wrong key, or none, fails at open naming the first event it cannot read, and writes nothing", async () => {
    const store = await engine.store();
    const key = freshKey();
    await runOnce(store, keyEnv(key));
    const before = await engine.rows(store);
    const first = before.find((r) => isSealed(JSON.parse(r.data)))!;
    expect(first).toBeDefined();
    for (const [label, env, reason] of [
      ["a wrong key", keyEnv(freshKey()), "unknown-key"],
      ["no key", NO_KEYS, "no-key"],
    ] as const) {
      const opening = engine.open(store, env);
      await expect(opening, label).rejects.toBeInstanceOf(EventDecryptError);
      const error = (await opening.catch((e: unknown) => e)) as EventDecryptError;
      expect(error, label).toMatchObject({
        streamId: first.stream_id,
        version: first.version,
        position: first.position,
        reason,
      });
      expect(error.message).toContain(
        `event ${first.stream_id}@${first.version} (position ${first.position})`,
      );
      expect(error.message).toContain("HOLDFAST_ENCRYPTION_KEY");
      // The runtime refuses the same way, before recovery or anything else writes.
      await expect(
        withEnv(env, () => openRuntime({ store, agents: [agent], tools: [lookup] })),
      ).rejects.toBeInstanceOf(EventDecryptError);
    }
    expect(await engine.rows(store)).toEqual(before);
  });

  it("after a rotation, the old key in HOLDFAST_ENCRYPTION_OLD_KEYS still opens the old events, new ones use the new key; without it the first old event is named", async () => {
    const store = await engine.store();
    const oldKey = freshKey();
    const newKey = freshKey();
    await runOnce(store, keyEnv(oldKey));
    const firstOld = (await engine.rows(store)).find((r) => isSealed(JSON.parse(r.data)))!;
    const countBefore = (await engine.rows(store)).length;

    const rotated = await track(engine.open(store, keyEnv(newKey, [oldKey])));
    await rotated.append({
      streamId: "run-rotation",
      expectedVersion: "no-stream",
      events: [
        {
          type: "run.admitted",
          runId: "rotation",
          chatId: "c2",
          inputId: "i2",
          inputDigest: "d".repeat(64),
          agent: { name: "secretive", version: "1" },
          machine: "run@1",
          input: { ask: "after rotation" },
        },
      ],
    });
    const all = await rotated.readAll({ after: 0, limit: 100 });
    expect(all).toHaveLength(countBefore + 1);
    const rows = await engine.rows(store);
    expect(rows.at(-1)!.data).toContain(`hf2.${keyIdOf(Buffer.from(newKey, "hex"))}.`);
    expect(firstOld.data).toContain(`hf2.${keyIdOf(Buffer.from(oldKey, "hex"))}.`);
    await rotated.close();
    journals.splice(journals.indexOf(rotated), 1);

    const opening = engine.open(store, keyEnv(newKey));
    await expect(opening).rejects.toMatchObject({
      _tag: "EventDecryptError",
      reason: "unknown-key",
      streamId: firstOld.stream_id,
      version: firstOld.version,
    });
  });

  it("the audit without the key verifies every chain and says the contents were not checked; a changed encrypted byte is still a hash-mismatch; a wrong key is undecryptable", async () => {
    const store = await engine.store();
    const key = freshKey();
    await runOnce(store, keyEnv(key));
    const blind = await track(
      engine.name === "libSQL"
        ? Promise.resolve(LibsqlJournal.open(store, { env: NO_KEYS, keyCheck: false }))
        : PostgresJournal.open(store, { env: NO_KEYS, keyCheck: false }),
    );
    const clean = await auditJournal(blind);
    expect(clean.findings).toEqual([]);
    expect(clean.sealedUnchecked).toBeGreaterThan(0);
    expect(clean.clean).toBe(true);

    const wrong = await track(
      engine.name === "libSQL"
        ? Promise.resolve(LibsqlJournal.open(store, { env: keyEnv(freshKey()), keyCheck: false }))
        : PostgresJournal.open(store, { env: keyEnv(freshKey()), keyCheck: false }),
    );
    const confused = await auditJournal(wrong);
    expect(confused.clean).toBe(false);
    expect(new Set(confused.findings.map((f) => f.kind))).toEqual(new Set(["undecryptable"]));

    // Flip one character of a sealed value, behind the journal's back.
    const target = (await engine.rows(store)).find((r) => isSealed(JSON.parse(r.data)))!;
    const marker = target.data.indexOf(".", target.data.indexOf("hf2.") + 13) + 3;
    const flipped = `${target.data.slice(0, marker)}${target.data[marker] === "A" ? "B" : "A"}${target.data.slice(marker + 1)}`;
    if (engine.name === "libSQL") {
      const db = new Database(store);
      db.exec("DROP TRIGGER events_are_immutable");
      db.prepare("UPDATE events SET data = ? WHERE position = ?").run(flipped, target.position);
      db.close();
    } else {
      const client = await admin(store);
      await client.query("ALTER TABLE events DISABLE TRIGGER events_are_immutable");
      await client.query("UPDATE events SET data = $1 WHERE position = $2", [flipped, target.position]);
      await client.query("ALTER TABLE events ENABLE TRIGGER events_are_immutable");
    }
    const tampered = await auditJournal(blind);
    expect(tampered.findings).toEqual([
      expect.objectContaining({ kind: "hash-mismatch", streamId: target.stream_id, version: target.version }),
    ]);
  });
});

describe.each([libsql, postgres])("F13: what encryption covers, on $name", (engine) => {
  /** Free text in every event field that can carry a tool's or a person's words. */
  const TEXT = {
    holdDetail: "canary-hold-detail-4111-1111",
    conflictDetail: "canary-conflict-detail-90ab",
    decidedBy: "canary-decided-by-77e1",
    grantedBy: "canary-granted-by-13f0",
    author: "canary-author-c4d2",
    stopReason: "canary-stop-reason-5b6e",
  } as const;
  const runId = "f13";
  const streamId = `run-${runId}`;
  const admitted = {
    type: "run.admitted" as const,
    runId,
    chatId: "c13",
    inputId: "i",
    inputDigest: "d".repeat(64),
    agent: { name: "secretive", version: "1" },
    machine: "run@2",
    input: null,
  };
  const held = {
    type: "run.held" as const,
    runId,
    reasons: [
      { code: "indefinite-failure" as const, callId: `${runId}/0`, detail: TEXT.holdDetail },
    ] as const,
  };

  it("F13: with a key, hold reasons, conflict details, decidedBy, grantedBy, document authors and stop reasons are sealed; the key opens them all", async () => {
    const store = await engine.store();
    const key = freshKey();
    const journal = await track(engine.open(store, keyEnv(key)));
    await journal.append({
      streamId,
      expectedVersion: "no-stream",
      events: [
        admitted,
        {
          type: "call.intended",
          runId,
          callId: `${runId}/0`,
          seq: 0,
          attempt: 1,
          kind: "tool",
          name: "lookup",
          args: {},
          fingerprint: "f".repeat(64),
          disposition: "hold",
          pin: null,
          reconciler: null,
          idempotencyKey: `${runId}/0#1`,
        },
        held,
        {
          type: "decision.recorded",
          runId,
          basedOnVersion: 3,
          decidedBy: TEXT.decidedBy,
          calls: [{ callId: `${runId}/0`, decision: "resume", note: "" }],
          run: "continue",
          note: "",
        },
        { type: "run.resumed", runId, by: TEXT.decidedBy },
        {
          type: "conflict.recorded",
          runId,
          callId: `${runId}/0`,
          kind: "outcome",
          detail: TEXT.conflictDetail,
          recorded: null,
          attempted: null,
        },
        {
          type: "retry.granted",
          runId,
          callId: `${runId}/0`,
          attempts: 1,
          grantedBy: TEXT.grantedBy,
          note: "",
        },
        { type: "run.stopped", runId, reason: TEXT.stopReason },
      ],
    });
    await journal.append({
      streamId: "chat-c13",
      expectedVersion: "no-stream",
      events: [
        {
          type: "document.replaced",
          chatId: "c13",
          document: "durable_plan",
          revision: 1,
          value: { title: "t", items: [] },
          digest: "a".repeat(64),
          by: { person: TEXT.author },
        },
        {
          type: "document.conflicted",
          chatId: "c13",
          document: "durable_plan",
          expectedRevision: 0,
          actualRevision: 1,
          by: { person: TEXT.author },
        },
      ],
    });
    const bytes = await engine.scan(store);
    for (const [field, value] of Object.entries(TEXT)) expect(bytes.includes(value), field).toBe(false);
    // The key opens every one of them again.
    const read = JSON.stringify(await journal.readAll({ after: 0, limit: 100 }));
    for (const value of Object.values(TEXT)) expect(read).toContain(value);
    // What the journal needs without the key stays readable: types, ids, codes are in the rows.
    expect(bytes).toContain("run.held");
    expect(bytes).toContain(`${runId}/0`);
  });

  it("F13: a sealed projection row put back from an older version of itself is refused on read, and the audit finds it", async () => {
    const store = await engine.store();
    const key = freshKey();
    const journal = await track(engine.open(store, keyEnv(key)));
    await journal.append({ streamId, expectedVersion: "no-stream", events: [admitted] });
    const older = await projectionRow(engine, store, runId);
    await journal.append({ streamId, expectedVersion: 1, events: [held] });
    const newer = await projectionRow(engine, store, runId);
    expect(newer.position).toBeGreaterThan(older.position);
    expect(await journal.projection("runs", runId)).toMatchObject({ status: "held" });

    // The older sealed value alone, under the row's current position: the read refuses it.
    await putProjectionRow(engine, store, runId, older.value, newer.position);
    await expect(journal.projection("runs", runId)).rejects.toMatchObject({
      _tag: "SealError",
      reason: "authentication",
    });
    const report = await auditJournal(journal);
    expect(report.clean).toBe(false);
    expect(report.findings).toEqual([
      expect.objectContaining({
        kind: "undecryptable",
        projection: "runs",
        detail: expect.stringContaining(`runs/${runId}`),
      }),
    ]);

    // The whole older row (value and position): it opens, and the audit finds it is not what the events say.
    await putProjectionRow(engine, store, runId, older.value, older.position);
    expect(await journal.projection("runs", runId)).toMatchObject({ status: "running" });
    const rolledBack = await auditJournal(journal);
    expect(rolledBack.findings).toEqual([
      expect.objectContaining({ kind: "projection-different", projection: "runs", key: runId }),
    ]);

    // A rebuild recomputes the row from the events and seals it for its position again.
    await putProjectionRow(engine, store, runId, older.value, newer.position);
    await journal.rebuildProjections();
    expect(await journal.projection("runs", runId)).toMatchObject({ status: "held" });
    expect((await auditJournal(journal)).findings).toEqual([]);
  });
});

/** A stored `runs` row as SQL sees it. */
const projectionRow = async (
  engine: Engine,
  store: string,
  key: string,
): Promise<{ value: string; position: number }> => {
  if (engine.name === "libSQL") {
    const db = new Database(store);
    try {
      const row = db
        .prepare("SELECT value, position FROM projections WHERE name = 'runs' AND key = ?")
        .get(key) as {
        value: string;
        position: number;
      };
      return { value: row.value, position: Number(row.position) };
    } finally {
      db.close();
    }
  }
  const client = await admin(store);
  const { rows } = await client.query<{ value: string; position: string }>(
    "SELECT value, position FROM projections WHERE name = 'runs' AND key = $1",
    [key],
  );
  return { value: rows[0]!.value, position: Number(rows[0]!.position) };
};

/** Write a `runs` row behind the journal's back. */
const putProjectionRow = async (
  engine: Engine,
  store: string,
  key: string,
  value: string,
  position: number,
): Promise<void> => {
  if (engine.name === "libSQL") {
    const db = new Database(store);
    try {
      db.prepare("UPDATE projections SET value = ?, position = ? WHERE name = 'runs' AND key = ?").run(
        value,
        position,
        key,
      );
    } finally {
      db.close();
    }
    return;
  }
  const client = await admin(store);
  await client.query("UPDATE projections SET value = $1, position = $2 WHERE name = 'runs' AND key = $3", [
    value,
    position,
    key,
  ]);
};

describe("payload encryption across processes", () => {
  it("a run killed after an outcome recovers under the key with no duplicate effect, and nothing readable is stored", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const env = { ...keyEnv(freshKey()), HF_DB: db, HF_WITNESS: witness, HF_CHAT: "c", HF_INPUT: "i" };
    const prefix = "canaryprefix9e1";
    const killed = await runWorker({
      ...env,
      HF_ACTION: "submit",
      HF_PREFIX: prefix,
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "record",
    });
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    const recovered = await runWorker({ ...env, HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    for (const step of ["a", "b", "c"]) expect(countOf(witness, `${prefix}-${step}`)).toBe(1);
    const raw = new Database(db);
    const stored = JSON.stringify(raw.prepare("SELECT data FROM events").all());
    raw.close();
    expect(stored).not.toContain(prefix);
    const journal = await track(libsql.open(db, env));
    const statuses = (await journal.projectionRows<{ status: string }>("runs")).map((r) => r.status);
    expect(statuses).toEqual(["completed"]);
  });

  it("the CLI with a wrong key exits 3 with one reason line naming the event and one hint line, no stack trace", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    await runOnce(db, keyEnv(freshKey()));
    const result = await runCli(["runs", "--db", db], { env: keyEnv(freshKey()) });
    expect(result.code).toBe(3);
    expect(result.stderr).not.toContain("    at ");
    const { reason, hint } = expectTwoLineError(result.stderr);
    expect(reason).toMatch(/event run-\S+@\d+ \(position \d+\) cannot be decrypted/);
    expect(hint).toContain("set the key it was written with");
    // The audit alone opens without the key check: it verifies the chains and says what it could not read.
    const audit = await runCli(["audit", "--db", db], { env: { HOLDFAST_ENCRYPTION_KEY: "" } });
    expect(audit.code, audit.stderr).toBe(0);
    expect(audit.stdout).toMatch(/events have encrypted fields and HOLDFAST_ENCRYPTION_KEY is not set/);
  });

  it("an event in the middle of a run that the keys cannot open stops recovery with EventDecryptError; the run is not marked needs-attention (law 11 is for corruption)", async () => {
    const db = join(tempDir(), "journal.db");
    const [a, b] = [freshKey(), freshKey()];
    const admitted = (runId: string) => ({
      type: "run.admitted" as const,
      runId,
      chatId: `chat-${runId}`,
      inputId: "i",
      inputDigest: "d".repeat(64),
      agent: { name: "secretive", version: "1" },
      machine: "run@1",
      input: { ask: runId },
    });
    const intent = (seq: number) => ({
      type: "call.intended" as const,
      runId: "x",
      callId: `x/${seq}`,
      seq,
      attempt: 1,
      kind: "tool" as const,
      name: "lookup",
      args: { query: CANARY.args },
      fingerprint: "f".repeat(64),
      disposition: "hold" as const,
      pin: null,
      reconciler: null,
      idempotencyKey: `x/${seq}#1`,
    });
    const write = async (env: Record<string, string>, streamId: string, events: unknown[]) => {
      const journal = LibsqlJournal.open(db, { env });
      await journal.append({ streamId, expectedVersion: "any", events: events as never });
      await journal.close();
    };
    // run x: admitted under key a, then an intent under key b; then its outcome and a next intent
    // under a again (so run x's cached rows are sealed with a: only the event is not), and run y
    // under a, so the first and the newest sealed events (what opening checks) open with a alone.
    await write(keyEnv(a), "run-x", [admitted("x")]);
    await write(keyEnv(b, [a]), "run-x", [intent(0)]);
    await write(keyEnv(a, [b]), "run-x", [
      {
        type: "call.completed",
        runId: "x",
        callId: "x/0",
        attempt: 1,
        result: 1,
        resultDigest: "e".repeat(64),
      },
      intent(1),
    ]);
    await write(keyEnv(a, [b]), "run-y", [admitted("y")]);

    const opening = withEnv(keyEnv(a), () => openRuntime({ store: db, agents: [agent], tools: [lookup] }));
    await expect(opening).rejects.toMatchObject({
      _tag: "EventDecryptError",
      streamId: "run-x",
      version: 2,
      reason: "unknown-key",
      keyId: keyIdOf(Buffer.from(b, "hex")),
    });
    const journal = await track(libsql.open(db, keyEnv(b, [a])));
    expect(await journal.streamHead("run-x")).toMatchObject({ version: 4 });
    expect(await journal.projection("runs", "x")).toMatchObject({ needsAttention: false });
  });

  it("a malformed key is refused at open naming the variable, never echoing the value", async () => {
    const db = join(tempDir(), "journal.db");
    const bad = "not-a-key-0123";
    expect(() => LibsqlJournal.open(db, { env: { HOLDFAST_ENCRYPTION_KEY: bad } })).toThrow(
      JournalUnavailable,
    );
    try {
      LibsqlJournal.open(db, { env: { HOLDFAST_ENCRYPTION_KEY: bad } });
    } catch (error) {
      expect((error as JournalUnavailable).reason).toContain("HOLDFAST_ENCRYPTION_KEY is not a 32-byte key");
      expect(String((error as Error).message)).not.toContain(bad);
    }
  });
});
